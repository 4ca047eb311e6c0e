package room

import (
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
)

// Join is a buyer's join of a sale's waiting room as its record
// (room_joins) keeps it: Gen is the room's generation the join was answered in, Seq the
// late joiner's sequence number in it (0 for a buyer who joined before the
// start).
type Join struct {
	UserID   string
	Gen      int64
	Seq      int64
	JoinedAt time.Time
	// Code is the digest of the presale code the buyer joined a
	// code_priority sale's room with ("" for none): they are in its lane.
	Code access.Digest
}

// ErrJoinConflict is the record's answer for a join whose place
// another buyer's record already holds, or whose buyer's record names
// another place: the room in Redis came back from an older state.
var ErrJoinConflict = errors.New("the room's record holds another place for this join")

// JoinMatch says which record of a join's buyer the record accepts
// when the buyer already has one.
type JoinMatch int

const (
	// SamePlace accepts only a record that names the join's place.
	SamePlace JoinMatch = iota
	// AnyPlace accepts any record of the buyer: an answered join asked
	// again, whose place a rebuild may have renumbered.
	AnyPlace
)
