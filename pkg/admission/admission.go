// Package admission verifies, offline, the admission a sale's waiting room
// gives a buyer: a shop that runs its own checkout gates it with Verify and
// the sale's public key (GET /admin/v1/activities/{id}/room/key), without
// calling the api. It imports only the standard library, so a shop's
// service can import it without the rest of the module (a test in
// internal/archtest keeps it so).
//
// # The token
//
// An admission is one line of URL-safe text, at most 512 characters:
//
//	token     = body "." mac "." signature        ; version a2
//	          | body "." mac                      ; version a1 (before Ed25519)
//	body      = version "." activity "." expires "." user
//	version   = "a2" | "a1"
//	activity  = the sale's id, a positive decimal integer
//	expires   = the end of the buyer's turn, Unix milliseconds, decimal
//	user      = the buyer's subject (the "sub" of their access token), base64url
//	mac       = HMAC-SHA256 of body under the sale's secret, base64url
//	signature = Ed25519 signature of body under the sale's private key, base64url
//
// base64url is RFC 4648's URL-safe alphabet without padding; body is the
// exact text of the token up to its fourth dot. The mac is for the api that
// issued the token: checking it costs a microsecond on every order, but its
// key could mint admissions, so it never leaves the api. The signature is
// for everyone else: the public key checks it and cannot make one. An a1
// token, issued before signatures, carries no signature and fails Verify;
// the api still takes one until it expires.
package admission

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Why a token is refused; Verify's errors wrap one of them (errors.Is).
var (
	// ErrMalformed: not a token of this grammar (or too long).
	ErrMalformed = errors.New("admission: malformed token")
	// ErrSignature: the signature is missing or not the key's over the
	// token's body (forged, altered, or another sale's key).
	ErrSignature = errors.New("admission: bad signature")
	// ErrOtherSale: a genuine admission to another sale.
	ErrOtherSale = errors.New("admission: for another sale")
	// ErrOtherBuyer: a genuine admission of another buyer.
	ErrOtherBuyer = errors.New("admission: another buyer's")
	// ErrExpired: a genuine admission whose turn is over.
	ErrExpired = errors.New("admission: expired")
)

// The versions of the grammar.
const (
	V1 = "a1" // mac only
	V2 = "a2" // mac and Ed25519 signature
)

// MaxLen is the longest token: a buyer's subject of 128 bytes fits twice.
const MaxLen = 512

var b64 = base64.RawURLEncoding

// Claims is what an admission grants: the buyer UserID's turn to order in
// sale ActivityID, until Expires (millisecond precision).
type Claims struct {
	ActivityID int64
	UserID     string
	Expires    time.Time
}

// Token is a token taken apart, checked for its grammar only.
type Token struct {
	Version string
	Claims  Claims
	// Body is the text the mac and the signature are over.
	Body      string
	MAC       []byte
	Signature []byte // nil in an a1 token
}

// Parse takes token apart; it checks the grammar, nothing the keys say.
// Every refusal wraps ErrMalformed.
func Parse(token string) (Token, error) {
	if len(token) > MaxLen {
		return Token{}, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxLen)
	}
	parts := strings.Split(token, ".")
	var want int
	switch parts[0] {
	case V1:
		want = 5
	case V2:
		want = 6
	default:
		return Token{}, fmt.Errorf("%w: version is not %s or %s", ErrMalformed, V2, V1)
	}
	if len(parts) != want {
		return Token{}, fmt.Errorf("%w: %s has %d dot-separated fields, not %d", ErrMalformed, parts[0], want, len(parts))
	}
	act, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || act <= 0 || parts[1] != strconv.FormatInt(act, 10) {
		return Token{}, fmt.Errorf("%w: the sale is not a positive decimal id", ErrMalformed)
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || parts[2] != strconv.FormatInt(exp, 10) {
		return Token{}, fmt.Errorf("%w: the expiry is not decimal Unix milliseconds", ErrMalformed)
	}
	user, err := b64.Strict().DecodeString(parts[3])
	if err != nil || len(user) == 0 {
		return Token{}, fmt.Errorf("%w: the buyer is not base64url", ErrMalformed)
	}
	t := Token{Version: parts[0], Body: strings.Join(parts[:4], "."),
		Claims: Claims{ActivityID: act, UserID: string(user), Expires: time.UnixMilli(exp).UTC()}}
	if t.MAC, err = b64.Strict().DecodeString(parts[4]); err != nil || len(t.MAC) != sha256.Size {
		return Token{}, fmt.Errorf("%w: the mac is not %d bytes of base64url", ErrMalformed, sha256.Size)
	}
	if t.Version == V2 {
		if t.Signature, err = b64.Strict().DecodeString(parts[5]); err != nil || len(t.Signature) != ed25519.SignatureSize {
			return Token{}, fmt.Errorf("%w: the signature is not %d bytes of base64url", ErrMalformed, ed25519.SignatureSize)
		}
	}
	return t, nil
}

// Verify checks token for the buyer userID ordering in sale activityID at
// now: signed with the sale's public key, for that sale and that buyer,
// and not expired, allowing leeway of clock difference between the api
// that issued it and the caller (a second or two is plenty; 0 is none).
// Each sale has its own key, so another sale's token fails the signature
// under this sale's key; a shop that serves several sales and picks the
// key by the token's sale (Parse) hears ErrOtherSale for it instead.
// It returns the claims, also with a refusal once the signature held.
// Each refusal wraps one of the Err values; a bad argument (a key of the
// wrong size, a negative leeway) is an error wrapping none of them.
func Verify(publicKey ed25519.PublicKey, token string, activityID int64, userID string, now time.Time, leeway time.Duration) (Claims, error) {
	if len(publicKey) != ed25519.PublicKeySize {
		return Claims{}, fmt.Errorf("admission: the public key is %d bytes, not %d", len(publicKey), ed25519.PublicKeySize)
	}
	if leeway < 0 {
		return Claims{}, fmt.Errorf("admission: leeway %v is negative", leeway)
	}
	t, err := Parse(token)
	if err != nil {
		return Claims{}, err
	}
	if t.Signature == nil {
		return Claims{}, fmt.Errorf("%w: an %s token carries no signature", ErrSignature, t.Version)
	}
	if !ed25519.Verify(publicKey, []byte(t.Body), t.Signature) {
		return Claims{}, fmt.Errorf("%w: not the sale's key's", ErrSignature)
	}
	return t.Claims, t.Claims.check(activityID, userID, now, leeway)
}

// check holds genuine claims to the sale, the buyer and the time.
func (c Claims) check(activityID int64, userID string, now time.Time, leeway time.Duration) error {
	switch {
	case c.ActivityID != activityID:
		return fmt.Errorf("%w: sale %d, not %d", ErrOtherSale, c.ActivityID, activityID)
	case c.UserID != userID:
		return fmt.Errorf("%w: issued to another buyer", ErrOtherBuyer)
	case !now.Before(c.Expires.Add(leeway)):
		return fmt.Errorf("%w: at %s", ErrExpired, c.Expires.Format(time.RFC3339Nano))
	}
	return nil
}

// Sign is the a2 token of c: macKey keys the mac, privateKey signs. The
// api issues admissions with it; a shop's tests may mint their own with a
// key pair of theirs and any macKey.
func Sign(privateKey ed25519.PrivateKey, macKey []byte, c Claims) string {
	body := V2 + "." + strconv.FormatInt(c.ActivityID, 10) + "." + strconv.FormatInt(c.Expires.UnixMilli(), 10) +
		"." + b64.EncodeToString([]byte(c.UserID))
	return body + "." + b64.EncodeToString(mac(macKey, body)) + "." + b64.EncodeToString(ed25519.Sign(privateKey, []byte(body)))
}

// CheckMAC is the issuer's check of token, a1 or a2, with the secret
// macKey instead of the signature: an HMAC costs a fraction of an Ed25519
// verification, and the issuer checks one on every order. The rest is
// Verify's, without leeway (the issuer's clock set the expiry).
func CheckMAC(macKey []byte, token string, activityID int64, userID string, now time.Time) (Claims, error) {
	t, err := Parse(token)
	if err != nil {
		return Claims{}, err
	}
	if !hmac.Equal(t.MAC, mac(macKey, t.Body)) {
		return Claims{}, fmt.Errorf("%w: the mac is not the sale's", ErrSignature)
	}
	return t.Claims, t.Claims.check(activityID, userID, now, 0)
}

func mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}
