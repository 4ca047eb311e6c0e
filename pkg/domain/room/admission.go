package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Admission is a buyer's turn to order in a sale with a room, until
// Expires. The api signs it with the sale's admission key and checks it on
// each order without a database read; Redis's ledger then decides whether
// it is still unused.
type Admission struct {
	ActivityID int64
	UserID     string
	Expires    time.Time // millisecond precision
}

const admissionVersion = "a1"

var b64 = base64.RawURLEncoding

// Sign is the admission as a token: its fields and an HMAC-SHA256 of them
// under key, URL-safe ("a1.<activity>.<expires ms>.<user>.<mac>").
func Sign(key []byte, a Admission) string {
	body := admissionVersion + "." + strconv.FormatInt(a.ActivityID, 10) + "." +
		strconv.FormatInt(a.Expires.UnixMilli(), 10) + "." + b64.EncodeToString([]byte(a.UserID))
	return body + "." + b64.EncodeToString(mac(key, body))
}

func mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// equalMAC compares two MACs in constant time.
func equalMAC(a, b []byte) bool { return hmac.Equal(a, b) }

// Verify checks token for activity and user at now: signed with key, for
// that sale and buyer, not expired. Every refusal is order.ErrNotAdmitted
// with the reason.
func Verify(key []byte, token string, activityID int64, userID string, now time.Time) (Admission, error) {
	if token == "" {
		return Admission{}, order.Errorf(order.ErrNotAdmitted, "this sale has a waiting room: send the admission the queue gave you in X-Admission")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 5 || parts[0] != admissionVersion || len(token) > 512 {
		return Admission{}, order.Errorf(order.ErrNotAdmitted, "the admission is not one this sale issued")
	}
	got, err := b64.DecodeString(parts[4])
	if err != nil || !equalMAC(got, mac(key, strings.Join(parts[:4], "."))) {
		return Admission{}, order.Errorf(order.ErrNotAdmitted, "the admission is not one this sale issued")
	}
	act, err1 := strconv.ParseInt(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	user, err3 := b64.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return Admission{}, order.Errorf(order.ErrNotAdmitted, "the admission is not one this sale issued")
	}
	a := Admission{ActivityID: act, UserID: string(user), Expires: time.UnixMilli(exp).UTC()}
	switch {
	case a.ActivityID != activityID:
		return a, order.Errorf(order.ErrNotAdmitted, "the admission is for another sale")
	case a.UserID != userID:
		return a, order.Errorf(order.ErrNotAdmitted, "the admission is another buyer's")
	case !now.Before(a.Expires):
		return a, order.Errorf(order.ErrNotAdmitted, "the admission expired at %s", a.Expires.UTC().Format(time.RFC3339))
	}
	return a, nil
}
