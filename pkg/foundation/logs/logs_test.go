package logs_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/foundation/logs"
)

func TestParseLevel(t *testing.T) {
	cases := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{in: "", want: slog.LevelInfo},
		{in: "debug", want: slog.LevelDebug},
		{in: "INFO", want: slog.LevelInfo},
		{in: " Warn ", want: slog.LevelWarn},
		{in: "error", want: slog.LevelError},
		{in: "verbose", wantErr: true},
		{in: "warning", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := logs.ParseLevel(tc.in)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
					t.Fatalf("ParseLevel(%q) = %v, %v; want an error", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseLevel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// An unknown level logs at info, so the program can still report it.
func TestNewUnknownLevelLogsAtInfo(t *testing.T) {
	var buf bytes.Buffer
	log := logs.New(&buf, "verbose")
	log.Debug("hidden")
	log.Info("shown")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "shown") {
		t.Fatalf("log = %s, want the info line only", out)
	}
}

// A line logged with a context holding a sampled span carries its trace
// and span ids; without one, or through WithTrace's logger, exactly once.
func TestTraceIDOnLines(t *testing.T) {
	var buf bytes.Buffer
	log := logs.New(&buf, "info")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{0xcd}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	log.InfoContext(ctx, "with")
	log.Info("without")
	log.InfoContext(context.Background(), "bare")
	logs.WithTrace(ctx, log).Info("through WithTrace")
	if logs.WithTrace(context.Background(), log) != log {
		t.Error("WithTrace without a span made a new logger")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	id := sc.TraceID().String()
	for i, want := range []int{1, 0, 0, 1} {
		if got := strings.Count(lines[i], `"trace_id":"`+id+`"`); got != want {
			t.Errorf("line %q: trace_id %d times, want %d", lines[i], got, want)
		}
	}
}
