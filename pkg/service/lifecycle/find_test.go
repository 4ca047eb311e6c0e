package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Find reads MySQL's row first, else the reservation in Redis, else tells
// a number the api issued to the user (PENDING) from one never issued, and
// only for the user who owns the order.
func TestFind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	s := p.NewSale(10, 1)
	inDB, pending, released := p.ReserveEvent(s, 1, 1, "a"), p.ReserveEvent(s, 2, 1, "b"), p.ReserveEvent(s, 3, 1, "c")
	if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: inDB, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if rel, err := p.Store.Reservations.Release(ctx, reservation.EventRef(released), reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}}); err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	// A number the api signed whose reservation Redis lost before the
	// consumer wrote it.
	numbers, err := order.NewSignedNumberGenerator(bytes.Repeat([]byte{3}, order.NumberKeySize))
	if err != nil {
		t.Fatal(err)
	}
	lost := numbers.NextFor(s.ItemID, "1")
	tests := []struct {
		name    string
		user    int64
		no      string
		status  order.Status // "" for ErrNotFound
		inMySQL bool
	}{
		{"MySQL's row", 1, inDB.OrderNo, order.Created, true},
		{"another user's row", 2, inDB.OrderNo, "", false},
		{"a reservation on its way", 2, pending.OrderNo, order.Pending, false},
		{"another user's reservation", 1, pending.OrderNo, "", false},
		{"a reservation released before MySQL", 3, released.OrderNo, order.Failed, false},
		{"no such order", 1, order.NewNumberGenerator().Next(s.ItemID), "", false},
		{"not an order number", 1, "nonsense", "", false},
		{"a number issued for the user, in neither store", 1, lost, order.Pending, false},
		{"a number issued for another user, in neither store", 2, lost, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, inMySQL, err := lifecycle.Find(ctx, p.DB.Orders, p.Store.Reservations, numbers, strconv.FormatInt(tt.user, 10), tt.no)
			if tt.status == "" {
				if !errors.Is(err, order.ErrNotFound) {
					t.Fatalf("Find: %+v %v, want ErrNotFound", o, err)
				}
				return
			}
			if err != nil || o.Status != tt.status || inMySQL != tt.inMySQL || o.UserID != strconv.FormatInt(tt.user, 10) {
				t.Fatalf("Find: %+v in MySQL %v, %v; want %s by user %d, in MySQL %v", o, inMySQL, err, tt.status, tt.user, tt.inMySQL)
			}
		})
	}
}
