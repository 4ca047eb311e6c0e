package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/draw"
)

func codedEntry(user string, c access.Code) (draw.NewEntry, string) {
	e, id := newEntry(user, item, roomStart.Add(time.Second))
	e.Code = c.Digest
	return e, id
}

// A draw entry naming a code: refused while the codes are not loaded, for
// a code never loaded or bound to another buyer, and once its uses are
// held; a new entry takes one use with it, and the buyer's entry taken
// again (with the code or another) answers the entry and uses nothing.
func TestTakeEntryWithCode(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		ctx := context.Background()
		one := access.Code{Digest: digest("ONEUSE"), Uses: 1}
		two := access.Code{Digest: digest("TWOUSES"), Uses: 2}
		mine := access.Code{Digest: digest("MINE"), Uses: 1, Subject: "u9"}
		take := func(user string, c access.Code) (draw.Accepted, bool, error) {
			e, id := codedEntry(user, c)
			return s.Entries.TakeEntry(ctx, entryWindow, e, id)
		}
		if _, _, err := take("u1", one); !errors.Is(err, draw.ErrCodesNotLoaded) {
			t.Fatalf("codes not loaded: %v, want ErrCodesNotLoaded", err)
		}
		loadCodes(t, rdb, s, one, two, mine)
		for _, c := range []struct {
			name string
			user string
			code access.Code
		}{
			{"never loaded", "u1", access.Code{Digest: digest("NOSUCH"), Uses: 1}},
			{"bound to another buyer", "u1", mine},
		} {
			if _, _, err := take(c.user, c.code); !errors.Is(err, access.ErrCodeInvalid) {
				t.Fatalf("%s: %v, want ErrCodeInvalid", c.name, err)
			}
		}
		a, added, err := take("u1", one)
		if err != nil || !added || a.Code != one.Digest {
			t.Fatalf("u1 with a one-use code: %+v, %v, %v", a, added, err)
		}
		wantLeft(t, rdb, s, one, 0)
		if _, _, err := take("u2", one); !errors.Is(err, access.ErrCodeUsed) {
			t.Fatalf("u2 with the used code: %v, want ErrCodeUsed", err)
		}
		// u1 again, naming another code: the first entry, nothing used.
		again, added, err := take("u1", two)
		if err != nil || added || again != a {
			t.Fatalf("u1 again: %+v, %v, %v; want %+v", again, added, err, a)
		}
		wantLeft(t, rdb, s, two, 2)
		if _, added, err := take("u9", mine); err != nil || !added {
			t.Fatalf("u9 with its own code: %v, %v", added, err)
		}
		wantLeft(t, rdb, s, mine, 0)
		// An entry refused for the window uses nothing.
		late, id := codedEntry("u3", two)
		late.At = entryWindow.ClosesAt
		if _, _, err := s.Entries.TakeEntry(ctx, entryWindow, late, id); !errors.Is(err, draw.ErrEntriesOver) {
			t.Fatalf("after the close: %v", err)
		}
		wantLeft(t, rdb, s, two, 2)
		if got, err := s.Entries.AcceptedEntry(ctx, item, 7, "u1"); err != nil || got.Code != one.Digest {
			t.Fatalf("u1's entry read back: %+v, %v", got, err)
		}
		if n, err := s.Entries.AcceptedCount(ctx, item, 7); err != nil || n != 2 {
			t.Fatalf("count: %d, %v; want 2", n, err)
		}
	})
}

// Buyers racing for a code of five uses (runs of the script shared by
// several buyers included): five entries, the rest CODE_USED, nothing
// left.
func TestTakeEntryCodeRace(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		five := access.Code{Digest: digest("FIVEUSES"), Uses: 5}
		loadCodes(t, rdb, s, five)
		var won, used atomic.Int64
		var wg sync.WaitGroup
		for b := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, id := codedEntry(fmt.Sprintf("b%d", b), five)
				_, added, err := s.Entries.TakeEntry(context.Background(), entryWindow, e, id)
				switch {
				case errors.Is(err, access.ErrCodeUsed):
					used.Add(1)
				case err != nil || !added:
					t.Errorf("b%d: %v, added %v", b, err, added)
				default:
					won.Add(1)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 5 || used.Load() != 35 {
			t.Fatalf("%d entries and %d CODE_USED, want 5 and 35", won.Load(), used.Load())
		}
		wantLeft(t, rdb, s, five, 0)
		if n, err := s.Entries.AcceptedCount(context.Background(), item, 7); err != nil || n != 5 {
			t.Fatalf("count: %d, %v; want 5", n, err)
		}
	})
}

// A take with a code whose answer is lost is run again: the second run
// finds the entry the first made, holding the code, and the code is used
// once.
func TestTakeEntryWithCodeLostAnswer(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		two := access.Code{Digest: digest("TWOUSES"), Uses: 2}
		loadCodes(t, l.Direct, l.direct, two)
		e, id := codedEntry("u1", two)
		l.LoseNext("entry_take")
		a, added, err := l.via.Entries.TakeEntry(context.Background(), entryWindow, e, id)
		if err != nil || added || a.ID != id || a.Code != two.Digest || l.Lost() != 1 {
			t.Fatalf("take with its answer lost: %+v, added %v, %v (lost %d); want the entry found by the run again", a, added, err, l.Lost())
		}
		wantLeft(t, l.Direct, l.direct, two, 1)
	})
}
