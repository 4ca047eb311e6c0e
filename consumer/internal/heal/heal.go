// Package heal notices that Redis lost data and repairs it from MySQL at
// once, instead of waiting for the nightly reconciler.
//
// Redis loses acknowledged writes when it comes back from an older state: a
// crash with the last second of AOF unwritten, a restore from a backup, a
// failover to a lagging replica. Stock then sits high or low, quota keys of
// closed orders are back and block their buyers, live orders lack theirs.
// A Watch polls, every Every, two signals that this happened:
//
//   - the run_id of every master (INFO server; on a cluster, each master):
//     a run_id that changed is a restart, after which Redis holds only what
//     its files held; a master at an address not seen before is a failover
//     (a replica promoted, with whatever it had replicated);
//   - a generation marker key the watch writes: when it vanishes or holds
//     another value, the data it lived with went too (FLUSHALL, a restore
//     without a restart).
//
// Either one starts an incident: the watch logs it once with its reason
// and runs Repair (the reconciler's checked repair: drift seen twice,
// compare-and-set scripts, under the reconcile lock with a fencing token)
// until one pass runs cleanly and, when that pass repaired something, until
// a later one finds nothing left to repair (orders that were in Kafka when Redis lost their
// reservations reach MySQL a moment later and show as drift then). A
// restart that lost nothing costs one repair pass that finds everything in
// order.
package heal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/logs"
	"github.com/seckill/seckill/pkg/metrics"
)

// DefaultEvery is the default period of the watch.
const DefaultEvery = time.Second

// MarkerKey is the generation marker's key. It is not under a key prefix:
// it speaks for the Redis dataset as a whole (every deployment sharing the
// Redis watches the same marker), so deleting one prefix's keys by hand is
// not taken for a lost dataset.
const MarkerKey = "seckill:heal:generation"

// Repair runs one checked repair pass over every item on sale. It returns
// whether it repaired anything; an error means the pass did not run
// cleanly (a store down, the lock busy or lost, drift it could not repair)
// and the watch runs another one.
type Repair func(ctx context.Context) (repaired bool, err error)

// Watch detects lost Redis data and repairs it.
type Watch struct {
	Redis redis.UniversalClient
	// Marker is the key of the generation marker (one key: on a cluster it
	// speaks for the master that holds it; the run_ids speak for all).
	Marker string
	Repair Repair
	// Every is the polling period (default DefaultEvery); a failed repair
	// pass is retried after it too.
	Every   time.Duration
	Log     *slog.Logger
	Metrics *metrics.Heal

	// state of the detector
	runIDs map[string]string // master address -> run_id
	marker string            // the marker's value last seen or written
	// the incident being repaired, if any
	incident *incident
}

type incident struct {
	at       time.Time
	reason   string
	passes   int
	repaired bool // a pass ran cleanly; the next one verifies
}

func (w *Watch) every() time.Duration {
	if w.Every > 0 {
		return w.Every
	}
	return DefaultEvery
}

// Run polls until ctx ends.
func (w *Watch) Run(ctx context.Context) {
	t := time.NewTicker(w.every())
	defer t.Stop()
	failures := 0
	for {
		if err := w.Tick(ctx); err != nil && ctx.Err() == nil {
			// Redis is unreachable (restarting): the run_ids seen before
			// are kept, so its return is judged against them.
			if failures%30 == 0 {
				w.Log.Warn("data-loss watch cannot read Redis", "err", err)
			}
			failures++
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick checks the signals once and, when an incident is open, runs one
// repair pass. It returns an error only when Redis could not be read.
func (w *Watch) Tick(ctx context.Context) error {
	reason, why, err := w.detect(ctx)
	if reason != "" {
		w.Metrics.Detected(reason)
		w.Log.Log(ctx, logs.Alert, "Redis lost data; repairing it from MySQL", "reason", reason, "detail", why)
		if w.incident == nil {
			w.incident = &incident{at: time.Now(), reason: reason}
		} else {
			// Lost again while repairing: what was repaired may be gone.
			w.incident.repaired = false
		}
	}
	if w.incident != nil {
		w.repair(ctx)
	}
	return err
}

// Incident reports whether a detection is still being repaired.
func (w *Watch) Incident() bool { return w.incident != nil }

func (w *Watch) repair(ctx context.Context) {
	in := w.incident
	in.passes++
	start := time.Now()
	repaired, err := w.Repair(ctx)
	if err != nil {
		w.Metrics.Pass(metrics.HealPassFailed)
		if ctx.Err() == nil {
			w.Log.Warn("repair after Redis data loss did not run cleanly; retrying", "reason", in.reason,
				"pass", in.passes, "err", err, "retry_in", w.every().String())
		}
		return
	}
	if repaired {
		w.Metrics.Pass(metrics.HealPassRepaired)
	} else {
		w.Metrics.Pass(metrics.HealPassClean)
	}
	took := time.Since(in.at)
	switch {
	case !in.repaired:
		in.repaired = true
		w.Metrics.Repaired(took)
		w.Log.Info("Redis repaired from MySQL after data loss", "reason", in.reason, "passes", in.passes,
			"repaired_anything", repaired, "took", took.Round(time.Millisecond).String(),
			"pass_took", time.Since(start).Round(time.Millisecond).String())
		if !repaired {
			w.incident = nil // nothing was lost that mattered
		}
	case repaired:
		w.Log.Info("more drift repaired after Redis data loss (orders that were on their way)", "reason", in.reason,
			"passes", in.passes)
	default:
		w.Log.Info("Redis and MySQL agree after data loss", "reason", in.reason, "passes", in.passes,
			"took", took.Round(time.Millisecond).String())
		w.incident = nil
	}
}

// detect reads the signals and returns the reason (a metrics.Heal* value)
// and a description when they say Redis lost data since the last call.
// The first call only records what it sees.
func (w *Watch) detect(ctx context.Context) (reason, why string, err error) {
	ids, err := w.readRunIDs(ctx)
	if err != nil {
		return "", "", fmt.Errorf("read run ids: %w", err)
	}
	first := w.runIDs == nil
	if !first {
		var restarted, added []string
		for addr, id := range ids {
			old, ok := w.runIDs[addr]
			switch {
			case !ok:
				added = append(added, addr)
			case old != id:
				restarted = append(restarted, fmt.Sprintf("%s run_id %s -> %s", addr, short(old), short(id)))
			}
		}
		switch {
		case len(restarted) > 0:
			sort.Strings(restarted)
			reason, why = metrics.HealRestart, "master restarted: "+strings.Join(restarted, ", ")
		case len(added) > 0:
			sort.Strings(added)
			reason, why = metrics.HealNewMaster, "new master: "+strings.Join(added, ", ")
		}
	}
	w.runIDs = ids

	v, err := w.Redis.Get(ctx, w.Marker).Result()
	switch {
	case errors.Is(err, redis.Nil):
		v = ""
	case err != nil:
		return reason, why, fmt.Errorf("read marker: %w", err)
	}
	if v == "" {
		// Missing: write a new generation (NX: another consumer's watch
		// may be writing one at the same moment; either is fine).
		gen := newGeneration()
		if err := w.Redis.SetNX(ctx, w.Marker, gen, 0).Err(); err != nil {
			return reason, why, fmt.Errorf("write marker: %w", err)
		}
		if v, err = w.Redis.Get(ctx, w.Marker).Result(); err != nil {
			return reason, why, fmt.Errorf("read marker: %w", err)
		}
	}
	if w.marker != "" && v != w.marker && reason == "" {
		reason, why = metrics.HealMarker, fmt.Sprintf("generation marker %s went (now %s)", short(w.marker), short(v))
	}
	w.marker = v
	return reason, why, nil
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

func newGeneration() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}
