package room

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// ChallengeTTL is how long a proof-of-work challenge may be solved and used.
const ChallengeTTL = 5 * time.Minute

const challengeVersion = "c1"

var b64 = base64.RawURLEncoding

func mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// equalMAC compares two MACs in constant time.
func equalMAC(a, b []byte) bool { return hmac.Equal(a, b) }

// NewChallenge is a proof-of-work challenge for user joining activity's
// room, signed with the room's key so the api keeps nothing: its fields, a
// random nonce and an HMAC ("c1.<activity>.<issued ms>.<user>.<nonce>.<mac>").
func NewChallenge(key []byte, activityID int64, userID string, now time.Time) string {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	body := challengeVersion + "." + strconv.FormatInt(activityID, 10) + "." + strconv.FormatInt(now.UnixMilli(), 10) + "." +
		b64.EncodeToString([]byte(userID)) + "." + b64.EncodeToString(nonce[:])
	return body + "." + b64.EncodeToString(mac(key, body))
}

// Work is the proof of work of solution for challenge: the leading zero
// bits of SHA-256(challenge + "." + solution). A page finds a solution by
// counting up from 0 until Work reaches the room's bits: 2^bits hashes on
// average.
func Work(challenge, solution string) int {
	sum := sha256.Sum256([]byte(challenge + "." + solution))
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// CheckWork checks a join's proof of work: a challenge this room issued to
// this buyer for this sale, not older than ChallengeTTL, and a solution of
// at least want bits. Refusals are order.ErrInvalidArgument with the
// reason.
func CheckWork(key []byte, challenge, solution string, activityID int64, userID string, want int, now time.Time) error {
	if challenge == "" || solution == "" {
		return order.Errorf(order.ErrInvalidArgument,
			"this waiting room asks for proof of work: GET the queue's challenge, then join with challenge and solution")
	}
	parts := strings.Split(challenge, ".")
	if len(parts) != 6 || parts[0] != challengeVersion || len(challenge) > 512 || len(solution) > 64 {
		return order.Errorf(order.ErrInvalidArgument, "the challenge is not one this sale issued")
	}
	got, err := b64.DecodeString(parts[5])
	if err != nil || !equalMAC(got, mac(key, strings.Join(parts[:5], "."))) {
		return order.Errorf(order.ErrInvalidArgument, "the challenge is not one this sale issued")
	}
	act, err1 := strconv.ParseInt(parts[1], 10, 64)
	issued, err2 := strconv.ParseInt(parts[2], 10, 64)
	user, err3 := b64.DecodeString(parts[3])
	switch {
	case err1 != nil || err2 != nil || err3 != nil || act != activityID || string(user) != userID:
		return order.Errorf(order.ErrInvalidArgument, "the challenge was issued for another sale or buyer")
	case now.Sub(time.UnixMilli(issued)) > ChallengeTTL:
		return order.Errorf(order.ErrInvalidArgument, "the challenge expired: get a new one")
	case Work(challenge, solution) < want:
		return order.Errorf(order.ErrInvalidArgument, "the solution does not have %d leading zero bits", want)
	}
	return nil
}
