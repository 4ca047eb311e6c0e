package stockredis

import (
	"context"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// ReserveTogether runs rs, all of one unbucketed item, as one batch of the
// reserve script (the batch the reserver would form had they arrived
// together), and returns each order's answer.
func (s *Reservations) ReserveTogether(rs []reservation.Reservation) ([]reservation.Result, []error) {
	calls := make([]reserveCall, len(rs))
	for i, r := range rs {
		calls[i] = reserveCall{r: r, first: s.keys(reservation.One(r.ItemID)).Stock(), reply: make(chan reserveAnswer, 1)}
	}
	s.reserves.run(calls)
	out, errs := make([]reservation.Result, len(rs)), make([]error, len(rs))
	for i, c := range calls {
		a := <-c.reply
		out[i], errs[i] = a.res, a.err
	}
	return out, errs
}

// ReserveAtOnce runs rs, of any unbucketed items of any sales, as one batch
// of the reserver (one script per sale, the sales' at once), and returns
// each order's answer.
func (s *Reservations) ReserveAtOnce(rs []reservation.Reservation) ([]reservation.Result, []error) {
	calls := make([]reserveCall, len(rs))
	for i, r := range rs {
		calls[i] = reserveCall{r: r, first: s.keys(r.Item()).Stock(), reply: make(chan reserveAnswer, 1)}
	}
	s.reserves.runAll(slices.Clone(calls)) // runAll sorts its slice in place
	out, errs := make([]reservation.Result, len(rs)), make([]error, len(rs))
	for i, c := range calls {
		a := <-c.reply
		out[i], errs[i] = a.res, a.err
	}
	return out, errs
}

// Client is the store's Redis client, for this package's tests' own reads
// and writes (the store hands out no client to other packages).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// QuotaHolders lists every quota key of the activity on item: user -> the
// order number the key holds (ScanQuota, into one map: for the tests' small activities).
func (r *Reconciler) QuotaHolders(ctx context.Context, item, activity int64) (map[string]string, error) {
	out := map[string]string{}
	err := r.ScanQuota(ctx, reservation.One(item), activity, func(page map[string]string) error {
		maps.Copy(out, page)
		return nil
	})
	return out, err
}

// Small chunks, so the tests read the early joiners in several.
func init() { earlyChunk = 300 }

// Room is the key of part of activity's waiting room.
func (k Keys) Room(activity int64, part string) string { return k.room(activity, part) }

// TakeOnly is the first step of r's bucketed reservation alone: r's units
// from bucket b (bucket_take), the reserve script not run.
func (s *Reservations) TakeOnly(ctx context.Context, r reservation.Reservation, b int) (int64, error) {
	return s.take(ctx, r, b)
}

// ReleaseOnly is the first step of a release alone (release.lua): a
// bucketed reservation's units not given back to their bucket.
func (s *Reservations) ReleaseOnly(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) ([]any, error) {
	return s.releaseStep(ctx, r, o, "")
}
