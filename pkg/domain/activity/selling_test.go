package activity

import (
	"testing"
	"time"
)

func TestSelling(t *testing.T) {
	closes := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	room := WaitingRoom{AdmitPerSecond: 10}
	draw := Draw{EntriesCloseAt: closes}
	cases := []struct {
		name     string
		a        Activity
		want     Selling
		wantMode string
	}{
		{"neither room nor draw", Activity{}, SellsFirstCome, ModeFirstCome},
		{"a waiting room", Activity{Room: room}, SellsInRoom, ModeFirstCome},
		{"a draw", Activity{Draw: draw}, SellsByDraw, ModeDraw},
		{"a draw wins over a room", Activity{Room: room, Draw: draw}, SellsByDraw, ModeDraw},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Selling(); got != tc.want {
				t.Errorf("Selling() = %v, want %v", got, tc.want)
			}
			if got := tc.a.Mode(); got != tc.wantMode {
				t.Errorf("Mode() = %q, want %q", got, tc.wantMode)
			}
		})
	}
}
