package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// drawSale makes a draw sale of one item a size, of stocks[i] units,
// which started a minute ago and whose entries close in a minute.
func drawSale(t testing.TB, db *mysqltest.DB, stocks ...int64) (activity.Activity, time.Time) {
	t.Helper()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	return db.OpenSizedDraw(t, closes, stocks...), closes
}

// seedDrawn writes a drawn record of n entrants over a's sizes straight
// into MySQL, as the draw writes it (multi-row INSERTs of the ranking, then
// the draw's row DRAWN with its digest and sizes), without the entries'
// own rows, which the record does not read. It returns how long the
// writes took.
func seedDrawn(t testing.TB, db *mysqltest.DB, a activity.Activity, n int, stock int64) time.Duration {
	t.Helper()
	entries := make([]draw.Entry, n)
	id := make([]byte, 16)
	for i := range entries {
		_, _ = rand.Read(id)
		entries[i] = draw.Entry{ID: hex.EncodeToString(id), ItemID: a.Items[i%len(a.Items)].ItemID, Quantity: 1 + i%7/6}
	}
	stocks := map[int64]int64{}
	var sizes []draw.Size
	for _, it := range a.Items {
		stocks[it.ItemID] = stock
		sizes = append(sizes, draw.Size{ItemID: it.ItemID, Stock: stock})
	}
	ranked := draw.Pick(a.Draw.Seed, entries, stocks)
	digest := draw.Digest(entries)
	entries = nil
	start := time.Now()
	g := db.Gorm()
	alternates := map[int64]int{}
	var q strings.Builder
	const rows = 5000
	for i := 0; i < len(ranked); i += rows {
		q.Reset()
		q.WriteString("INSERT INTO draw_results (activity_id, draw_rank, entry_id, item_id, quantity, user_id, outcome, alternate, event_seq) VALUES ")
		for j := i; j < min(i+rows, len(ranked)); j++ {
			r := ranked[j]
			if j > i {
				q.WriteByte(',')
			}
			alt := "NULL"
			if r.Outcome == draw.Alternate {
				alternates[r.ItemID]++
				alt = strconv.Itoa(alternates[r.ItemID])
			}
			fmt.Fprintf(&q, "(%d,%d,'%s',%d,%d,'u%d','%s',%s,1)", a.ID, j+1, r.ID, r.ItemID, r.Quantity, j, r.Outcome, alt)
		}
		if err := g.Exec(q.String()).Error; err != nil {
			t.Fatal(err)
		}
	}
	js, _ := json.Marshal(sizes)
	err := g.Exec("UPDATE activity_draws SET state = ?, entries = ?, entries_digest = ?, sizes = ?, drawn_at = ? WHERE activity_id = ?",
		draw.StateDrawn, n, digest, string(js), time.Now().UTC(), a.ID).Error
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// getRecord GETs the sale's record with the given Accept-Encoding (sent as
// given, so the client does not gunzip on its own) and If-None-Match, and
// returns the answer with its body decoded.
func getRecord(t *testing.T, ts *testServer, activityID int64, acceptEncoding, ifNoneMatch string) response {
	t.Helper()
	h := map[string]string{"Accept-Encoding": acceptEncoding}
	if ifNoneMatch != "" {
		h["If-None-Match"] = ifNoneMatch
	}
	res := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/api/v1/activities/%d/draw", activityID), header: h})
	if res.header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(res.body))
		if err != nil {
			t.Fatal(err)
		}
		if res.body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip the record: %v", err)
		}
	}
	return res
}

// A drawn record is written a page at a time, byte for byte what the whole
// record's json.Marshal wrote, plain or gzipped; it is cached a year under
// its ETag, which answers 304 with no body; and it verifies.
func TestDrawRecordIsStreamedAsBefore(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T) int64
	}{
		{"drawn by the draw", func(t *testing.T) int64 {
			a, closes := drawSale(t, ts.db, 3, 2)
			for u := range 30 {
				e := draw.NewEntry{ActivityID: a.ID, UserID: strconv.Itoa(u), ItemID: a.Items[u%2].ItemID, Quantity: 1 + u%5/4, At: time.Now()}
				if _, _, err := ts.db.Draws.Enter(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if d, err := ts.db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err != nil || d.Entries != 30 {
				t.Fatalf("draw: %+v, %v", d, err)
			}
			return a.ID
		}},
		{"25,000 entries, three pages of MySQL", func(t *testing.T) int64 {
			a, _ := drawSale(t, ts.db, 100, 100, 100, 100, 100)
			seedDrawn(t, ts.db, a, 25_000, 100)
			return a.ID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.make(t)
			whole, err := ts.db.Draws.DrawRecord(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(whole)
			if err != nil {
				t.Fatal(err)
			}
			plain := getRecord(t, ts, id, "identity", "")
			zipped := getRecord(t, ts, id, "br;q=1.0, gzip;q=0.8", "")
			for _, r := range []response{plain, zipped} {
				if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
					t.Fatalf("%d, %s, %d bytes; want 200 and the %d bytes of json.Marshal(record)", r.status, r.header.Get("Content-Encoding"), len(r.body), len(want))
				}
				if cc, vary := r.header.Get("Cache-Control"), r.header.Get("Vary"); cc != "public, max-age=31536000, immutable" || vary != "Accept-Encoding" {
					t.Fatalf("Cache-Control %q, Vary %q", cc, vary)
				}
			}
			if plain.header.Get("Content-Encoding") != "" || zipped.header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("Content-Encoding: %q plain, %q asked gzip", plain.header.Get("Content-Encoding"), zipped.header.Get("Content-Encoding"))
			}
			tag, ztag := plain.header.Get("ETag"), zipped.header.Get("ETag")
			if len(tag) != 34 || ztag != strings.TrimSuffix(tag, `"`)+`-gzip"` {
				t.Fatalf("ETag %q plain, %q gzipped", tag, ztag)
			}
			for _, inm := range []string{tag, ztag, "W/" + tag, `"other", ` + ztag, "*"} {
				for _, ae := range []string{"identity", "gzip"} {
					r := getRecord(t, ts, id, ae, inm)
					if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") == "" || r.header.Get("Cache-Control") == "" {
						t.Fatalf("If-None-Match %s, Accept-Encoding %s: %d, %d bytes, ETag %q; want 304 with no body", inm, ae, r.status, len(r.body), r.header.Get("ETag"))
					}
				}
			}
			if r := getRecord(t, ts, id, "gzip;q=0", `"other"`); r.status != http.StatusOK || r.header.Get("Content-Encoding") != "" || !bytes.Equal(r.body, want) {
				t.Fatalf("another tag, gzip refused: %d, %q", r.status, r.header.Get("Content-Encoding"))
			}
			v := draw.NewVerifier()
			if _, err := v.Read(bytes.NewReader(zipped.body)); err != nil {
				t.Fatal(err)
			}
			if n, _ := v.Entries(); n != len(whole.Entries) || v.Err() != nil {
				t.Fatalf("verified %d entries of %d: %v", n, len(whole.Entries), v.Err())
			}
		})
	}
}

// A draw not yet drawn changes with each entry: no-store, no ETag, and no
// 304 whatever the client holds.
func TestDrawRecordNotDrawnIsNotCached(t *testing.T) {
	ts := newTestServer(t)
	a, _ := drawSale(t, ts.db, 3)
	want, _ := json.Marshal(draw.Record{ActivityID: a.ID, State: draw.StateOpen, Commitment: draw.Seed(a.Draw.Seed).Commitment()})
	for _, inm := range []string{"", "*"} {
		r := getRecord(t, ts, a.ID, "gzip", inm)
		if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
			t.Fatalf("If-None-Match %q: %d %s, want 200 %s", inm, r.status, r.body, want)
		}
		if cc, tag := r.header.Get("Cache-Control"), r.header.Get("ETag"); cc != "no-store" || tag != "" {
			t.Fatalf("Cache-Control %q, ETag %q; want no-store and none", cc, tag)
		}
	}
}

// A record changed in MySQL behind the draw is caught by the verifier as
// it streams, with the messages of the whole record's check.
func TestDrawRecordTamperedIsCaughtStreaming(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	a, _ := drawSale(t, ts.db, 50, 50, 50, 50, 50)
	seedDrawn(t, ts.db, a, 12_000, 50)
	g := ts.db.Gorm()
	// An alternate made a winner, and two entries swapped across a page.
	if err := g.Exec("UPDATE draw_results SET outcome = ?, alternate = NULL WHERE activity_id = ? AND draw_rank = 9000", draw.Won, a.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec("UPDATE draw_results SET draw_rank = -draw_rank WHERE activity_id = ? AND draw_rank IN (100, 11000)", a.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec("UPDATE draw_results SET draw_rank = IF(draw_rank = -100, 11000, 100) WHERE activity_id = ? AND draw_rank < 0", a.ID).Error; err != nil {
		t.Fatal(err)
	}
	whole, err := ts.db.Draws.DrawRecord(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := draw.Verify(whole)
	if want == nil || !strings.Contains(want.Error(), "rank 100: the seed ranks entry") || !strings.Contains(want.Error(), "rank 9000, entry") {
		t.Fatalf("the whole record's check: %v", want)
	}
	v := draw.NewVerifier()
	if _, err := v.Read(bytes.NewReader(getRecord(t, ts, a.ID, "gzip", "").body)); err != nil {
		t.Fatal(err)
	}
	if got := v.Err(); got == nil || got.Error() != want.Error() {
		t.Fatalf("streaming:\n%v\nwant:\n%v", got, want)
	}
}

// A record whose MySQL read fails before its first byte answers a plain
// error; one that fails midway ends with the connection dropped, so no
// client takes the bytes it got for a whole record.
func TestDrawRecordCutShortIsNoRecord(t *testing.T) {
	ts := newTestServer(t)
	a, _ := drawSale(t, ts.db, 100, 100)
	seedDrawn(t, ts.db, a, 25_000, 100)
	// The draws' reads go through a proxy that can lose MySQL's answers
	// (parameters interpolated, so the query's text is on the wire).
	cfg, err := mysqldrv.ParseDSN(ts.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := proxytest.Start(t, cfg.Addr, proxytest.MySQL)
	cfg.Addr, cfg.InterpolateParams = proxy.Addr(), true
	proxied, err := orderdb.Open(orderdb.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxied.Close() })
	services := ts.services(ts.svc, testLogger(t))
	services.Draws.Store = proxied.Draws
	srv := httptest.NewServer(httpapi.New(ts.svc, services, auth.NewVerifier(testSecret), nil, testLogger(t)))
	t.Cleanup(srv.Close)
	page := func(after int) proxytest.Matcher {
		return proxytest.MySQLQuery(fmt.Sprintf("SELECT `draw_rank`,`entry_id`,`item_id`,`quantity`,`outcome` FROM `draw_results` WHERE activity_id = %d AND draw_rank > %d ", a.ID, after))
	}
	path := fmt.Sprintf("/api/v1/activities/%d/draw", a.ID)

	proxy.LoseReply(page(0), 1)
	wantError(t, ts.do(t, srv.URL, request{method: "GET", path: path, header: map[string]string{"Accept-Encoding": "identity"}}), http.StatusServiceUnavailable, "UNAVAILABLE")
	if proxy.Lost() != 1 {
		t.Fatalf("%d answers lost, want the first page's", proxy.Lost())
	}

	for _, enc := range []string{"identity", "gzip"} {
		proxy.LoseReply(page(10_000), 1)
		lost := proxy.Lost()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Accept-Encoding", enc)
		res, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || err == nil {
			t.Fatalf("%s: %d, %d bytes, read error %v; want 200 and the body failing", enc, res.StatusCode, len(body), err)
		}
		if proxy.Lost() != lost+1 {
			t.Fatalf("%s: the second page's answer was not lost", enc)
		}
		if enc == "identity" && (len(body) < 100_000 || json.Valid(body)) {
			t.Fatalf("%s: %d bytes before the cut, valid JSON %v; want the first page, cut", enc, len(body), json.Valid(body))
		}
	}
	// Whole again once MySQL answers.
	if r := ts.do(t, srv.URL, request{method: "GET", path: path, header: map[string]string{"Accept-Encoding": "identity"}}); r.status != http.StatusOK || !json.Valid(r.body) {
		t.Fatalf("after the faults: %d, valid %v", r.status, json.Valid(r.body))
	}
}
