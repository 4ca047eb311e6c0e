package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/seckill/seckill/pkg/adapter/webhook"
)

// newSecret is a fresh secret and its key.
func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil || !strings.HasPrefix(s, "whsec_") || len(key) != 32 {
		t.Fatalf("secret %q: %d key bytes, %v", s, len(key), err)
	}
	return s, key
}

// hmacV1 is the specification's v1 signature, computed by hand.
func hmacV1(key []byte, id string, at time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestNewSecretIsRandom(t *testing.T) {
	a, _ := newSecret(t)
	b, _ := newSecret(t)
	if a == b {
		t.Fatalf("two new secrets are the same: %s", a)
	}
}

// The header is the HMAC-SHA256 of "id.unix-seconds.body" keyed by the
// secret's bytes: the wire format, not only what the library reads back.
func TestSignIsTheSpecsHMAC(t *testing.T) {
	secret, key := newSecret(t)
	at := time.Unix(1_764_700_000, 999_000_000) // the fraction is not signed
	body := []byte(`{"type":"order.paid","timestamp":"2025-12-02T18:26:40.999Z","data":{"order_no":"A-1"}}`)
	got, err := webhook.Sign([]string{secret}, "msg_1", at, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := hmacV1(key, "msg_1", at, body); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if other := hmacV1(key, "msg_2", at, body); got == other {
		t.Fatal("the id is not signed")
	}
}

// While a secret is rotated both sign, and either verifies the delivery.
func TestSignWithTwoSecrets(t *testing.T) {
	oldS, oldKey := newSecret(t)
	newS, newKey := newSecret(t)
	at, body := time.Now(), []byte(`{"n":1}`)
	sig, err := webhook.Sign([]string{oldS, newS}, "msg_r", at, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := hmacV1(oldKey, "msg_r", at, body) + " " + hmacV1(newKey, "msg_r", at, body); sig != want {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	h := webhook.Headers("msg_r", at, sig)
	for _, s := range []string{oldS, newS} {
		if err := webhook.Verify([]string{s}, h, body, at); err != nil {
			t.Errorf("verify with one of the two secrets: %v", err)
		}
	}
	third, _ := newSecret(t)
	if err := webhook.Verify([]string{third}, h, body, at); !errors.Is(err, webhook.ErrNoMatchingSignature) {
		t.Fatalf("verify with a third secret: %v", err)
	}
}

// A shop that checks deliveries with the library's own Verify, as
// docs/events.md shows, accepts ours: the secret's form, the headers.
func TestTheLibraryVerifiesADelivery(t *testing.T) {
	secret, _ := newSecret(t)
	body := []byte(`{"type":"order.created"}`)
	at := time.Now()
	sig, err := webhook.Sign([]string{secret}, "msg_l", at, body)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, webhook.Headers("msg_l", at, sig)); err != nil {
		t.Fatalf("the library refuses our delivery: %v", err)
	}
	if err := wh.Verify(append(body, ' '), webhook.Headers("msg_l", at, sig)); err == nil {
		t.Fatal("the library accepts a changed body")
	}
}

func TestHeaders(t *testing.T) {
	h := webhook.Headers("msg_h", time.Unix(1_700_000_000, 5), "v1,abc")
	want := map[string]string{"Webhook-Id": "msg_h", "Webhook-Timestamp": "1700000000",
		"Webhook-Signature": "v1,abc", "Content-Type": "application/json"}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("headers %v, want only %v", h, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	secret, _ := newSecret(t)
	other, _ := newSecret(t)
	at, body := time.Unix(1_764_700_000, 0), []byte(`{"type":"order.created"}`)
	sig, err := webhook.Sign([]string{secret}, "msg_v", at, body)
	if err != nil {
		t.Fatal(err)
	}
	good := webhook.Headers("msg_v", at, sig)
	with := func(k, v string) http.Header {
		h := good.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	tests := []struct {
		name    string
		secrets []string
		h       http.Header
		body    string
		now     time.Time
		want    error // nil: accepted
	}{
		{"as sent", []string{secret}, good, string(body), at, nil},
		{"4m59s late", []string{secret}, good, string(body), at.Add(4*time.Minute + 59*time.Second), nil},
		{"second secret matches", []string{other, secret}, good, string(body), at, nil},
		{"tampered body", []string{secret}, good, `{"type":"order.paid"}`, at, webhook.ErrNoMatchingSignature},
		{"wrong secret", []string{other}, good, string(body), at, webhook.ErrNoMatchingSignature},
		{"other id", []string{secret}, with(webhook.HeaderID, "msg_w"), string(body), at, webhook.ErrNoMatchingSignature},
		{"timestamp moved", []string{secret}, with(webhook.HeaderTimestamp, strconv.FormatInt(at.Unix()+1, 10)), string(body), at,
			webhook.ErrNoMatchingSignature},
		{"stale", []string{secret}, good, string(body), at.Add(5*time.Minute + time.Second), webhook.ErrMessageTooOld},
		{"from the future", []string{secret}, good, string(body), at.Add(-6 * time.Minute), webhook.ErrMessageTooNew},
		{"no signature", []string{secret}, with(webhook.HeaderSignature, ""), string(body), at, webhook.ErrRequiredHeaders},
		{"no id", []string{secret}, with(webhook.HeaderID, ""), string(body), at, webhook.ErrRequiredHeaders},
		{"timestamp not seconds", []string{secret}, with(webhook.HeaderTimestamp, "2025-12-02T18:26:40Z"), string(body), at,
			webhook.ErrInvalidHeaders},
		{"v2 signature", []string{secret}, with(webhook.HeaderSignature, strings.Replace(sig, "v1,", "v2,", 1)), string(body), at,
			webhook.ErrNoMatchingSignature},
		{"no secrets", nil, good, string(body), at, webhook.ErrSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify(tt.secrets, tt.h, []byte(tt.body), tt.now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestBadSecrets(t *testing.T) {
	key := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	tests := []struct{ name, secret, says string }{
		{"no prefix", key(32), `does not start with "whsec_"`},
		{"not base64", "whsec_not*base64", "not standard base64"},
		{"url base64", "whsec_" + strings.Repeat("-_", 16), "not standard base64"},
		{"empty key", "whsec_", "0 bytes"},
		{"short key", "whsec_" + key(23), "23 bytes"},
		{"long key", "whsec_" + key(65), "65 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.Sign([]string{tt.secret}, "msg", time.Now(), nil)
			if !errors.Is(err, webhook.ErrSecret) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Sign: %v, want ErrSecret saying %q", err, tt.says)
			}
			if err := webhook.Verify([]string{tt.secret}, webhook.Headers("msg", time.Now(), "v1,x"), nil, time.Now()); !errors.Is(err, webhook.ErrSecret) {
				t.Fatalf("Verify: %v, want ErrSecret", err)
			}
		})
	}
	for _, n := range []int{24, 64} {
		if _, err := webhook.Sign([]string{"whsec_" + key(n)}, "msg", time.Now(), nil); err != nil {
			t.Errorf("a %d-byte key: %v", n, err)
		}
	}
}

// BenchmarkSign and BenchmarkVerify are the signature's share of a
// delivery's cost (BenchmarkSendToAVerifyingEndpoint): the dispatcher's
// and the receiver's.
func BenchmarkSign(b *testing.B) {
	secret, err := webhook.NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 330)
	at := time.Now()
	for b.Loop() {
		if _, err := webhook.Sign([]string{secret}, "evt_x_1", at, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	secret, err := webhook.NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 330)
	at := time.Now()
	sig, err := webhook.Sign([]string{secret}, "evt_x_1", at, body)
	if err != nil {
		b.Fatal(err)
	}
	h := webhook.Headers("evt_x_1", at, sig)
	for b.Loop() {
		if err := webhook.Verify([]string{secret}, h, body, at); err != nil {
			b.Fatal(err)
		}
	}
}
