package orderevents

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
)

// partitionQueue holds one partition's fetched messages, in offset order,
// until its worker takes them.
type partitionQueue struct {
	limit  int
	mu     sync.Mutex
	msgs   []kafka.Message
	closed bool
	ready  chan struct{} // something to take, or closed
	space  chan struct{} // the worker took some
}

func newPartitionQueue(limit int) *partitionQueue {
	return &partitionQueue{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends msgs, waiting while the queue is over its limit; false when
// ctx ended first.
func (q *partitionQueue) push(ctx context.Context, msgs []kafka.Message) bool {
	for {
		q.mu.Lock()
		if len(q.msgs) < q.limit {
			q.msgs = append(q.msgs, msgs...)
			q.mu.Unlock()
			signal(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

// take removes and returns up to n messages, waiting for some; false once
// the queue is closed and empty.
func (q *partitionQueue) take(n int) ([]kafka.Message, bool) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			n = min(n, len(q.msgs))
			out := append([]kafka.Message(nil), q.msgs[:n]...)
			q.msgs = q.msgs[n:]
			q.mu.Unlock()
			signal(q.space)
			return out, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

func (q *partitionQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}
