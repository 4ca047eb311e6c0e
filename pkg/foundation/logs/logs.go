// Package logs builds the programs' slog logger: JSON lines by default, text
// when standard error is a terminal, level from SECKILL_LOG_LEVEL.
package logs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"go.opentelemetry.io/otel/trace"
)

// ParseLevel returns the level named by s ("debug", "info", "warn" or
// "error", in any case; empty means info).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
}

// New returns a logger writing to w at level (see ParseLevel). An unknown
// level logs at info, so a program can still report it: config.LogLevel
// refuses it at start.
func New(w io.Writer, level string) *slog.Logger {
	lv, _ := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return slog.New(traceHandler{slog.NewTextHandler(w, opts)})
	}
	return slog.New(traceHandler{slog.NewJSONHandler(w, opts)})
}

// WithTrace returns log with trace_id and span_id of ctx's sampled span, or
// log itself when ctx holds none (tracing off: nothing is allocated), for
// lines logged without the context.
func WithTrace(ctx context.Context, log *slog.Logger) *slog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return log
	}
	return log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
}

// traceHandler adds trace_id (and span_id) to a line logged with a context
// (InfoContext, Log) that holds a sampled span, so a line about an order
// leads to the order's trace. Without tracing it costs a context lookup.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// Alert is the level of lines an operator must act on (Redis and MySQL
// disagree, drift found): above error, so alerting can select on it.
const Alert = slog.Level(12)
