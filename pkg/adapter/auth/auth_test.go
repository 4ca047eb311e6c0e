package auth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seckill/seckill/pkg/domain/order"
)

var secret = []byte("auth-test-secret-0123456789abcdef0123")

func hs256(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	exp := time.Now().Add(time.Hour).Unix()
	good, _ := Mint(secret, "42", RoleAdmin, time.Hour)
	expired, _ := Mint(secret, "42", "", -time.Minute)
	forged, _ := Mint([]byte("another-secret-0123456789abcdef01234"), "42", "", time.Hour)
	long := strings.Repeat("ü", 128)
	cases := []struct {
		name  string
		token string
		want  order.Identity
		ok    bool
	}{
		{"good", good, order.Identity{UserID: "42", Admin: true}, true},
		{"expired", expired, order.Identity{}, false},
		{"wrong key", forged, order.Identity{}, false},
		{"garbage", "a.b.c", order.Identity{}, false},
		{"a UUID subject", hs256(t, jwt.MapClaims{"sub": "f3a1c9e2-7d4b-4c1e-9a63-2b8f0e5d7c41", "exp": exp}),
			order.Identity{UserID: "f3a1c9e2-7d4b-4c1e-9a63-2b8f0e5d7c41"}, true},
		{"an Auth0 subject", hs256(t, jwt.MapClaims{"sub": "auth0|65ab12", "exp": exp}), order.Identity{UserID: "auth0|65ab12"}, true},
		{"separators and braces", hs256(t, jwt.MapClaims{"sub": "{i1}:q:1:2", "exp": exp}), order.Identity{UserID: "{i1}:q:1:2"}, true},
		{"128 characters", hs256(t, jwt.MapClaims{"sub": long, "exp": exp}), order.Identity{UserID: long}, true},
		{"129 characters", hs256(t, jwt.MapClaims{"sub": long + "x", "exp": exp}), order.Identity{}, false},
		{"empty subject", hs256(t, jwt.MapClaims{"sub": "", "exp": exp}), order.Identity{}, false},
		{"no subject", hs256(t, jwt.MapClaims{"exp": exp}), order.Identity{}, false},
		{"integer subject", hs256(t, jwt.MapClaims{"sub": 1001, "exp": exp}), order.Identity{UserID: "1001"}, true},
		{"fractional subject", hs256(t, jwt.MapClaims{"sub": 10.5, "exp": exp}), order.Identity{}, false},
		{"array subject", hs256(t, jwt.MapClaims{"sub": []string{"1"}, "exp": exp}), order.Identity{}, false},
		{"no exp", hs256(t, jwt.MapClaims{"sub": "1"}), order.Identity{}, false},
		{"role Admin is not admin", hs256(t, jwt.MapClaims{"sub": "1", "role": "Admin", "exp": exp}), order.Identity{UserID: "1"}, true},
	}
	v := NewVerifier(secret)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the second time may come from the cache
				got, err := v.Verify(tc.token)
				if (err == nil) != tc.ok || got != tc.want {
					t.Fatalf("Verify = %+v, %v; want %+v ok=%v", got, err, tc.want, tc.ok)
				}
				if err != nil && !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("error %v does not wrap ErrInvalidToken", err)
				}
			}
		})
	}
}

// Issuer, audience and leeway hold in secret mode too, and the token
// subcommand's Token writes what they check.
func TestIssuerAudienceLeeway(t *testing.T) {
	v, err := New(t.Context(), Config{Secret: secret, Issuer: "http://127.0.0.1:8443/realms/shop", Audience: "seckill-api", Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(tk Token) string {
		s, err := tk.Sign(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ok := Token{Subject: "u1", Issuer: "http://127.0.0.1:8443/realms/shop", Audience: "seckill-api", TTL: time.Hour}
	if _, err := v.Verify(sign(ok)); err != nil {
		t.Fatalf("right issuer and audience: %v", err)
	}
	bad := map[string]Token{
		"wrong issuer":   {Subject: "u1", Issuer: "http://127.0.0.1:9443/realms/shop", Audience: "seckill-api", TTL: time.Hour},
		"no issuer":      {Subject: "u1", Audience: "seckill-api", TTL: time.Hour},
		"wrong audience": {Subject: "u1", Issuer: ok.Issuer, Audience: "another-api", TTL: time.Hour},
		"no audience":    {Subject: "u1", Issuer: ok.Issuer, TTL: time.Hour},
		"expired beyond the leeway": {Subject: "u1", Issuer: ok.Issuer, Audience: "seckill-api",
			TTL: -31 * time.Second},
	}
	for name, tk := range bad {
		if _, err := v.Verify(sign(tk)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	within := ok
	within.TTL = -20 * time.Second
	if _, err := v.Verify(sign(within)); err != nil {
		t.Fatalf("expired 20 s ago, within a 30 s leeway: %v", err)
	}
}

// A cached token stops being accepted when it expires.
func TestCachedTokenExpires(t *testing.T) {
	v := NewVerifier(secret)
	now := time.Now()
	v.now = func() time.Time { return now }
	tok, _ := Mint(secret, "7", "", time.Minute)
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute + v.cfg.Leeway + time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("an expired cached token was accepted: %v", err)
	}
}

func TestCheckSecret(t *testing.T) {
	if CheckSecret([]byte("short")) == nil || CheckSecret(secret) != nil {
		t.Fatal("secrets under 32 bytes must be refused, longer ones accepted")
	}
}

func TestCheckAlgorithms(t *testing.T) {
	for _, bad := range [][]string{{"none"}, {"HS256"}, {"RS256", "HS512"}, {"rs256"}} {
		if CheckAlgorithms(bad) == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := CheckAlgorithms([]string{"RS256", "ES256", "EdDSA", "PS256"}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Config{JWKSURL: "http://127.0.0.1:1/jwks", Algorithms: []string{"HS256"}}); err == nil {
		t.Fatal("a JWKS verifier took HS256")
	}
	if _, err := New(t.Context(), Config{Secret: secret, JWKSURL: "http://127.0.0.1:1/jwks"}); err == nil {
		t.Fatal("a verifier took both a secret and a JWKS")
	}
}

// The admin role comes from the configured claim: a string, a
// space-separated scope, an array, a nested path or a namespaced name.
func TestAdminClaim(t *testing.T) {
	exp := time.Now().Add(time.Hour).Unix()
	cases := []struct {
		name      string
		roleClaim string
		admin     string
		claims    jwt.MapClaims
		want      bool
	}{
		{"role string", "", "", jwt.MapClaims{"role": "admin"}, true},
		{"role string, buyer", "", "", jwt.MapClaims{"role": "buyer"}, false},
		{"role missing", "", "", jwt.MapClaims{}, false},
		{"roles array", "roles", "seckill-admin", jwt.MapClaims{"roles": []any{"user", "seckill-admin"}}, true},
		{"roles array without it", "roles", "seckill-admin", jwt.MapClaims{"roles": []any{"user", "seckill-admin2"}}, false},
		{"scope string", "scope", "seckill:admin", jwt.MapClaims{"scope": "openid profile seckill:admin"}, true},
		{"scope string, prefix only", "scope", "seckill:admin", jwt.MapClaims{"scope": "openid seckill:admins"}, false},
		{"Keycloak realm roles", "realm_access.roles", "seckill-admin",
			jwt.MapClaims{"realm_access": map[string]any{"roles": []any{"offline_access", "seckill-admin"}}}, true},
		{"Keycloak realm roles without it", "realm_access.roles", "seckill-admin",
			jwt.MapClaims{"realm_access": map[string]any{"roles": []any{"offline_access"}}}, false},
		{"Auth0 namespaced claim", "http://127.0.0.1/roles", "admin",
			jwt.MapClaims{"http://127.0.0.1/roles": []any{"admin"}}, true},
		{"role claim not a string", "", "", jwt.MapClaims{"role": 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(t.Context(), Config{Secret: secret, RoleClaim: tc.roleClaim, AdminRole: tc.admin})
			if err != nil {
				t.Fatal(err)
			}
			c := jwt.MapClaims{"sub": "u", "exp": exp}
			for k, x := range tc.claims {
				c[k] = x
			}
			got, err := v.Verify(hs256(t, c))
			if err != nil || got.Admin != tc.want {
				t.Fatalf("Verify = %+v, %v; want admin %v", got, err, tc.want)
			}
		})
	}
}

// The user id comes from the configured claim.
func TestUserClaim(t *testing.T) {
	v, err := New(t.Context(), Config{Secret: secret, UserClaim: "uid"})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	got, err := v.Verify(hs256(t, jwt.MapClaims{"sub": "ignored", "uid": 9007199254740993, "exp": exp}))
	if err != nil || got.UserID != "9007199254740993" {
		t.Fatalf("Verify = %+v, %v; want uid 9007199254740993 exactly", got, err)
	}
	if _, err := v.Verify(hs256(t, jwt.MapClaims{"sub": "s", "exp": exp})); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a token without the user claim: %v", err)
	}
}
