package access

import (
	"testing"
	"time"
)

func TestParseGuessLimit(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     GuessLimit
		bad      bool
	}{
		{name: "ten in ten minutes", in: "10/10m", want: GuessLimit{Max: 10, Per: 10 * time.Minute}},
		{name: "off", in: "off", want: GuessLimit{}},
		{name: "no window", in: "10", bad: true},
		{name: "zero", in: "0/1m", bad: true},
		{name: "negative", in: "-1/1m", bad: true},
		{name: "window too short", in: "5/10ms", bad: true},
		{name: "not a duration", in: "5/ten", bad: true},
		{name: "empty", in: "", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseGuessLimit(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseGuessLimit(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseGuessLimit(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back, err := ParseGuessLimit(got.String()); err != nil || back != got {
				t.Fatalf("String %q reads back as %v, %v", got.String(), back, err)
			}
		})
	}
	if !(GuessLimit{Max: 2, Per: time.Minute}).Over(2) || (GuessLimit{Max: 2, Per: time.Minute}).Over(1) || (GuessLimit{}).Over(1<<40) {
		t.Fatal("Over: wrong")
	}
}
