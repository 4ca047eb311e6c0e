// Package auth mints and verifies the buyers' and operators' bearer tokens:
// HS256 JWTs whose "sub" is the user id (a positive int64 as a decimal
// string), with a required "exp" and an optional "role".
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest secret the programs accept.
const MinSecretLen = 32

// RoleAdmin may use the admin routes.
const RoleAdmin = "admin"

// ErrInvalidToken covers every token that must be refused.
var ErrInvalidToken = errors.New("invalid token")

// Claims is what a verified token says.
type Claims struct {
	UserID int64
	Role   string
}

type jwtClaims struct {
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// CheckSecret reports why secret is not good enough, or nil.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("must be at least %d bytes (got %d)", MinSecretLen, len(secret))
	}
	return nil
}

// Mint returns a signed token for user with role ("" for a buyer) valid for ttl.
func Mint(secret []byte, user int64, role string, ttl time.Duration) (string, error) {
	if user <= 0 {
		return "", fmt.Errorf("user id must be positive")
	}
	now := time.Now()
	c := jwtClaims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(user, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// leeway is the clock skew tolerated on exp and nbf.
const leeway = 5 * time.Second

// cacheMax bounds the verified-token cache; it is emptied when full.
const cacheMax = 1 << 16

// Verifier checks tokens against one secret. A buyer clicking and polling
// sends the same token many times, so verified tokens are remembered until
// they expire: the exact token string (signature included) is the key, so
// nothing unverified can hit the cache. Safe for concurrent use.
type Verifier struct {
	secret []byte
	parser *jwt.Parser
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]verified
}

type verified struct {
	claims Claims
	until  time.Time
}

// NewVerifier returns a verifier that accepts only HS256 with an exp claim.
func NewVerifier(secret []byte) *Verifier {
	v := &Verifier{secret: secret, now: time.Now, cache: make(map[string]verified)}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	return v
}

// Verify returns the token's claims, or an error wrapping ErrInvalidToken.
func (v *Verifier) Verify(token string) (Claims, error) {
	now := v.now()
	v.mu.Lock()
	hit, ok := v.cache[token]
	v.mu.Unlock()
	if ok && now.Before(hit.until) {
		return hit.claims, nil
	}
	var c jwtClaims
	_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != c.Subject {
		return Claims{}, fmt.Errorf("%w: sub %q is not a positive user id", ErrInvalidToken, c.Subject)
	}
	claims := Claims{UserID: id, Role: c.Role}
	v.mu.Lock()
	if len(v.cache) >= cacheMax {
		clear(v.cache)
	}
	v.cache[token] = verified{claims: claims, until: c.ExpiresAt.Time.Add(leeway)}
	v.mu.Unlock()
	return claims, nil
}
