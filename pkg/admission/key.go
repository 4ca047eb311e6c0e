package admission

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
)

// JWK is an Ed25519 public key as a JSON Web Key (RFC 8037), the second
// form the admin API serves it in, for tools that read JWKs.
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // the key, base64url
}

// FormatPublicKey is the key as the admin API serves it: its 32 bytes in
// base64url, 43 characters.
func FormatPublicKey(key ed25519.PublicKey) string { return b64.EncodeToString(key) }

// JWKOf is key as a JWK.
func JWKOf(key ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: FormatPublicKey(key)}
}

// ParsePublicKey reads a sale's public key in either form the admin API
// serves: the "public_key" string (base64url) or the "jwk" object's JSON.
// Surrounding white space is ignored, so a key pasted from a file works.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var j JWK
		if err := json.Unmarshal([]byte(s), &j); err != nil {
			return nil, fmt.Errorf("admission: the public key's JWK: %w", err)
		}
		if j.Kty != "OKP" || j.Crv != "Ed25519" {
			return nil, fmt.Errorf("admission: the JWK is kty %q crv %q, not an OKP Ed25519 key", j.Kty, j.Crv)
		}
		s = j.X
	}
	b, err := b64.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("admission: the public key is not %d bytes of base64url (unpadded)", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
