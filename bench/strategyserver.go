package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seckill/seckill/bench/internal/procs"
	"github.com/seckill/seckill/bench/internal/strategies"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// strategySecretEnv carries the JWT secret to the strategy server (never
// on a command line).
const strategySecretEnv = "SECKILL_BENCH_STRATEGY_SECRET"

// serveStrategy is the hidden `bench serve-strategy` mode: one of the
// compare scenario's strategies behind HTTP, in a process of its own like
// the real API, until SIGTERM.
func serveStrategy(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer) error {
	fs := flag.NewFlagSet("serve-strategy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "naive, lock, lua or floor")
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	redisAddr := fs.String("redis-addr", "127.0.0.1:6379", "Redis address")
	prefix := fs.String("prefix", "", "key prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret, _ := lookup(strategySecretEnv)
	if len(secret) < auth.MinSecretLen || *prefix == "" {
		return errors.New("serve-strategy needs --prefix and the JWT secret in " + strategySecretEnv)
	}
	if *name == "floor" {
		// The floor stands for the api's own work: the api's GC target too.
		config.GC(config.New(lookup))
	}
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{*redisAddr}})
	defer rdb.Close()
	s, err := strategies.ByName(*name, rdb, *prefix)
	if err != nil {
		return err
	}
	srv, err := strategies.Serve(s, auth.NewVerifier([]byte(secret)), *listen)
	if err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Close(sctx)
}

// startStrategy runs `bench serve-strategy` as a child process and waits
// until it answers.
func (e *env) startStrategy(ctx context.Context, name, prefix string) (*procs.Process, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	port, err := procs.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := procs.StartArgs("strategy-"+name, self,
		[]string{"serve-strategy", "--name", name, "--listen", addr, "--redis-addr", e.opts.redisAddrs()[0], "--prefix", prefix},
		[]string{strategySecretEnv + "=" + string(e.secret)}, filepath.Join(e.dir, "strategy-"+name+".log"))
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	if err := procs.WaitReady(ctx, url+"/healthz", p, 30*time.Second); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("strategy %s: %w", name, err)
	}
	return p, url, nil
}
