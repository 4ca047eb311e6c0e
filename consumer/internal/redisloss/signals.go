package redisloss

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/domain/heal"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// detect compares what Redis holds (the masters' run ids, the marker's
// generation, 0 for none) with the record and returns the reason (a
// metrics.Heal* value) and a description when they say Redis lost data
// since the record was written. A record never written judges nothing.
func detect(rec heal.RedisWatch, ids map[string]string, gen int64) (reason, why string) {
	if rec.RunIDs != "" {
		old := decodeRunIDs(rec.RunIDs)
		var restarted, added []string
		for addr, id := range ids {
			was, ok := old[addr]
			switch {
			case !ok:
				added = append(added, addr)
			case was != id:
				restarted = append(restarted, fmt.Sprintf("%s run_id %s -> %s", addr, short(was), short(id)))
			}
		}
		switch {
		case len(restarted) > 0:
			sort.Strings(restarted)
			return metrics.HealRestart, "master restarted: " + strings.Join(restarted, ", ")
		case len(added) > 0:
			sort.Strings(added)
			return metrics.HealNewMaster, "new master: " + strings.Join(added, ", ")
		}
	}
	switch {
	case rec.Generation == 0 || gen >= rec.Generation:
		return "", ""
	case gen == 0:
		return metrics.HealMarker, fmt.Sprintf("generation marker gone (generation %d was written)", rec.Generation)
	default:
		return metrics.HealMarker, fmt.Sprintf("generation marker went back from %d to %d: Redis came back from an older state",
			rec.Generation, gen)
	}
}

// readMarker returns the marker's generation, 0 when it is gone; isGen is
// false when the key holds something other than a counter.
func (w *Watch) readMarker(ctx context.Context) (gen int64, isGen bool, err error) {
	v, err := w.Redis.Get(ctx, w.Marker).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("read marker: %w", err)
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// encodeRunIDs writes run ids by address as the record keeps them:
// "addr=run_id" sorted by address, comma-separated.
func encodeRunIDs(ids map[string]string) string {
	parts := make([]string, 0, len(ids))
	for addr, id := range ids {
		parts = append(parts, addr+"="+id)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func decodeRunIDs(s string) map[string]string {
	ids := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if addr, id, ok := strings.Cut(p, "="); ok {
			ids[addr] = id
		}
	}
	return ids
}

// readRunIDs reads the run_id of every master, by address.
func (w *Watch) readRunIDs(ctx context.Context) (map[string]string, error) {
	ids := map[string]string{}
	if cc, ok := w.Redis.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			id, err := runID(ctx, c)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			ids[c.Options().Addr] = id
			return nil
		})
		return ids, err
	}
	id, err := runID(ctx, w.Redis)
	if err != nil {
		return nil, err
	}
	ids["redis"] = id
	return ids, nil
}

func runID(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && v != "" {
			return v, nil
		}
	}
	return "", errors.New("INFO server has no run_id")
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}
