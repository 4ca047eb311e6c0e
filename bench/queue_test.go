package main

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/admission"
)

// forge alters the part of an admission the api checks, the mac, and
// nothing else: the api refuses what forge returns.
func TestForgeAltersTheMAC(t *testing.T) {
	macKey := []byte("the sale's secret")
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	c := admission.Claims{ActivityID: 6, UserID: "bob", Expires: time.Now().Add(time.Minute)}
	tok := admission.Sign(priv, macKey, c)
	forged := forge(tok)
	if forged == tok || len(forged) != len(tok) {
		t.Fatalf("forge(%q) = %q", tok, forged)
	}
	if _, err := admission.Verify(priv.Public().(ed25519.PublicKey), forged, 6, "bob", time.Now(), 0); err != nil {
		t.Fatalf("forge altered more than the mac: %v", err)
	}
	if _, err := admission.CheckMAC(macKey, forged, 6, "bob", time.Now()); err == nil {
		t.Fatal("the api's check takes the forged admission")
	}
}
