package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// moveCandidate is an order whose units may be between a bucket and the
// item's in-flight counter.
type moveCandidate struct {
	orderNo string
	qty     int64
}

// readMoving reads the n buckets of item, each with the orders whose units
// are between it and the in-flight counter (lua/reconcile_read_bucket.lua),
// after the item's own keys were read with pending and its recent
// give-backs gives, and the states of the orders MySQL closed (closing).
// It returns the buckets' values and the units moving: those of each order
// whose take marker exists at its bucket's read (its units are out of the
// bucket), that pending did not hold (they were not in the in-flight
// counter), that closing did not hold CONFIRMED (the reconciler counts
// those apart), and whose reservation, read last, is not CONFIRMED (MySQL
// did not take them). Each case:
//   - a take reserved before the item's read is pending: not moving;
//   - a take whose reserve came after the item's read, or never (refused,
//     its give-back to come), has its marker: moving;
//   - a take given back before its bucket's read has no marker: not moving;
//   - a release before the item's read is among gives; its marker says
//     whether the give-back came before the bucket's read;
//   - a confirmed order keeps its marker, and is not moving: its state
//     says so.
//
// What is left errs toward fewer units in Redis (an order MySQL committed
// but Redis has not confirmed yet counts as moving), never more.
func (r *Reconciler) readMoving(ctx context.Context, item reservation.Item, n int, pending []string, closing map[string]reservation.State, gives []any) (bucketValues, int64, error) {
	k := r.keys(item)
	given := make([][]moveCandidate, n)
	for _, g := range gives {
		m, _ := g.(string)
		bs, rest, _ := strings.Cut(m, ":")
		b, err := strconv.Atoi(bs)
		if err != nil || b < 0 || b >= n {
			continue // a give-back of an earlier layout
		}
		c, ok := parseMove(rest)
		if ok {
			given[b] = append(given[b], c)
		}
	}
	vals := make(bucketValues, n)
	moving := map[string]int64{}
	for b := range n {
		keys := []string{k.Bucket(b), k.Takes(b)}
		for _, c := range given[b] {
			keys = append(keys, k.Taken(b, c.orderNo))
		}
		res, err := r.readBucket.Run(ctx, r.rdb, keys, MovingRetention.Milliseconds()).Slice()
		if err != nil {
			return nil, 0, unavailable("read bucket", err)
		}
		if len(res) != 3 {
			return nil, 0, fmt.Errorf("read bucket: unexpected reply %v", res)
		}
		vals[b], _ = res[0].(int64)
		takes, _ := res[1].([]any)
		for _, t := range takes {
			m, _ := t.(string)
			if c, ok := parseMove(m); ok {
				moving[c.orderNo] = c.qty
			}
		}
		markers, _ := res[2].([]any)
		for i, c := range given[b] {
			if i < len(markers) && markers[i] != int64(0) {
				moving[c.orderNo] = c.qty
			}
		}
	}
	for _, no := range pending {
		delete(moving, no)
	}
	for no, st := range closing {
		if st == reservation.StateConfirmed {
			// Counted closing (its units are MySQL's again, Redis's at
			// its release and give-back): not a second time here.
			delete(moving, no)
		}
	}
	sum, err := r.notConfirmed(ctx, k, moving)
	if err != nil {
		return nil, 0, err
	}
	return vals, sum, nil
}

// notConfirmed sums the quantities of the orders in moving whose
// reservation is not CONFIRMED (one pipeline on the sale's slot).
func (r *Reconciler) notConfirmed(ctx context.Context, k Keys, moving map[string]int64) (int64, error) {
	if len(moving) == 0 {
		return 0, nil
	}
	nos := make([]string, 0, len(moving))
	cmds := make([]*redis.StringCmd, 0, len(moving))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for no := range moving {
			nos = append(nos, no)
			cmds = append(cmds, p.HGet(ctx, k.Reservation(no), "state"))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable("read moving reservations", err)
	}
	var sum int64
	for i, c := range cmds {
		st, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, unavailable("read moving reservation", err)
		}
		if reservation.State(st) != reservation.StateConfirmed {
			sum += moving[nos[i]]
		}
	}
	return sum, nil
}

// parseMove reads "<qty>:<order_no>".
func parseMove(m string) (moveCandidate, bool) {
	q, no, ok := strings.Cut(m, ":")
	qty, err := strconv.ParseInt(q, 10, 64)
	if !ok || err != nil || qty <= 0 || no == "" {
		return moveCandidate{}, false
	}
	return moveCandidate{orderNo: no, qty: qty}, true
}
