// Package relaytest runs the outbox's relays in a test: several at once on
// a test database, one of them dying between its publishes and its marks
// if the test asks, until the outbox has drained.
package relaytest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/relay"
)

// DiesAfterPublish publishes, then fails its first batches as a relay
// that died before marking them would: Kafka has them, MySQL does not say
// so, and they are published again.
type DiesAfterPublish struct {
	relay.Publisher
	left atomic.Int32
}

// Dying is p dying after each of its first n publishes.
func Dying(p relay.Publisher, n int) *DiesAfterPublish {
	d := &DiesAfterPublish{Publisher: p}
	d.left.Store(int32(n))
	return d
}

func (d *DiesAfterPublish) Publish(ctx context.Context, evs []outbox.Event) error {
	if err := d.Publisher.Publish(ctx, evs); err != nil {
		return err
	}
	if d.left.Add(-1) >= 0 {
		return errors.New("the relay died before the mark")
	}
	return nil
}

// Run runs a relay on db's outbox for each publisher, batch events a
// batch, a pass every few milliseconds, until stop, which waits for them.
func Run(db *mysqltest.DB, batch int, pubs ...relay.Publisher) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range pubs {
		r := &relay.Relay{Tx: db, Store: db.Outbox, Publisher: p, Batch: batch}
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_, _ = r.Pass(context.Background()) // a dying relay's passes fail; the next goes on
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// WaitDrained waits (up to 30 s) until db's outbox holds no event
// unpublished.
func WaitDrained(t testing.TB, db *mysqltest.DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		shards, err := db.Outbox.PendingShards(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(shards) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relaytest: shards %v still hold unpublished events", shards)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
