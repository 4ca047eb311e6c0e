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

// The console's client reaches the server with the issuer it signs in at
// and the role claim the api checks; without a client the console names
// no issuer, and a client without an issuer stops the start.
func TestConsoleSettings(t *testing.T) {
	env := map[string]string{
		"SECKILL_JWT_JWKS_URL":      "https://id.example.com/realms/shop/protocol/openid-connect/certs",
		"SECKILL_JWT_ISSUER":        "https://id.example.com/realms/shop",
		"SECKILL_JWT_ROLE_CLAIM":    "realm_access.roles",
		"SECKILL_JWT_ADMIN_ROLE":    "seckill-admin",
		"SECKILL_CONSOLE_CLIENT_ID": "seckill-console",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := loadSettings(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := httpapi.Console{Issuer: "https://id.example.com/realms/shop", ClientID: "seckill-console",
		RoleClaim: "realm_access.roles", AdminRole: "seckill-admin"}
	if s.console != want {
		t.Fatalf("console %+v, want %+v", s.console, want)
	}

	delete(env, "SECKILL_CONSOLE_CLIENT_ID")
	if s, err = loadSettings(lookup); err != nil || s.console.Issuer != "" || s.console.ClientID != "" {
		t.Fatalf("without a client: %+v %v, want no issuer named", s.console, err)
	}

	env["SECKILL_CONSOLE_CLIENT_ID"] = "seckill-console"
	delete(env, "SECKILL_JWT_ISSUER")
	if _, err = loadSettings(lookup); err == nil || !strings.Contains(err.Error(), `SECKILL_CONSOLE_CLIENT_ID="seckill-console": needs SECKILL_JWT_ISSUER`) {
		t.Fatalf("a client without an issuer: %v", err)
	}
}
