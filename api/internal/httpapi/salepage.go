package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/draws"
)

// ActivityPageTTL is how long this instance serves a sale page from memory
// before it reads Redis (or MySQL) again: the most a page can be stale.
const ActivityPageTTL = time.Second

// ActivityState is where a sale stands.
type ActivityState string

// The sale's states, in the order they come.
const (
	ActivityUpcoming ActivityState = "UPCOMING"
	ActivityLive     ActivityState = "LIVE"
	ActivitySoldOut  ActivityState = "SOLD_OUT"
	ActivityEnded    ActivityState = "ENDED"
)

// ActivityPage is the body of GET /api/v1/activities/{id}.
type ActivityPage struct {
	ActivityID int64 `json:"activity_id"`
	// Name is the sale's first item's name.
	Name         string        `json:"name,omitempty"`
	ItemID       int64         `json:"item_id"`
	StartsAt     time.Time     `json:"starts_at"`
	EndsAt       time.Time     `json:"ends_at"`
	PerUserLimit int           `json:"per_user_limit"`
	SalePrice    *int64        `json:"sale_price,omitempty"`
	Currency     string        `json:"currency,omitempty"`
	State        ActivityState `json:"state"`
	// UnitsLeft is exact when read: the units Redis can still reserve
	// (MySQL's stock before the warm-up), at most ActivityPageTTL old; over
	// every item of the sale.
	UnitsLeft int64 `json:"units_left"`
	// Items are the sale's items (its sizes), each with its units left.
	Items []ActivityPageItem `json:"items"`
	// WaitingRoom is true for a sale whose buyers queue first
	// (/api/v1/activities/{id}/queue) and order with their admission.
	WaitingRoom bool `json:"waiting_room"`
	// SeedCommitment is SHA-256 of the seed that orders the buyers who
	// joined before the start; Seed is the seed itself, shown from the
	// start, so anyone can check the order (docs/api.md).
	SeedCommitment string `json:"seed_commitment,omitempty"`
	Seed           string `json:"seed,omitempty"`
	// Mode is "first_come" or "draw"; Draw is a draw's state, left out for
	// a first-come sale.
	Mode string            `json:"mode"`
	Draw *ActivityPageDraw `json:"draw,omitempty"`
	// Access is whom the sale takes: "open", "code_required" (orders,
	// entries and joins carry an access_code) or "code_priority" (code
	// holders are admitted from the room first).
	Access string `json:"access"`
}

// ActivityPageItem is one item on the sale page.
type ActivityPageItem struct {
	ItemID    int64  `json:"item_id"`
	Label     string `json:"label,omitempty"`
	SalePrice *int64 `json:"sale_price,omitempty"`
	Currency  string `json:"currency,omitempty"`
	UnitsLeft int64  `json:"units_left"`
	// State is LIVE while the item has units left, else SOLD_OUT.
	State ActivityState `json:"state"`
}

// saleState is the state at now of a sale with left units unreserved.
func saleState(a activity.Activity, left int64, now time.Time) ActivityState {
	switch {
	case now.Before(a.StartsAt):
		return ActivityUpcoming
	case !now.Before(a.EndsAt):
		return ActivityEnded
	case left <= 0:
		return ActivitySoldOut
	}
	return ActivityLive
}

// salePages serves each activity's page from memory: one load (one Redis
// read, or a MySQL one before the warm-up) per activity per ActivityPageTTL on
// this instance, whatever the request rate. Requests that find the page
// older than that wait for the one load under way (a single flight).
type salePages struct {
	ttl  time.Duration
	now  func() time.Time
	load func(ctx context.Context, id int64) ([]byte, error)

	mu sync.Mutex
	m  map[int64]*salePage
}

// salePage is one activity's page as last loaded; done is closed once the
// load finished, and body, etag and err are read only after that.
type salePage struct {
	at   time.Time // when the load started: the data is no older
	done chan struct{}
	body []byte
	etag string
	err  error
}

// loaded reports whether pg's load finished.
func (pg *salePage) loaded() bool {
	select {
	case <-pg.done:
		return true
	default:
		return false
	}
}

// maxSalePages bounds the pages kept; beyond it the expired ones go.
const maxSalePages = 4096

// get returns activity id's page, loading it when the one in memory is
// older than the TTL.
func (p *salePages) get(ctx context.Context, id int64) (*salePage, error) {
	now := p.now()
	p.mu.Lock()
	pg := p.m[id]
	if pg == nil || (pg.loaded() && now.Sub(pg.at) >= p.ttl) {
		pg = &salePage{at: now, done: make(chan struct{})}
		if len(p.m) >= maxSalePages {
			p.dropExpired(now)
		}
		p.m[id] = pg
		p.mu.Unlock()
		p.fill(ctx, id, pg)
	} else {
		p.mu.Unlock()
	}
	select {
	case <-pg.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return pg, pg.err
}

// fill loads pg. The load runs on its own context, so one waiter giving
// up does not fail the others; an error other than "no such activity" is
// not kept, so the next request loads again.
func (p *salePages) fill(ctx context.Context, id int64, pg *salePage) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	pg.body, pg.err = p.load(lctx, id)
	if pg.err == nil {
		sum := sha256.Sum256(pg.body)
		pg.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
	}
	close(pg.done)
	if pg.err != nil && !errors.Is(pg.err, order.ErrNotFound) {
		p.mu.Lock()
		if p.m[id] == pg {
			delete(p.m, id)
		}
		p.mu.Unlock()
	}
}

// dropExpired forgets the pages older than the TTL; p.mu is held.
func (p *salePages) dropExpired(now time.Time) {
	for id, pg := range p.m {
		if pg.loaded() && now.Sub(pg.at) >= p.ttl {
			delete(p.m, id)
		}
	}
}

// loadSalePage reads what the page shows: the activity, read afresh (the
// page itself is the once-a-second cache, so a sale ended early shows ENDED
// within a second) and the units left.
func (s *Server) loadSalePage(ctx context.Context, id int64) ([]byte, error) {
	act, err := s.sales.Activity(ctx, id)
	if err != nil {
		return nil, err
	}
	page := ActivityPage{ActivityID: act.ID, Name: act.Name, ItemID: act.ItemID, StartsAt: act.StartsAt.UTC(), EndsAt: act.EndsAt.UTC(),
		PerUserLimit: act.PerUserLimit, Items: make([]ActivityPageItem, 0, len(act.Items))}
	items := make([]reservation.Item, len(act.Items))
	for i, it := range act.Items {
		items[i] = reservation.In(act.ItemID, it.ItemID)
	}
	// One read of Redis for every size (they share the sale's hash tag).
	snaps, err := s.intake.Stock.Stocks(ctx, items)
	if err != nil {
		return nil, err
	}
	for i, it := range act.Items {
		snap := snaps[i]
		left := snap.Stock
		if !snap.Warmed {
			if left, err = s.sales.ItemStock(ctx, it.ItemID); err != nil {
				return nil, err
			}
		}
		left = max(left, 0)
		pi := ActivityPageItem{ItemID: it.ItemID, Label: it.Label, UnitsLeft: left, State: ActivityLive}
		if left == 0 {
			pi.State = ActivitySoldOut
		}
		if price := priceView(it.SalePrice); price.Price != nil {
			pi.SalePrice, pi.Currency = price.Price, price.Currency
		}
		page.UnitsLeft += left
		page.Items = append(page.Items, pi)
	}
	// SOLD_OUT only when every item is: the total is then 0.
	now := s.salePages.now()
	page.State = saleState(act, page.UnitsLeft, now)
	switch act.Selling() {
	case activity.SellsInRoom:
		seed := room.Seed(act.Room.Seed)
		page.WaitingRoom, page.SeedCommitment = true, seed.Commitment()
		if !now.Before(act.StartsAt) {
			page.Seed = seed.String()
		}
	case activity.SellsByDraw:
		sum, err := s.draws.Summary(ctx, act.ID)
		if err != nil {
			return nil, err
		}
		page.Draw = &ActivityPageDraw{State: draws.State(sum.State, act, now), Entries: sum.Entries,
			Commitment: act.Draw.Commitment, EntriesCloseAt: act.Draw.EntriesCloseAt.UTC()}
	}
	page.Mode, page.Access = act.Mode(), string(act.AccessMode())
	if price := priceView(act.SalePrice); price.Price != nil {
		page.SalePrice, page.Currency = price.Price, price.Currency
	}
	return json.Marshal(page)
}

// salePageView answers the sale page to anyone (no token), from memory,
// with Cache-Control and an ETag so browsers and CDNs take most of a
// refresh storm; a matching If-None-Match gets 304.
func (s *Server) salePageView(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	pg, err := s.salePages.get(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Cache-Control", "public, max-age=1")
	h.Set("ETag", pg.etag)
	if etagMatches(c.GetHeader("If-None-Match"), pg.etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", pg.body)
}

// etagMatches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
