package payment

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"transaction_id":"tx1","order_no":"x","amount":100,"currency":"EUR"}`)
	now := time.Unix(1_800_000_000, 0)
	good := Sign(secret, body, now)
	tests := []struct {
		name   string
		body   []byte
		header string
		now    time.Time
		want   error
	}{
		{"valid", body, good, now, nil},
		{"valid 4m59s later", body, good, now.Add(4*time.Minute + 59*time.Second), nil},
		{"second signature matches", body, good + ",v1=" + strings.Repeat("00", 32), now, nil},
		{"stale", body, good, now.Add(5*time.Minute + time.Second), ErrStale},
		{"from the future", body, good, now.Add(-5*time.Minute - time.Second), ErrStale},
		{"other body", []byte(strings.Replace(string(body), "100", "101", 1)), good, now, ErrMismatch},
		{"other secret", body, Sign([]byte("another-secret-another-secret-xx"), body, now), now, ErrMismatch},
		{"timestamp changed", body, strings.Replace(good, "t=1800000000", "t=1800000001", 1), now, ErrMismatch},
		{"empty", body, "", now, ErrMalformed},
		{"no signature", body, "t=1800000000", now, ErrMalformed},
		{"no timestamp", body, good[strings.Index(good, ",")+1:], now, ErrMalformed},
		{"short hex", body, "t=1800000000,v1=abcd", now, ErrMalformed},
		{"not hex", body, "t=1800000000,v1=" + strings.Repeat("zz", 32), now, ErrMalformed},
		{"two timestamps", body, good + ",t=1800000000", now, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(secret, tt.body, tt.header, tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}
