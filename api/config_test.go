package main

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/seckill/seckill/api/internal/httpapi"
)

// The address settings reach the server's options, and a bad one stops
// the start with an error naming it and its bad entry.
func TestAddressSettings(t *testing.T) {
	env := map[string]string{
		"SECKILL_JWT_SECRET":      "address-settings-test-secret-0123456789",
		"SECKILL_RATE_LIMIT_ADDR": "5",
		"SECKILL_DENY_CIDRS":      "203.0.113.0/24",
		"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := loadSettings(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := httpapi.Addresses{PerAddress: 5, Header: "X-Forwarded-For",
		Deny: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	if !reflect.DeepEqual(s.addrs, want) {
		t.Fatalf("addresses %+v, want %+v", s.addrs, want)
	}

	env["SECKILL_DENY_CIDRS"] = "203.0.113.0/24,203.0.113.0/40"
	env["SECKILL_RATE_LIMIT_ADDR"] = "-1"
	_, err = loadSettings(lookup)
	for _, w := range []string{`SECKILL_DENY_CIDRS="203.0.113.0/24,203.0.113.0/40": "203.0.113.0/40": want a CIDR range`, "SECKILL_RATE_LIMIT_ADDR"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %v, want one containing %s", err, w)
		}
	}
}
