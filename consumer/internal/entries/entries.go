// Package entries writes the draw entries the api accepted (the entries'
// topic, ADR 7) to MySQL: each batch the router hands over is one
// transaction a sale (draws.Service.WriteEntries).
package entries

import (
	"context"
	"log/slog"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// Writer writes accepted entries (*draws.Service).
type Writer interface {
	WriteEntries(ctx context.Context, entries []draw.EntryEvent) (draw.Written, error)
}

// Handler is the entries' loop's handler.
type Handler struct {
	Draws Writer
	Log   *slog.Logger
}

// Handle writes events; a failure retries them all (the write is
// idempotent). An entry the draw no longer takes is done, labelled late.
func (h *Handler) Handle(ctx context.Context, events []draw.EntryEvent) []consume.Result {
	out := make([]consume.Result, len(events))
	w, err := h.Draws.WriteEntries(ctx, events)
	if err != nil {
		for i := range out {
			out[i] = consume.Result{Outcome: consume.Retry, Err: err}
		}
		return out
	}
	for i := range out {
		out[i] = consume.Result{Outcome: consume.Done, Label: "entered"}
		if w.IsLate[i] {
			out[i].Label = "late"
		}
	}
	if w.Late > 0 {
		// Accepted by Redis, refused by MySQL: published after the
		// watermark was read (an answer that was not 201), or taken by
		// an instance whose copy of the sale predated its end.
		h.Log.Warn("entries too late for their draw", "late", w.Late, "written", w.New)
	}
	if w.CodeRefused > 0 {
		// Redis took the code's use and the buyer heard 201, so the
		// entry is drawn; MySQL had no use left for it (ADR 7's costs).
		h.Log.Warn("entries written beyond their presale code's uses", "entries", w.CodeRefused, "written", w.New)
	}
	return out
}

// DeadLettered logs an entry event that can never be written.
func (h *Handler) DeadLettered(_ context.Context, e draw.EntryEvent) error {
	h.Log.Error("entry event dead-lettered", "activity_id", e.ActivityID, "entry_id", e.EntryID)
	return nil
}
