package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	"github.com/seckill/seckill/pkg/service/reconcile"
)

// manyItems is the number of items from which progress is shown.
const manyItems = 20

// newProgress shows progress on w: a bar when w is a terminal, otherwise a
// log line every tenth of the items.
func newProgress(w io.Writer, log *slog.Logger) reconcile.Progress {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return &barProgress{w: w}
	}
	return &lineProgress{log: log}
}

// barProgress draws a progress bar (cleared when the pass ends).
type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *barProgress) Start(stage string, total int) {
	p.bar = nil
	if total < manyItems {
		return
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(stage),
		progressbar.OptionSetItsString("items"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func (p *barProgress) Step() {
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

func (p *barProgress) Done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

// lineProgress logs "reconcile progress" lines, about ten per pass.
type lineProgress struct {
	log      *slog.Logger
	stage    string
	total, n int
	every    int
	started  time.Time
	enabled  bool
}

func (p *lineProgress) Start(stage string, total int) {
	*p = lineProgress{log: p.log, stage: stage, total: total, every: max(total/10, 1),
		started: time.Now(), enabled: total >= manyItems}
}

func (p *lineProgress) Step() {
	p.n++
	if p.enabled && (p.n%p.every == 0 || p.n == p.total) {
		p.log.Info("reconcile progress", "stage", p.stage, "checked", p.n, "total", p.total,
			"elapsed", time.Since(p.started).Round(time.Millisecond).String())
	}
}

func (p *lineProgress) Done() {}
