package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

var entryKey = []byte("entries test key")

// entryWindow is a draw sale of activity 7 over item (its tag) taking
// entries for a minute from roomStart.
var entryWindow = draw.Window{Tag: item, StartsAt: roomStart, ClosesAt: roomStart.Add(time.Minute), KeysUntil: roomStart.Add(time.Hour)}

func newEntry(user string, size int64, at time.Time) (draw.NewEntry, string) {
	return draw.NewEntry{ActivityID: 7, UserID: user, ItemID: size, Quantity: 1, At: at}, draw.EntryIDFor(entryKey, 7, user)
}

// A sale takes entries from its start until their close, by the time the
// api gives, one per buyer: a buyer who entered gets that entry back
// whatever they ask and whenever (also after the close), and a sale whose
// entries are closed takes no new one.
func TestTakeEntryWindowAndOnePerBuyer(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		ctx := context.Background()
		take := func(user string, size int64, at time.Time) (draw.Accepted, bool, error) {
			e, id := newEntry(user, size, at)
			return s.Entries.TakeEntry(ctx, entryWindow, e, id)
		}
		if _, _, err := take("early", item, roomStart.Add(-time.Millisecond)); !errors.Is(err, draw.ErrEntriesNotOpen) {
			t.Fatalf("a millisecond before the start: %v, want ErrEntriesNotOpen", err)
		}
		a, added, err := take("u1", item, roomStart)
		if err != nil || !added || a.ID != draw.EntryIDFor(entryKey, 7, "u1") || a.ItemID != item || a.Quantity != 1 || !a.At.Equal(roomStart) {
			t.Fatalf("at the start: %+v, %v, %v", a, added, err)
		}
		last := entryWindow.ClosesAt.Add(-time.Millisecond)
		if _, added, err := take("u2", item, last); err != nil || !added {
			t.Fatalf("a millisecond before the close: %v, %v", added, err)
		}
		if _, _, err := take("u3", item, entryWindow.ClosesAt); !errors.Is(err, draw.ErrEntriesOver) {
			t.Fatalf("at the close: %v, want ErrEntriesOver", err)
		}
		// Again, for another size and after the close: the first entry.
		again, added, err := take("u1", item+1, entryWindow.ClosesAt.Add(time.Hour))
		if err != nil || added || again != a {
			t.Fatalf("u1 again after the close: %+v, %v, %v; want %+v, not added", again, added, err, a)
		}
		if err := s.Entries.CloseEntries(ctx, item, 7, entryWindow.KeysUntil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := take("u4", item, roomStart.Add(time.Second)); !errors.Is(err, draw.ErrEntriesClosed) {
			t.Fatalf("after the sale's entries closed: %v, want ErrEntriesClosed", err)
		}
		if got, err := s.Entries.AcceptedEntry(ctx, item, 7, "u1"); err != nil || got != a {
			t.Fatalf("u1's entry read: %+v, %v", got, err)
		}
		if _, err := s.Entries.AcceptedEntry(ctx, item, 7, "u3"); !errors.Is(err, order.ErrNotFound) {
			t.Fatalf("u3 (refused) read: %v, want not found", err)
		}
		if n, err := s.Entries.AcceptedCount(ctx, item, 7); err != nil || n != 2 {
			t.Fatalf("count: %d, %v; want 2", n, err)
		}
	})
}

// Many requests of one buyer at once, and of many buyers: each buyer has
// one entry, exactly one request added it, and every request of a buyer
// got that entry.
func TestTakeEntryRacesAddOnce(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		const buyers, tries = 50, 8
		var mu sync.Mutex
		added := map[string]int{}
		seen := map[string]map[draw.Accepted]bool{}
		var wg sync.WaitGroup
		for b := range buyers {
			for i := range tries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					user := fmt.Sprintf("b%d", b)
					e, id := newEntry(user, item+int64(i%3), roomStart.Add(time.Duration(i)*time.Millisecond))
					a, add, err := s.Entries.TakeEntry(context.Background(), entryWindow, e, id)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if add {
						added[user]++
					}
					if seen[user] == nil {
						seen[user] = map[draw.Accepted]bool{}
					}
					seen[user][a] = true
				}()
			}
		}
		wg.Wait()
		for b := range buyers {
			user := fmt.Sprintf("b%d", b)
			if added[user] != 1 || len(seen[user]) != 1 {
				t.Errorf("%s: added %d times, answered %d different entries; want 1 and 1", user, added[user], len(seen[user]))
			}
		}
		if n, err := s.Entries.AcceptedCount(context.Background(), item, 7); err != nil || n != buyers {
			t.Fatalf("count: %d, %v; want %d", n, err, buyers)
		}
	})
}

// A take whose answer is lost is run again by the adapter: the second run
// finds the entry the first made (not added), so the buyer has one.
func TestTakeEntryLostAnswer(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		e, id := newEntry("u1", item, roomStart.Add(time.Second))
		l.LoseNext("entry_take")
		a, added, err := l.via.Entries.TakeEntry(context.Background(), entryWindow, e, id)
		if err != nil || added || a.ID != id || l.Lost() != 1 {
			t.Fatalf("take with its answer lost: %+v, added %v, %v (lost %d); want the entry found by the run again", a, added, err, l.Lost())
		}
		if n, err := l.direct.Entries.AcceptedCount(context.Background(), item, 7); err != nil || n != 1 {
			t.Fatalf("count: %d, %v; want 1", n, err)
		}
	})
}
