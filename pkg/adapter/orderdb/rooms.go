package orderdb

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
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
}

func (roomRow) TableName() string { return "activity_rooms" }

func newRoomRow(activity int64, r order.WaitingRoom) roomRow {
	row := roomRow{ActivityID: activity, AdmitPerSecond: r.AdmitPerSecond, AdmissionTTLSeconds: int(r.AdmissionTTL / time.Second),
		ProofOfWorkBits: r.ProofOfWorkBits, Seed: r.Seed[:], AdmissionKey: r.Key[:]}
	if !r.OpensAt.IsZero() {
		at := r.OpensAt.UTC()
		row.OpensAt = &at
	}
	return row
}

func (row roomRow) room() order.WaitingRoom {
	r := order.WaitingRoom{AdmitPerSecond: row.AdmitPerSecond, AdmissionTTL: time.Duration(row.AdmissionTTLSeconds) * time.Second,
		ProofOfWorkBits: row.ProofOfWorkBits}
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
}

// roomColumns selects a sale's room beside its row (LEFT JOIN
// activity_rooms): all NULL, so zero, for a sale without one.
const roomColumns = "activity_rooms.activity_id AS room_activity_id, activity_rooms.admit_per_second AS room_admit_per_second, " +
	"activity_rooms.admission_ttl_seconds AS room_admission_ttl_seconds, activity_rooms.proof_of_work_bits AS room_proof_of_work_bits, " +
	"activity_rooms.opens_at AS room_opens_at, activity_rooms.seed AS room_seed, activity_rooms.admission_key AS room_admission_key"
