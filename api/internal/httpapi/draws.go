package httpapi

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// EntryBody is the body of POST /api/v1/activities/{id}/entries.
type EntryBody struct {
	// ItemID is the size entered for: required for a sale of several
	// items; left out for a sale of one. null is refused.
	ItemID optional[int64] `json:"item_id,omitzero"`
	// Quantity left out is 1; null is refused.
	Quantity optional[int] `json:"quantity,omitzero"`
	// AccessCode is the buyer's presale code, as typed: a code_required
	// sale's entry must carry one, and holds one of its uses.
	AccessCode string `json:"access_code,omitempty"`
}

// The states of an entry, as GET .../entries/me answers them.
const (
	EntryEntered     = "ENTERED"      // before the draw
	EntryWon         = "WON"          // drawn, or an alternate the stock came back to: it has an order
	EntryAlternate   = "ALTERNATE"    // waits, in rank order, for units of its size to come back
	EntryNotSelected = "NOT_SELECTED" // the sale ended without giving it units
)

// EntryView is a buyer's entry.
type EntryView struct {
	EntryID    string    `json:"entry_id"`
	ActivityID int64     `json:"activity_id"`
	ItemID     int64     `json:"item_id"`
	Quantity   int       `json:"quantity"`
	State      string    `json:"state"`
	EnteredAt  time.Time `json:"entered_at"`
	// OrderNo is the order made for a WON entry (once it is made: the
	// consumer does so within seconds of the draw).
	OrderNo string `json:"order_no,omitempty"`
	// AlternateRank is an ALTERNATE's place among its size's alternates
	// still waiting: 1 is next.
	AlternateRank int64 `json:"alternate_rank,omitempty"`
	// Commitment is the draw's, fixed when the sale was made: with the
	// entry id, item and quantity it makes this answer the buyer's receipt
	// (reconciler verify-draw --receipt holds the published record to it).
	Commitment string `json:"commitment"`
}

func entryView(e draw.BuyerEntry, a activity.Activity, now time.Time) EntryView {
	v := EntryView{EntryID: e.ID, ActivityID: e.ActivityID, ItemID: e.ItemID, Quantity: e.Quantity, EnteredAt: e.CreatedAt.UTC(),
		Commitment: a.Draw.Commitment}
	if e.Issued {
		// Only an order whose event reached Kafka: an alternate's number
		// may still be taken back when its reserve is refused.
		v.OrderNo = e.OrderNo
	}
	over := !now.Before(a.EndsAt) || !a.CancelledAt.IsZero()
	switch {
	case e.Issued || e.Outcome == draw.Won:
		v.State = EntryWon
	case over:
		v.State = EntryNotSelected
	case e.Outcome == draw.Alternate:
		v.State, v.AlternateRank = EntryAlternate, e.AlternatesBefore+1
	default:
		v.State = EntryEntered
	}
	return v
}

// drawSale is the path's sale, which must be a draw.
func (s *Server) drawSale(c *gin.Context) (activity.Activity, bool) {
	return s.saleOf(c, func(a activity.Activity) bool { return a.Selling() == activity.SellsByDraw }, "sale %d is not a draw: order it at /api/v1/orders")
}

// enterDraw records the buyer's entry: 201 for a new one, 200 with the
// entry they made before (unchanged) when they entered already, so a
// retry is safe whatever became of the first answer.
func (s *Server) enterDraw(c *gin.Context) {
	a, ok := s.drawSale(c)
	if !ok {
		return
	}
	var b EntryBody
	if c.Request.ContentLength != 0 && !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"quantity", b.Quantity}, field{"item_id", b.ItemID}); err != nil {
		s.fail(c, err)
		return
	}
	q := 1
	if b.Quantity.Set {
		q = b.Quantity.Value
	}
	e, created, err := s.draws.Enter(c.Request.Context(), a, claimsOf(c).UserID, b.ItemID.Value, q, b.AccessCode, addrKey(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, entryView(e, a, s.intake.Now()))
}

// myEntry answers the buyer's entry and what became of it.
func (s *Server) myEntry(c *gin.Context) {
	a, ok := s.drawSale(c)
	if !ok {
		return
	}
	e, err := s.draws.Entry(c.Request.Context(), a, claimsOf(c).UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, entryView(e, a, s.intake.Now()))
}

// recordFormat is the version of the record's JSON in its ETag: a change
// of what the api writes for a record changes every record's ETag, so no
// cache keeps serving the old form as the new.
const recordFormat = "1"

// recordPageTimeout is how long a page of a record may take to reach the
// client: the server's WriteTimeout (15 s) bounds a whole answer, which a
// record of a million entries (~100 MB) can outlast on a slow link, so each
// page sets the deadline again; a client that stalls is still cut off.
const recordPageTimeout = 15 * time.Second

// drawRecord publishes the sale's draw to anyone (no token): the
// commitment, and once drawn everything draw.Verify recomputes. A drawn
// record never changes: it is written as MySQL's pages of it are read (the
// api holds a page, not the record), gzipped when the client takes it,
// and cached anywhere for a year under an ETag derived from its head (the
// sale, commitment, seed, digest, sizes and restocks) and its count of
// entries, which fix the rest; If-None-Match with that tag answers 304
// with no record read. A draw not yet drawn changes with every entry:
// no-store, no ETag.
func (s *Server) drawRecord(c *gin.Context) {
	a, ok := s.saleOf(c, func(a activity.Activity) bool { return a.Selling() == activity.SellsByDraw }, "sale %d is not a draw")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	head, entries, err := s.draws.RecordHead(ctx, a)
	if err != nil {
		s.fail(c, err)
		return
	}
	hb, err := draw.HeadJSON(head)
	if err != nil {
		s.fail(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Vary", "Accept-Encoding")
	if head.State != draw.StateDrawn {
		h.Set("Cache-Control", "no-store")
		c.Data(http.StatusOK, "application/json; charset=utf-8", hb)
		return
	}
	tag := recordTag(hb, entries)
	gz := acceptsGzip(c.GetHeader("Accept-Encoding"))
	if gz {
		// Another representation, another strong tag; either names the
		// same record in If-None-Match.
		h.Set("ETag", `"`+tag+`-gzip"`)
	} else {
		h.Set("ETag", `"`+tag+`"`)
	}
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	if noneMatch(c.GetHeader("If-None-Match"), tag) {
		c.Status(http.StatusNotModified)
		c.Writer.WriteHeaderNow()
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	var (
		w  io.Writer = c.Writer
		zw *gzip.Writer
	)
	if gz {
		// BestSpeed: a million entries' ~100 MB compress to about half in
		// about a second a core; the default level costs several times
		// that for a few per cent less.
		zw, _ = gzip.NewWriterLevel(c.Writer, gzip.BestSpeed)
		w = zw
		h.Set("Content-Encoding", "gzip")
	}
	c.Status(http.StatusOK)
	rc := http.NewResponseController(c.Writer)
	rw := draw.NewRecordWriter(w, hb)
	err = s.draws.RecordEntries(ctx, a, func(page []draw.Ranked) error {
		_ = rc.SetWriteDeadline(time.Now().Add(recordPageTimeout)) // not every writer has one (tests)
		return rw.Entries(page)
	})
	if err == nil {
		err = rw.Close()
	}
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err == nil {
		return
	}
	if !c.Writer.Written() {
		// Nothing sent yet (MySQL failed at the first page): a plain error.
		for _, k := range []string{"ETag", "Cache-Control", "Content-Encoding"} {
			h.Del(k)
		}
		s.fail(c, err)
		return
	}
	// A record cut short must not pass for a whole one: the connection is
	// dropped, so the client sees the answer fail, not end.
	s.log.Error("draw record cut short", "request_id", c.GetString(ctxRequestID), "activity_id", a.ID, "error", err)
	panic(http.ErrAbortHandler)
}

// recordTag is a drawn record's ETag (without its quotes): SHA-256 of the
// record's format, its head's JSON and its count of entries. The seed,
// the digest of the list and the sizes' stock fix the ranking and every
// outcome, so the tag changes whenever the record could.
func recordTag(head []byte, entries int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n", recordFormat, entries)
	h.Write(head)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// noneMatch reports whether an If-None-Match header names the record of
// tag (plain or gzipped; weak comparison, RFC 9110 13.1.2), or is "*".
func noneMatch(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == `"`+tag+`"` || t == `"`+tag+`-gzip"` {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip: named
// (or x-gzip, or *) with a q above 0 (RFC 9110 12.5.3).
func acceptsGzip(header string) bool {
	star, gzip := false, -1 // gzip: -1 not named, 0 refused, 1 taken
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		taken := true
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			taken = err == nil && q > 0
		}
		switch coding {
		case "gzip", "x-gzip":
			if taken {
				gzip = 1
			} else if gzip < 0 {
				gzip = 0
			}
		case "*":
			star = taken
		}
	}
	return gzip == 1 || gzip < 0 && star
}

// ActivityPageDraw is a draw sale's draw on its page.
type ActivityPageDraw struct {
	State          string    `json:"state"`
	Entries        int64     `json:"entries"`
	Commitment     string    `json:"commitment"`
	EntriesCloseAt time.Time `json:"entries_close_at"`
}

// DrawView is a draw sale's draw in the admin's answers.
type DrawView struct {
	EntriesCloseAt time.Time `json:"entries_close_at"`
	Commitment     string    `json:"commitment"`
}

func drawView(d activity.Draw) *DrawView {
	if !d.On() {
		return nil
	}
	return &DrawView{EntriesCloseAt: d.EntriesCloseAt.UTC(), Commitment: d.Commitment}
}
