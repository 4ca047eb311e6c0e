package orderdb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/room"
)

type roomJoinRow struct {
	ActivityID int64  `gorm:"primaryKey"`
	UserID     string `gorm:"primaryKey"`
	Gen        int64
	Seq        *int64
	JoinedAt   time.Time
	AccessCode *string
}

func (roomJoinRow) TableName() string { return "room_joins" }

// RecordRoomJoins writes joins of activity's room, one statement for the
// lot, and returns, for each, nil when MySQL now holds it. A join whose
// buyer already has a record keeps that record if match[i] accepts it,
// else its error is room.ErrJoinConflict, as it is when another buyer holds
// the place. Sent again after a lost answer, it finds its own rows.
func (s *Rooms) RecordRoomJoins(ctx context.Context, activity int64, joins []room.Join, match []room.JoinMatch) ([]error, error) {
	rows := make([]roomJoinRow, len(joins))
	for i, j := range joins {
		rows[i] = roomJoinRow{ActivityID: activity, UserID: j.UserID, Gen: j.Gen, JoinedAt: j.JoinedAt.UTC()}
		if j.Code != "" {
			code := string(j.Code)
			rows[i].AccessCode = &code
		}
		if j.Seq > 0 {
			seq := j.Seq
			rows[i].Seq = &seq
		}
	}
	g := s.db(ctx)
	res := g.Clauses(clause.Insert{Modifier: "IGNORE"}).Create(&rows)
	if res.Error != nil {
		return nil, wrap("record room joins", res.Error)
	}
	out := make([]error, len(joins))
	if res.RowsAffected == int64(len(rows)) {
		return out, nil
	}
	// Some were there already (a retry, a rejoin) or collided: read back
	// what MySQL holds for these buyers and these places.
	users := make([]string, len(joins))
	for i, j := range joins {
		users[i] = j.UserID
	}
	var have []roomJoinRow
	if err := g.Where("activity_id = ? AND user_id IN ?", activity, users).Find(&have).Error; err != nil {
		return nil, wrap("read room joins back", err)
	}
	byUser := make(map[string]roomJoinRow, len(have))
	for _, h := range have {
		byUser[h.UserID] = h
	}
	for i, r := range rows {
		h, ok := byUser[r.UserID]
		switch {
		case ok && match[i] == room.AnyPlace:
		case ok && h.Gen == r.Gen && (h.Seq == nil) == (r.Seq == nil) && (h.Seq == nil || *h.Seq == *r.Seq):
		default:
			out[i] = fmt.Errorf("%w: buyer %q, generation %d, place %v", room.ErrJoinConflict, r.UserID, r.Gen, seqText(r.Seq))
		}
	}
	return out, nil
}

func seqText(s *int64) string {
	if s == nil {
		return "early"
	}
	return fmt.Sprint(*s)
}

// RoomJoins returns every join of activity's room: the early joiners
// (Seq 0) in no order, then the late ones in the order they joined, by
// generation and sequence number (equal places, left by a Redis brought
// back from an older copy before the second join was refused, by user id).
func (s *Rooms) RoomJoins(ctx context.Context, activity int64) ([]room.Join, error) {
	return roomJoins(s.db(ctx), activity)
}

func roomJoins(g *gorm.DB, activity int64) ([]room.Join, error) {
	var rows []roomJoinRow
	err := g.Where("activity_id = ?", activity).
		Order("seq IS NOT NULL, gen, seq, user_id").Find(&rows).Error
	if err != nil {
		return nil, wrap("read room joins", err)
	}
	out := make([]room.Join, len(rows))
	for i, r := range rows {
		out[i] = room.Join{UserID: r.UserID, Gen: r.Gen, JoinedAt: r.JoinedAt}
		if r.AccessCode != nil {
			out[i].Code = access.Digest(*r.AccessCode)
		}
		if r.Seq != nil {
			out[i].Seq = *r.Seq
		}
	}
	return out, nil
}

// BuyersWithOrders returns the buyers who hold an order of any status in
// activity: their turn in the room is done.
func (s *Rooms) BuyersWithOrders(ctx context.Context, activity int64) (map[string]bool, error) {
	return buyersWithOrders(s.db(ctx), activity)
}

func buyersWithOrders(g *gorm.DB, activity int64) (map[string]bool, error) {
	var users []string
	err := g.Model(&orderRow{}).Distinct("user_id").
		Where("activity_id = ?", activity).Pluck("user_id", &users).Error
	if err != nil {
		return nil, wrap("read the sale's buyers", err)
	}
	out := make(map[string]bool, len(users))
	for _, u := range users {
		out[u] = true
	}
	return out, nil
}

// RoomRebuild runs build holding the lock of activity's room row, with
// the room's generation as MySQL has it (activity_rooms.gen), when it
// was last built (zero: never) and its live settings (the row's: a change
// of them waits for the lock); when build answers a generation above it,
// that is recorded, built at now() once build returned, before the lock
// goes. build reads the room's joins and the buyers who hold an order
// through read, on the transaction's connection, as MySQL has them when
// read is called. Rebuilds of one room, from any instance, run one at a
// time.
func (s *Rooms) RoomRebuild(ctx context.Context, activity int64, now func() time.Time,
	build func(gen int64, builtAt time.Time, live room.Control, read func() ([]room.Join, map[string]bool, error)) (int64, error)) error {
	return wrap("rebuild the waiting room", s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var row struct {
			Gen            int64
			RebuiltAt      *time.Time
			AdmitPerSecond int
			Paused         bool
			Passthrough    bool
			ControlVersion int64
		}
		err := tx.Raw("SELECT gen, rebuilt_at, admit_per_second, paused, passthrough, control_version FROM activity_rooms "+
			"WHERE activity_id = ? FOR UPDATE", activity).Scan(&row).Error
		if err != nil {
			return err
		}
		var at time.Time
		if row.RebuiltAt != nil {
			at = *row.RebuiltAt
		}
		read := func() ([]room.Join, map[string]bool, error) {
			joins, err := roomJoins(tx, activity)
			if err != nil {
				return nil, nil, err
			}
			done, err := buyersWithOrders(tx, activity)
			return joins, done, err
		}
		live := room.Control{AdmitPerSecond: row.AdmitPerSecond, Paused: row.Paused, Passthrough: row.Passthrough, Version: row.ControlVersion}
		next, err := build(row.Gen, at, live, read)
		if err != nil || next <= row.Gen {
			return err
		}
		return tx.Exec("UPDATE activity_rooms SET gen = ?, rebuilt_at = ? WHERE activity_id = ?", next, now().UTC(), activity).Error
	}))
}

// RoomGeneration returns activity's room's generation (activity_rooms.gen):
// how many times it was built in Redis, 0 before the first.
func (s *Rooms) RoomGeneration(ctx context.Context, activity int64) (int64, error) {
	var row struct{ Gen int64 }
	err := s.db(ctx).Raw("SELECT gen FROM activity_rooms WHERE activity_id = ?", activity).Scan(&row).Error
	return row.Gen, wrap("read the room's generation", err)
}

// LiveRoomSales returns the sales with a waiting room that have not ended
// at now.
func (s *Rooms) LiveRoomSales(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := s.db(ctx).Raw("SELECT a.id FROM activities a JOIN activity_rooms r ON r.activity_id = a.id WHERE a.ends_at > ?",
		now.UTC()).Scan(&ids).Error
	if err != nil {
		return nil, wrap("read the sales with a room", err)
	}
	slices.Sort(ids)
	return ids, nil
}
