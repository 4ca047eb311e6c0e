package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// drawnRecord is an honest drawn record of n entries over three sizes.
func drawnRecord(n int) draw.Record {
	seed := draw.NewSeed()
	es := make([]draw.Entry, n)
	for i := range es {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		es[i] = draw.Entry{ID: hex.EncodeToString(sum[:16]), ItemID: int64(11 + i%3), Quantity: 1 + i%4/3}
	}
	stock := map[int64]int64{11: 30, 12: 30, 13: 30}
	return draw.Record{ActivityID: 9, State: draw.StateDrawn, Commitment: seed.Commitment(), Seed: seed.String(), Digest: draw.Digest(es),
		Sizes: []draw.Size{{ItemID: 11, Stock: 30}, {ItemID: 12, Stock: 30}, {ItemID: 13, Stock: 30}}, Entries: draw.Pick(seed, es, stock)}
}

// verify-draw reads a record as a stream (a file, or the api's answer
// gzipped) and prints draw.Verify's breaches of it, each a line, and each
// receipt's; exit 0 when it holds, 1 when it does not.
func TestVerifyDrawStreams(t *testing.T) {
	honest := drawnRecord(400)
	tampered := drawnRecord(400)
	tampered.Entries[0], tampered.Entries[1] = tampered.Entries[1], tampered.Entries[0]
	tampered.Entries[300].Outcome = "WON"
	tampered.Entries = append(tampered.Entries, tampered.Entries[5])
	dir := t.TempDir()
	save := func(name string, v any) string {
		b, _ := json.Marshal(v)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	e := honest.Entries[123]
	kept := save("kept.json", draw.Receipt{EntryID: e.ID, ActivityID: 9, ItemID: e.ItemID, Quantity: e.Quantity, Commitment: honest.Commitment})
	lost := save("lost.json", draw.Receipt{EntryID: strings.Repeat("0", 32), ActivityID: 9, ItemID: 11, Quantity: 1, Commitment: honest.Commitment})
	served := map[string]draw.Record{"/api/v1/activities/9/draw": honest, "/api/v1/activities/8/draw": tampered}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, ok := served[r.URL.Path]
		if !ok || r.Header.Get("Accept-Encoding") != "gzip" {
			http.Error(w, "not here, or not asked for gzip", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_ = json.NewEncoder(zw).Encode(rec)
		_ = zw.Close()
	}))
	defer api.Close()

	wantBreaches := func(rec draw.Record, extra ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "draw of activity %d does NOT hold:\n", rec.ActivityID)
		for _, line := range append(strings.Split(draw.Verify(rec).Error(), "\n"), extra...) {
			fmt.Fprintf(&b, "  - %s\n", line)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"a file that holds", []string{"--file", save("honest.json", honest), "--receipt", kept}, 0,
			fmt.Sprintf("draw of activity 9 holds: 400 entries, %d won, %d alternates", won(honest), 400-won(honest))},
		{"the api's, gzipped", []string{"--url", api.URL, "--activity", "9"}, 0, "draw of activity 9 holds: 400 entries"},
		{"a receipt lost", []string{"--url", api.URL, "--activity", "9", "--receipt", kept, "--receipt", lost}, 1,
			"  - receipt " + lost + ": entry " + strings.Repeat("0", 32) + " (item 11, quantity 1) is missing from the record\n"},
		{"a tampered file", []string{"--file", save("tampered.json", tampered)}, 1, wantBreaches(tampered)},
		{"the api's, tampered", []string{"--url", api.URL, "--activity", "8"}, 1, wantBreaches(tampered)},
		{"no such record", []string{"--url", api.URL, "--activity", "7"}, 2, ""},
		{"cut short", []string{"--file", save("cut.json", json.RawMessage(`{"state":"DRAWN","entries":[{"entry_id":"a"}`))}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := verifyDraw(context.Background(), append([]string{}, tc.args...), &out, &errOut)
			if code := exitCode(err); err == nil && tc.code != 0 || err != nil && code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.code, out.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Fatalf("printed:\n%s\nwant it to hold:\n%s", out.String(), tc.out)
			}
		})
	}
}

func won(rec draw.Record) int {
	n := 0
	for _, e := range rec.Entries {
		if e.Outcome == draw.Won {
			n++
		}
	}
	return n
}
