// Package logs builds the programs' slog logger: JSON lines by default, text
// when standard error is a terminal, level from SECKILL_LOG_LEVEL.
package logs

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error"; default info).
func New(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Alert is the level of lines an operator must act on (Redis and MySQL
// disagree, drift found): above error, so alerting can select on it.
const Alert = slog.Level(12)
