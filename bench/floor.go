package main

import (
	"context"
	"strconv"
	"time"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
)

// floor runs the flash load (every request a new buyer) against the floor
// strategy's server: Gin doing what the api does before it touches stock
// (bearer token, Idempotency-Key, JSON body), then answering 409. Its CPU
// per answer is the floor under the api's flash figure on this machine;
// the server's CPU shows in the api column.
func (e *env) floor(ctx context.Context, sh shape) (*report.Run, error) {
	srv, url, err := e.startStrategy(ctx, "floor", e.prefix+"floor")
	if err != nil {
		return nil, err
	}
	defer func() { _ = srv.Stop(5 * time.Second) }()
	base := userBase()
	tk, err := e.mintTokens("floor", base, int64(sh.duration.Seconds()*25000))
	if err != nil {
		return nil, err
	}
	b, err := e.newBuyers([]string{url}, sh.connections, 1, 1, tk)
	if err != nil {
		return nil, err
	}
	defer b.close()
	update, done := e.meter.track("floor", sh.duration, 0)
	b.t0 = time.Now()
	stopCPU := e.measureCPU(cpu.Proc{Name: "api", Pid: srv.Pid()})
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			return b.place(ctx, w, base+seq, "f"+strconv.FormatInt(seq, 36))
		})
	usage := stopCPU()
	done()
	r := runResult("floor", sh, sale{}, res)
	r.CPU = usage
	r.Floor = true
	return r, nil
}
