// Package auth mints and verifies the buyers' and operators' bearer tokens.
// Two modes: the shop's identity provider (Keycloak, Auth0, Okta, Cognito,
// Dex) signs access tokens with RS256, ES256 or EdDSA keys it publishes at a
// JWKS URL and rotates; or, for development and tests, HS256 with a secret
// the API shares. Either way a token needs exp, is checked against an
// issuer and an audience when they are configured, and names the buyer in
// a configurable claim ("sub" by default): any string of 1-128 characters.
package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill/pkg/domain/order"
)

// MinSecretLen is the shortest secret the programs accept.
const MinSecretLen = 32

// RoleAdmin may use the admin routes (the default AdminRole).
const RoleAdmin = "admin"

// ErrInvalidToken covers every token that must be refused.
var ErrInvalidToken = errors.New("invalid token")

// DefaultAlgorithms are the signatures accepted from a JWKS by default.
var DefaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// PublicKeyAlgorithms are every algorithm Config.Algorithms may name: never
// "none", never an HMAC one (a JWKS holds public keys, and an HS256 token
// "signed" with one is the classic forgery).
var PublicKeyAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA"}

// Config says which tokens a Verifier accepts. Exactly one of Secret and
// JWKSURL is set.
type Config struct {
	// Secret: HS256 tokens signed with it (development and tests).
	Secret []byte
	// JWKSURL: tokens signed by a key of the JWK Set published there, with
	// one of Algorithms (DefaultAlgorithms when empty).
	JWKSURL    string
	Algorithms []string
	// JWKSRefresh is how often the key set is fetched again (default 10m);
	// UnknownKIDEvery is the least time between two extra fetches made
	// because a token named a key the set lacks (default 10s): a rotated-in
	// key is picked up at once, a flood of forged kids costs the provider
	// one request per period.
	JWKSRefresh     time.Duration
	UnknownKIDEvery time.Duration
	// HTTPClient fetches the key set (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// Log receives the key set's fetch errors (default slog.Default()).
	Log *slog.Logger

	// Issuer and Audience, when set, must be the token's iss and one of
	// its aud.
	Issuer   string
	Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat (default 5s;
	// negative for none).
	Leeway time.Duration

	// UserClaim names the claim holding the user id (default "sub"): a
	// string, or an integer.
	UserClaim string
	// RoleClaim names the claim that makes an admin (default "role") when
	// it holds AdminRole (default "admin"): a string equal to it or listing
	// it among space-separated values (an OAuth "scope"), or an array of
	// strings containing it ("roles", "groups"). A name with dots that is
	// not a top-level claim is a path into nested objects
	// ("realm_access.roles" in Keycloak's tokens).
	RoleClaim string
	AdminRole string
}

// CheckSecret reports why secret is not good enough, or nil.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("must be at least %d bytes (got %d)", MinSecretLen, len(secret))
	}
	return nil
}

// CheckAlgorithms reports why algs is not an allow-list for a JWKS, or nil.
func CheckAlgorithms(algs []string) error {
	for _, a := range algs {
		if !slices.Contains(PublicKeyAlgorithms, a) {
			return fmt.Errorf("%q is not one of %s", a, strings.Join(PublicKeyAlgorithms, ", "))
		}
	}
	return nil
}

// Token is what Sign puts in a development token.
type Token struct {
	Subject  string
	Role     string // "" for a buyer; written as the "role" claim
	Issuer   string // optional
	Audience string // optional
	TTL      time.Duration
}

// Sign returns t signed with secret (HS256).
func (t Token) Sign(secret []byte) (string, error) {
	if !order.ValidUserID(t.Subject) {
		return "", fmt.Errorf("subject must be 1-%d characters of UTF-8", order.MaxUserIDLen)
	}
	now := time.Now()
	c := jwt.MapClaims{"sub": t.Subject, "iat": now.Unix(), "exp": now.Add(t.TTL).Unix()}
	if t.Role != "" {
		c["role"] = t.Role
	}
	if t.Issuer != "" {
		c["iss"] = t.Issuer
	}
	if t.Audience != "" {
		c["aud"] = t.Audience
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// Mint returns an HS256 token for user with role ("" for a buyer) valid for ttl.
func Mint(secret []byte, user, role string, ttl time.Duration) (string, error) {
	return Token{Subject: user, Role: role, TTL: ttl}.Sign(secret)
}

// cacheMax bounds the verified-token cache; it is emptied when full.
const cacheMax = 1 << 16

// Verifier checks tokens. A buyer clicking and polling sends the same token
// many times, so verified tokens are remembered until they expire: the
// exact token string (signature included) is the key, so nothing
// unverified can hit the cache; a token verified with a key of the JWKS is
// taken from the cache only while the set still holds that key, so a key
// the provider retired stops working at the next fetch. Safe for
// concurrent use.
type Verifier struct {
	cfg    Config
	secret []byte
	jwks   keyfunc.Keyfunc
	parser *jwt.Parser
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]verified
}

type verified struct {
	claims order.Identity
	until  time.Time
	kid    string           // JWKS mode: the key's id
	key    crypto.PublicKey // JWKS mode: the key that verified the token
}

// NewVerifier returns a verifier of HS256 tokens signed with secret, with
// the default claims and leeway.
func NewVerifier(secret []byte) *Verifier {
	v, err := New(context.Background(), Config{Secret: secret})
	if err != nil {
		panic(err) // unreachable: a secret-only config needs no I/O
	}
	return v
}

// New returns a verifier for cfg. In JWKS mode it starts fetching the key
// set, and keeps refreshing it until ctx ends; a provider that cannot be
// reached yet is logged, not fatal (tokens are refused until it answers).
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if (len(cfg.Secret) == 0) == (cfg.JWKSURL == "") {
		return nil, errors.New("auth: set exactly one of a secret and a JWKS URL")
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "role"
	}
	if cfg.AdminRole == "" {
		cfg.AdminRole = RoleAdmin
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = 5 * time.Second
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	v := &Verifier{cfg: cfg, secret: cfg.Secret, now: time.Now, cache: make(map[string]verified)}
	algs := []string{"HS256"}
	if cfg.JWKSURL != "" {
		algs = cfg.Algorithms
		if len(algs) == 0 {
			algs = DefaultAlgorithms
		}
		if err := CheckAlgorithms(algs); err != nil {
			return nil, fmt.Errorf("auth: algorithms: %w", err)
		}
		kf, err := newJWKS(ctx, cfg)
		if err != nil {
			return nil, err
		}
		v.jwks = kf
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithJSONNumber(),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

func newJWKS(ctx context.Context, cfg Config) (keyfunc.Keyfunc, error) {
	refresh := cfg.JWKSRefresh
	if refresh <= 0 {
		refresh = 10 * time.Minute
	}
	every := cfg.UnknownKIDEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	log := cfg.Log
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client:          client,
		HTTPTimeout:     client.Timeout,
		RefreshInterval: refresh,
		// One fetch per period for tokens naming a key the set lacks. A
		// request that finds the period's fetch used refuses its token at
		// once instead of queueing: rate.Limiter.Wait gives up when the
		// wait would pass RateLimitWaitMax, which is shorter than the
		// period, so at most one request per period waits, and for no
		// longer than a fetch (the bound covers the fetch too).
		RefreshUnknownKID: rate.NewLimiter(rate.Every(every), 1),
		RateLimitWaitMax:  min(every/2, client.Timeout),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				log.Error("fetch the identity provider's keys", "jwks_url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: jwks %s: %w", cfg.JWKSURL, err)
	}
	return kf, nil
}

// Verify returns whom the token names (its user and role claims), or an
// error wrapping ErrInvalidToken.
func (v *Verifier) Verify(token string) (order.Identity, error) {
	now := v.now()
	v.mu.Lock()
	hit, ok := v.cache[token]
	v.mu.Unlock()
	if ok && now.Before(hit.until) && v.stillHeld(hit) {
		return hit.claims, nil
	}
	var used crypto.PublicKey
	kid := ""
	keyFunc := func(t *jwt.Token) (any, error) { return v.secret, nil }
	if v.jwks != nil {
		keyFunc = func(t *jwt.Token) (any, error) {
			k, err := v.jwks.Keyfunc(t)
			if err == nil {
				used = k
				kid, _ = t.Header["kid"].(string)
			}
			return k, err
		}
	}
	c := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, c, keyFunc); err != nil {
		return order.Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	user, err := userOf(c, v.cfg.UserClaim)
	if err != nil {
		return order.Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	claims := order.Identity{UserID: user, Admin: holds(lookup(c, v.cfg.RoleClaim), v.cfg.AdminRole)}
	exp, err := c.GetExpirationTime()
	if err != nil || exp == nil {
		return order.Identity{}, fmt.Errorf("%w: exp", ErrInvalidToken)
	}
	if v.jwks != nil && (kid == "" || !canCompare(used)) {
		return claims, nil // no way to tell later that its key left the set
	}
	v.mu.Lock()
	if len(v.cache) >= cacheMax {
		clear(v.cache)
	}
	v.cache[token] = verified{claims: claims, until: exp.Time.Add(v.cfg.Leeway), kid: kid, key: used}
	v.mu.Unlock()
	return claims, nil
}

type equaler interface{ Equal(crypto.PublicKey) bool }

func canCompare(k crypto.PublicKey) bool { _, ok := k.(equaler); return ok }

// stillHeld reports whether a cached token's key is still in the key set
// (always true in secret mode).
func (v *Verifier) stillHeld(hit verified) bool {
	if v.jwks == nil {
		return true
	}
	jwk, err := v.jwks.Storage().KeyRead(context.Background(), hit.kid)
	if err != nil {
		return false
	}
	k := jwk.Key()
	if pk, ok := k.(interface{ Public() crypto.PublicKey }); ok {
		k = pk.Public()
	}
	e, ok := hit.key.(equaler)
	return ok && e.Equal(k)
}

// userOf returns the user id the claim holds.
func userOf(c jwt.MapClaims, name string) (string, error) {
	var user string
	switch x := c[name].(type) {
	case string:
		user = x
	case json.Number:
		if _, err := x.Int64(); err != nil {
			return "", fmt.Errorf("claim %s %s is not an integer", name, x)
		}
		user = x.String()
	case nil:
		return "", fmt.Errorf("no claim %s", name)
	default:
		return "", fmt.Errorf("claim %s is not a string", name)
	}
	if !order.ValidUserID(user) {
		return "", fmt.Errorf("claim %s is not 1-%d characters of UTF-8", name, order.MaxUserIDLen)
	}
	return user, nil
}

// lookup returns the claim name: a top-level claim of that name, else a
// path of dot-separated names into nested objects.
func lookup(c jwt.MapClaims, name string) any {
	if x, ok := c[name]; ok || !strings.Contains(name, ".") {
		return x
	}
	var cur any = map[string]any(c)
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// holds reports whether a claim's value names role: a string equal to it or
// listing it among space-separated values, or an array with it.
func holds(x any, role string) bool {
	switch x := x.(type) {
	case string:
		return slices.Contains(strings.Fields(x), role)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && s == role {
				return true
			}
		}
	}
	return false
}
