package access

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// ErrCodesExist: a batch names a code the sale has already (409); nothing
// of the batch was added.
var ErrCodesExist = errors.New("access codes exist")

// NonceLen is the bytes of a batch's nonce.
const NonceLen = 16

// Derive is the i-th code of a generated batch whose nonce is nonce, in
// the format of Generate: the first GeneratedLen bytes of
// HMAC-SHA256(key, "codes|<sale>|<nonce hex>|<i>"), five bits of each (80
// bits). Only whoever holds key (the order number key every instance
// shares) can compute it, so a batch's nonce may be stored beside its
// digests: the same request answered again (its answer was lost) gives the
// same codes, and the stores alone tell no one a code.
func Derive(key []byte, sale int64, nonce []byte, i int) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("codes|" + strconv.FormatInt(sale, 10) + "|" + hex.EncodeToString(nonce) + "|" + strconv.Itoa(i)))
	return formatGenerated(m.Sum(nil))
}

// BatchKind is how a batch's codes were given.
type BatchKind string

// The kinds of batch.
const (
	// Generated codes are Derive'd from the batch's nonce.
	Generated BatchKind = "generate"
	// Imported codes are the shop's own.
	Imported BatchKind = "import"
)

// Batch is a request that added codes under an idempotency key, as MySQL
// keeps it: a request with the key again is answered from it.
type Batch struct {
	Sale int64
	Key  string
	Kind BatchKind
	// Nonce derives a generated batch's codes (Derive); nil for an import.
	Nonce []byte
	// Count is the codes the batch added; Uses each one's uses.
	Count, Uses int
	// Fingerprint is a digest of the request: the key sent with another
	// request is refused.
	Fingerprint string
	// By is the operator's subject.
	By string
	At time.Time
}

// Summary counts a sale's codes.
type Summary struct {
	// Codes is every code the sale was given, Revoked those of them
	// revoked.
	Codes, Revoked int64
	// Uses is the uses of the codes not revoked; Used how many of them
	// live orders and entries hold (MySQL's figure).
	Uses, Used int64
}

// Reader reads a sale's codes a page at a time in digest order (for the
// loader that copies them into Redis; *orderdb.Codes).
type Reader interface {
	// CodePage returns up to limit of sale's codes, revoked ones too,
	// whose digests come after after ("": from the first).
	CodePage(ctx context.Context, sale int64, after Digest, limit int) ([]Code, error)
}
