package stockredis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// reservationBatch bounds the hashes one script call writes or reads (the
// script blocks Redis while it runs).
const reservationBatch = 500

// RestoreReservations writes, CONFIRMED, the reservation hash of each of
// recs that is missing (a hash that exists, in any state, is left alone),
// in script calls of up to 500 hashes, each guarded by g. For a bucketed
// item (buckets > 1) each hash names the order's home bucket, and that
// bucket gets the order's take marker back after the hash is written (the
// release gives a bucketed order's units back by its marker); a marker
// that exists is kept. It returns the order numbers whose hash it wrote;
// on StaleFence it stops, and the list is what earlier calls wrote.
func (r *Reconciler) RestoreReservations(ctx context.Context, item reservation.Item, buckets int, recs []drift.LostReservation, g drift.Guard) ([]string, drift.CAS, error) {
	k := r.keys(item)
	var written []string
	for len(recs) > 0 {
		n := min(len(recs), reservationBatch)
		keys := make([]string, 0, n+1)
		args := make([]any, 0, 7*n+3)
		keys = append(keys, k.Fence())
		args = append(args, g.Fence, g.ExpireAt.UnixMilli(), item.ID)
		for _, rec := range recs[:n] {
			bucket := ""
			if buckets > 1 {
				bucket = strconv.Itoa(homeBucket(rec.UserID, buckets))
			}
			keys = append(keys, k.Reservation(rec.OrderNo))
			args = append(args, rec.UserID, rec.ActivityID, rec.Quantity, rec.ReservedAt.UnixMilli(), rec.IdempotencyKey,
				bucket, max(rec.TTL.Milliseconds(), 1))
		}
		res, err := r.restoreReservation.Run(ctx, r.rdb, keys, args...).Slice()
		if err != nil {
			return written, 0, unavailable("reconcile restore reservations", err)
		}
		c, err := casResult("reconcile restore reservations", res)
		if err != nil || c != drift.Written {
			return written, c, err
		}
		if len(res) != n+1 {
			return written, 0, fmt.Errorf("reconcile restore reservations: unexpected reply %v", res)
		}
		var now []drift.LostReservation
		for i, rec := range recs[:n] {
			if w, _ := res[i+1].(int64); w == 1 {
				now = append(now, rec)
				written = append(written, rec.OrderNo)
			}
		}
		if buckets > 1 && len(now) > 0 {
			// After the hash: a marker never stands without its hash, so a
			// release that finds no hash never gives back units the
			// reconciler's figure from MySQL already counts.
			_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, rec := range now {
					p.SetNX(ctx, k.Taken(homeBucket(rec.UserID, buckets), rec.OrderNo), rec.Quantity, markerTTL(rec.TTL))
				}
				return nil
			})
			if err != nil {
				return written, 0, unavailable("reconcile restore take markers", err)
			}
		}
		recs = recs[n:]
	}
	return written, drift.Written, nil
}

// UnrestoreReservations deletes the reservation hashes among orderNos that
// the reconciler restored and that are still CONFIRMED (orders MySQL has
// closed since), and the take markers of every restored one that is
// deleted or RELEASED, in script calls of up to 500, each guarded by g
// (lua/reconcile_unrestore_reservation.lua says why). It returns how many
// hashes it deleted; on StaleFence it stops.
func (r *Reconciler) UnrestoreReservations(ctx context.Context, item reservation.Item, orderNos []string, g drift.Guard) (int, drift.CAS, error) {
	k := r.keys(item)
	deleted := 0
	for len(orderNos) > 0 {
		n := min(len(orderNos), reservationBatch)
		keys := make([]string, 0, n+1)
		keys = append(keys, k.Fence())
		for _, no := range orderNos[:n] {
			keys = append(keys, k.Reservation(no))
		}
		res, err := r.unrestoreReservation.Run(ctx, r.rdb, keys, g.Fence, g.ExpireAt.UnixMilli()).Slice()
		if err != nil {
			return deleted, 0, unavailable("reconcile unrestore reservations", err)
		}
		c, err := casResult("reconcile unrestore reservations", res)
		if err != nil || c != drift.Written {
			return deleted, c, err
		}
		if len(res) != n+2 {
			return deleted, 0, fmt.Errorf("reconcile unrestore reservations: unexpected reply %v", res)
		}
		d, _ := res[1].(int64)
		deleted += int(d)
		var markers []string
		for i, no := range orderNos[:n] {
			b, _ := res[i+2].(string)
			if b == "" {
				continue
			}
			bn, err := strconv.Atoi(b)
			if err != nil {
				return deleted, 0, fmt.Errorf("reconcile unrestore reservations: unexpected bucket %q", b)
			}
			markers = append(markers, k.Taken(bn, no))
		}
		if len(markers) > 0 {
			// One DEL per marker: they live in other slots.
			_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, m := range markers {
					p.Del(ctx, m)
				}
				return nil
			})
			if err != nil {
				return deleted, 0, unavailable("reconcile unrestore take markers", err)
			}
		}
		orderNos = orderNos[n:]
	}
	return deleted, drift.Written, nil
}
