package draw

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
)

// EntryIDFor is the id of user's entry in sale activity: the first 16
// bytes, in hex, of HMAC-SHA256 under key (the order number key every
// program reads from MySQL) of "entry|<activity>|<user>". Every api
// instance gives a buyer the same id in a sale, so an entry taken again
// after Redis lost the sale's entries is the same entry, and MySQL's
// unique key keeps one row (ADR 7). The key is secret, so the id, which
// the record publishes, does not name the buyer.
func EntryIDFor(key []byte, activity int64, user string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("entry|" + strconv.FormatInt(activity, 10) + "|" + user))
	return hex.EncodeToString(m.Sum(nil)[:EntryIDLen/2])
}

// Accepted is an entry Redis took, as the entries' hash keeps it: the
// entry, the shared clock's time it was taken at (ms precision), and the
// digest of the presale code whose use it holds ("" for none: a sale
// without codes).
type Accepted struct {
	Entry
	At   time.Time
	Code access.Digest
}

// String is the form the entries' hash keeps:
// "<entry id>|<item>|<quantity>|<ms>", then "|<code digest>" for an entry
// that holds a code's use.
func (a Accepted) String() string {
	s := a.ID + "|" + strconv.FormatInt(a.ItemID, 10) + "|" + strconv.Itoa(a.Quantity) + "|" + strconv.FormatInt(a.At.UnixMilli(), 10)
	if a.Code != "" {
		s += "|" + string(a.Code)
	}
	return s
}

// ParseAccepted reads an Accepted from its String form.
func ParseAccepted(s string) (Accepted, error) {
	f := strings.Split(s, "|")
	if (len(f) != 4 && len(f) != 5) || !ValidEntryID(f[0]) {
		return Accepted{}, fmt.Errorf("not an accepted entry: %q", s)
	}
	item, err1 := strconv.ParseInt(f[1], 10, 64)
	qty, err2 := strconv.Atoi(f[2])
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || item <= 0 || qty <= 0 {
		return Accepted{}, fmt.Errorf("not an accepted entry: %q", s)
	}
	a := Accepted{Entry: Entry{ID: f[0], ItemID: item, Quantity: qty}, At: time.UnixMilli(ms).UTC()}
	if len(f) == 5 {
		d, err := access.ParseDigest(f[4])
		if err != nil {
			return Accepted{}, fmt.Errorf("not an accepted entry: %q", s)
		}
		a.Code = d
	}
	return a, nil
}

// Window is when a draw sale takes entries, and how long Redis keeps them.
type Window struct {
	// Tag is the sale's first item, whose hash tag the sale's keys share.
	Tag                int64
	StartsAt, ClosesAt time.Time
	KeysUntil          time.Time
}

// Refusals of a new entry by Redis.
var (
	// ErrEntriesClosed: the sale's end or cancel closed its entries.
	ErrEntriesClosed = errors.New("the draw's entries are closed")
	// ErrEntriesNotOpen: the shared clock is before the sale's start.
	ErrEntriesNotOpen = errors.New("the draw takes no entries before the sale starts")
	// ErrEntriesOver: the shared clock is past the entries' close.
	ErrEntriesOver = errors.New("the draw's entries closed at their time")
	// ErrCodesNotLoaded: the entry names a presale code and the sale's
	// codes are not in Redis yet (its warm-up loads them).
	ErrCodesNotLoaded = errors.New("the sale's presale codes are not loaded")
)
