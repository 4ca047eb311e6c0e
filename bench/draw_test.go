package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seckill/seckill/bench/internal/verify"
	"github.com/seckill/seckill/pkg/domain/draw"
)

func TestWonWanted(t *testing.T) {
	tests := []struct {
		name           string
		stock, entries int64
		quantity       int
		want           int64
	}{
		{name: "more entries than units: the stock wins", stock: 200, entries: 5000, quantity: 1, want: 200},
		{name: "fewer entries than units: every entry wins", stock: 200, entries: 20, quantity: 1, want: 20},
		{name: "two units an entry", stock: 201, entries: 5000, quantity: 2, want: 100},
		{name: "no entries", stock: 10, entries: 0, quantity: 1, want: 0},
		{name: "no stock", stock: 0, entries: 10, quantity: 1, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wonWanted(tt.stock, tt.entries, tt.quantity); got != tt.want {
				t.Errorf("wonWanted(%d, %d, %d) = %d, want %d", tt.stock, tt.entries, tt.quantity, got, tt.want)
			}
		})
	}
}

// drawnRecord is a record as the api publishes it: entries ids e0, e1, …
// (item 1 for the even ones, 2 for the odd), drawn against stock.
func drawnRecord(n int, stock map[int64]int64) (draw.Record, map[string]int64) {
	var seed draw.Seed
	copy(seed[:], "a seed of exactly thirty-two b..")
	entries := make([]draw.Entry, n)
	entered := map[string]int64{}
	for i := range entries {
		id := fmt.Sprintf("%032x", i)
		entries[i] = draw.Entry{ID: id, ItemID: 1 + int64(i%2), Quantity: 1}
		entered[id] = entries[i].ItemID
	}
	rec := draw.Record{ActivityID: 7, State: draw.StateDrawn, Commitment: seed.Commitment(), Seed: seed.String(),
		Digest: draw.Digest(entries), Sizes: []draw.Size{{ItemID: 1, Stock: stock[1]}, {ItemID: 2, Stock: stock[2]}},
		Entries: draw.Pick(seed, entries, stock)}
	return rec, entered
}

func invariants(vs []verify.Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestCheckListedAndSizes(t *testing.T) {
	stock := map[int64]int64{1: 3, 2: 5}
	tests := []struct {
		name   string
		change func(rec *draw.Record, entered map[string]int64)
		faults int64
		want   []string
	}{
		{name: "a record as drawn holds", change: func(*draw.Record, map[string]int64) {}, want: []string{}},
		{
			name:   "the first winner left out",
			change: func(rec *draw.Record, _ map[string]int64) { rec.Entries = rec.Entries[1:] },
			want:   []string{invRecordVerifies, invListed, invSizeWonStock},
		},
		{
			name:   "an entry the bench never heard of, no request failed",
			change: func(_ *draw.Record, entered map[string]int64) { delete(entered, fmt.Sprintf("%032x", 3)) },
			want:   []string{invListed},
		},
		{
			name:   "an entry whose answer was lost may be listed",
			change: func(_ *draw.Record, entered map[string]int64) { delete(entered, fmt.Sprintf("%032x", 3)) },
			faults: 1,
			want:   []string{},
		},
		{
			name:   "an entry listed under another size",
			change: func(_ *draw.Record, entered map[string]int64) { entered[fmt.Sprintf("%032x", 2)] = 2 },
			want:   []string{invListed},
		},
		{
			name: "one winner too many, the outcome changed",
			change: func(rec *draw.Record, _ map[string]int64) {
				for i := range rec.Entries {
					if rec.Entries[i].Outcome == draw.Alternate {
						rec.Entries[i].Outcome = draw.Won
						return
					}
				}
			},
			want: []string{invRecordVerifies, invSizeWonStock},
		},
		{
			name: "drawn against another stock: verifies, but not the sale's",
			change: func(rec *draw.Record, _ map[string]int64) {
				var seed draw.Seed
				copy(seed[:], "a seed of exactly thirty-two b..")
				other := map[int64]int64{1: 2, 2: 5}
				plain := make([]draw.Entry, len(rec.Entries))
				for i, x := range rec.Entries {
					plain[i] = x.Entry
				}
				rec.Sizes[0].Stock, rec.Entries = 2, draw.Pick(seed, plain, other)
			},
			want: []string{invSizeWonStock},
		},
		{
			name:   "the seed altered",
			change: func(rec *draw.Record, _ map[string]int64) { rec.Seed = strings.Repeat("0", 64) },
			want:   []string{invRecordVerifies},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, entered := drawnRecord(40, stock)
			tt.change(&rec, entered)
			var vs []verify.Violation
			if err := draw.Verify(rec); err != nil {
				vs = append(vs, verify.Violation{Invariant: invRecordVerifies})
			}
			vs = append(append(vs, checkListed(rec.Entries, entered, tt.faults)...), checkSizes(rec.Entries, rec.Sizes, stock, 1)...)
			got := invariants(vs)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("invariants broken %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckWinners(t *testing.T) {
	won := func(id, user string, item int64, no, status, orderUser string, orderItem int64) winnerRow {
		return winnerRow{EntryID: id, ItemID: item, UserID: user, Outcome: draw.Won, OrderNo: no, Status: status, OrderUser: orderUser, OrderItem: orderItem}
	}
	ok := []winnerRow{won("a", "u1", 1, "o1", "CREATED", "u1", 1), won("b", "u2", 2, "o2", "PAID", "u2", 2)}
	tests := []struct {
		name string
		rows []winnerRow
		live int64
		want []string
	}{
		{name: "every winner has its order", rows: ok, live: 2, want: []string{}},
		{name: "a winner without an order", rows: append(ok, won("c", "u3", 1, "", "", "", 0)), live: 2, want: []string{invWinnerOneOrder}},
		{name: "a winner's order failed", rows: append(ok, won("c", "u3", 1, "o3", "FAILED", "u3", 1)), live: 2, want: []string{invWinnerOneOrder}},
		{name: "a winner's order numbered but not in MySQL", rows: append(ok, won("c", "u3", 1, "o3", "", "", 0)), live: 2, want: []string{invWinnerOneOrder}},
		{name: "an order of another buyer", rows: append(ok, won("c", "u3", 1, "o3", "CREATED", "u4", 1)), live: 3, want: []string{invWinnerOneOrder, invOnlyWinners}},
		{name: "an order of another size", rows: append(ok, won("c", "u3", 1, "o3", "CREATED", "u3", 2)), live: 3, want: []string{invWinnerOneOrder, invOnlyWinners}},
		{
			name: "an alternate holds an order",
			rows: append(ok, winnerRow{EntryID: "d", ItemID: 1, UserID: "u5", Outcome: draw.Alternate, OrderNo: "o5", Status: "CREATED", OrderUser: "u5", OrderItem: 1}),
			live: 3, want: []string{invOnlyWinners},
		},
		{name: "a live order of the sale that is no winner's", rows: ok, live: 3, want: []string{invOnlyWinners}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := invariants(checkWinners(tt.rows, tt.live))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("invariants broken %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckSizesWithoutTheRecord(t *testing.T) {
	stock := map[int64]int64{1: 3, 2: 5}
	rec, _ := drawnRecord(40, stock)
	if vs := checkSizes(rec.Entries, nil, stock, 1); len(vs) != 0 {
		t.Errorf("MySQL's ranking as drawn: %v, want none", vs)
	}
	// A size the sale sells but nobody entered wins nothing, as wanted.
	if vs := checkSizes(rec.Entries, nil, map[int64]int64{1: 3, 2: 5, 3: 7}, 1); len(vs) != 0 {
		t.Errorf("a size without entries: %v, want none", vs)
	}
	rec.Entries = rec.Entries[:len(rec.Entries)-1]
	rec.Entries[0].Outcome = draw.Alternate
	if got := invariants(checkSizes(rec.Entries, nil, stock, 1)); fmt.Sprint(got) != fmt.Sprint([]string{invSizeWonStock}) {
		t.Errorf("a winner lost: %v, want %s", got, invSizeWonStock)
	}
}
