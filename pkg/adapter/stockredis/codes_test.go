package stockredis_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// codePages is a sale's codes as MySQL would page them (access.Reader),
// counting the pages read.
type codePages struct {
	codes []access.Code // in digest order
	reads int
}

func (p *codePages) CodePage(_ context.Context, _ int64, after access.Digest, limit int) ([]access.Code, error) {
	p.reads++
	i := sort.Search(len(p.codes), func(i int) bool { return p.codes[i].Digest > after })
	return p.codes[i:min(i+limit, len(p.codes))], nil
}

// The loader copies every page of a sale's codes into the hash and marks
// it loaded last: a missing code gets its left uses, a count a script
// changed stays, a revoked code's field goes; a second load writes the
// same.
func TestCodesLoad(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	st := stockredis.New(rdb, prefix)
	ctx := context.Background()
	sale := activity.Activity{ID: 9, ItemID: 31, EndsAt: time.Now().Add(time.Hour)}
	key := st.Keys(reservation.One(sale.ItemID)).Codes(sale.ID)

	// 12,001 codes: three pages. Code 0 is bound to a buyer and half used,
	// code 1 revoked, code 2 all used.
	src := &codePages{}
	for i := range 12_001 {
		src.codes = append(src.codes, access.Code{Digest: access.Digest(fmt.Sprintf("%032x", i)), Uses: 2})
	}
	src.codes[0].Used, src.codes[0].Subject = 1, "alice"
	src.codes[1].Revoked = true
	src.codes[2].Used = 2
	d := func(i int) string { return string(src.codes[i].Digest) }
	// Redis before: code 3's count changed by a script, code 1 still there
	// (its revoke's HDEL was lost).
	if err := rdb.HSet(ctx, key, d(3), "0|", d(1), "2|").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Codes.Loaded(ctx, sale); err != nil || ok {
		t.Fatalf("loaded before the load: %v %v", ok, err)
	}
	for pass := range 2 {
		n, err := st.Codes.Load(ctx, sale, src)
		if err != nil || n != len(src.codes) {
			t.Fatalf("pass %d: loaded %d, %v", pass, n, err)
		}
		h, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 12_001 || h[access.LoadedField] != "1" || h[d(0)] != "1|alice" || h[d(2)] != "0|" || h[d(3)] != "0|" ||
			h[d(12_000)] != "2|" {
			t.Fatalf("pass %d: %d fields; . %q, 0 %q, 2 %q, 3 %q, last %q", pass, len(h), h["."], h[d(0)], h[d(2)], h[d(3)], h[d(12_000)])
		}
		if _, ok := h[d(1)]; ok {
			t.Fatalf("pass %d: the revoked code is in the hash", pass)
		}
	}
	if src.reads != 6 {
		t.Fatalf("%d page reads for two loads of three pages", src.reads)
	}
	if ok, err := st.Codes.Loaded(ctx, sale); err != nil || !ok {
		t.Fatalf("not loaded: %v", err)
	}
	// It lives past the end and the longest payment window a sale has.
	if left := rdb.PTTL(ctx, key).Val(); left < time.Hour+activity.MaxPaymentWindow {
		t.Fatalf("the codes hash lives %v", left)
	}

	// The write-through adds without overwriting, and revokes.
	if err := st.Codes.Add(ctx, sale, []access.Code{{Digest: src.codes[3].Digest, Uses: 2}, {Digest: "new", Uses: 4, Subject: "bob"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Codes.Revoke(ctx, sale, src.codes[0].Digest); err != nil {
		t.Fatal(err)
	}
	h := rdb.HGetAll(ctx, key).Val()
	if h[d(3)] != "0|" || h["new"] != "4|bob" || h[d(0)] != "" {
		t.Fatalf("after the write-through: 3 %q, new %q, revoked %q", h[d(3)], h["new"], h[d(0)])
	}
}
