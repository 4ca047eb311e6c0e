package stockredis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

var restoreMissingScript = redis.NewScript(lua.Source("reconcile_restore_missing"))

// idemBatch bounds the records one script call writes (the script blocks
// Redis while it runs).
const idemBatch = 500

// RestoreIdem writes each record of item whose key is missing (a record
// that exists is left alone, whatever order it names), in script calls of
// up to 500 records, each guarded by g. It returns how many it wrote; on
// StaleFence (a later reconciler wrote to the item) it stops, and the
// count is what earlier calls wrote.
func (r *Reconciler) RestoreIdem(ctx context.Context, item reservation.Item, recs []drift.IdemRecord, g drift.Guard) (int, drift.CAS, error) {
	k := r.keys(item)
	written := 0
	for chunk := range slices.Chunk(recs, idemBatch) {
		keys := make([]string, len(chunk))
		vals := make([]missingValue, len(chunk))
		for i, rec := range chunk {
			keys[i] = k.Idem(rec.UserID, rec.Key)
			vals[i] = missingValue{rec.OrderNo, rec.TTL}
		}
		set, c, err := r.restoreMissing(ctx, "reconcile restore idempotency records", k.Fence(), keys, vals, g)
		written += len(set)
		if err != nil || c != drift.Written {
			return written, c, err
		}
	}
	return written, drift.Written, nil
}

// missingValue is what restoreMissing writes to one key.
type missingValue struct {
	value string
	ttl   time.Duration
}

// restoreMissing writes each of keys that is missing with its value and
// ttl, in one script call guarded by g, and returns the positions in keys
// of those it wrote.
func (r *Reconciler) restoreMissing(ctx context.Context, op, fence string, keys []string, vals []missingValue, g drift.Guard) ([]int, drift.CAS, error) {
	args := make([]any, 0, 2*len(keys)+2)
	args = append(args, g.Fence, g.ExpireAt.UnixMilli())
	for _, v := range vals {
		args = append(args, v.value, max(v.ttl.Milliseconds(), 1))
	}
	res, err := restoreMissingScript.Run(ctx, r.rdb, append([]string{fence}, keys...), args...).Slice()
	if err != nil {
		return nil, 0, unavailable(op, err)
	}
	c, err := casResult(op, res)
	if err != nil || c != drift.Written {
		return nil, c, err
	}
	if len(res) < 3 {
		return nil, 0, fmt.Errorf("%s: unexpected reply %v", op, res)
	}
	list, _ := res[2].([]any)
	set := make([]int, 0, len(list))
	for _, x := range list {
		if n, ok := x.(int64); ok && n >= 1 && int(n) <= len(keys) {
			set = append(set, int(n)-1)
		}
	}
	return set, drift.Written, nil
}
