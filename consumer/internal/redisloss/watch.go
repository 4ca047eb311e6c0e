// Package redisloss notices that Redis lost data and repairs it from MySQL at
// once, instead of waiting for the nightly reconciler.
//
// Redis loses acknowledged writes when it comes back from an older state: a
// crash with the last second of AOF unwritten, a restore from a backup, a
// failover to a lagging replica. Stock then sits high or low, quota keys of
// closed orders are back and block their buyers, live orders lack theirs,
// idempotency records are gone (a retried key would buy again).
// A Watch polls, every Every, two signals that this happened:
//
//   - the run_id of every master (INFO server; on a cluster, each master):
//     a run_id that changed is a restart, after which Redis holds only what
//     its files held; a master at an address not seen before is a failover
//     (a replica promoted, with whatever it had replicated);
//   - a generation marker key, a counter the watch raises at every tick:
//     when it is gone or behind the highest value written, Redis came back
//     from an older state or lost the key (FLUSHALL, a restore, a resync
//     from a lagging master, even without a restart).
//
// What the watch saw is compared with, and recorded in, MySQL (the
// redis_watches row of the marker, through a Record), not the watch's own
// memory: a loss that happened while no consumer ran (Redis restarted from
// an older AOF during a rolling deploy) is noticed at the first tick of the
// next consumer. The record is read before Redis, and the marker raised
// before the record, so without a loss the marker is never behind what
// the record was when read, whatever other consumers' watches do at the
// same time.
//
// A detection is recorded (losses) before anything moves on, and cleared
// (healed) only when a repair finished, so a loss detected by a watch that
// stopped before repairing it is repaired by whichever watch ticks next.
// An incident is logged once with its reason and runs Repair (the
// reconciler's checked repair: drift seen twice, compare-and-set scripts,
// under the reconcile lock with a fencing token) until one pass runs
// cleanly and, when that pass repaired something, until a later one finds
// nothing left to repair. A restart that lost nothing costs one repair
// pass that finds everything in order. With Settle, one more pass follows
// Settle after the loss, the incident closed.
//
// Orders that were in Kafka when Redis lost their reservations reach MySQL
// later, by any amount of time (the router's backoff while Redis was down
// alone reaches 5 s): a pass that read MySQL before such an order's commit
// set Redis stock with its unit in and gave its buyer no quota key, and
// nothing in Redis shows it afterwards. So the consumer that writes such an
// order (its claim found the reservation missing) records a loss again, by
// a Reporter, before its event is final, and the next tick of any watch
// repairs after that commit.
package redisloss

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/domain/heal"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// DefaultEvery is the default period of the watch.
const DefaultEvery = time.Second

// MarkerKey returns the generation marker's key for the deployment whose
// keys are under prefix. The marker and its MySQL record belong to one
// deployment: deployments sharing a Redis each have their own (each raises
// its counter and records it in its own MySQL), and losing a prefix's keys
// is losing that deployment's data, marker included.
func MarkerKey(prefix string) string {
	if prefix == "" {
		return "heal:generation"
	}
	return prefix + ":heal:generation"
}

// Repair runs one checked repair pass over every item on sale. It returns
// whether it repaired anything; an error means the pass did not run
// cleanly (a store down, the lock busy or lost, drift it could not repair,
// items it could not check or repair) and the watch runs another one. An
// item that fails does not keep the others unrepaired: the pass repairs
// them, returns true with a *PassError naming the ones that failed, and
// the watch tries those again at its next pass.
type Repair func(ctx context.Context) (repaired bool, err error)

// Record keeps what the watches know of one Redis dataset, in MySQL
// (implemented by *orderdb.RedisWatches). Its writes are idempotent or
// monotonic: one whose answer was lost does no harm sent again or not.
type Record interface {
	RedisWatch(ctx context.Context, marker string) (heal.RedisWatch, error)
	RecordRedisLoss(ctx context.Context, marker, what string) error
	RecordRedisSeen(ctx context.Context, marker, oldRunIDs, runIDs string, generation int64) error
	RecordRedisHealed(ctx context.Context, marker string, losses int64) error
}

// Watch detects lost Redis data and repairs it.
type Watch struct {
	Redis redis.UniversalClient
	// Marker is the key of the generation marker (MarkerKey; one key: on a
	// cluster it speaks for the master that holds it; the run_ids speak
	// for all), and names the watch's Record.
	Marker string
	Record Record
	Repair Repair
	// Every is the polling period (default DefaultEvery); a failed repair
	// pass is retried after it too.
	Every   time.Duration
	Log     *slog.Logger
	Metrics *metrics.Heal
	// Rooms, if set, rebuilds the waiting rooms of the sales not ended
	// that were not built after lostBy, from MySQL (and the program's
	// wiring has it load the presale codes of those sales again): a Redis brought back
	// from an older copy keeps a room's generation, so no room script
	// notices it by itself. It runs once per incident (again when Redis
	// is lost again meanwhile); the incident stays open until it ran
	// cleanly. Now is the shared clock lostBy is read on (time.Now if
	// nil).
	Rooms func(ctx context.Context, lostBy time.Time) error
	Now   func() time.Time
	// Settle is when, after a loss (lostBy), the watch runs one more
	// repair pass once the incident closed: units of a bucketed item
	// between their two steps count in flight while the step is listed
	// (stockredis.MovingRetention), and a loss can leave some listed whose
	// second step never comes (a release kept, its give-back to the bucket
	// lost with the bucket's master). The incident's passes leave them out
	// of Redis; the follow-up puts them back. Zero: no follow-up.
	Settle time.Duration

	// followUp is when the follow-up pass is due (zero: none); followUps
	// counts its failed tries.
	followUp  time.Time
	followUps int

	// the incident being repaired, if any
	incident *incident
}

type incident struct {
	at       time.Time
	reason   string
	passes   int
	repaired bool // a pass ran cleanly; the next one verifies
	// covers is the record's loss count this incident repairs: when it
	// ends, the record is healed up to it.
	covers int64
	// failing is the error of each item the last pass could not check or
	// repair, by item id (logged when it starts or changes).
	failing map[int64]string
	// lostBy is when the loss the rooms are rebuilt for was seen (on the
	// shared clock); roomsDone is set once they were.
	lostBy    time.Time
	roomsDone bool
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
			// Redis or MySQL is unreachable (restarting): nothing was
			// recorded, so its return is judged against the record.
			if failures%30 == 0 {
				w.Log.Warn("data-loss watch cannot read or record Redis's state", "err", err)
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

// Tick checks the signals once against the record and, when a loss is
// detected or recorded and not yet healed, runs one repair pass. It
// returns an error when Redis or MySQL could not be read or written.
func (w *Watch) Tick(ctx context.Context) error {
	err := w.check(ctx)
	switch {
	case w.incident != nil:
		w.repair(ctx)
	case !w.followUp.IsZero() && !w.now().Before(w.followUp):
		w.followUpPass(ctx)
	}
	return err
}

// maxFollowUps bounds the tries of a follow-up pass that keeps failing
// (the nightly reconciler checks the items then).
const maxFollowUps = 30

// followUpPass is the pass Settle after a loss. It is retried at the next
// ticks when it fails, up to maxFollowUps tries.
func (w *Watch) followUpPass(ctx context.Context) {
	repaired, err := w.Repair(ctx)
	switch {
	case err != nil:
		w.followUps++
		if w.followUps < maxFollowUps {
			if ctx.Err() == nil && w.followUps == 1 {
				w.Log.Warn("the pass after Redis data loss settled did not run cleanly; retrying", "err", err, "retry_in", w.every().String())
			}
			return
		}
		w.Log.Log(ctx, logs.Alert, "the pass after Redis data loss settled kept failing; the reconciler checks the items", "tries", w.followUps, "err", err)
		w.Metrics.Pass(metrics.HealPassFailed)
	case repaired:
		w.Metrics.Pass(metrics.HealPassRepaired)
		w.Log.Log(ctx, logs.Alert, "drift repaired after Redis data loss settled (units that were between a bucket and their reservation at the loss)")
	default:
		w.Metrics.Pass(metrics.HealPassClean)
		w.Log.Info("Redis and MySQL agree after Redis data loss settled")
	}
	w.followUp, w.followUps = time.Time{}, 0
}

// check reads the record, then Redis, detects a loss, records it, moves
// the record on to what Redis holds now, and opens (or reopens) the
// incident the record calls for.
func (w *Watch) check(ctx context.Context) error {
	rec, err := w.Record.RedisWatch(ctx, w.Marker)
	if err != nil {
		return err
	}
	ids, err := w.readRunIDs(ctx)
	if err != nil {
		return fmt.Errorf("read run ids: %w", err)
	}
	gen, isGen, err := w.readMarker(ctx)
	if err != nil {
		return err
	}
	reason, why := detect(rec, ids, gen)
	if reason != "" {
		w.Metrics.Detected(reason)
		w.Log.Log(ctx, logs.Alert, "Redis lost data; repairing it from MySQL", "reason", reason, "detail", why)
		// Recorded before anything moves on: until it is, the evidence
		// stays as it was and the next tick (of any watch) sees it again.
		if err := w.Record.RecordRedisLoss(ctx, w.Marker, reason+": "+why); err != nil {
			return err
		}
		rec.Losses++ // at least this one; another watch may have counted it too
	}
	// The loss (if any) is recorded: the incident opens even when the
	// record cannot be moved on now.
	err = w.advance(ctx, rec, ids, gen, isGen)
	w.open(ctx, rec, reason)
	return err
}

// open starts an incident when the record owes a repair (a loss detected
// now, or recorded earlier by a watch that did not finish repairing it),
// and marks the open one as lost again when the record counts losses it
// does not cover.
func (w *Watch) open(ctx context.Context, rec heal.RedisWatch, reason string) {
	switch in := w.incident; {
	case in == nil && rec.Healed < rec.Losses:
		if reason == "" {
			reason = "recorded"
			w.Log.Log(ctx, logs.Alert, "a recorded loss of Redis data is not repaired yet; repairing it from MySQL",
				"reason", reason, "detail", rec.LastLoss, "losses", rec.Losses, "healed", rec.Healed)
		}
		w.incident = &incident{at: time.Now(), reason: reason, covers: rec.Losses, lostBy: w.now()}
	case in != nil && rec.Losses > in.covers:
		// Lost again while repairing (seen here or by another watch):
		// what was repaired may be gone.
		in.covers, in.repaired = rec.Losses, false
		in.lostBy, in.roomsDone = w.now(), false
	}
}

// advance raises the marker past the record's generation and records it
// with the run ids seen. The raise comes first: the record never holds a
// generation Redis has not had.
func (w *Watch) advance(ctx context.Context, rec heal.RedisWatch, ids map[string]string, gen int64, isGen bool) error {
	next := rec.Generation + 1
	var err error
	if isGen {
		// INCRBY, not SET, even when the marker is gone (it counts from 0
		// then): a concurrent watch's raise is never undone.
		next, err = w.Redis.IncrBy(ctx, w.Marker, max(1, rec.Generation+1-gen)).Result()
	} else {
		// Not a counter (a value of another kind): INCRBY would fail.
		err = w.Redis.Set(ctx, w.Marker, next, 0).Err()
	}
	if err != nil {
		// It may have run: the next tick reads what Redis holds.
		return fmt.Errorf("raise the generation marker: %w", err)
	}
	return w.Record.RecordRedisSeen(ctx, w.Marker, rec.RunIDs, encodeRunIDs(ids), next)
}

// Incident reports whether a detection is still being repaired.
func (w *Watch) Incident() bool { return w.incident != nil }

func (w *Watch) repair(ctx context.Context) {
	in := w.incident
	in.passes++
	start := time.Now()
	repaired, err := w.Repair(ctx)
	roomsOK := w.rooms(ctx, in)
	if err != nil {
		var pe *PassError
		if errors.As(err, &pe) {
			w.items(ctx, in, pe)
		}
		if repaired {
			// Some items were repaired, others failed: the incident stays
			// open (and recorded) until a pass runs cleanly.
			w.Metrics.Pass(metrics.HealPassPartial)
		} else {
			w.Metrics.Pass(metrics.HealPassFailed)
		}
		if ctx.Err() == nil {
			w.Log.Warn("repair after Redis data loss did not run cleanly; retrying", "reason", in.reason,
				"pass", in.passes, "repaired_anything", repaired, "err", err, "retry_in", w.every().String())
		}
		return
	}
	w.items(ctx, in, nil)
	if !roomsOK {
		w.Metrics.Pass(metrics.HealPassPartial)
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
			w.close(ctx) // nothing was lost that mattered
		}
	case repaired:
		w.Log.Info("more drift repaired after Redis data loss (orders that were on their way)", "reason", in.reason,
			"passes", in.passes)
	default:
		w.Log.Info("Redis and MySQL agree after data loss", "reason", in.reason, "passes", in.passes,
			"took", took.Round(time.Millisecond).String())
		w.close(ctx)
	}
}

func (w *Watch) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// rooms rebuilds the waiting rooms once per incident (Rooms) and reports
// whether that is done.
func (w *Watch) rooms(ctx context.Context, in *incident) bool {
	if w.Rooms == nil || in.roomsDone {
		return true
	}
	if err := w.Rooms(ctx, in.lostBy); err != nil {
		if ctx.Err() == nil {
			w.Log.Warn("rebuilding the waiting rooms after Redis data loss failed; retrying", "reason", in.reason,
				"err", err, "retry_in", w.every().String())
		}
		return false
	}
	in.roomsDone = true
	return true
}

// items notes the items a pass could not check or repair (pe nil: none):
// each is logged with its item id when it starts failing or its error
// changes, and the gauge counts them.
func (w *Watch) items(ctx context.Context, in *incident, pe *PassError) {
	var now map[int64]string
	if pe != nil {
		now = pe.Unchecked
		if len(pe.Repaired) > 0 {
			w.Log.Info("items repaired after Redis data loss while others fail", "reason", in.reason, "pass", in.passes,
				"repaired_items", pe.Repaired, "failing_items", len(now))
		}
	}
	for id, e := range now {
		if in.failing[id] != e {
			w.Log.Log(ctx, logs.Alert, "item not repaired after Redis data loss; it is tried again at every pass",
				"reason", in.reason, "item_id", id, "err", e, "pass", in.passes)
		}
	}
	for id := range in.failing {
		if _, ok := now[id]; !ok {
			w.Log.Info("item that failed the repair after Redis data loss went through", "reason", in.reason,
				"item_id", id, "pass", in.passes)
		}
	}
	in.failing = now
	w.Metrics.ItemsFailing(len(now))
}

// close ends the incident and records the losses it covered as healed. If
// that write fails, the record still owes a repair and the next tick opens
// an incident again: one more pass, nothing worse.
func (w *Watch) close(ctx context.Context) {
	in := w.incident
	w.incident = nil
	if w.Settle > 0 {
		w.followUp, w.followUps = in.lostBy.Add(w.Settle), 0
	}
	if err := w.Record.RecordRedisHealed(ctx, w.Marker, in.covers); err != nil && ctx.Err() == nil {
		w.Log.Warn("cannot record the repair after Redis data loss; it runs again", "reason", in.reason, "err", err)
	}
}
