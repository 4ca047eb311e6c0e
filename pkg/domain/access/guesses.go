package access

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GuessLimit bounds the invalid codes one buyer in a sale, or one client
// address, may send in a window: Max refusals for CODE_INVALID within Per
// of the first; the next coded request is refused (ErrTooManyGuesses)
// before any code is looked up, until the window ends. Max 0 is no limit.
type GuessLimit struct {
	Max int
	Per time.Duration
}

// The defaults: a buyer who mistypes a code a few times is not stopped,
// a guesser learns at most a handful of digests' fate per window.
var (
	DefaultGuessesPerBuyer = GuessLimit{Max: 10, Per: 10 * time.Minute}
	DefaultGuessesPerAddr  = GuessLimit{Max: 100, Per: 10 * time.Minute}
)

// ParseGuessLimit reads "<max>/<window>" ("10/10m": 10 in ten minutes),
// or "off" for no limit. The window is a Go duration of at least a second.
func ParseGuessLimit(s string) (GuessLimit, error) {
	if s == "off" {
		return GuessLimit{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	max, err := strconv.Atoi(n)
	if !ok || err != nil || max < 1 {
		return GuessLimit{}, fmt.Errorf("want <max>/<window> (10/10m) with max at least 1, or off")
	}
	d, err := time.ParseDuration(per)
	if err != nil || d < time.Second {
		return GuessLimit{}, fmt.Errorf("want <max>/<window> (10/10m) with a window of at least 1s, or off")
	}
	return GuessLimit{Max: max, Per: d}, nil
}

// Over reports whether count guesses pass l.
func (l GuessLimit) Over(count int64) bool { return l.Max > 0 && count >= int64(l.Max) }

// String is l as ParseGuessLimit reads it.
func (l GuessLimit) String() string {
	if l.Max == 0 {
		return "off"
	}
	return strconv.Itoa(l.Max) + "/" + l.Per.String()
}
