package orderdb

import (
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// roomRow is a sale's waiting room (0013).
type roomRow struct {
	ActivityID          int64 `gorm:"primaryKey"`
	AdmitPerSecond      int
	AdmissionTTLSeconds int `gorm:"column:admission_ttl_seconds"`
	ProofOfWorkBits     int
	OpensAt             *time.Time
	Seed                []byte
	AdmissionKey        []byte
	Paused              bool
	Passthrough         bool
	ControlVersion      int64
}

func (roomRow) TableName() string { return "activity_rooms" }

func newRoomRow(activity int64, r activity.WaitingRoom) roomRow {
	row := roomRow{ActivityID: activity, AdmitPerSecond: r.AdmitPerSecond, AdmissionTTLSeconds: int(r.AdmissionTTL / time.Second),
		ProofOfWorkBits: r.ProofOfWorkBits, Seed: r.Seed[:], AdmissionKey: r.Key[:]}
	if !r.OpensAt.IsZero() {
		at := r.OpensAt.UTC()
		row.OpensAt = &at
	}
	return row
}

func (row roomRow) room() activity.WaitingRoom {
	r := activity.WaitingRoom{AdmitPerSecond: row.AdmitPerSecond, AdmissionTTL: time.Duration(row.AdmissionTTLSeconds) * time.Second,
		ProofOfWorkBits: row.ProofOfWorkBits, Paused: row.Paused, Passthrough: row.Passthrough, ControlVersion: row.ControlVersion}
	if row.OpensAt != nil {
		r.OpensAt = *row.OpensAt
	}
	copy(r.Seed[:], row.Seed)
	copy(r.Key[:], row.AdmissionKey)
	return r
}

// activityRoomRow is a sale's row with its room's columns (roomColumns).
// (Named fields: GORM skips an embedded struct of an unexported type.)
type activityRoomRow struct {
	Activity activityRow `gorm:"embedded"`
	Room     roomRow     `gorm:"embedded;embeddedPrefix:room_"`
	Draw     drawColumns `gorm:"embedded;embeddedPrefix:draw_"`
	ItemName string      // the sale's first item's name
}

// roomColumns selects a sale's room beside its row (LEFT JOIN
// activity_rooms): all NULL, so zero, for a sale without one.
const roomColumns = "activity_rooms.activity_id AS room_activity_id, activity_rooms.admit_per_second AS room_admit_per_second, " +
	"activity_rooms.admission_ttl_seconds AS room_admission_ttl_seconds, activity_rooms.proof_of_work_bits AS room_proof_of_work_bits, " +
	"activity_rooms.opens_at AS room_opens_at, activity_rooms.seed AS room_seed, activity_rooms.admission_key AS room_admission_key, " +
	"activity_rooms.paused AS room_paused, activity_rooms.passthrough AS room_passthrough, " +
	"activity_rooms.control_version AS room_control_version"

// changeRoom writes ch's room for the sale of row (locked), starting at
// starts, checked against the sale as the change leaves it, and in time
// for every instance to see it before the start (activity.CheckRoomInTime).
func changeRoom(tx *gorm.DB, row activityRow, ch activity.Patch, starts, now time.Time) error {
	var cur roomRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("activity_id = ?", row.ID).Take(&cur).Error
	has := err == nil
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return err
	}
	if ch.Room == nil && (!has || ch.StockBuckets == nil && ch.StartsAt == nil) {
		return nil
	}
	a := activity.Activity{StartsAt: starts, StockBuckets: row.StockBuckets}
	if ch.StockBuckets != nil {
		a.StockBuckets = *ch.StockBuckets
	}
	if has {
		a.Room = cur.room()
	}
	if ch.Room != nil {
		was := a.Room
		a.Room = *ch.Room
		if has {
			// The live control stays as the operator left it.
			a.Room.Seed, a.Room.Key, a.Room.Paused, a.Room.Passthrough = was.Seed, was.Key, was.Paused, was.Passthrough
		}
	}
	if err := a.CheckRoom(); err != nil {
		return err
	}
	if err := activity.CheckRoomInTime(has, true, row.StartsAt, starts, now); err != nil {
		return err
	}
	if ch.Room == nil {
		return nil
	}
	next := newRoomRow(row.ID, a.Room)
	if !has {
		return tx.Create(&next).Error
	}
	// A new version: the rate may have changed, and Redis's live settings
	// take it from the copies of the sale only at a later version.
	return tx.Model(&roomRow{}).Where("activity_id = ?", row.ID).Updates(map[string]any{
		"admit_per_second": next.AdmitPerSecond, "admission_ttl_seconds": next.AdmissionTTLSeconds,
		"proof_of_work_bits": next.ProofOfWorkBits, "opens_at": next.OpensAt,
		"control_version": gorm.Expr("control_version + 1")}).Error
}
