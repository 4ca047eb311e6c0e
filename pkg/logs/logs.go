// Package logs builds the programs' slog logger: JSON lines by default, text
// when standard error is a terminal, level from SECKILL_LOG_LEVEL.
package logs

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
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
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Alert is the level of lines an operator must act on (Redis and MySQL
// disagree, drift found): above error, so alerting can select on it.
const Alert = slog.Level(12)
