package stockredis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

var restoreIdemScript = redis.NewScript(lua.Source("reconcile_restore_idem"))

// idemBatch bounds the records one script call writes (the script blocks
// Redis while it runs).
const idemBatch = 500

// IdemRecord is one idempotency record the reconciler gives back: the
// order number the user's key produced on the item, and how long the
// record lives.
type IdemRecord struct {
	UserID  string
	Key     string
	OrderNo string
	TTL     time.Duration
}

// RestoreIdem writes each record of item whose key is missing (a record
// that exists is left alone, whatever order it names), in script calls of
// up to 500 records, each guarded by g. It returns how many it wrote; on
// StaleFence (a later reconciler wrote to the item) it stops, and the
// count is what earlier calls wrote.
func (r *Reconciler) RestoreIdem(ctx context.Context, item int64, recs []IdemRecord, g Guard) (int, CAS, error) {
	k := r.s.Keys(item)
	written := 0
	for len(recs) > 0 {
		n := min(len(recs), idemBatch)
		keys := make([]string, 0, n+1)
		args := make([]any, 0, 2*n+2)
		keys = append(keys, k.Fence())
		args = append(args, g.Fence, g.ExpireAt.UnixMilli())
		for _, rec := range recs[:n] {
			keys = append(keys, k.Idem(rec.UserID, rec.Key))
			args = append(args, rec.OrderNo, max(rec.TTL.Milliseconds(), 1))
		}
		res, err := restoreIdemScript.Run(ctx, r.s.rdb, keys, args...).Slice()
		if err != nil {
			return written, 0, unavailable("reconcile restore idempotency records", err)
		}
		c, err := casResult("reconcile restore idempotency records", res)
		if err != nil {
			return written, 0, err
		}
		if c != Written {
			return written, c, nil
		}
		if len(res) < 2 {
			return written, 0, fmt.Errorf("reconcile restore idempotency records: unexpected reply %v", res)
		}
		w, _ := res[1].(int64)
		written += int(w)
		recs = recs[n:]
	}
	return written, Written, nil
}
