// Package webhook is the HTTP side of the order events' deliveries to the
// shops' endpoints, following the Standard Webhooks specification
// (standardwebhooks.com): the secrets, the signature of a delivery and its
// check, the guard that keeps deliveries off the internal network, the send
// of one delivery, and the receiver a shop's developer runs to watch them.
//
// The signature is the specification's v1 scheme, computed and compared by
// its official Go library: an HMAC-SHA256, keyed by the secret's bytes, of
// "<webhook-id>.<webhook-timestamp>.<body>".
package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers of a delivery.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// secretPrefix marks a signing secret, as the specification writes them.
const secretPrefix = "whsec_"

// The length of a secret's key: the specification asks for 24 to 64 bytes;
// a new secret has 32.
const (
	minKeyBytes = 24
	maxKeyBytes = 64
	newKeyBytes = 32
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, either way (the specification's five minutes): an older delivery
// is refused as a possible replay.
const Tolerance = 5 * time.Minute

// The reasons Verify refuses a delivery: the library's, so errors.Is
// matches either name.
var (
	ErrRequiredHeaders     = standardwebhooks.ErrRequiredHeaders     // a header is missing
	ErrInvalidHeaders      = standardwebhooks.ErrInvalidHeaders      // the timestamp is not Unix seconds
	ErrMessageTooOld       = standardwebhooks.ErrMessageTooOld       // sent more than Tolerance ago
	ErrMessageTooNew       = standardwebhooks.ErrMessageTooNew       // sent more than Tolerance ahead
	ErrNoMatchingSignature = standardwebhooks.ErrNoMatchingSignature // no signature is a secret's
)

// ErrSecret is the error of a secret that is not "whsec_" followed by the
// standard base64 of 24 to 64 bytes.
var ErrSecret = errors.New("webhook secret")

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() (string, error) {
	key := make([]byte, newKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// signer is the library's signer for one secret, after checking its form:
// the library would take a secret without the prefix, or a short key, and
// sign with it.
func signer(secret string) (*standardwebhooks.Webhook, error) {
	encoded, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: does not start with %q", ErrSecret, secretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: the part after %q is not standard base64: %v", ErrSecret, secretPrefix, err)
	}
	if len(key) < minKeyBytes || len(key) > maxKeyBytes {
		return nil, fmt.Errorf("%w: its key has %d bytes, want %d to %d", ErrSecret, len(key), minKeyBytes, maxKeyBytes)
	}
	return standardwebhooks.NewWebhookRaw(key)
}

// signers checks every secret and returns their signers, in order.
func signers(secrets []string) ([]*standardwebhooks.Webhook, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: none given", ErrSecret)
	}
	whs := make([]*standardwebhooks.Webhook, len(secrets))
	for i, s := range secrets {
		wh, err := signer(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d of %d: %w", i+1, len(secrets), err)
		}
		whs[i] = wh
	}
	return whs, nil
}

// Sign returns the webhook-signature header of the delivery of body as
// message id at time at: one "v1,<base64 signature>" per secret, separated
// by spaces. Two secrets sign while an endpoint's secret is rotated, so the
// receiver accepts the delivery with either.
func Sign(secrets []string, id string, at time.Time, body []byte) (string, error) {
	whs, err := signers(secrets)
	if err != nil {
		return "", fmt.Errorf("sign webhook %s: %w", id, err)
	}
	sigs := make([]string, len(whs))
	for i, wh := range whs {
		if sigs[i], err = wh.Sign(id, at, body); err != nil {
			return "", fmt.Errorf("sign webhook %s: %w", id, err)
		}
	}
	return strings.Join(sigs, " "), nil
}

// Headers are the headers of a delivery: its id, its timestamp in Unix
// seconds, its signature (Sign's) and its JSON content type.
func Headers(id string, at time.Time, signature string) http.Header {
	h := make(http.Header, 4)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderSignature, signature)
	h.Set("Content-Type", "application/json")
	return h
}

// Verify checks a delivery's headers and body against the secrets: its
// timestamp is within Tolerance of now and one of its signatures is one of
// the secrets'. Its errors wrap one of the reasons above, or ErrSecret
// when a secret is malformed.
//
// The library compares the signatures in constant time; the timestamp is
// checked here against now rather than by the library against the wall
// clock, so a test or a replay of a log can give the time.
func Verify(secrets []string, h http.Header, body []byte, now time.Time) error {
	whs, err := signers(secrets)
	if err != nil {
		return fmt.Errorf("verify webhook: %w", err)
	}
	id, ts := h.Get(HeaderID), h.Get(HeaderTimestamp)
	if id == "" || ts == "" || h.Get(HeaderSignature) == "" {
		return fmt.Errorf("verify webhook: %w: want %s, %s and %s", ErrRequiredHeaders,
			HeaderID, HeaderTimestamp, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("verify webhook %s: %w: %s %q is not Unix seconds", id, ErrInvalidHeaders, HeaderTimestamp, ts)
	}
	switch at := time.Unix(sec, 0); {
	case now.Sub(at) > Tolerance:
		return fmt.Errorf("verify webhook %s: %w: sent at %s, %v before now", id, ErrMessageTooOld,
			at.UTC().Format(time.RFC3339), now.Sub(at).Round(time.Second))
	case at.Sub(now) > Tolerance:
		return fmt.Errorf("verify webhook %s: %w: sent at %s, %v after now", id, ErrMessageTooNew,
			at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second))
	}
	for _, wh := range whs {
		if err = wh.VerifyIgnoringTimestamp(body, h); err == nil {
			return nil
		}
	}
	return fmt.Errorf("verify webhook %s: %w", id, err)
}
