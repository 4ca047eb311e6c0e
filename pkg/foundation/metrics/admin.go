package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AdminConfig configures a program's admin listener (SECKILL_ADMIN_ADDR,
// SECKILL_PPROF).
type AdminConfig struct {
	// Addr is the listen address; empty means no admin listener.
	Addr string
	// Pprof serves the runtime profiles under /debug/pprof/ too.
	Pprof bool
	// Optional says Addr is the program's default rather than the
	// operator's choice: a port already taken is then logged, not fatal
	// (several consumers on one host).
	Optional bool
}

// AdminHandler serves /metrics from g and, when withPprof is set, the
// net/http/pprof handlers under /debug/pprof/. It never uses
// http.DefaultServeMux.
func AdminHandler(g prometheus.Gatherer, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Admin is a running admin listener.
type Admin struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// ListenAdmin binds addr now, so a taken port fails at start-up, and serves
// h on it until Shutdown.
func ListenAdmin(addr string, h http.Handler) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	a := &Admin{
		ln:   ln,
		done: make(chan error, 1),
		// No WriteTimeout: a CPU profile or trace streams for as long as
		// it was asked to (net/http/pprof refuses one longer than it).
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute},
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	return a, nil
}

// Addr is the address the listener is bound to (with the port the system
// chose for ":0").
func (a *Admin) Addr() string { return a.ln.Addr().String() }

// Shutdown stops the listener, waiting for requests in progress until ctx
// ends.
func (a *Admin) Shutdown(ctx context.Context) error {
	err := a.srv.Shutdown(ctx)
	if serr := <-a.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// StartAdmin serves g's admin handler as cfg says and returns what stops
// it (waiting up to 5 s for requests in progress). With no address it
// serves nothing. A taken port is an error, unless cfg.Optional: then it
// is logged and nothing is served, since a program's own work matters
// more than its metrics.
func StartAdmin(cfg AdminConfig, g prometheus.Gatherer, log *slog.Logger) (stop func(), err error) {
	if cfg.Addr == "" {
		return func() {}, nil
	}
	adm, err := ListenAdmin(cfg.Addr, AdminHandler(g, cfg.Pprof))
	if err != nil {
		if cfg.Optional {
			log.Warn("admin listener not started; set SECKILL_ADMIN_ADDR to serve /metrics", "addr", cfg.Addr, "err", err)
			return func() {}, nil
		}
		return nil, err
	}
	log.Info("admin listening", "addr", adm.Addr(), "pprof", cfg.Pprof)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Shutdown(ctx)
	}, nil
}
