// Package payment is the payment provider's side of the contract: the body
// of a payment notification and its signature. A notification is signed
// with HMAC-SHA256 over "<unix timestamp>.<raw body>" with a secret shared
// with the provider, and carried in the header
//
//	Seckill-Signature: t=<unix timestamp>,v1=<hex HMAC>
//
// (Stripe's scheme). Verify refuses a signature that does not match (in
// constant time) and a timestamp more than Tolerance from now, so a
// captured notification cannot be replayed later.
package payment

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header carries the signature.
const Header = "Seckill-Signature"

// Tolerance is how far a notification's timestamp may be from now, either
// way.
const Tolerance = 5 * time.Minute

// MinSecretLen is the shortest secret accepted.
const MinSecretLen = 32

// Notification is the body the provider sends when money moved for an
// order: TransactionID is the provider's own id of the transaction (the
// idempotency key), Amount is in the currency's minor units.
type Notification struct {
	TransactionID string `json:"transaction_id"`
	OrderNo       string `json:"order_no"`
	Amount        *int64 `json:"amount"`
	Currency      string `json:"currency"`
}

// Why a signature is refused.
var (
	ErrMalformed = errors.New("the " + Header + " header must be t=<unix seconds>,v1=<hex HMAC-SHA256>")
	ErrStale     = errors.New("the notification's timestamp is more than 5 minutes from now")
	ErrMismatch  = errors.New("the signature does not match the body")
)

// Sign returns the header value for body signed at t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks header against body at now: the timestamp within Tolerance
// and one v1 signature equal to the HMAC (several v1 are allowed while the
// provider rolls its secret).
func Verify(secret, body []byte, header string, now time.Time) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrMalformed
			}
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return ErrMalformed
			}
			sigs = append(sigs, b)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 || len(sigs) > 4 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(unix, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w (it is %s)", ErrStale, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		// Compare every one so the time taken says nothing about which.
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrMismatch
	}
	return nil
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
