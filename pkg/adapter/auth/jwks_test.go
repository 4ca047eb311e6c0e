package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// provider is an identity provider's JWKS endpoint: it serves the public
// halves of its current keys over HTTP and counts how often it is asked.
type provider struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu   sync.Mutex
	keys []*signer
}

// signer is one of the provider's private keys.
type signer struct {
	kid    string
	alg    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func newProvider(t *testing.T, keys ...*signer) *provider {
	p := &provider{keys: keys}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		set := map[string]any{"keys": jwksOf(t, p.keys)}
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) URL() string { return p.srv.URL + "/protocol/openid-connect/certs" }

// publish replaces the key set the provider serves.
func (p *provider) publish(keys ...*signer) {
	p.mu.Lock()
	p.keys = keys
	p.mu.Unlock()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksOf writes the keys as RFC 7517 JWKs, by hand (not with the library
// under test).
func jwksOf(t *testing.T, keys []*signer) []map[string]string {
	var out []map[string]string
	for _, k := range keys {
		j := map[string]string{"kid": k.kid, "use": "sig", "alg": k.alg}
		switch pub := k.priv.Public().(type) {
		case *rsa.PublicKey:
			j["kty"], j["n"], j["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
		case *ecdsa.PublicKey:
			ecdh, err := pub.ECDH()
			if err != nil {
				t.Fatal(err)
			}
			raw := ecdh.Bytes() // 0x04 || X || Y
			j["kty"], j["crv"], j["x"], j["y"] = "EC", "P-256", b64(raw[1:33]), b64(raw[33:65])
		case ed25519.PublicKey:
			j["kty"], j["crv"], j["x"] = "OKP", "Ed25519", b64(pub)
		default:
			t.Fatalf("key type %T", pub)
		}
		out = append(out, j)
	}
	return out
}

func rsaSigner(t *testing.T, kid string) *signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: "RS256", method: jwt.SigningMethodRS256, priv: k}
}

func ecSigner(t *testing.T, kid string) *signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: "ES256", method: jwt.SigningMethodES256, priv: k}
}

func edSigner(t *testing.T, kid string) *signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, alg: "EdDSA", method: jwt.SigningMethodEdDSA, priv: k}
}

const (
	testIssuer   = "http://127.0.0.1/realms/shop"
	testAudience = "seckill-api"
)

// claims are a good access token's claims for sub; kv adds or replaces.
func claims(sub string, kv ...any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "iss": testIssuer, "aud": []string{testAudience, "account"},
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for i := 0; i < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// sign signs c with k under the header kid k.kid.
func (k *signer) sign(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, c)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func jwksVerifier(t *testing.T, p *provider, tune func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{JWKSURL: p.URL(), Issuer: testIssuer, Audience: testAudience,
		JWKSRefresh: time.Hour, UnknownKIDEvery: time.Second}
	if tune != nil {
		tune(&cfg)
	}
	v, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestJWKSAlgorithms(t *testing.T) {
	t.Parallel()
	rs, es, ed := rsaSigner(t, "rs-1"), ecSigner(t, "es-1"), edSigner(t, "ed-1")
	p := newProvider(t, rs, es, ed)
	v := jwksVerifier(t, p, nil)
	for _, k := range []*signer{rs, es, ed} {
		sub := "f3a1c9e2-7d4b-4c1e-9a63-" + k.kid
		got, err := v.Verify(k.sign(t, claims(sub)))
		if err != nil || got.UserID != sub || got.Admin {
			t.Fatalf("%s: Verify = %+v, %v", k.alg, got, err)
		}
	}
	// Only the listed algorithms: a verifier for RS256 alone refuses the
	// provider's ES256 and EdDSA tokens, though their keys are in the set.
	only := jwksVerifier(t, p, func(c *Config) { c.Algorithms = []string{"RS256"} })
	if _, err := only.Verify(rs.sign(t, claims("u"))); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*signer{es, ed} {
		if _, err := only.Verify(k.sign(t, claims("u"))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%s accepted by an RS256-only verifier: %v", k.alg, err)
		}
	}
}

// Tokens the provider did not sign, or signed for someone else, are refused.
func TestJWKSRefuses(t *testing.T) {
	t.Parallel()
	rs := rsaSigner(t, "rs-1")
	p := newProvider(t, rs)
	v := jwksVerifier(t, p, nil)
	if _, err := v.Verify(rs.sign(t, claims("buyer-1"))); err != nil {
		t.Fatalf("control: %v", err)
	}

	// The same RSA key under RS384, an algorithm not on the list (the JWK
	// says RS256 too, but the list refuses it first).
	rs384 := &signer{kid: rs.kid, alg: "RS384", method: jwt.SigningMethodRS384, priv: rs.priv}
	// The classic confusion: HS256 "signed" with the public key's bytes.
	pubDER, err := x509.MarshalPKIXPublicKey(rs.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	hsWithPub := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("buyer-1"))
	hsWithPub.Header["kid"] = rs.kid
	confused, err := hsWithPub.SignedString(pubDER)
	if err != nil {
		t.Fatal(err)
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims("buyer-1")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	stranger := rsaSigner(t, rs.kid) // another key under the provider's kid

	cases := map[string]string{
		"wrong issuer":       rs.sign(t, claims("buyer-1", "iss", "http://127.0.0.1/realms/other")),
		"no issuer":          rs.sign(t, claims("buyer-1", "iss", nil)),
		"wrong audience":     rs.sign(t, claims("buyer-1", "aud", "another-api")),
		"no audience":        rs.sign(t, claims("buyer-1", "aud", nil)),
		"expired":            rs.sign(t, claims("buyer-1", "exp", time.Now().Add(-time.Minute).Unix())),
		"no exp":             rs.sign(t, claims("buyer-1", "exp", nil)),
		"not valid yet":      rs.sign(t, claims("buyer-1", "nbf", time.Now().Add(time.Hour).Unix())),
		"RS384 not listed":   rs384.sign(t, claims("buyer-1")),
		"HS256 with the key": confused,
		"alg none":           none,
		"forged signature":   stranger.sign(t, claims("buyer-1")),
		"subject too long":   rs.sign(t, claims(string(make([]byte, 129)))),
	}
	for name, tok := range cases {
		if got, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: accepted as %+v (%v)", name, got, err)
		}
	}
}

// Keys rotate: a token signed by a key just published verifies at once (an
// unknown kid fetches the set again), and one signed by a retired key is
// refused once the key left the set, even if it was verified (and cached)
// before.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	old, next := rsaSigner(t, "2026-11-old"), ecSigner(t, "2026-12-new")
	p := newProvider(t, old)
	v := jwksVerifier(t, p, func(c *Config) { c.JWKSRefresh = 300 * time.Millisecond; c.UnknownKIDEvery = time.Hour })

	oldTok := old.sign(t, claims("buyer-old"))
	if _, err := v.Verify(oldTok); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	// The provider adds the new key and signs with it from now on.
	p.publish(old, next)
	newTok := next.sign(t, claims("buyer-new"))
	if got, err := v.Verify(newTok); err != nil || got.UserID != "buyer-new" {
		t.Fatalf("a token of the new key right after it was published: %+v %v", got, err)
	}
	if _, err := v.Verify(oldTok); err != nil {
		t.Fatalf("the old key is still published: %v", err)
	}
	// The old key leaves the set: its token is refused within a refresh.
	p.publish(next)
	waittest.Until(t, 10*time.Second, "the retired key's token to be refused", func() bool {
		_, err := v.Verify(oldTok)
		return errors.Is(err, ErrInvalidToken)
	})
	if _, err := v.Verify(newTok); err != nil {
		t.Fatalf("the new key after the old one left: %v", err)
	}
	// A fresh token of the retired key is refused too.
	if _, err := v.Verify(old.sign(t, claims("buyer-old"))); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a new token of the retired key: %v", err)
	}
}

// A flood of tokens naming keys the set lacks costs the provider a bounded
// number of fetches, and every one of them is refused without waiting for
// the next period.
func TestJWKSUnknownKidFlood(t *testing.T) {
	t.Parallel()
	rs := rsaSigner(t, "rs-1")
	p := newProvider(t, rs)
	v := jwksVerifier(t, p, func(c *Config) { c.UnknownKIDEvery = time.Hour })
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches at start, want 1", n)
	}
	forger := rsaSigner(t, "")
	const flood = 400
	toks := make([]string, flood)
	for i := range toks {
		forger.kid = fmt.Sprintf("forged-%d", i)
		toks[i] = forger.sign(t, claims("attacker"))
	}
	start := time.Now()
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for _, tok := range toks {
		wg.Go(func() {
			if _, err := v.Verify(tok); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if accepted.Load() != 0 {
		t.Fatalf("%d forged tokens accepted", accepted.Load())
	}
	// The initial fetch and at most one for the whole flood (the limiter
	// allows one per hour here).
	if n := p.fetches.Load(); n > 2 {
		t.Fatalf("the provider was asked %d times for %d forged kids, want at most 2", n, flood)
	}
	// The real key still works, without another fetch.
	if _, err := v.Verify(rs.sign(t, claims("buyer"))); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d forged kids refused in %v; provider asked %d times in all", flood, took, p.fetches.Load())
}

// The admin role and the user id come from the configured claims of a
// provider's token (Keycloak's realm roles here).
func TestJWKSClaims(t *testing.T) {
	t.Parallel()
	ed := edSigner(t, "ed-1")
	p := newProvider(t, ed)
	v := jwksVerifier(t, p, func(c *Config) {
		c.UserClaim, c.RoleClaim, c.AdminRole = "preferred_username", "realm_access.roles", "seckill-admin"
	})
	got, err := v.Verify(ed.sign(t, claims("f3a1c9e2", "preferred_username", "ops@shop",
		"realm_access", map[string]any{"roles": []string{"offline_access", "seckill-admin"}})))
	if err != nil || got != (order.Identity{UserID: "ops@shop", Admin: true}) {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
}
