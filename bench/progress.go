package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// meter shows how a load is going: a progress bar on a terminal, a plain
// line every few seconds otherwise.
type meter struct {
	mode string // bar, lines, off
	w    io.Writer
}

func newMeter(mode string, w io.Writer) *meter {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			mode = "bar"
		}
	}
	return &meter{mode: mode, w: w}
}

// track returns a load.Config Progress function for one load of the given
// length (a duration, or a number of operations when d is 0), and a finish
// function to call afterwards.
func (m *meter) track(name string, d time.Duration, ops int64) (func(time.Duration, int64), func()) {
	switch m.mode {
	case "off":
		return func(time.Duration, int64) {}, func() {}
	case "bar":
		limit := ops
		if d > 0 {
			limit = d.Milliseconds()
		}
		bar := progressbar.NewOptions64(limit,
			progressbar.OptionSetWriter(m.w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetPredictTime(false),
		)
		update := func(elapsed time.Duration, done int64) {
			bar.Describe(fmt.Sprintf("%-12s %8d done %8.0f/s", name, done, float64(done)/max(elapsed.Seconds(), 1e-3)))
			if d > 0 {
				_ = bar.Set64(min(elapsed.Milliseconds(), limit))
			} else {
				_ = bar.Set64(min(done, limit))
			}
		}
		return update, func() { _ = bar.Finish(); _ = bar.Clear() }
	}
	var last time.Time
	start := time.Now()
	update := func(elapsed time.Duration, done int64) {
		if time.Since(last) < 5*time.Second {
			return
		}
		last = time.Now()
		if time.Since(start) < time.Second {
			return
		}
		total := "?"
		if d > 0 {
			total = d.String()
		} else if ops > 0 {
			total = fmt.Sprintf("%d ops", ops)
		}
		fmt.Fprintf(m.w, "bench: %s %.0fs of %s, %d done, %.0f/s\n", name, elapsed.Seconds(), total, done, float64(done)/max(elapsed.Seconds(), 1e-3))
	}
	return update, func() {}
}

// say prints a status line (both modes except off).
func (m *meter) say(format string, a ...any) {
	if m.mode == "off" {
		return
	}
	fmt.Fprintf(m.w, "bench: "+format+"\n", a...)
}
