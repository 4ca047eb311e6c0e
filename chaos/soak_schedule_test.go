//go:build soak

package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/hook"
)

// The soak's fault schedule is a pure function of the seed and the
// duration: the kinds, times, targets and parameters of every fault come
// from one PCG stream seeded with the seed, so a run that broke a promise
// is replayed by its seed (the client mix and the programs' timing are not
// replayed, the faults are).

// The kinds of fault the nemesis injects.
const (
	faultLoseRedis = "lost-reply-redis" // a script's answer lost at the wire (internal/testkit/proxytest)
	faultLoseMySQL = "lost-reply-mysql" // a COMMIT's or UPDATE's answer lost
	faultLoseKafka = "lost-reply-kafka" // a produce's or offset commit's answer lost
	faultLatency   = "latency"          // base ± jitter on one program's link
	faultCut       = "cut-link"         // one program's link cut, new connections refused
	faultKillProg  = "kill-program"     // kill -9 of an api or consumer, restarted later
	faultKillSvc   = "kill-service"     // kill -9 of redis-server, mariadbd or the broker
	faultRestore   = "redis-restore"    // Redis brought back from an older copy of its AOF
	faultStall     = "mysql-stall"      // SIGSTOP of mariadbd, SIGCONT later
	faultSkew      = "clock-skew"       // an api restarted with SECKILL_TEST_CLOCK_OFFSET
	faultFlush     = "redis-flush"      // Redis loses everything (FLUSHALL); only pinned (pinnedFaults)
	faultHookDown  = "endpoint-down"    // the faulty webhook endpoint refuses connections; only pinned
	faultHookSlow  = "endpoint-slow"    // the faulty webhook endpoint answers in 30 s (slowStretches)

	// The replicated topology's own (soak_replicated_test.go).
	faultKillBroker    = "kill-broker"       // kill -9 of one of the three brokers, restarted later
	faultKillMaster    = "kill-redis-master" // kill -9 of a Redis master (its replica lagging first, N=1); the replica takes over
	faultRedisFailover = "redis-failover"    // CLUSTER FAILOVER on a master's replica (graceful)
	faultMySQLFailover = "mysql-failover"    // kill -9 of the MariaDB primary, the standby promoted, the programs repointed
	faultCutBroker     = "cut-broker"        // one broker cut off from the other two (scripts/services cut), healed later
)

// The topologies the soak runs on (SOAK_TOPOLOGY, make soak TOPOLOGY=...).
const (
	topologySingle     = "single"     // one Redis, one MariaDB, one broker (scripts/services up redis mysql kafka)
	topologyReplicated = "replicated" // docs/replicated.md: kafka-cluster, redis-replicas, mysql-standby
)

// soakPrograms are the programs the soak runs, by name.
var (
	soakAPIs      = []string{"api1", "api2"}
	soakConsumers = []string{"consumer1", "consumer2"}
	soakServices  = []string{"redis", "mysql", "kafka"}
	// hookFaulty is the webhook endpoint the endpoint faults hold
	// (soak_hooks_test.go).
	hookFaulty = "faulty"
)

// soakFault is one fault of the schedule: from At for For (0: instant).
type soakFault struct {
	At     time.Duration
	Kind   string
	Target string // a program, a service, or a link "program/service" ("kafka-link": the broker link all share)
	For    time.Duration
	N      int    // lost replies
	Match  string // which request loses its answer
	Base   time.Duration
	Jitter time.Duration
	Offset time.Duration // clock skew
	Why    string        // a pinned fault: what it is aimed at
}

func (f soakFault) String() string {
	s := fmt.Sprintf("%8s %-16s %-16s", f.At.Round(10*time.Millisecond), f.Kind, f.Target)
	if f.For > 0 {
		s += fmt.Sprintf(" for %v", f.For.Round(10*time.Millisecond))
	}
	switch f.Kind {
	case faultLoseRedis, faultLoseMySQL, faultLoseKafka:
		s += fmt.Sprintf(" %d× %s", f.N, f.Match)
	case faultLatency:
		s += fmt.Sprintf(" %v±%v", f.Base, f.Jitter)
	case faultSkew:
		s += fmt.Sprintf(" offset %v", f.Offset)
	case faultHookSlow:
		s += fmt.Sprintf(" answers in %v", hookSlowAnswer)
	case faultKillMaster:
		if f.N == 1 {
			s += " its replica lagging"
		}
	}
	if f.Why != "" {
		s += " (pinned: " + f.Why + ")"
	}
	return s
}

// soakSchedule is the faults of one run, in the order they start.
type soakSchedule struct {
	Seed     uint64
	Duration time.Duration
	Topology string
	Faults   []soakFault
}

func (s soakSchedule) String() string {
	var b strings.Builder
	on := ""
	if s.Topology == topologyReplicated {
		on = " on the replicated topology"
	}
	fmt.Fprintf(&b, "soak: schedule of seed %d over %v%s: %d faults\n", s.Seed, s.Duration, on, len(s.Faults))
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "soak:   %s\n", f)
	}
	return b.String()
}

// byKind counts the schedule's faults by kind, as "kind n, ...".
func (s soakSchedule) byKind() string {
	n := map[string]int{}
	for _, f := range s.Faults {
		n[f.Kind]++
	}
	return countsLine(n)
}

// countsLine prints counts sorted by name: "a 3, b 1".
func countsLine(n map[string]int) string {
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

// makeSchedule is the schedule of a run on the single-node services.
func makeSchedule(seed uint64, d time.Duration) soakSchedule {
	return makeScheduleOn(seed, d, topologySingle)
}

// makeScheduleOn draws the faults of a run of duration d from seed. Faults
// arrive at random (exponential gaps, a few seconds apart) and last
// seconds, so several are on at once; two never hold the same target at
// once (a service is not killed while it is stalled), and at most two
// services are down or stalled at a time, so the sale keeps moving. Every
// fault ends by d; the first second and the last are quiet.
//
// On the replicated topology the kinds are those that make sense there
// (replicatedKinds) and up to three services may be down at once (each
// one node of its service: the service as a whole still answers). On the
// single-node topology the stream of draws is what it always was, so a
// seed replays the faults it gave before the replicated kinds were added.
func makeScheduleOn(seed uint64, d time.Duration, topology string) soakSchedule {
	r := rand.New(rand.NewPCG(seed, 0x5eed50a4))
	s := soakSchedule{Seed: seed, Duration: d, Topology: topology}
	type weighted struct {
		kind string
		w    int
	}
	kinds := []weighted{
		{faultLoseRedis, 3}, {faultLoseMySQL, 2}, {faultLoseKafka, 2}, {faultLatency, 3}, {faultCut, 2},
		{faultKillProg, 3}, {faultKillSvc, 2}, {faultRestore, 1}, {faultStall, 2}, {faultSkew, 1},
	}
	replicated := topology == topologyReplicated
	if replicated {
		kinds = nil
		for _, k := range replicatedKinds {
			kinds = append(kinds, weighted{k.kind, k.w})
		}
	}
	total := 0
	for _, k := range kinds {
		total += k.w
	}
	pick := func() string {
		n := r.IntN(total)
		for _, k := range kinds {
			if n < k.w {
				return k.kind
			}
			n -= k.w
		}
		panic("unreachable")
	}
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(r.Int64N(int64(hi-lo)+1))).Round(10 * time.Millisecond)
	}
	oneOf := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	programs := append(append([]string{}, soakAPIs...), soakConsumers...)
	link := func(svc string) string { return oneOf(programs...) + "/" + svc }
	// A link the latency and cut faults may hold: on the replicated
	// topology only MySQL's are proxied (replicatedKinds says why).
	anyLink := func() string {
		if replicated {
			return link("mysql")
		}
		return oneOf(link("redis"), link("mysql"), "kafka-link")
	}

	// Every fault holds its target, and a service fault a service, over
	// [At, At+For); the pinned faults hold theirs first.
	held := &holds{busy: map[string][]span{}, maxServices: 2}
	s.Faults = pinnedFaults(d)
	if replicated {
		held.maxServices = 3
		s.Faults = pinnedReplicated(d)
	}
	for _, f := range s.Faults {
		held.take(f)
	}
	const meanGap = 4 * time.Second
	end := d - time.Second
	for at := time.Second; ; {
		at += time.Duration(r.ExpFloat64() * float64(meanGap)).Round(10 * time.Millisecond)
		if at >= end {
			break
		}
		room := end - at
		var f soakFault
		for try := 0; try < 5; try++ {
			f = soakFault{At: at, Kind: pick()}
			switch f.Kind {
			case faultLoseRedis:
				f.Target, f.N, f.Match = link("redis"), 1+r.IntN(3), "script"
			case faultLoseMySQL:
				f.Target, f.N, f.Match = link("mysql"), 1+r.IntN(2), oneOf("COMMIT", "UPDATE")
			case faultLoseKafka:
				f.Target, f.N, f.Match = "kafka-link", 1+r.IntN(2), oneOf("produce", "offset-commit")
			case faultLatency:
				f.Target = anyLink()
				f.For, f.Base = between(2*time.Second, 10*time.Second), between(20*time.Millisecond, 300*time.Millisecond)
				f.Jitter = f.Base / 2
			case faultCut:
				f.Target, f.For = anyLink(), between(500*time.Millisecond, 4*time.Second)
			case faultKillProg:
				f.Target, f.For = oneOf(programs...), between(500*time.Millisecond, 5*time.Second)
			case faultKillSvc:
				f.Target, f.For = oneOf(soakServices...), between(500*time.Millisecond, 4*time.Second)
			case faultRestore:
				// The copy is taken at At; the sale goes on for For; then
				// Redis is killed and brought back from the copy.
				f.Target, f.For = "redis", between(2*time.Second, 8*time.Second)
			case faultStall:
				f.Target, f.For = "mysql", between(500*time.Millisecond, 6*time.Second)
			case faultSkew:
				f.Target, f.For = oneOf(soakAPIs...), between(8*time.Second, 25*time.Second)
				f.Offset = between(time.Second, 5*time.Second)
				if r.IntN(3) > 0 {
					f.Offset = -f.Offset // mostly behind: it would sell past the end
				}
			default:
				drawReplicated(&f, r.IntN, between)
			}
			f.For = min(f.For, room)
			if held.free(f) {
				break
			}
			f.Kind = ""
		}
		if f.Kind == "" {
			continue
		}
		held.take(f)
		s.Faults = append(s.Faults, f)
	}
	s.Faults = append(s.Faults, slowStretches(seed, d, held)...)
	if replicated {
		s.Faults = append(s.Faults, brokerCuts(seed, d, held)...)
	}
	sort.SliceStable(s.Faults, func(i, j int) bool { return s.Faults[i].At < s.Faults[j].At })
	return s
}

// drawCloseIn is when sale H's entries close, from its creation: at 30 %
// of the run, and at least 15 s in.
func drawCloseIn(d time.Duration) time.Duration { return max(15*time.Second, d*3/10) }

// pinnedFaults are the faults of every run of a minute or more whose times
// follow the sales, not the seed: Redis losing sale G's room (brought back
// from a copy taken before the room's start, a few seconds after it;
// emptied while it admits, twice) and losing the state around sale H's
// draw (a copy taken before its entries close, brought back after the
// draw ran).
func pinnedFaults(d time.Duration) []soakFault {
	if d < time.Minute {
		return nil
	}
	closeAt := drawCloseIn(d)
	return []soakFault{
		{At: 2 * time.Second, Kind: faultRestore, Target: "redis", For: 8 * time.Second,
			Why: "sale G's room from a copy taken before its start"},
		{At: d / 5, Kind: faultFlush, Target: "redis", For: 5 * time.Second, Why: "sale G's room emptied while it admits"},
		{At: closeAt - 4*time.Second, Kind: faultRestore, Target: "redis", For: 8 * time.Second,
			Why: "sale H from a copy taken before its draw"},
		{At: d * 3 / 5, Kind: faultFlush, Target: "redis", For: 5 * time.Second,
			Why: "sale G's room emptied again, sale H's alternates under way"},
		{At: d / 5, Kind: faultHookDown, Target: hookFaulty, For: hookDownFor(d),
			Why: "an endpoint down: its deliveries wait on the retry schedule"},
	}
}

// hookDownFor is how long the faulty endpoint is down: two minutes (the
// issue's fault), or 60 % of a shorter run, so that it comes back with a
// fifth of the run left for the retries to catch up.
func hookDownFor(d time.Duration) time.Duration { return min(2*time.Minute, d*3/5) }

// hookSlowAnswer is how long the faulty endpoint takes to answer in an
// endpoint-slow stretch: past the dispatcher's timeout (15 s by default),
// so every delivery sent to it then fails after arriving.
const hookSlowAnswer = 30 * time.Second

// slowStretches draws the stretches in which the faulty endpoint answers
// in hookSlowAnswer, 8-16 s each: one before it goes down (so every run of
// a minute or more has one), then about one every 45 s where it is up.
// They come from a PCG stream of their own, so that the other faults of a
// seed are the same as before these were added.
func slowStretches(seed uint64, d time.Duration, held *holds) []soakFault {
	if d < time.Minute {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 0x5eedb00c))
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(r.Int64N(int64(hi-lo)+1))).Round(10 * time.Millisecond)
	}
	var out []soakFault
	down, end := d/5, d-time.Second
	for at := between(time.Second, down-9*time.Second); at < end; at += time.Duration(r.ExpFloat64() * float64(45*time.Second)).Round(10 * time.Millisecond) {
		f := soakFault{At: at, Kind: faultHookSlow, Target: hookFaulty, For: min(between(8*time.Second, 16*time.Second), end-at)}
		if len(out) == 0 {
			f.For = min(f.For, down-at-time.Second) // the first ends before the endpoint goes down
		}
		if held.free(f) {
			held.take(f)
			out = append(out, f)
		}
	}
	return out
}

func isServiceFault(kind string) bool {
	switch kind {
	case faultKillSvc, faultRestore, faultStall, faultFlush, faultKillBroker, faultKillMaster, faultRedisFailover, faultMySQLFailover,
		faultCutBroker:
		return true
	}
	return false
}

// span is the time a fault holds something.
type span struct{ from, to time.Duration }

func (a span) overlaps(b span) bool { return a.from < b.to && b.from < a.to }

// holds is what the faults placed so far hold: targets, and services
// down, stalled or emptied.
type holds struct {
	busy     map[string][]span
	services []span
	// maxServices is how many service faults may overlap: 2 on the single
	// node topology, 3 on the replicated one.
	maxServices int
}

// free says whether f may be placed: no fault holds its target over its
// span, and fewer than maxServices service faults overlap it. A lost reply is
// armed at once and holds nothing.
func (h *holds) free(f soakFault) bool {
	if f.Kind == faultLoseRedis || f.Kind == faultLoseMySQL || f.Kind == faultLoseKafka {
		return true
	}
	if f.For <= 0 {
		return false
	}
	sp := span{f.At, f.At + f.For}
	for _, b := range h.busy[heldAs(f)] {
		if b.overlaps(sp) {
			return false
		}
	}
	if isServiceFault(f.Kind) {
		on := 0
		for _, b := range h.services {
			if b.overlaps(sp) {
				on++
			}
		}
		if on >= h.maxServices {
			return false
		}
	}
	return true
}

// take records what f holds.
func (h *holds) take(f soakFault) {
	if f.Kind == faultLoseRedis || f.Kind == faultLoseMySQL || f.Kind == faultLoseKafka {
		return
	}
	sp := span{f.At, f.At + f.For}
	h.busy[heldAs(f)] = append(h.busy[heldAs(f)], sp)
	if isServiceFault(f.Kind) {
		h.services = append(h.services, sp)
	}
}

// holdBreach says how the schedule's fault i breaks the holds' rules, if it
// does: a fault holding what an earlier one still holds (heldAs), or
// starting while maxServices service faults are on.
func holdBreach(s soakSchedule, i, maxServices int) string {
	f, services := s.Faults[i], 0
	for _, g := range s.Faults[:i] {
		if g.At+g.For <= f.At || g.For == 0 || f.For == 0 {
			continue
		}
		if heldAs(g) == heldAs(f) {
			return fmt.Sprintf("%s and %s hold %s at once", g, f, heldAs(f))
		}
		if isServiceFault(g.Kind) && isServiceFault(f.Kind) {
			services++
		}
	}
	if services >= maxServices {
		return fmt.Sprintf("%s starts while %d services are down", f, services)
	}
	return ""
}

// The schedule is a pure function of the seed: the same seed gives the
// same faults, another seed others; no target is held by two faults at
// once, at most two services are down or stalled at a time, and every
// fault ends within the run.
func TestSoakScheduleIsAPureFunctionOfTheSeed(t *testing.T) {
	a, b := makeSchedule(7, 5*time.Minute), makeSchedule(7, 5*time.Minute)
	if a.String() != b.String() || len(a.Faults) == 0 {
		t.Fatalf("seed 7 gave two schedules:\n%s\n%s", a, b)
	}
	if c := makeSchedule(8, 5*time.Minute); c.String()[30:] == a.String()[30:] {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	for seed := uint64(1); seed <= 50; seed++ {
		s := makeSchedule(seed, 3*time.Minute)
		kinds := map[string]bool{}
		for i, f := range s.Faults {
			kinds[f.Kind] = true
			if f.At+f.For > s.Duration {
				t.Fatalf("seed %d: %s ends after the run", seed, f)
			}
			if why := holdBreach(s, i, 2); why != "" {
				t.Fatalf("seed %d: %s", seed, why)
			}
		}
		pinned := 0
		for _, f := range s.Faults {
			if f.Why != "" {
				pinned++
			}
		}
		if pinned != len(pinnedFaults(s.Duration)) || pinned == 0 {
			t.Fatalf("seed %d: %d pinned faults in the schedule, want the %d of pinnedFaults", seed, pinned, len(pinnedFaults(s.Duration)))
		}
		if len(kinds) < 6 {
			t.Fatalf("seed %d: only %d kinds of fault in 3 minutes: %s", seed, len(kinds), s.byKind())
		}
	}
	// Every run of a minute or more has the faulty endpoint down once and
	// slow at least once, and the retries outlast the down stretch
	// (jitter takes up to a fifth off each wait) with 30 s to spare: a
	// delivery it refused at the start is still being tried when it is
	// back.
	retries, err := hook.ParseSchedule(soakRetrySchedule)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Minute, 2 * time.Minute, 30 * time.Minute} {
		for seed := uint64(1); seed <= 50; seed++ {
			down, slow := 0, 0
			for _, f := range makeSchedule(seed, d).Faults {
				switch f.Kind {
				case faultHookDown:
					down++
					if retries.Span()*4/5 < f.For+30*time.Second {
						t.Fatalf("the retry schedule %s (%v) does not outlast %s", soakRetrySchedule, retries.Span(), f)
					}
				case faultHookSlow:
					slow++
				}
			}
			if down != 1 || slow == 0 {
				t.Fatalf("seed %d over %v: %d endpoint-down, %d endpoint-slow; want 1 and at least 1", seed, d, down, slow)
			}
		}
	}
}
