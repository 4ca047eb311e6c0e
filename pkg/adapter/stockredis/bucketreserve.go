package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// reserveBucketed takes the quantity from the user's home bucket or, when
// that one is short, from the others in order, then records the
// reservation on the item's main tag.
func (s *Reservations) reserveBucketed(ctx context.Context, r reservation.Reservation) (reservation.Result, error) {
	k := s.keys(r.Item())
	n := r.Buckets
	home := homeBucket(r.UserID, n)
	missing := 0
	for i := range n {
		b := (home + i) % n
		left, err := s.take(ctx, r, b)
		if err != nil {
			return reservation.Result{}, err
		}
		switch left {
		case -2:
			missing++
			continue
		case -1:
			continue
		}
		res, err := s.runReserve(ctx, r, k.BucketMarker(), bucketMode(b))
		refused := errors.Is(err, order.ErrNotWarmed) || errors.Is(err, order.ErrAlreadyPurchased) ||
			errors.Is(err, access.ErrCodeInvalid) || errors.Is(err, access.ErrCodeUsed)
		if err != nil && !refused {
			if !MayHaveRun(err) {
				// The script never ran (the item's master refused the
				// connection: dead, or failed over and not yet known):
				// no reservation holds the units, give them back now.
				// Best effort, as below.
				_ = s.buckets.giveBack(ctx, r.Item(), b, r.OrderNo)
				return res, err
			}
			// The script may have run: keep the units out of the bucket
			// (an undersell the reconciler repairs) rather than risk
			// crediting a reservation's units twice.
			return res, err
		}
		if refused || res.Duplicate {
			// Best effort: if this fails the units are lost from Redis
			// until the reconciler puts them back (never an oversell).
			_ = s.buckets.giveBack(ctx, r.Item(), b, r.OrderNo)
			return res, err
		}
		res.Left = left
		return res, nil
	}
	if missing > 0 {
		return reservation.Result{}, order.ErrNotWarmed
	}
	// Every bucket is short. Keep reserve.lua's precedence: a replayed key
	// gets its order, a user holding the quota hears so.
	vals, err := s.rdb.MGet(ctx, k.Idem(r.UserID, r.IdempotencyKey), k.Quota(r.ActivityID, r.UserID)).Result()
	if err != nil {
		return reservation.Result{}, unavailable("read idempotency record", err)
	}
	if v, ok := vals[0].(string); ok {
		return reservation.Result{OrderNo: v, Duplicate: true}, nil
	}
	if v, ok := vals[1].(string); ok {
		return reservation.Result{OrderNo: v}, order.ErrAlreadyPurchased
	}
	return reservation.Result{}, order.ErrSoldOut
}

// take is bucket_take: r's units from bucket b. It returns what the bucket
// has left, -1 when it is short, -2 when it is missing.
func (s *Reservations) take(ctx context.Context, r reservation.Reservation, b int) (int64, error) {
	ctx, span := s.span(ctx, "bucket_take", r.Item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), attribute.Int("seckill.bucket", b))
	}
	k := s.keys(r.Item())
	left, err := s.bucketTake.Run(ctx, s.rdb, []string{k.Bucket(b), k.Taken(b, r.OrderNo), k.Takes(b)},
		r.Quantity, markerTTL(r.ReservationTTL).Milliseconds(), r.OrderNo, MovingRetention.Milliseconds()).Int64()
	endSpan(span, err)
	if err != nil {
		return 0, unavailable("take from bucket", err)
	}
	return left, nil
}

// markerTTL keeps a take marker as long as the reservation (a day when the
// caller gave no reservation TTL).
func markerTTL(reservation time.Duration) time.Duration {
	if reservation <= 0 {
		return 24 * time.Hour
	}
	return reservation
}

// giveBack is bucket_give: bucket n gets back what orderNo took from it,
// if it still holds a take marker for it (so it may be repeated).
func (s *buckets) giveBack(ctx context.Context, item reservation.Item, n int, orderNo string) (err error) {
	ctx, span := s.span(ctx, "bucket_give", item)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(orderNo), attribute.Int("seckill.bucket", n))
	}
	defer func() { endSpan(span, err) }()
	k := s.keys(item)
	if err := s.bucketGive.Run(ctx, s.rdb, []string{k.Bucket(n), k.Taken(n, orderNo), k.Takes(n)}, orderNo).Err(); err != nil {
		return unavailable("give back to bucket", err)
	}
	return nil
}

// giveBackAny gives back whatever orderNo took from any bucket of item: its
// reservation is missing (the reserve script never ran after bucket_take, or
// Redis lost it), so the bucket is not known.
func (s *buckets) giveBackAny(ctx context.Context, item reservation.Item, orderNo string) error {
	n, err := s.bucketCount(ctx, item)
	if err != nil {
		return err
	}
	for b := range n {
		if err := s.giveBack(ctx, item, b, orderNo); err != nil {
			return err
		}
	}
	return nil
}

// releaseToBucket gives a released bucketed reservation's units back to
// its bucket and, for a capped release (dbStock not ""), lowers the
// buckets to what MySQL can still fulfil.
func (s *buckets) releaseToBucket(ctx context.Context, item reservation.Item, orderNo string, bucket any, dbStock string) error {
	bs, _ := bucket.(string)
	b, err := strconv.Atoi(bs)
	if err != nil {
		return fmt.Errorf("release: unexpected bucket %v", bucket)
	}
	if err := s.giveBack(ctx, item, b, orderNo); err != nil {
		return err
	}
	if dbStock == "" {
		return nil
	}
	db, err := strconv.ParseInt(dbStock, 10, 64)
	if err != nil {
		return err
	}
	return s.capBuckets(ctx, item, db)
}

// capBuckets lowers item's buckets (never raises them) so that their sum
// is at most MySQL stock minus what is in flight.
func (s *buckets) capBuckets(ctx context.Context, item reservation.Item, dbStock int64) error {
	n, err := s.bucketCount(ctx, item)
	if err != nil || n < 2 {
		return err
	}
	for range 5 {
		inflight, err := s.rdb.Get(ctx, s.keys(item).Inflight()).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return unavailable("read in flight", err)
		}
		cur, err := s.readBuckets(ctx, item, n)
		if err != nil {
			return err
		}
		ok, err := s.lowerBuckets(ctx, item, cur, dbStock-inflight)
		if err != nil || ok {
			return err
		}
	}
	return nil
}
