package orderevents

import (
	"io"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
)

// Writes is how many produce requests the publisher sent since the last call.
func (p *Publisher) Writes() int64 { return p.prod.requests.Swap(0) }

// Sent returns the publisher's lane writes, its produce requests and the
// partitions they held, since it started.
func (p *Publisher) Sent() (writes, requests, partitions int64) {
	return p.prod.calls.Load(), p.prod.requests.Load(), p.prod.partitions.Load()
}

// WriteDue hands msgs to the lane's sender as if each had waited in the lane
// until due, and returns each one's answer.
func (p *Publisher) WriteDue(due time.Time, msgs ...kafka.Message) []error {
	waiting := make([]publishing, len(msgs))
	for i, m := range msgs {
		waiting[i] = publishing{msg: m, deadline: due, done: make(chan error, 1)}
	}
	p.write(waiting)
	errs := make([]error, len(msgs))
	for i, w := range waiting {
		errs[i] = <-w.done
	}
	return errs
}

// NewGroupReader returns the router's reader on cfg.
func NewGroupReader(cfg RouterConfig) *groupReader {
	return newReader(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() {})
}

// Fetches returns the fetch requests the reader sent and the partitions
// they asked for in all.
func (r *groupReader) Fetches() (requests, partitions int64) {
	return r.fetches.Load(), r.fetchedPartitions.Load()
}
