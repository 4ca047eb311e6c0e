package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/payment"
)

// sign-payment prints a header and a body that the api's check accepts.
func TestSignPayment(t *testing.T) {
	const secret = "sign-payment-test-secret-0123456789abcdef"
	lookup := func(k string) (string, bool) {
		if k == "SECKILL_PAYMENT_SECRET" {
			return secret, true
		}
		return "", false
	}
	var out bytes.Buffer
	now := time.Now()
	err := run(t.Context(), []string{"sign-payment", "--order-no", "01KB3Z5W7XQ4M0R9D2H6T8V1CE-2", "--amount", "2998",
		"--currency", "EUR", "--transaction-id", "pi_1"}, lookup, &out, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := strings.Cut(strings.TrimSuffix(out.String(), "\n"), "\n")
	name, value, _ := strings.Cut(header, ": ")
	if !ok || name != payment.Header {
		t.Fatalf("output %q", out.String())
	}
	if want := `{"transaction_id":"pi_1","order_no":"01KB3Z5W7XQ4M0R9D2H6T8V1CE-2","amount":2998,"currency":"EUR"}`; body != want {
		t.Fatalf("body %s, want %s", body, want)
	}
	if err := payment.Verify([]byte(secret), []byte(body), value, now); err != nil {
		t.Fatalf("the api would refuse it: %v", err)
	}
	if err := run(t.Context(), []string{"sign-payment", "--order-no", "x"}, lookup, &out, io.Discard, nil); err == nil {
		t.Fatal("no amount or currency: no error")
	}
}
