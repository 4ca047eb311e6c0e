package auth

import (
	"errors"
	"testing"
	"time"
)

var secret = []byte("auth-test-secret-0123456789abcdef0123")

func TestVerify(t *testing.T) {
	good, _ := Mint(secret, 42, RoleAdmin, time.Hour)
	expired, _ := Mint(secret, 42, "", -time.Minute)
	forged, _ := Mint([]byte("another-secret-0123456789abcdef01234"), 42, "", time.Hour)
	cases := []struct {
		name  string
		token string
		want  Claims
		ok    bool
	}{
		{"good", good, Claims{UserID: 42, Role: RoleAdmin}, true},
		{"expired", expired, Claims{}, false},
		{"wrong key", forged, Claims{}, false},
		{"garbage", "a.b.c", Claims{}, false},
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

// A cached token stops being accepted when it expires.
func TestCachedTokenExpires(t *testing.T) {
	v := NewVerifier(secret)
	now := time.Now()
	v.now = func() time.Time { return now }
	tok, _ := Mint(secret, 7, "", time.Minute)
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute + leeway + time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("an expired cached token was accepted: %v", err)
	}
}

func TestCheckSecret(t *testing.T) {
	if CheckSecret([]byte("short")) == nil || CheckSecret(secret) != nil {
		t.Fatal("secrets under 32 bytes must be refused, longer ones accepted")
	}
}
