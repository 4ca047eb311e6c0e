package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/strategies"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// compare runs the seed article's strategy table live: the three strategies
// of package strategies, each served over loopback HTTP by a child process
// of the bench (serve-strategy), then our real pipeline, all under the same
// load: buyers drawn at random from a pool (so one buyer's requests race
// each other), a fresh Idempotency-Key per request.
func (e *env) compare(ctx context.Context, sh shape) ([]*report.Row, *report.Run, error) {
	base := userBase()
	tk, err := mintTokens(e.secret, base, sh.users, nil)
	if err != nil {
		return nil, nil, err
	}
	pick := func(w int, rngs []*rand.Rand) int64 { return base + rngs[w].Int64N(sh.users) }
	newRNGs := func() []*rand.Rand {
		rngs := make([]*rand.Rand, sh.connections)
		for i := range rngs {
			rngs[i] = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		}
		return rngs
	}
	// The strategies' Redis client is configured like the API's.
	rdb := stockredis.NewClient(stockredis.Config{Addrs: e.opts.redisAddrs()[:1]})
	defer rdb.Close()
	// Keys of the bench's own, whatever prefix the API uses.
	prefix := e.prefix + "cmp"
	if !strings.HasPrefix(prefix, "bench") {
		prefix = "bench" + prefix
	}
	defer func() {
		if !e.opts.keepData {
			_ = deleteKeys(context.WithoutCancel(ctx), rdb, prefix+":*")
		}
	}()
	var rows []*report.Row
	for _, name := range strategies.Names {
		s, err := strategies.ByName(name, rdb, prefix)
		if err != nil {
			return nil, nil, err
		}
		if err := strategies.Load(ctx, rdb, s, sh.stock); err != nil {
			return nil, nil, fmt.Errorf("%s: load stock: %w", s.Name(), err)
		}
		srv, url, err := e.startStrategy(ctx, name, prefix)
		if err != nil {
			return nil, nil, err
		}
		b, err := e.newBuyers([]string{url}, sh.connections, 1, e.opts.quantity, tk)
		if err != nil {
			_ = srv.Stop(5 * time.Second)
			return nil, nil, err
		}
		rngs := newRNGs()
		update, done := e.meter.track("compare-"+name, sh.duration, 0)
		b.t0 = time.Now()
		stopCPU := e.measureCPU(cpu.Proc{Name: "api", Pid: srv.Pid()})
		res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Rate: sh.rate, Progress: update},
			func(ctx context.Context, w int, seq int64) load.Outcome {
				return b.place(ctx, w, pick(w, rngs), "k"+strconv.FormatInt(seq, 36))
			})
		usage := stopCPU()
		done()
		b.close()
		if err := srv.Stop(10 * time.Second); err != nil {
			e.meter.say("compare: %v", err)
		}
		t, err := strategies.Count(context.WithoutCancel(ctx), rdb, s)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: count: %w", s.Name(), err)
		}
		run := runResult("compare", sh, sale{stock: sh.stock, quantity: e.opts.quantity}, res)
		row := &report.Row{
			Strategy: s.Name(), Requests: run.Requests, Throughput: run.Throughput, Outcomes: run.Outcomes,
			Orders: t.Orders, Units: t.Units, Stock: sh.stock, FinalStock: t.FinalStock, Duplicates: t.Duplicates,
			Oversold: max(t.Units-sh.stock, 0), Latency: run.Latency, Series: run.Series, CPU: usage,
		}
		// Correct is about the data: no oversell, no buyer twice, stock
		// accounted for. Requests refused because the lock could not be had
		// in time are counted apart (Failed).
		row.Correct = row.Oversold == 0 && row.Duplicates == 0 && t.FinalStock >= 0 && t.FinalStock+t.Units == sh.stock
		row.Failed = errorCount(res)
		rows = append(rows, row)
		e.meter.say("compare: %s: %d requests, %.0f/s, %d orders, final stock %d, %d duplicates",
			s.Name(), row.Requests, row.Throughput, row.Orders, row.FinalStock, row.Duplicates)
	}

	// Our pipeline, through the real API, same load.
	const name = "compare-ours"
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, e.opts.buckets)
	if err != nil {
		return rows, nil, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, s.activity, s.quantity, tk)
	if err != nil {
		return rows, nil, err
	}
	defer b.close()
	rngs := newRNGs()
	update, done := e.meter.track("compare-ours", sh.duration, 0)
	b.t0 = time.Now()
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Rate: sh.rate, Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			return b.place(ctx, w, pick(w, rngs), "k"+strconv.FormatInt(seq, 36))
		})
	done()
	run := runResult(name, sh, s, res)
	run.CPU = stopCPU()
	run.Buyers = sh.users
	demand := min(sh.users, run.Requests) * int64(s.quantity)
	t, err := e.finish(ctx, run, s, b, res, demand)
	if err != nil {
		return rows, run, err
	}
	e.chart(run)
	row := &report.Row{
		Strategy: "ours: Lua + idempotency + Kafka + MySQL", Requests: run.Requests, Throughput: run.Throughput,
		Outcomes: run.Outcomes, Orders: t.created, Units: t.obs.LiveUnits, Stock: sh.stock, FinalStock: t.obs.DBStock,
		Duplicates: t.obs.ExtraLiveOrders, Oversold: max(t.obs.LiveUnits-sh.stock, 0), Latency: run.Latency,
		Series: run.Series, Correct: len(run.Violations) == 0, CPU: run.CPU, Failed: errorCount(res),
	}
	rows = append(rows, row)
	e.meter.say("compare: %s: %d requests, %.0f/s, %d orders, final stock %d, %d duplicates",
		row.Strategy, row.Requests, row.Throughput, row.Orders, row.FinalStock, row.Duplicates)
	if err := report.CompareChart(filepath.Join(e.dir, "compare.png"), rows); err != nil {
		e.meter.say("compare: chart: %v", err)
	}
	return rows, run, nil
}
