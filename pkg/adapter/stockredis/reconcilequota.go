package stockredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// quotaPrefix is what every quota key of the activity starts with.
func (k Keys) quotaPrefix(activityID int64) string {
	return fmt.Sprintf("%sq:%d:", k.group(), activityID)
}

// QuotaBatch bounds the keys one MGET asks for and the records one quota
// repair's script call writes (a script blocks Redis while it runs).
const QuotaBatch = 1000

// ScanCount is the COUNT of each SCAN step of ScanQuota: about how many
// keys of the node one step visits (the matching ones are a part of them).
const ScanCount = 5000

// ScanQuota calls fn with the quota keys of the activity on item, a SCAN
// step at a time: user -> the order number the key holds, at most
// ScanCount users per call (SCAN's COUNT is a hint, but a step returns at
// most about the keys it visited). It SCANs for the item's quota pattern;
// on a cluster it scans the one node that owns the item's hash tag, where
// all of the item's keys live. SCAN may return a key twice (fn then sees
// it twice) and misses no key that lived throughout the scan. An error
// from fn ends the scan.
func (r *Reconciler) ScanQuota(ctx context.Context, item reservation.Item, activity int64, fn func(map[string]string) error) error {
	k := r.keys(item)
	node, err := r.nodeFor(ctx, k.Stock())
	if err != nil {
		return err
	}
	prefix, pattern := k.quotaPrefix(activity), k.quotaPattern(activity)
	for cursor := uint64(0); ; {
		keys, next, err := node.Scan(ctx, cursor, pattern, ScanCount).Result()
		if err != nil {
			return unavailable("scan quota keys", err)
		}
		page := make(map[string]string, len(keys))
		for chunk := range slices.Chunk(keys, QuotaBatch) {
			vals, err := r.rdb.MGet(ctx, chunk...).Result()
			if err != nil {
				return unavailable("read quota keys", err)
			}
			for i, key := range chunk {
				user, ok := ParseUserSegment(strings.TrimPrefix(key, prefix))
				if !ok {
					continue // not a quota key of this activity
				}
				if v, ok := vals[i].(string); ok {
					page[user] = v
				}
			}
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// QuotaHoldersOf reads the quota keys of users in the activity on item:
// user -> the order number the key holds, for the users who have one
// (MGET of QuotaBatch keys at a time).
func (r *Reconciler) QuotaHoldersOf(ctx context.Context, item reservation.Item, activity int64, users []string) (map[string]string, error) {
	k := r.keys(item)
	out := make(map[string]string, len(users))
	for chunk := range slices.Chunk(users, QuotaBatch) {
		keys := make([]string, len(chunk))
		for i, u := range chunk {
			keys[i] = k.Quota(activity, u)
		}
		vals, err := r.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, unavailable("read quota keys", err)
		}
		for i, u := range chunk {
			if v, ok := vals[i].(string); ok {
				out[u] = v
			}
		}
	}
	return out, nil
}

// RestoreQuotas writes the quota key of each record whose key is missing
// (a key that exists is left alone, whatever order it names), QuotaBatch
// records per script call, each guarded by g. It returns the users whose
// key it wrote; on StaleFence it stops, and the list is what earlier calls
// wrote.
func (r *Reconciler) RestoreQuotas(ctx context.Context, item reservation.Item, activity int64, recs []drift.QuotaRecord, g drift.Guard) ([]string, drift.CAS, error) {
	k := r.keys(item)
	var written []string
	for chunk := range slices.Chunk(recs, QuotaBatch) {
		keys := make([]string, len(chunk))
		vals := make([]missingValue, len(chunk))
		for i, rec := range chunk {
			keys[i] = k.Quota(activity, rec.UserID)
			vals[i] = missingValue{rec.OrderNo, rec.TTL}
		}
		set, c, err := r.restoreMissing(ctx, "reconcile restore quota keys", k.Fence(), keys, vals, g)
		for _, i := range set {
			written = append(written, chunk[i].UserID)
		}
		if err != nil || c != drift.Written {
			return written, c, err
		}
	}
	return written, drift.Written, nil
}

// nodeFor returns the client that serves key: the client itself on a single
// node, the master owning key's slot on a cluster.
func (r *Reconciler) nodeFor(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := r.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, unavailable("find cluster node", err)
		}
		return c, nil
	}
	return r.rdb, nil
}

// QuotaStates reads, for each user -> order number in holders, the user's
// quota key and the state of the reservation of the order it holds, each
// pair atomically (MULTI; the keys share the item's slot). A key that no
// longer holds the order number given is reported with its new holder and
// that holder's state is not read (StateMissing).
func (r *Reconciler) QuotaStates(ctx context.Context, item reservation.Item, activity int64, holders map[string]string) (map[string]drift.QuotaState, error) {
	k := r.keys(item)
	type pair struct {
		get   *redis.StringCmd
		state *redis.StringCmd
	}
	out := make(map[string]drift.QuotaState, len(holders))
	users := make([]string, 0, len(holders))
	for u := range holders {
		users = append(users, u)
	}
	for len(users) > 0 {
		n := min(len(users), 200)
		cmds := make(map[string]pair, n)
		_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, u := range users[:n] {
				cmds[u] = pair{
					get:   p.Get(ctx, k.Quota(activity, u)),
					state: p.HGet(ctx, k.Reservation(holders[u]), "state"),
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, unavailable("read quota states", err)
		}
		for u, c := range cmds {
			holder, err := c.get.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, unavailable("read quota key", err)
			}
			state, err := c.state.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, unavailable("read reservation state", err)
			}
			if err != nil || holder != holders[u] {
				state = string(reservation.StateMissing)
			}
			out[u] = drift.QuotaState{Holder: holder, State: reservation.State(state)}
		}
		users = users[n:]
	}
	return out, nil
}

// RestoreQuota sets the user's quota key to orderNo (the user's live order)
// with ttl, only if it still holds was ("" for a missing key) and no later
// fence wrote here.
func (r *Reconciler) RestoreQuota(ctx context.Context, item reservation.Item, activity int64, user, orderNo, was string, ttl time.Duration, g drift.Guard) (drift.CAS, error) {
	k := r.keys(item)
	res, err := r.restoreQuota.Run(ctx, r.rdb, []string{k.Fence(), k.Quota(activity, user)},
		g.Fence, orderNo, was, max(ttl.Milliseconds(), 1), g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile restore quota", err)
	}
	return casResult("reconcile restore quota", res)
}

// RemoveQuota deletes the user's quota key only if it still holds the stale
// order number and no later fence wrote here.
func (r *Reconciler) RemoveQuota(ctx context.Context, item reservation.Item, activity int64, user, stale string, g drift.Guard) (drift.CAS, error) {
	k := r.keys(item)
	res, err := r.removeQuota.Run(ctx, r.rdb, []string{k.Fence(), k.Quota(activity, user)},
		g.Fence, stale, g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile remove quota", err)
	}
	return casResult("reconcile remove quota", res)
}
