package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
)

var errFlagHelp = flag.ErrHelp

func findRun(rep *report.Report, name string) *report.Run {
	for _, r := range rep.Runs {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// targets judges the figures against the goals. They are printed
// with PASS or MISS and never fail the run.
func targets(rep *report.Report) []report.Target {
	var out []report.Target
	add := func(name, want, got string, pass bool) {
		out = append(out, report.Target{Name: name, Want: want, Got: got, Pass: pass})
	}
	ref := rep.Reference
	if u := rep.Idle; u != nil {
		pct := report.PipelineCPU(u)
		if base := rep.IdleBase; base != nil {
			// What the programs use and make the services use: the
			// services' own idle CPU (Kafka's JVM, Redis's timers) is
			// there without any pipeline.
			alone := report.PipelineCPU(base)
			add("idle pipeline CPU (programs, and what they add to the services"+report.IdleOn(rep.IdleHistory)+")", "< 5 % of one CPU",
				fmt.Sprintf("%.1f %% (%.1f %% idle − %.1f %% services alone)", pct-alone, pct, alone), pct-alone < 5)
		} else {
			add("idle pipeline CPU (all but the bench"+report.IdleOn(rep.IdleHistory)+")", "< 5 % of one CPU", fmt.Sprintf("%.1f %%", pct), pct < 5)
		}
		if v := rep.IdleMySQLSessions; v != nil {
			// The programs and the MySQL work they cause, apart from
			// whatever else the shared services do meanwhile.
			own := report.Column(u, "api") + report.Column(u, "consumer") + *v
			add("idle programs' CPU with their MySQL sessions (api + consumer + the MySQL threads serving them)", "< 5 % of one CPU",
				fmt.Sprintf("%.1f %% (api %.1f, consumer %.1f, MySQL sessions %.1f)", own, report.Column(u, "api"),
					report.Column(u, "consumer"), *v), own < 5)
		}
	}
	for _, name := range []string{"first-sale", "second-sale"} {
		if r := findRun(rep, name); r != nil {
			var acc, sold string
			if v := r.APIView; v != nil {
				// What the api measured itself, beside what the load
				// tool saw: the difference is the tool's and the
				// kernel's share of the 2 CPUs.
				acc = fmt.Sprintf("; the api's own: P99 ≈ %.1f ms, %.1f %% within 25 ms (its reserve P99 ≈ %.1f ms, publish P99 ≈ %.1f ms)",
					v.Accepted.P99Ms, 100*v.Accepted.Within25, v.Reserve.P99Ms, v.Publish.P99Ms)
				sold = fmt.Sprintf("; the api's own: P99 ≈ %.1f ms, %.1f %% within 5 ms", v.SoldOut.P99Ms, 100*v.SoldOut.Within5)
			}
			add(name+": accepted answers", "P99 ≤ 25 ms", fmt.Sprintf("P99 %.2f ms (%d)%s", r.AcceptedLatency.P99Ms, r.AcceptedLatency.Count, acc),
				r.AcceptedLatency.Count > 0 && r.AcceptedLatency.P99Ms <= 25)
			add(name+": sold-out answers", "P99 ≤ 5 ms", fmt.Sprintf("P99 %.2f ms (%d)%s", r.SoldOutLatency.P99Ms, r.SoldOutLatency.Count, sold),
				r.SoldOutLatency.Count > 0 && r.SoldOutLatency.P99Ms <= 5)
		}
	}
	if r := findRun(rep, "flash"); r != nil && r.Rate == 0 && r.CPU != nil && r.Requests > 0 {
		us := report.PerUnit(r.CPU, report.Column(r.CPU, "api"), r.Requests)
		got := fmt.Sprintf("%.1f µs", us)
		if f := findRun(rep, "floor"); f != nil && f.CPU != nil && f.Requests > 0 {
			// The same load against Gin doing only the work before stock.
			got += fmt.Sprintf(" (the floor: %.1f µs)", report.PerUnit(f.CPU, report.Column(f.CPU, "api"), f.Requests))
		}
		add("flash: api CPU per answer (nearly all sold out)", "≤ 30 µs", got, us <= 30)
	}
	if r := findRun(rep, "flash"); r != nil && r.Rate == 0 {
		add("flash throughput", "≥ 17,000 req/s", fmt.Sprintf("%.0f req/s", r.Throughput), r.Throughput >= 17000)
		if ref != nil && ref.ReservePerSecond > 0 {
			ratio := stats.Ratio(r.Throughput, ref.ReservePerSecond)
			add("flash vs raw reserve script", "≥ 0.5×", fmt.Sprintf("%.2f× (%.0f / %.0f)", ratio, r.Throughput, ref.ReservePerSecond), ratio >= 0.5)
		}
	}
	for _, r := range rep.Runs {
		if (r.Name == "flash" || r.Name == "flash-rate") && r.Rate > 0 {
			got := fmt.Sprintf("P99 %.2f ms (%.0f answered/s, %d dropped)", r.Latency.P99Ms, r.Throughput, r.Dropped)
			name := fmt.Sprintf("%s at a fixed %.0f req/s", r.Name, r.Rate)
			if r.Rate < 5000 {
				name += " (target is at 5,000)"
			}
			add(name, "P99 ≤ 10 ms", got, r.Latency.P99Ms <= 10 && r.Dropped == 0 && r.Rate >= 5000)
		}
	}
	if r := findRun(rep, "sustained"); r != nil && r.Pipeline != nil {
		pl := r.Pipeline
		add("sustained orders end to end", "≥ 10,000 orders/s", fmt.Sprintf("%.0f orders/s", pl.OrdersPerSecond), pl.OrdersPerSecond >= 10000)
		add("sustained PENDING→CREATED", "P99 ≤ 250 ms", fmt.Sprintf("P99 %.0f ms", pl.PendingToCreated.P99Ms), pl.PendingToCreated.Count > 0 && pl.PendingToCreated.P99Ms <= 250)
		add("sustained drain after load stops", "≤ 2 s", fmt.Sprintf("%.2f s", r.DrainSeconds), r.DrainSeconds <= 2 && len(r.Violations) == 0)
		if r.CPU != nil {
			unit, n := report.PerOrderUnit(r)
			us := report.PerUnit(r.CPU, report.PipelineCPU(r.CPU), n)
			add("sustained CPU per "+unit+" (all but the bench)", "≤ 175 µs", fmt.Sprintf("%.0f µs", us), n > 0 && us <= 175)
		}
		if ref != nil && ref.MySQLPerSecond > 0 {
			ratio := stats.Ratio(pl.OrdersPerSecond, ref.MySQLPerSecond)
			add("sustained vs raw per-order MySQL", "≥ 2×", fmt.Sprintf("%.2f× (%.0f / %.0f)", ratio, pl.OrdersPerSecond, ref.MySQLPerSecond), ratio >= 2)
		}
	}
	for _, r := range rep.Runs {
		if ratio, pages := rep.PollsToPages(r); pages > 0 {
			add(r.Name+": polls/s vs the sale page's pages/s of the same run", "≥ 1×",
				fmt.Sprintf("%.2f× (%.0f / %.0f)", ratio, r.Queue.PollsPerSecond, pages), ratio >= 1)
		}
	}
	out = append(out, sizedTargets(rep)...)
	for _, ev := range rep.Events {
		if pct, ok := ev.OrdersChange(); ok {
			add(ev.OnRun+": orders/s end to end vs "+ev.OffRun, "within 10 %",
				fmt.Sprintf("%+.1f %% (%.0f / %.0f orders/s)", pct, ev.On.Pipeline.OrdersPerSecond, ev.Off.Pipeline.OrdersPerSecond), pct >= -10)
		}
		add(ev.OnRun+": commit→delivery of every event at the sustained rate", "P99 < 1 s, every event delivered",
			fmt.Sprintf("P99 %.0f ms; %d of %d delivered, %d invalid signatures", ev.CommitToDelivery.P99Ms, ev.Delivered, ev.Committed, ev.Invalid),
			ev.Complete() && ev.CommitToDelivery.P99Ms < 1000)
	}
	for _, rc := range rep.Reconcile {
		if st := rc.Step("clean check"); st != nil {
			got := fmt.Sprintf("%.1f s, max RSS %.0f MiB, exit %d", st.Seconds, st.MaxRSSMiB, st.ExitCode)
			name := fmt.Sprintf("reconcile: clean check of %d orders of one item", rc.Orders)
			if rc.Orders < 1_000_000 {
				name += " (the target is at 1,000,000)"
			}
			add(name, "exit 0 in < 60 s, max RSS < 256 MiB", got,
				st.OK() && st.Seconds < 60 && st.MaxRSSMiB < 256 && rc.Orders >= 1_000_000)
		}
		var failed []string
		for _, st := range rc.Steps {
			if !st.OK() {
				failed = append(failed, fmt.Sprintf("%s: exit %d", st.Name, st.ExitCode))
			}
		}
		got := "all exit 0"
		if len(failed) > 0 {
			got = strings.Join(failed, "; ")
		}
		add(fmt.Sprintf("reconcile: every step of %d orders (checks clean, repairs done)", rc.Orders), "exit 0 each", got, len(failed) == 0)
	}
	if rows := rep.Compare; len(rows) == 4 {
		naive, lock, lua, ours := rows[0], rows[1], rows[2], rows[3]
		add("compare: naive shows the failure", "oversell or duplicates",
			fmt.Sprintf("%d oversold, %d duplicates, final stock %d", naive.Oversold, naive.Duplicates, naive.FinalStock),
			naive.Oversold > 0 || naive.Duplicates > 0 || naive.FinalStock < 0)
		add("compare: lock correct but slower", "correct, fewer req/s than ours",
			fmt.Sprintf("correct=%t, %.0f vs %.0f req/s", lock.Correct, lock.Throughput, ours.Throughput),
			lock.Correct && lock.Throughput < ours.Throughput)
		fastest := ours.Correct
		for _, r := range []*report.Row{lock, lua} {
			if r.Correct && r.Throughput > ours.Throughput {
				fastest = false
			}
		}
		add("compare: ours correct and fastest correct", "correct, most req/s of the correct ones",
			fmt.Sprintf("correct=%t, %.0f req/s (lua %.0f, lock %.0f)", ours.Correct, ours.Throughput, lua.Throughput, lock.Throughput), fastest)
	}
	return out
}

// notes explains figures a reader could misread.
func notes(rep *report.Report) []string {
	var out []string
	if r := findRun(rep, "flash"); r != nil {
		out = append(out, fmt.Sprintf("flash: %d of %d requests came after the item sold out; the API answers those from its in-process sold-out flag after an idempotency-key look-up (concurrent look-ups share one MGET), without running the reserve script.",
			r.Outcomes["sold_out"], r.Requests))
	}
	if r := findRun(rep, "clickers"); r != nil {
		out = append(out, fmt.Sprintf("clickers: %d buyers, %d requests; %d idempotency keys were sent more than once and each got its original answer back unless an invariant above says otherwise.",
			r.Buyers, r.Requests, r.ReplayedKeys))
	}
	var busy []string
	for _, r := range rep.Runs {
		if r.CPU != nil && r.CPU.Other >= 20 {
			busy = append(busy, fmt.Sprintf("%s %.0f%%", r.Name, r.CPU.Other))
		}
	}
	for _, c := range rep.Compare {
		if c.CPU != nil && c.CPU.Other >= 20 && !strings.HasPrefix(c.Strategy, "ours") {
			busy = append(busy, fmt.Sprintf("compare %s %.0f%%", strings.Fields(c.Strategy)[0], c.CPU.Other))
		}
	}
	if len(busy) > 0 {
		out = append(out, "Other work on the machine (not the bench, api, consumer, Redis, MySQL or Kafka) took CPU during: "+
			strings.Join(busy, ", ")+" (of one CPU). Those figures are lower, and their tails longer, than on a quiet machine.")
	}
	if rep.Host.CPUs <= 2 {
		out = append(out, fmt.Sprintf("The load generator shares the %d CPUs with the API, consumer, Redis, Kafka and MySQL; every figure is a whole-machine figure, and the Go client's own CPU is part of what limits req/s.", rep.Host.CPUs))
	}
	return out
}

// sizedTargets reads the sizes and drops scenarios as ratios to the
// one-item loads of the same run (issue 30): req/s of the sell-out against
// flash, orders/s end to end and CPU per created order of the lasting
// stock against sustained. Runs are matched by their labels (topology,
// tracing), so each compares with its own session's one-item loads.
func sizedTargets(rep *report.Report) []report.Target {
	var out []report.Target
	for _, r := range rep.Runs {
		one, sized, ok := oneItemBase(r.Name)
		if !ok {
			continue
		}
		base := findRun(rep, one)
		if base == nil || r.Rate != base.Rate {
			continue
		}
		if !sized {
			ratio := stats.Ratio(r.Throughput, base.Throughput)
			out = append(out, report.Target{Name: r.Name + " vs " + base.Name + ": req/s", Want: "≥ 0.9×",
				Got: fmt.Sprintf("%.2f× (%.0f / %.0f)", ratio, r.Throughput, base.Throughput), Pass: ratio >= 0.9})
			continue
		}
		if r.Pipeline == nil || base.Pipeline == nil {
			continue
		}
		ratio := stats.Ratio(r.Pipeline.OrdersPerSecond, base.Pipeline.OrdersPerSecond)
		out = append(out, report.Target{Name: r.Name + " vs " + base.Name + ": orders/s end to end", Want: "≥ 0.9×",
			Got: fmt.Sprintf("%.2f× (%.0f / %.0f)", ratio, r.Pipeline.OrdersPerSecond, base.Pipeline.OrdersPerSecond), Pass: ratio >= 0.9})
		if r.CPU != nil && base.CPU != nil {
			_, n := report.PerOrderUnit(r)
			_, bn := report.PerOrderUnit(base)
			us, bus := report.PerUnit(r.CPU, report.PipelineCPU(r.CPU), n), report.PerUnit(base.CPU, report.PipelineCPU(base.CPU), bn)
			ratio := stats.Ratio(us, bus)
			out = append(out, report.Target{Name: r.Name + " vs " + base.Name + ": CPU per created order (all but the bench)", Want: "≤ 1.1×",
				Got: fmt.Sprintf("%.2f× (%.0f / %.0f µs)", ratio, us, bus), Pass: n > 0 && bn > 0 && ratio <= 1.1})
		}
	}
	return out
}

// oneItemBase names the one-item run a sized run compares with: "sizes"
// and "drops" with "flash", their "-sustained" runs with "sustained", the
// labels after the name (" (replicated)", " (tracing on, …)") kept. lasting
// says it is a -sustained run.
func oneItemBase(name string) (base string, lasting bool, ok bool) {
	for _, s := range []string{"sizes", "drops"} {
		rest, found := strings.CutPrefix(name, s)
		if !found {
			continue
		}
		if r, ok := strings.CutPrefix(rest, "-sustained"); ok && (r == "" || r[0] == ' ') {
			return "sustained" + r, true, true
		}
		if rest == "" || rest[0] == ' ' {
			return "flash" + rest, false, true
		}
	}
	return "", false, false
}
