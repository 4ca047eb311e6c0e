package orderdb

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// entryRows bounds one INSERT's rows (seven placeholders each).
const entryRows = 2000

// WriteEntries writes entries that Redis took (ADR 7), each sale's in one
// transaction: the rows, with a buyer's second entry ignored (the unique
// key (activity_id, user_id) is the last word), then the count on the
// draw's row, which only an OPEN draw takes. The draw's run locks that row
// before it reads the list, so a sale's batch commits before the list is
// read or finds the draw DRAWN, and then writes none of them (Late). An
// entry taken outside the sale's window by MySQL's row (an api whose copy
// of the sale predated an end or a cancel) is Late too. It is idempotent:
// a batch written again finds its entries Known.
//
// A new entry holding a presale code (AccessCode) takes MySQL's use of it
// in the same transaction, with the conditional update every use takes
// (takeCodeSQL), and the row records the digest. An entry whose use MySQL
// refuses is written all the same and counted in CodeRefused: Redis took
// its use and the api answered 201 once Kafka held it, and the draw's
// promise is that every such entry is drawn (ADR 7's costs: only a Redis
// that lost the codes' hash and loaded a count older than entries still
// on their way, or a revoke racing the entry, gets there).

func (s *Draws) WriteEntries(ctx context.Context, entries []draw.EntryEvent) (draw.Written, error) {
	out := draw.Written{IsLate: make([]bool, len(entries))}
	bySale := map[int64][]int{}
	var sales []int64
	for i, e := range entries {
		if bySale[e.ActivityID] == nil {
			sales = append(sales, e.ActivityID)
		}
		bySale[e.ActivityID] = append(bySale[e.ActivityID], i)
	}
	for _, sale := range sales {
		idx := bySale[sale]
		w, err := s.writeSale(ctx, sale, entries, idx)
		if err != nil {
			return out, wrap("write entries", err)
		}
		out.New, out.Known, out.Late = out.New+w.New, out.Known+w.Known, out.Late+w.Late
		out.CodeRefused += w.CodeRefused
		for j, late := range w.IsLate {
			out.IsLate[idx[j]] = late
		}
	}
	return out, nil
}

// writeSale writes entries[idx], all of sale, in one transaction; its
// IsLate is idx's.
func (s *Draws) writeSale(ctx context.Context, sale int64, entries []draw.EntryEvent, idx []int) (draw.Written, error) {
	var out draw.Written
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		out = draw.Written{IsLate: make([]bool, len(idx))}
		// The draw's row first, locked: a run holds it until its commit.
		var d drawRow
		err := tx.Raw("SELECT activity_draws.state, activity_draws.entries_close_at FROM activity_draws WHERE activity_id = ? FOR UPDATE", sale).
			Scan(&d).Error
		if err != nil {
			return err
		}
		var a activityRow
		if err := tx.Select("starts_at", "ends_at", "cancelled_at").Where("id = ?", sale).Take(&a).Error; err != nil {
			return err
		}
		var in []draw.EntryEvent
		for j, i := range idx {
			e := entries[i]
			if d.State != draw.StateOpen || !inWindow(e.AcceptedAt, a, d.EntriesCloseAt) {
				out.Late++
				out.IsLate[j] = true
				continue
			}
			in = append(in, e)
		}
		refused, err := s.useEntryCodes(tx, sale, in)
		if err != nil {
			return err
		}
		out.CodeRefused = refused
		for len(in) > 0 {
			n := min(len(in), entryRows)
			var sql strings.Builder
			sql.WriteString("INSERT IGNORE INTO draw_entries (entry_id, activity_id, user_id, item_id, quantity, created_at, access_code) VALUES ")
			args := make([]any, 0, 7*n)
			for i, e := range in[:n] {
				if i > 0 {
					sql.WriteString(",")
				}
				sql.WriteString("(?,?,?,?,?,?,?)")
				var code any
				if e.AccessCode != "" {
					code = string(e.AccessCode)
				}
				args = append(args, e.EntryID, e.ActivityID, e.UserID, e.ItemID, e.Quantity, e.AcceptedAt.UTC(), code)
			}
			res := tx.Exec(sql.String(), args...)
			if res.Error != nil {
				return res.Error
			}
			out.New += int(res.RowsAffected)
			out.Known += n - int(res.RowsAffected)
			in = in[n:]
		}
		if out.New == 0 {
			return nil
		}
		return tx.Model(&drawRow{}).Where("activity_id = ?", sale).UpdateColumn("entries", gorm.Expr("entries + ?", out.New)).Error
	})
	return out, err
}

// useEntryCodes takes MySQL's use of the code of each entry of in that
// holds one and MySQL does not have yet (an entry published again, or
// twice in one batch, uses nothing more), in tx, which holds the draw's
// row: no other write of the sale's entries runs beside it. It returns
// how many of those uses MySQL refused (none left, revoked or bound
// elsewhere); their entries are written all the same.
func (s *Draws) useEntryCodes(tx *gorm.DB, sale int64, in []draw.EntryEvent) (int, error) {
	coded := map[string]draw.EntryEvent{}
	var ids []string
	for _, e := range in {
		if _, seen := coded[e.EntryID]; e.AccessCode != "" && !seen {
			coded[e.EntryID] = e
			ids = append(ids, e.EntryID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var known []string
	for start := 0; start < len(ids); start += entryRows {
		var page []string
		err := tx.Raw("SELECT entry_id FROM draw_entries WHERE activity_id = ? AND entry_id IN ?", sale, ids[start:min(start+entryRows, len(ids))]).
			Scan(&page).Error
		if err != nil {
			return 0, err
		}
		known = append(known, page...)
	}
	for _, id := range known {
		delete(coded, id)
	}
	refused := 0
	for _, id := range ids {
		e, ok := coded[id]
		if !ok {
			continue
		}
		res := tx.Exec(takeCodeSQL, sale, string(e.AccessCode), e.UserID)
		if res.Error != nil {
			return 0, res.Error
		}
		if res.RowsAffected == 0 {
			refused++
		}
	}
	return refused, nil
}

// inWindow reports whether an entry taken at t is inside the sale's
// window as MySQL's row has it: from the start, before the entries' close
// and the end, and before a cancel.
func inWindow(t time.Time, a activityRow, closes time.Time) bool {
	return !t.Before(a.StartsAt) && t.Before(closes) && t.Before(a.EndsAt) && (a.CancelledAt == nil || t.Before(*a.CancelledAt))
}
