// Package codes holds the operator's use cases on a sale's presale codes
// (docs/codes.md): generate a batch, import the shop's own, revoke one,
// count them. MySQL is the codes' truth: each change commits there with
// its record in the sale's audit, then is written through to the sale's
// hash in Redis, which the buyers' scripts read; a write-through that
// fails is logged and healed by the next load of the hash (stockredis
// Codes.Load, run by every warm-up of a coded sale).
package codes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Store is the sales' codes and batches as MySQL keeps them
// (*orderdb.Codes).
type Store interface {
	AddCodes(ctx context.Context, sale int64, codes []access.Code, at time.Time) error
	RevokeCode(ctx context.Context, sale int64, d access.Digest, at time.Time) (bool, error)
	CodeSummary(ctx context.Context, sale int64) (access.Summary, error)
	ClaimBatch(ctx context.Context, b access.Batch) (access.Batch, bool, error)
}

// Sales reads a sale (*orderdb.Activities).
type Sales interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
}

// Audit records an operator's action in the action's unit (*orderdb.Audit).
type Audit interface {
	RecordAction(ctx context.Context, e activity.AuditEntry) error
}

// Live is the sales' codes in Redis (*stockredis.Codes).
type Live interface {
	Add(ctx context.Context, sale activity.Activity, codes []access.Code) error
	Revoke(ctx context.Context, sale activity.Activity, d access.Digest) error
}

// Service runs the use cases. Key reads the key codes are hashed and
// derived with (the order number key, orderdb Orders.OrderNumberKey; safe
// to call again), read once and kept. Now is the shared clock. Live nil
// writes nothing through (the next load of the hash carries the change).
type Service struct {
	Tx    unit.Work
	Store Store
	Sales Sales
	Audit Audit
	Live  Live
	Key   func(ctx context.Context) ([]byte, error)
	Now   func() time.Time
	Log   *slog.Logger

	mu  sync.Mutex
	key []byte
}

// Generate asks for Count new codes of Uses uses each. Key is the
// request's idempotency key ("": none, and the request is not repeatable:
// its codes are answered once and never again); By the operator.
type Generate struct {
	Count, Uses int
	Key, By     string
}

// Given is one of the shop's own codes, bound to Subject when not "".
type Given struct {
	Code, Subject string
}

// Import asks for the shop's Codes, of Uses uses each.
type Import struct {
	Codes   []Given
	Uses    int
	Key, By string
}

// Added is what a batch added.
type Added struct {
	// Codes are a generated batch's codes, as buyers type them (none for
	// an import: the shop has its own).
	Codes []string
	// Count is the codes the batch added; Uses each one's uses.
	Count, Uses int
	// Replayed: the idempotency key added this batch before; nothing was
	// added now, and the answer is the first one's.
	Replayed bool
}

// addDetail is a batch's record in the audit: counts, never codes.
type addDetail struct {
	Kind  access.BatchKind `json:"kind"`
	Count int              `json:"count"`
	Uses  int              `json:"uses"`
	Bound int              `json:"bound,omitempty"`
	Keyed bool             `json:"idempotency_key"`
}

// numberKey is the shared key, read on first use.
func (s *Service) numberKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := s.Key(ctx)
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

// Generate adds g.Count codes (1 to access.MaxCodesPerRequest) to sale id,
// each drawn from a random nonce under the shared key (access.Derive), and
// answers them: this is the only time they are shown. With an
// idempotency key, the nonce is kept with the batch, so the same request
// again (its answer was lost) answers the same codes and adds nothing; a
// different request with the key is order.ErrKeyReused.
func (s *Service) Generate(ctx context.Context, id int64, g Generate) (Added, error) {
	key, err := s.checkBatch(ctx, "count must be", g.Count, g.Uses)
	if err != nil {
		return Added{}, err
	}
	nonce := make([]byte, access.NonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return Added{}, err
	}
	b := access.Batch{Sale: id, Key: g.Key, Kind: access.Generated, Nonce: nonce, Count: g.Count, Uses: g.Uses, By: g.By,
		Fingerprint: fingerprint("generate|" + strconv.Itoa(g.Count) + "|" + strconv.Itoa(g.Uses))}
	var plain []string
	var codes []access.Code
	derive := func(b access.Batch) {
		plain, codes = make([]string, b.Count), make([]access.Code, b.Count)
		for i := range b.Count {
			plain[i] = access.Derive(key, id, b.Nonce, i)
			n, _ := access.Normalize(plain[i]) // a generated code is always normal
			codes[i] = access.Code{Digest: access.Hash(key, id, n), Uses: b.Uses}
		}
	}
	res, a, err := s.add(ctx, id, b, addDetail{Kind: access.Generated, Count: g.Count, Uses: g.Uses},
		func(had access.Batch) []access.Code { derive(had); return codes })
	if err != nil {
		return Added{}, err
	}
	res.Codes = plain
	s.writeThrough(ctx, a, codes)
	return res, nil
}

// Import adds the shop's codes im.Codes (1 to access.MaxCodesPerRequest,
// each access.Normalize'd, its subject at most access.MaxSubjectLen
// bytes) to sale id. A code given twice (after Normalize) refuses the
// batch, naming how many; so does a code the sale has already
// (access.ErrCodesExist). With an idempotency key the same request again
// adds nothing and answers the first one's counts.
func (s *Service) Import(ctx context.Context, id int64, im Import) (Added, error) {
	key, err := s.checkBatch(ctx, "codes must list", len(im.Codes), im.Uses)
	if err != nil {
		return Added{}, err
	}
	codes := make([]access.Code, len(im.Codes))
	seen := make(map[access.Digest]struct{}, len(im.Codes))
	sum, twice, bound := sha256.New(), 0, 0
	sum.Write([]byte("import|" + strconv.Itoa(im.Uses)))
	for i, c := range im.Codes {
		n, err := access.Normalize(c.Code)
		if err != nil {
			return Added{}, order.Errorf(order.ErrInvalidArgument, "codes[%d]: %s", i, order.ClientMessage(err))
		}
		if len(c.Subject) > access.MaxSubjectLen {
			return Added{}, order.Errorf(order.ErrInvalidArgument, "codes[%d].subject is longer than %d bytes", i, access.MaxSubjectLen)
		}
		if c.Subject != "" {
			bound++
		}
		d := access.Hash(key, id, n)
		if _, ok := seen[d]; ok {
			twice++
		}
		seen[d] = struct{}{}
		codes[i] = access.Code{Digest: d, Uses: im.Uses, Subject: c.Subject}
		sum.Write([]byte("|" + string(d) + "|" + strconv.Itoa(len(c.Subject)) + ":" + c.Subject))
	}
	if twice > 0 {
		return Added{}, order.Errorf(order.ErrInvalidArgument, "%d of the codes are given more than once (after dropping spaces and hyphens and upper-casing); none was added", twice)
	}
	b := access.Batch{Sale: id, Key: im.Key, Kind: access.Imported, Count: len(codes), Uses: im.Uses, By: im.By,
		Fingerprint: hex.EncodeToString(sum.Sum(nil))}
	res, a, err := s.add(ctx, id, b, addDetail{Kind: access.Imported, Count: len(codes), Uses: im.Uses, Bound: bound},
		func(access.Batch) []access.Code { return codes })
	if err != nil {
		return Added{}, err
	}
	// Again on a replay: the first answer may have been lost before its
	// write-through ran (a field that exists keeps its count).
	s.writeThrough(ctx, a, codes)
	return res, nil
}

// add runs batch b of sale id in one unit: the sale checked (it exists and
// has not ended), the batch claimed under its key (a key used before
// answers that batch: codesOf gives its codes, nothing is written), its
// codes added and its record written. It returns the sale too.
func (s *Service) add(ctx context.Context, id int64, b access.Batch, detail addDetail,
	codesOf func(access.Batch) []access.Code) (Added, activity.Activity, error) {
	type out struct {
		added Added
		sale  activity.Activity
		codes []access.Code
	}
	now := s.Now()
	b.At = now
	o, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (out, error) {
		a, err := s.Sales.Activity(ctx, id)
		if err != nil {
			return out{}, err
		}
		if !now.Before(a.EndsAt) {
			return out{}, order.Errorf(order.ErrActivityNotActive, "the sale ended at %s: it takes no more codes",
				a.EndsAt.UTC().Format(time.RFC3339))
		}
		if b.Key != "" {
			had, created, err := s.Store.ClaimBatch(ctx, b)
			if err != nil {
				return out{}, err
			}
			if !created {
				if had.Kind != b.Kind || had.Fingerprint != b.Fingerprint {
					return out{}, order.Errorf(order.ErrKeyReused, "the Idempotency-Key added another batch of codes to this sale")
				}
				codesOf(had)
				return out{added: Added{Count: had.Count, Uses: had.Uses, Replayed: true}, sale: a}, nil
			}
		}
		codes := codesOf(b)
		if err := s.Store.AddCodes(ctx, id, codes, now); err != nil {
			return out{}, err
		}
		detail.Keyed = b.Key != ""
		d, err := json.Marshal(detail)
		if err != nil {
			return out{}, err
		}
		err = s.Audit.RecordAction(ctx, activity.AuditEntry{ActivityID: id, Action: activity.ActionCodesAdd, Subject: b.By,
			Detail: string(d), At: now})
		return out{added: Added{Count: b.Count, Uses: b.Uses}, sale: a, codes: codes}, err
	})
	if err != nil {
		return Added{}, activity.Activity{}, err
	}
	s.Log.Info("codes added", "request_id", logs.RequestID(ctx), "activity_id", id, "operator", b.By, "kind", b.Kind,
		"count", o.added.Count, "uses", o.added.Uses, "replayed", o.added.Replayed)
	return o.added, o.sale, nil
}

// writeThrough gives the sale's Redis hash the codes MySQL just committed;
// a failure is logged: the next load of the hash adds them.
func (s *Service) writeThrough(ctx context.Context, a activity.Activity, codes []access.Code) {
	if s.Live == nil {
		return
	}
	if err := s.Live.Add(ctx, a, codes); err != nil {
		s.Log.Warn("codes added in MySQL, not yet in Redis: the next load of the sale's codes adds them",
			"request_id", logs.RequestID(ctx), "activity_id", a.ID, "count", len(codes), "err", err)
	}
}

// checkBatch refuses a batch of n codes (what names n in the message) of
// uses each out of bounds, and returns the shared key.
func (s *Service) checkBatch(ctx context.Context, what string, n, uses int) ([]byte, error) {
	if n < 1 || n > access.MaxCodesPerRequest {
		return nil, order.Errorf(order.ErrInvalidArgument, "%s from 1 to %d codes", what, access.MaxCodesPerRequest)
	}
	if err := access.CheckUses(uses); err != nil {
		return nil, err
	}
	return s.numberKey(ctx)
}

// fingerprint is the digest of a request kept with its batch.
func fingerprint(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Revoke revokes sale id's code as operator by asked: MySQL refuses it
// from then on, with the record in the audit, and the sale's Redis hash
// loses it (a failure there is logged, and the next load removes it).
// Revoking a revoked code changes and records nothing; a code the sale
// never had is order.ErrNotFound.
func (s *Service) Revoke(ctx context.Context, id int64, code, by string) error {
	n, err := access.Normalize(code)
	if err != nil {
		return order.Errorf(order.ErrNotFound, "the sale has no such code")
	}
	key, err := s.numberKey(ctx)
	if err != nil {
		return err
	}
	d, now := access.Hash(key, id, n), s.Now()
	a, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (activity.Activity, error) {
		a, err := s.Sales.Activity(ctx, id)
		if err != nil {
			return a, err
		}
		revoked, err := s.Store.RevokeCode(ctx, id, d, now)
		if err != nil || !revoked {
			return a, err
		}
		return a, s.Audit.RecordAction(ctx, activity.AuditEntry{ActivityID: id, Action: activity.ActionCodesRevoke, Subject: by,
			Detail: `{"digest":"` + string(d) + `"}`, At: now})
	})
	if err != nil {
		return err
	}
	if s.Live != nil {
		if err := s.Live.Revoke(ctx, a, d); err != nil {
			s.Log.Warn("code revoked in MySQL, not yet in Redis: the next load of the sale's codes removes it",
				"request_id", logs.RequestID(ctx), "activity_id", id, "digest", d, "err", err)
		}
	}
	s.Log.Info("code revoked", "request_id", logs.RequestID(ctx), "activity_id", id, "operator", by, "digest", d)
	return nil
}

// Summary counts sale id's codes (order.ErrNotFound: no such sale).
func (s *Service) Summary(ctx context.Context, id int64) (access.Summary, error) {
	if _, err := s.Sales.Activity(ctx, id); err != nil {
		return access.Summary{}, err
	}
	return s.Store.CodeSummary(ctx, id)
}
