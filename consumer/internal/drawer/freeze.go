package drawer

import (
	"context"
	"time"
)

// Watermark is where the entries' consumer group stands on the entries'
// topic (*orderevents.Watermark).
type Watermark interface {
	// Ends reads the topic's end offsets now.
	Ends(ctx context.Context) (map[int]int64, error)
	// Reached says whether the group's committed offsets reached ends,
	// and how many messages below them are not committed yet.
	Reached(ctx context.Context, ends map[int]int64) (bool, int64, error)
}

// frozen says whether sale id's draw may run at now, and how many
// entries it still waits for: without a
// Watermark, at once; with one, from Grace after its close, once the
// entries' consumer group committed past the end read then (kept in
// memory: a drawer that restarts reads a later end, which holds every
// entry the first one did).
func (d *Drawer) frozen(ctx context.Context, id int64, now time.Time) (bool, int64, error) {
	if d.Watermark == nil {
		return true, 0, nil
	}
	a, err := d.Activities.Activity(ctx, id)
	if err != nil {
		return false, 0, err
	}
	if now.Before(a.Draw.EntriesCloseAt.Add(d.Grace)) {
		return false, 0, nil
	}
	d.marksMu.Lock()
	ends, ok := d.marks[id]
	d.marksMu.Unlock()
	if !ok {
		if ends, err = d.Watermark.Ends(ctx); err != nil {
			return false, 0, err
		}
		d.marksMu.Lock()
		if d.marks == nil {
			d.marks = map[int64]map[int]int64{}
		}
		d.marks[id] = ends
		d.marksMu.Unlock()
	}
	reached, behind, err := d.Watermark.Reached(ctx, ends)
	if err != nil || !reached {
		if err == nil {
			d.Log.Info("draw waits for its entries to reach MySQL", "activity_id", id, "entries_behind", behind,
				"since_close", now.Sub(a.Draw.EntriesCloseAt).Round(time.Millisecond))
		}
		return false, behind, err
	}
	d.marksMu.Lock()
	delete(d.marks, id)
	d.marksMu.Unlock()
	if d.FreezeWait != nil {
		d.FreezeWait(now.Sub(a.Draw.EntriesCloseAt))
	}
	return true, 0, nil
}
