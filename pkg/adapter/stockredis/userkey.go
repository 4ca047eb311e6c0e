package stockredis

import (
	"encoding/base64"
	"hash/fnv"
	"strings"

	"github.com/seckill/seckill/pkg/domain/order"
)

// userMark starts the key segment of a user id that is not a canonical
// positive number; base64url never yields it, nor a digit at the front.
const userMark = "~"

// UserSegment is how a user id appears inside a key. A canonical positive
// number stays as it is ("1001": the keys of the releases before ids were
// strings, so a sale that runs through an upgrade keeps its quotas and
// idempotency records); anything else is "~" + unpadded base64url of its
// bytes. The segment then holds only A-Z a-z 0-9 - _ ~, so a subject can
// never bring a ':' (and pass for another user's key with a shifted
// idempotency key), a '{' or '}' (and move the key to another hash tag, as
// a tag is the first {...} of a key and the item's comes first anyway), a
// glob character that would widen the reconciler's SCAN, or a space. Two
// ids have the same segment only if they are the same id.
func UserSegment(user string) string {
	if _, ok := order.NumericUserID(user); ok {
		return user
	}
	return userMark + base64.RawURLEncoding.EncodeToString([]byte(user))
}

// ParseUserSegment is the inverse of UserSegment.
func ParseUserSegment(seg string) (string, bool) {
	if rest, ok := strings.CutPrefix(seg, userMark); ok {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil || !order.ValidUserID(string(b)) {
			return "", false
		}
		if _, numeric := order.NumericUserID(string(b)); numeric {
			return "", false // never written so: not a key of ours
		}
		return string(b), true
	}
	if _, ok := order.NumericUserID(seg); ok {
		return seg, true
	}
	return "", false
}

// homeBucket is the stock bucket a user tries first: the id modulo n for a
// numeric id (as before ids were strings), else an FNV-1a hash of it
// modulo n, so buyers spread evenly over the buckets either way.
func homeBucket(user string, n int) int {
	if n <= 1 {
		return 0
	}
	if id, ok := order.NumericUserID(user); ok {
		return int(id % int64(n))
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(user))
	return int(h.Sum32() % uint32(n))
}
