package orderdb

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Codes stores the sales' presale codes (sale_codes, 0022) by digest, and
// the batches added under an idempotency key (sale_code_batches).
type Codes struct{ conn }

// codeChunk is the rows one INSERT of AddCodes writes: 100,000 codes are
// 20 statements (a round trip a code would be 100,000), each well under
// the placeholders' limit (65,535) and max_allowed_packet.
const codeChunk = 5000

// AddCodes inserts codes as sale's, created at, in the transaction ctx
// carries (the caller's unit: the batch and its record commit with them).
// A code the sale has already makes it access.ErrCodesExist, naming how
// many of codes the sale has; the unit then rolls back, so a batch is added
// whole or not at all. The caller refuses a digest given twice first.
func (s *Codes) AddCodes(ctx context.Context, sale int64, codes []access.Code, at time.Time) error {
	at = at.UTC()
	for start := 0; start < len(codes); start += codeChunk {
		chunk := codes[start:min(start+codeChunk, len(codes))]
		var q strings.Builder
		q.WriteString("INSERT INTO sale_codes (activity_id, digest, uses, used, subject, revoked_at, created_at) VALUES ")
		args := make([]any, 0, len(chunk)*5)
		for i, c := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?, ?, ?, 0, ?, NULL, ?)")
			args = append(args, sale, string(c.Digest), c.Uses, subjectColumn(c.Subject), at)
		}
		err := s.db(ctx).Exec(q.String(), args...).Error
		if duplicateKey(err) != "" {
			// This statement wrote nothing and the earlier ones met no
			// code of the sale's: the ones the sale had are among the rest.
			n, cerr := s.countExisting(ctx, sale, codes[start:])
			if cerr != nil {
				return wrap("count the codes the sale has", cerr)
			}
			return order.Errorf(access.ErrCodesExist, "%d of the codes are the sale's already; none was added", n)
		}
		if err != nil {
			return wrap("add codes", err)
		}
	}
	return nil
}

// countExisting counts how many of codes sale has.
func (s *Codes) countExisting(ctx context.Context, sale int64, codes []access.Code) (int64, error) {
	var total int64
	for start := 0; start < len(codes); start += codeChunk {
		chunk := codes[start:min(start+codeChunk, len(codes))]
		digests := make([]string, len(chunk))
		for i, c := range chunk {
			digests[i] = string(c.Digest)
		}
		var n int64
		if err := s.db(ctx).Table("sale_codes").Where("activity_id = ? AND digest IN ?", sale, digests).Count(&n).Error; err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// subjectColumn is a code's subject as stored: NULL for anyone.
func subjectColumn(subject string) any {
	if subject == "" {
		return nil
	}
	return []byte(subject)
}

// RevokeCode marks sale's code d revoked at at, and reports whether this
// call revoked it (false: it was revoked already, so a retry changes
// nothing). A code the sale never had is order.ErrNotFound.
func (s *Codes) RevokeCode(ctx context.Context, sale int64, d access.Digest, at time.Time) (bool, error) {
	res := s.db(ctx).Exec("UPDATE sale_codes SET revoked_at = ? WHERE activity_id = ? AND digest = ? AND revoked_at IS NULL",
		at.UTC(), sale, string(d))
	if res.Error != nil {
		return false, wrap("revoke code", res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	var n int64
	if err := s.db(ctx).Table("sale_codes").Where("activity_id = ? AND digest = ?", sale, string(d)).Count(&n).Error; err != nil {
		return false, wrap("revoke code", err)
	}
	if n == 0 {
		return false, order.Errorf(order.ErrNotFound, "the sale has no such code")
	}
	return false, nil
}

// CodeSummary counts sale's codes: all of them, the revoked ones, and the
// uses given and held over all of them.
func (s *Codes) CodeSummary(ctx context.Context, sale int64) (access.Summary, error) {
	var r struct {
		Codes, Revoked, Uses, Used int64
	}
	err := s.db(ctx).Raw(`SELECT COUNT(*) AS codes, COALESCE(SUM(revoked_at IS NOT NULL), 0) AS revoked,
		COALESCE(SUM(uses), 0) AS uses, COALESCE(SUM(used), 0) AS used FROM sale_codes WHERE activity_id = ?`, sale).Scan(&r).Error
	if err != nil {
		return access.Summary{}, wrap("count codes", err)
	}
	return access.Summary{Codes: r.Codes, Revoked: r.Revoked, Uses: r.Uses, Used: r.Used}, nil
}

type codeRow struct {
	Digest    string
	Uses      int
	Used      int
	Subject   []byte
	RevokedAt *time.Time
}

// CodePage returns up to limit of sale's codes, revoked ones too, whose
// digests come after after, in digest order (access.Reader: the loader's
// pages, each one range of the primary key).
func (s *Codes) CodePage(ctx context.Context, sale int64, after access.Digest, limit int) ([]access.Code, error) {
	var rows []codeRow
	err := s.db(ctx).Table("sale_codes").Select("digest, uses, used, subject, revoked_at").
		Where("activity_id = ? AND digest > ?", sale, string(after)).Order("digest").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, wrap("read codes", err)
	}
	holds, err := s.laneHolds(ctx, sale, rows)
	if err != nil {
		return nil, err
	}
	out := make([]access.Code, len(rows))
	for i, r := range rows {
		out[i] = access.Code{Digest: access.Digest(r.Digest), Uses: r.Uses, Used: r.Used + holds[r.Digest], Subject: string(r.Subject),
			Revoked: r.RevokedAt != nil}
	}
	return out, nil
}

// laneHolds counts, for the codes of rows, the uses held by places in the
// sale's priority lane (room_joins with the code, whose buyer has no order
// in the sale: an order took the use over, and MySQL counts it in used
// once the order is written). Redis holds them at the join, before MySQL's
// used does: a load from MySQL counts them as used, so a code Redis lost
// gives no more places in the lane than it has uses.
func (s *Codes) laneHolds(ctx context.Context, sale int64, rows []codeRow) (map[string]int, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	digests := make([]string, len(rows))
	for i, r := range rows {
		digests[i] = r.Digest
	}
	var held []struct {
		AccessCode string
		N          int
	}
	err := s.db(ctx).Raw(`SELECT j.access_code, COUNT(*) AS n FROM room_joins j
		WHERE j.activity_id = ? AND j.access_code IN ?
		AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.activity_id = j.activity_id AND o.user_id = j.user_id)
		GROUP BY j.access_code`, sale, digests).Scan(&held).Error
	if err != nil {
		return nil, wrap("read the codes' places in the lane", err)
	}
	out := make(map[string]int, len(held))
	for _, h := range held {
		out[h.AccessCode] = h.N
	}
	return out, nil
}

type batchRow struct {
	ActivityID  int64  `gorm:"primaryKey"`
	IdemKey     string `gorm:"primaryKey"`
	Kind        string
	Nonce       []byte
	Count       int
	Uses        int
	Fingerprint string
	CreatedBy   []byte
	CreatedAt   time.Time
}

func (batchRow) TableName() string { return "sale_code_batches" }

func (r batchRow) batch() access.Batch {
	return access.Batch{Sale: r.ActivityID, Key: r.IdemKey, Kind: access.BatchKind(r.Kind), Nonce: r.Nonce, Count: r.Count,
		Uses: r.Uses, Fingerprint: r.Fingerprint, By: string(r.CreatedBy), At: r.CreatedAt.UTC()}
}

// ClaimBatch records b in the transaction ctx carries and reports true,
// or, when the sale has a batch under b.Key already, returns that one and
// false. A concurrent claim of the key waits for the first to commit or
// roll back (the row's lock): it then finds the first's batch, or makes
// its own.
func (s *Codes) ClaimBatch(ctx context.Context, b access.Batch) (access.Batch, bool, error) {
	row := batchRow{ActivityID: b.Sale, IdemKey: b.Key, Kind: string(b.Kind), Nonce: b.Nonce, Count: b.Count, Uses: b.Uses,
		Fingerprint: b.Fingerprint, CreatedBy: []byte(b.By), CreatedAt: b.At.UTC()}
	err := s.db(ctx).Create(&row).Error
	if err == nil {
		return b, true, nil
	}
	if duplicateKey(err) == "" {
		return access.Batch{}, false, wrap("record the codes' batch", err)
	}
	var had batchRow
	// A shared lock, as the failed insert took: claims waiting on one key
	// all hold one, and one of them asking for an exclusive lock would
	// deadlock with the others.
	err = s.db(ctx).Raw("SELECT * FROM sale_code_batches WHERE activity_id = ? AND idem_key = ? LOCK IN SHARE MODE", b.Sale, b.Key).
		Scan(&had).Error
	if err == nil && had.IdemKey == "" {
		err = gorm.ErrRecordNotFound
	}
	if err != nil {
		return access.Batch{}, false, wrap("read the codes' batch", err)
	}
	return had.batch(), false, nil
}

// LiveCodedSales lists, by id, the sales not ended at now whose access
// reads codes (code_required, code_priority): the ones whose codes a
// Redis that lost data must get back (the heal watch loads them again).
func (s *Codes) LiveCodedSales(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := s.db(ctx).Raw("SELECT id FROM activities WHERE access <> ? AND ends_at > ? ORDER BY id",
		string(access.Open), now.UTC()).Scan(&ids).Error
	return ids, wrap("read the sales with codes", err)
}
