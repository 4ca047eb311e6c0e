package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/verify"
)

// salePage: the crowd refreshing one live sale's page (GET
// /api/v1/activities/{id}, no token) as fast as it can, each API serving it
// from memory. Besides the throughput it counts the MGETs Redis served
// meanwhile: the page's reads, at most one a second per API (nothing else
// runs; the consumer's periodic checks use other commands).
func (e *env) salePage(ctx context.Context, sh shape) (*report.Run, string, error) {
	const name = "salepage"
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, e.opts.buckets)
	if err != nil {
		return nil, "", err
	}
	b, err := e.newBuyers(e.apis, sh.connections, s.activity, s.quantity, nil)
	if err != nil {
		return nil, "", err
	}
	defer b.close()
	urls := make([]string, len(e.apis))
	for i, base := range e.apis {
		urls[i] = fmt.Sprintf("%s/api/v1/activities/%d", base, s.activity)
	}
	before, err := e.commandCalls(ctx, "mget")
	if err != nil {
		return nil, "", err
	}
	update, done := e.meter.track(name, sh.duration, 0)
	stopCPU := e.measureCPU()
	live := []byte(`"state":"LIVE"`)
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Progress: update},
		func(ctx context.Context, w int, _ int64) load.Outcome {
			st, body := b.do(ctx, w, urls, load.Call{Method: http.MethodGet})
			o := load.Classify(st, body)
			if o == load.Accepted && !bytes.Contains(body, live) {
				return load.ClientError // a page that is not the live sale's
			}
			return o
		})
	done()
	ctx = context.WithoutCancel(ctx)
	after, err := e.commandCalls(ctx, "mget")
	if err != nil {
		return nil, "", err
	}
	r := runResult(name, sh, s, res)
	r.CPU = stopCPU()
	r.Violations = []verify.Violation{} // it checks no order invariant: it places none
	// Reading the page sells nothing: both stores still hold the stock.
	if err := e.readStock(ctx, r, s); err != nil {
		return r, "", err
	}
	if len(b.doers) > 1 {
		r.APIRequests = b.perAPI()
	}
	if b.firstErr != nil && errorCount(res) > 0 {
		e.meter.say("%s: first transport error: %v", name, b.firstErr)
	}
	reads := after - before
	note := fmt.Sprintf("salepage: %d page requests in %.1f s (%.0f/s) cost Redis %d MGETs (%.2f/s over %d API(s); the page cache allows 1/s each; an upper bound: MGETs of anything else using this Redis count too).",
		r.Requests, r.Elapsed, r.Throughput, reads, float64(reads)/r.Elapsed, len(e.apis))
	e.chart(r)
	return r, note, nil
}

// readStock puts sale s's MySQL and Redis stock in r.
func (e *env) readStock(ctx context.Context, r *report.Run, s sale) error {
	var err error
	if r.DBStock, err = e.db.Activities.ItemStock(ctx, s.item); err != nil {
		return err
	}
	snap, err := e.store.Stock.Stock(ctx, s.stockItem())
	r.RedisStock = snap.Stock
	return err
}

// commandCalls sums the calls of the named commands (lower case, as INFO
// commandstats names them) every Redis node has served since it started.
func (e *env) commandCalls(ctx context.Context, names ...string) (int64, error) {
	var total int64
	err := forEachNode(ctx, e.rdb, func(ctx context.Context, node redis.UniversalClient) error {
		info, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			for _, name := range names {
				rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
				if !ok {
					continue
				}
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
				total += n
			}
		}
		return nil
	})
	return total, err
}

// forEachNode runs f on every master of a cluster client, or on the client
// itself for a single node.
func forEachNode(ctx context.Context, rdb redis.UniversalClient, f func(context.Context, redis.UniversalClient) error) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return f(ctx, c) })
	}
	return f(ctx, rdb)
}
