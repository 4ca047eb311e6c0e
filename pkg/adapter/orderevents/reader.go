package orderevents

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// fetchWait is how long the broker holds a fetch that finds no message.
// The reader asks MinBytes 1, so a fetch returns as soon as one message is
// there: the wait bounds only empty fetches. An idle consumer sends one
// per partition per fetchWait, and those empty fetches are what an idle
// broker spends its CPU on (with 12 partitions, 50 ms would be 240 a
// second); 2 s keeps them to a few a second. A close or a rebalance waits
// for the fetch under way, so it may take up to this long.
const fetchWait = 2 * time.Second

// commitEvery is how often the reader sends the offsets the router marked
// final. The router calls CommitMessages only once a batch's work is final
// (so only final offsets are ever sent), and the reader sends the newest of
// each partition every commitEvery, and once more when its generation ends
// (a rebalance or a close): a commit per batch would be an OffsetCommit
// request every few milliseconds under sustained load, a large share of
// the broker's CPU. What a crash loses is at most commitEvery of
// commits: those events are delivered again, and the handler is idempotent
// (the reservation's state machine and the unique order number).
const commitEvery = 200 * time.Millisecond

// newReader returns a consumer-group reader that never commits by itself:
// the router uses FetchMessage, and CommitMessages once the work is final.
// Failed commits (kafka-go retries each three times and keeps the offsets
// for the next tick) are logged and counted through failed.
func newReader(cfg RouterConfig, log *slog.Logger, failed func()) *kafka.Reader {
	start := kafka.FirstOffset
	if cfg.StartLast {
		start = kafka.LastOffset
	}
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:        cfg.Brokers,
		Topic:          cfg.Topic,
		GroupID:        cfg.GroupID,
		MinBytes:       1,
		MaxBytes:       8 << 20,
		MaxWait:        fetchWait,
		Dialer:         &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: pacedDial(fetchSpacing)},
		ReadBackoffMin: 10 * time.Millisecond,
		ReadBackoffMax: 200 * time.Millisecond,
		CommitInterval: commitEvery,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			// Only commit failures: the router reports fetch errors itself.
			if text := fmt.Sprintf(msg, args...); strings.Contains(text, "commit") {
				failed()
				log.Warn("offset commit failed; the reader tries again at the next tick", "err", text)
			}
		}),
		StartOffset:           start,
		HeartbeatInterval:     1 * time.Second,
		SessionTimeout:        6 * time.Second,
		RebalanceTimeout:      10 * time.Second,
		JoinGroupBackoff:      500 * time.Millisecond,
		QueueCapacity:         4000,
		WatchPartitionChanges: true,
	})
}
