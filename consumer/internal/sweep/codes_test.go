package sweep_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A stranded reservation that used a presale code is re-published with
// the code's digest, so the consumer takes the use in MySQL as it would
// have from the api's event.
func TestSweepRepublishesTheCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	s := p.NewSale(10, 1)
	code := access.Hash([]byte("k"), s.ActivityID, "STRANDED")
	key := p.Store.Keys(reservation.One(s.ItemID)).Codes(s.ActivityID)
	if err := p.Redis.HSet(ctx, key, string(code), "1|", access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
	no := order.NewNumberGenerator().Next(s.ItemID)
	if _, err := p.Store.Reservations.Reserve(ctx, reservation.Reservation{OrderNo: no, UserID: strconv.Itoa(7), ItemID: s.ItemID,
		ActivityID: s.ActivityID, Quantity: 1, IdempotencyKey: "sweep-key", At: time.Now().Add(-time.Minute),
		QuotaTTL: time.Hour, ReservationTTL: time.Hour, Code: code}); err != nil {
		t.Fatal(err)
	}
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
	defer pub.Close()
	sw := &sweep.Sweeper{Items: p.Store.Stock, Reservations: p.Store.Reservations, DB: p.DB.Orders, Publisher: pub,
		After: 2 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Locker: lock.New(p.Redis, lock.Options{Prefix: p.Prefix, InstanceID: "sweep-test"})}
	if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{Republished: 1}) {
		t.Fatalf("sweep: %+v, %v", st, err)
	}
	msgs := kafkatest.ReadAll(t, p.Topic)[0]
	if len(msgs) != 1 {
		t.Fatalf("%d events on the topic, want 1", len(msgs))
	}
	ev, err := orderevents.Decode(msgs[0].Value)
	if err != nil || ev.OrderNo != no || ev.AccessCode != string(code) {
		t.Fatalf("re-published %+v, %v; want order %s with code %s", ev, err, no, code)
	}
}
