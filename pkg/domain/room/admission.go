package room

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/admission"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Admission is a buyer's turn to order in a sale with a room, until
// Expires. The api signs it with the sale's admission key and checks it on
// each order without a database read; Redis's ledger then decides whether
// it is still unused. Its token's grammar is package admission's.
type Admission = admission.Claims

// signingInfo is HKDF's info for the sale's Ed25519 seed: it keeps the
// seed apart from anything else the secret might ever key.
const signingInfo = "seckill admission ed25519 v1"

// SigningKey is the sale's Ed25519 private key, derived from its admission
// secret key (activity.WaitingRoom.Key) with HKDF-SHA256. Derived, not
// drawn: every api instance gets the same key from the secret it already
// loads, and the rooms made before admissions were signed have one too,
// with no new column and no migration. The secret never leaves the api;
// the public half (PublicKey) is what a shop is given.
func SigningKey(key []byte) ed25519.PrivateKey {
	seed, err := hkdf.Key(sha256.New, key, nil, signingInfo, ed25519.SeedSize)
	if err != nil {
		// Only a length beyond HKDF's 255 hashes fails; 32 bytes never do.
		panic("room: hkdf: " + err.Error())
	}
	return ed25519.NewKeyFromSeed(seed)
}

// PublicKey is the public half of the sale's SigningKey: it verifies the
// sale's admissions (package admission) and can mint none.
func PublicKey(key []byte) ed25519.PublicKey {
	return SigningKey(key).Public().(ed25519.PublicKey)
}

// Sign is the admission as a token (an a2 of package admission): the
// HMAC-SHA256 under key that the api checks on each order, and the
// Ed25519 signature under SigningKey(key) that a shop's checkout checks.
func Sign(key []byte, a Admission) string { return NewSigner(key).Sign(a) }

// Signer signs one sale's admissions. The derivation of its Ed25519 key
// costs more than a signature, so a process that signs a sale's admissions
// again and again keeps one Signer per sale.
type Signer struct {
	key     []byte
	private ed25519.PrivateKey
}

// NewSigner is the signer for the sale whose admission secret is key.
func NewSigner(key []byte) *Signer {
	return &Signer{key: bytes.Clone(key), private: SigningKey(key)}
}

// Signs reports whether s signs for the secret key.
func (s *Signer) Signs(key []byte) bool { return bytes.Equal(s.key, key) }

// Sign is Sign(key, a) for s's key.
func (s *Signer) Sign(a Admission) string { return admission.Sign(s.private, s.key, a) }

// Verify checks token for activity and user at now: its HMAC is key's
// (an a1 token from before the signatures is taken until it expires, as an
// a2), for that sale and buyer, not expired. The api checks the HMAC, not
// the signature: it costs a fraction of an Ed25519 verification on every
// order. Every refusal is order.ErrNotAdmitted with the reason.
func Verify(key []byte, token string, activityID int64, userID string, now time.Time) (Admission, error) {
	if token == "" {
		return Admission{}, order.Errorf(order.ErrNotAdmitted, "this sale has a waiting room: send the admission the queue gave you in X-Admission")
	}
	a, err := admission.CheckMAC(key, token, activityID, userID, now)
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, admission.ErrOtherSale):
		return a, order.Errorf(order.ErrNotAdmitted, "the admission is for another sale")
	case errors.Is(err, admission.ErrOtherBuyer):
		return a, order.Errorf(order.ErrNotAdmitted, "the admission is another buyer's")
	case errors.Is(err, admission.ErrExpired):
		return a, order.Errorf(order.ErrNotAdmitted, "the admission expired at %s", a.Expires.UTC().Format(time.RFC3339))
	}
	return Admission{}, order.Errorf(order.ErrNotAdmitted, "the admission is not one this sale issued")
}
