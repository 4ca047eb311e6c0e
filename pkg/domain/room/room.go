// Package room holds the rules of a sale's waiting room (its settings are
// activity.WaitingRoom): the fair order of the buyers who came before the
// start, and the signed admission that lets a buyer order.
//
// A room sits beside the stock. From the sale's start it admits positions
// in order, at up to AdmitPerSecond, and only while the units its
// outstanding admissions hold stay within the units left to sell: each
// admission holds a grant of units (at most the sale's per-user limit, and
// no more than are left unheld), an order may take no more than its
// admission's grant, and the order uses the admission up. Units that come
// back (a failed or closed order, a cancel, a restock, an admission that
// expired unused) let the next positions in.
package room

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Seed orders the buyers who joined before the start. It is drawn when the
// room is made and only its Commitment is shown until the start, so
// nobody, the operator included, can choose it once the joins are known;
// from the start it is shown too, and anyone can check their rank.
type Seed [32]byte

// NewSeed draws a seed from the system's random source.
func NewSeed() Seed {
	var s Seed
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go 1.24)
	return s
}

// String is the seed in hex.
func (s Seed) String() string { return hex.EncodeToString(s[:]) }

// Commitment is SHA-256 of the seed, in hex: published from the room's
// making, it binds the operator to the seed before anyone joined.
func (s Seed) Commitment() string {
	sum := sha256.Sum256(s[:])
	return hex.EncodeToString(sum[:])
}

// RankBits is how many bits a rank has: a Redis sorted set's score (a
// double) holds every such integer exactly.
const RankBits = 53

// Rank is the buyer's rank among the early joiners: the first 53 bits of
// HMAC-SHA256(seed, user id). The early joiners' positions are their ranks
// in ascending order (equal ranks, a 2⁻⁵³ chance, by user id as bytes).
// Whoever knows the seed computes it, so the order cannot be bent without
// a different seed, and the seed was committed to before the joins.
func Rank(seed Seed, userID string) uint64 {
	mac := hmac.New(sha256.New, seed[:])
	mac.Write([]byte(userID))
	return binary.BigEndian.Uint64(mac.Sum(nil)) >> (64 - RankBits)
}
