package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerifyNewToken is what a buyer's first request pays to have its
// token checked, by algorithm (later requests with the same token hit the
// Verifier's cache): the development HS256 against an identity provider's
// RS256 and ES256.
//
//	go test -run '^$' -bench VerifyNewToken ./pkg/adapter/auth/
func BenchmarkVerifyNewToken(b *testing.B) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		m         jwt.SigningMethod
		sign, key any
	}{
		{jwt.SigningMethodHS256, secret, secret},
		{jwt.SigningMethodRS256, rsaKey, &rsaKey.PublicKey},
		{jwt.SigningMethodES256, ecKey, &ecKey.PublicKey},
	} {
		b.Run(c.m.Alg(), func(b *testing.B) {
			tok, err := jwt.NewWithClaims(c.m, jwt.MapClaims{"sub": "1001", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(c.sign)
			if err != nil {
				b.Fatal(err)
			}
			p := jwt.NewParser(jwt.WithValidMethods([]string{c.m.Alg()}), jwt.WithExpirationRequired(), jwt.WithJSONNumber())
			for b.Loop() {
				if _, err := p.ParseWithClaims(tok, jwt.MapClaims{}, func(*jwt.Token) (any, error) { return c.key, nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
