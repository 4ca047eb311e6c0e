package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxUserIDLen bounds a user id in characters: a token's subject as the
// identity provider writes it ("1001", "f3a1c9e2-…", "auth0|65ab…").
const MaxUserIDLen = 128

// Identity is who a request's verified bearer token names: what the
// transports take from the token.
type Identity struct {
	// UserID is the buyer: the user claim's value (1-128 characters).
	UserID string
	// Admin is true when the role claim holds the admin role.
	Admin bool
}

// ValidUserID reports whether u can be a buyer's id: 1-128 characters of
// valid UTF-8. Anything else is allowed, separators and braces included:
// every store encodes or parameterises it (see stockredis.Keys).
func ValidUserID(u string) bool {
	return u != "" && utf8.ValidString(u) && utf8.RuneCountInString(u) <= MaxUserIDLen
}

// NumericUserID returns the id as a number when it is a positive int64
// written the canonical way ("1001", not "01001" or "+1001"): the ids of
// the tokens the programs accepted before subjects were strings.
func NumericUserID(u string) (int64, bool) {
	if u == "" || u[0] < '1' || u[0] > '9' || len(u) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// eventJSON is Event on the wire. user_id is written as a JSON number when
// it is numeric, as events were before ids were strings (a consumer of the
// previous release still reads an event of a numeric buyer), and as a
// string otherwise; both forms are read.
type eventJSON struct {
	Version        int             `json:"v"`
	OrderNo        string          `json:"order_no"`
	IdempotencyKey string          `json:"idempotency_key"`
	UserID         json.RawMessage `json:"user_id"`
	ItemID         int64           `json:"item_id"`
	ActivityID     int64           `json:"activity_id"`
	Quantity       int             `json:"quantity"`
	ReservedAt     time.Time       `json:"reserved_at"`
	RequestID      string          `json:"request_id,omitempty"`
	AccessCode     string          `json:"access_code,omitempty"`
}

// MarshalJSON writes e as eventJSON.
func (e Event) MarshalJSON() ([]byte, error) {
	var user []byte
	if _, ok := NumericUserID(e.UserID); ok {
		user = []byte(e.UserID)
	} else {
		b, err := json.Marshal(e.UserID)
		if err != nil {
			return nil, err
		}
		user = b
	}
	return json.Marshal(eventJSON{Version: e.Version, OrderNo: e.OrderNo, IdempotencyKey: e.IdempotencyKey,
		UserID: user, ItemID: e.ItemID, ActivityID: e.ActivityID, Quantity: e.Quantity,
		ReservedAt: e.ReservedAt, RequestID: e.RequestID, AccessCode: e.AccessCode})
}

// UnmarshalJSON reads an event whose user_id is a string or an integer.
// Like encoding/json for a field of the wrong type, it keeps every field it
// could read and returns the first error: the router releases a
// dead-lettered event's reservation from whatever of it decodes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w eventJSON
	err := json.Unmarshal(b, &w)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return err
	}
	user, uerr := decodeUserID(w.UserID)
	*e = Event{Version: w.Version, OrderNo: w.OrderNo, IdempotencyKey: w.IdempotencyKey, UserID: user,
		ItemID: w.ItemID, ActivityID: w.ActivityID, Quantity: w.Quantity,
		ReservedAt: w.ReservedAt, RequestID: w.RequestID, AccessCode: w.AccessCode}
	return errors.Join(err, uerr)
}

func decodeUserID(raw json.RawMessage) (string, error) {
	switch raw = bytes.TrimSpace(raw); {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "", nil
	case raw[0] == '"':
		var user string
		if err := json.Unmarshal(raw, &user); err != nil {
			return "", fmt.Errorf("user_id: %w", err)
		}
		return user, nil
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("user_id: %w", err)
		}
		if _, err := n.Int64(); err != nil {
			return "", fmt.Errorf("user_id %s is not an integer", raw)
		}
		return n.String(), nil
	}
}
