package eventcheck

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Kind names a broken promise.
type Kind string

// The promises a delivery can break.
const (
	// Missing: an event MySQL committed for a stream of the sales never
	// arrived.
	Missing Kind = "missing"
	// OutOfOrder: an event first arrived after a later event of its
	// stream (a redelivery of an earlier one is not this).
	OutOfOrder Kind = "out_of_order"
	// StaleStatus: an order's last event delivered (its highest seq) does
	// not state the order's status in MySQL.
	StaleStatus Kind = "stale_status"
	// BadStart: a stream's first event (seq 1) is not one that opens a
	// stream (outbox.Type.Opens).
	BadStart Kind = "bad_start"
	// UnknownStream: an event names an order or entry MySQL does not have.
	UnknownStream Kind = "unknown_stream"
	// UnknownEvent: MySQL has the stream but its outbox no event of the
	// delivered id.
	UnknownEvent Kind = "unknown_event"
	// Differs: the event is not the outbox's event of its id (its type,
	// timestamp or data differ).
	Differs Kind = "differs"
)

// Violation is one broken promise: of which stream (an order number, or
// an entry's stream), which event when it is about one, and what was seen.
type Violation struct {
	Kind   Kind   `json:"kind"`
	Stream string `json:"stream"`
	ID     string `json:"id,omitempty"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	s := string(v.Kind) + " " + v.Stream
	if v.ID != "" {
		s += " " + v.ID
	}
	return s + ": " + v.Detail
}

// Report is what a check found: the sales' streams and events in MySQL,
// what arrived, and every broken promise.
type Report struct {
	Sales []int64 `json:"sales"`
	// Orders and Entries are the sales' streams in MySQL; Committed the
	// events MySQL counts for them.
	Orders    int `json:"orders"`
	Entries   int `json:"entries"`
	Committed int `json:"committed"`
	// Arrivals counts every event delivered, Distinct their ids, and
	// Duplicates the arrivals of an id that had arrived before.
	Arrivals   int `json:"arrivals"`
	Distinct   int `json:"distinct"`
	Duplicates int `json:"duplicates"`
	// Outside counts the ids delivered of streams MySQL has in other
	// sales: each is held to the outbox and to its stream's order, but
	// their streams' completeness and status are not checked.
	Outside    int         `json:"outside"`
	Violations []Violation `json:"violations"`
}

// OK says whether no promise was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Of returns the violations of kind k.
func (r Report) Of(k Kind) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Kind == k {
			out = append(out, v)
		}
	}
	return out
}

// Summary is one line of the counts and the broken promises by kind.
func (r Report) Summary() string {
	s := fmt.Sprintf("sales %v: %d orders, %d entries, %d events committed; %d delivered (%d distinct, %d duplicates, %d of other sales); ",
		r.Sales, r.Orders, r.Entries, r.Committed, r.Arrivals, r.Distinct, r.Duplicates, r.Outside)
	if r.OK() {
		return s + "no broken promise"
	}
	by := map[Kind]int{}
	for _, v := range r.Violations {
		by[v.Kind]++
	}
	kinds := make([]string, 0, len(by))
	for k, n := range by {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(kinds)
	return s + fmt.Sprintf("%d broken promises (%s)", len(r.Violations), strings.Join(kinds, ", "))
}

// String is the summary, then each violation on a line of its own.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// stream is what arrived of one stream.
type stream struct {
	// high is the highest seq that has arrived; last its event.
	high int
	last outbox.Event
}

// comparison is one Compare's state.
type comparison struct {
	rep     Report
	inSale  map[int64]bool
	heads   map[string]outbox.Head
	outbox  map[string]outbox.Event
	arrived map[string]bool
	streams map[string]*stream
	said    map[Violation]bool
}

// Compare holds delivered, the events a receiver got in the order they
// arrived, to heads and committed, what MySQL holds of the streams of sales
// and of the streams delivered names (Store), and reports every broken
// promise.
func Compare(sales []int64, heads []outbox.Head, committed, delivered []outbox.Event) Report {
	c := comparison{rep: Report{Sales: slices.Clone(sales)}, inSale: map[int64]bool{}, heads: map[string]outbox.Head{},
		outbox: map[string]outbox.Event{}, arrived: map[string]bool{}, streams: map[string]*stream{}, said: map[Violation]bool{}}
	for _, s := range sales {
		c.inSale[s] = true
	}
	for _, h := range heads {
		c.heads[h.Stream] = h
	}
	for _, e := range committed {
		c.outbox[e.ID] = e
	}
	for _, e := range delivered {
		c.arrival(e)
	}
	for _, h := range heads {
		if c.inSale[h.Sale] {
			c.complete(h)
		}
	}
	return c.rep
}

// arrival checks one delivered event: its stream, its contents, and, the
// first time its id arrives, its place in its stream.
func (c *comparison) arrival(e outbox.Event) {
	c.rep.Arrivals++
	again := c.arrived[e.ID]
	if again {
		c.rep.Duplicates++
	} else {
		c.arrived[e.ID] = true
		c.rep.Distinct++
	}
	name := e.Stream()
	h, known := c.heads[name]
	if !known {
		what := fmt.Sprintf("MySQL has no order %s (a %s event arrived)", e.Data.OrderNo, e.Type)
		switch {
		case e.Type.OfEntry():
			what = fmt.Sprintf("MySQL has no draw entry %s (a %s event arrived)", e.Data.EntryID, e.Type)
		case name == "":
			what = fmt.Sprintf("event %s (%s) names no order", e.ID, e.Type)
		}
		c.violate(UnknownStream, name, "", what)
		return
	}
	if !again && !c.inSale[h.Sale] {
		c.rep.Outside++
	}
	if want, ok := c.outbox[e.ID]; !ok {
		c.violate(UnknownEvent, name, e.ID, fmt.Sprintf("the outbox holds no event of this id (MySQL counts %d for the stream)", h.Seq))
	} else if d := differences(want, e); d != "" {
		c.violate(Differs, name, e.ID, d)
	}
	if again {
		return
	}
	s := c.streams[name]
	if s == nil {
		s = &stream{}
		c.streams[name] = s
	}
	if e.Data.Seq < s.high {
		c.violate(OutOfOrder, name, e.ID, fmt.Sprintf("seq %d first arrived after seq %d", e.Data.Seq, s.high))
	}
	if e.Data.Seq > s.high {
		s.high, s.last = e.Data.Seq, e
	}
	if e.Data.Seq == 1 && !e.Type.Opens() {
		c.violate(BadStart, name, e.ID, fmt.Sprintf("the stream's first event is %s", e.Type))
	}
}

// complete checks that each event MySQL counts for h's stream arrived,
// and that the last one states the stream's status.
func (c *comparison) complete(h outbox.Head) {
	if _, ok := outbox.EntryOfStream(h.Stream); ok {
		c.rep.Entries++
	} else {
		c.rep.Orders++
	}
	c.rep.Committed += h.Seq
	for seq := 1; seq <= h.Seq; seq++ {
		id := outbox.IDOf(h.Stream, seq)
		if c.arrived[id] {
			continue
		}
		what := "not in the outbox either"
		if e, ok := c.outbox[id]; ok {
			what = "the outbox's " + string(e.Type)
		}
		c.violate(Missing, h.Stream, id, fmt.Sprintf("event %d of %d never arrived (%s)", seq, h.Seq, what))
	}
	s := c.streams[h.Stream]
	if h.Status == "" || s == nil || s.last.Data.Status == h.Status {
		return
	}
	c.violate(StaleStatus, h.Stream, s.last.ID, fmt.Sprintf("the last event delivered (seq %d, %s) states %s; MySQL has %s",
		s.high, s.last.Type, s.last.Data.Status, h.Status))
}

// violate records a violation once.
func (c *comparison) violate(k Kind, stream, id, detail string) {
	v := Violation{Kind: k, Stream: stream, ID: id, Detail: detail}
	if !c.said[v] {
		c.said[v] = true
		c.rep.Violations = append(c.rep.Violations, v)
	}
}

// differences names what of got is not as the outbox holds it (want),
// field by field; empty when nothing is.
func differences(want, got outbox.Event) string {
	var d []string
	if got.Type != want.Type {
		d = append(d, fmt.Sprintf("type %s, the outbox's %s", got.Type, want.Type))
	}
	if !got.Time.Equal(want.Time) {
		d = append(d, fmt.Sprintf("timestamp %s, the outbox's %s", got.Time.UTC().Format(timeLayout), want.Time.UTC().Format(timeLayout)))
	}
	if !reflect.DeepEqual(got.Data, want.Data) {
		w, g := fields(want.Data), fields(got.Data)
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if g[k] != w[k] {
				d = append(d, fmt.Sprintf("data.%s %s, the outbox's %s", k, orNone(g[k]), orNone(w[k])))
			}
		}
	}
	return strings.Join(d, "; ")
}

const timeLayout = "2006-01-02T15:04:05.999999Z07:00"

// fields is data's JSON, field by field, each value as JSON.
func fields(data outbox.Data) map[string]string {
	b, _ := json.Marshal(data) // plain fields: it cannot fail
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}
