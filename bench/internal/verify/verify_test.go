package verify

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// healthy is a drained, sold-out run with nothing wrong: stock 200, 200
// live orders of one unit.
func healthy() Observation {
	return Observation{
		InitialStock: 200, DBStock: 0, RedisWarmed: true, RedisStock: 0, Inflight: 0,
		LiveUnits: 200, LiveOrders: 200, Accepted: 200, DemandUnits: 50000, Quantity: 1, Drained: true,
	}
}

func names(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Observation)
		want   []string
		by     map[string]int64
	}{
		{name: "healthy sold-out run", change: func(*Observation) {}},
		{
			name:   "stock left over with enough demand and no faults",
			change: func(o *Observation) { o.LiveUnits, o.LiveOrders, o.DBStock, o.RedisStock = 190, 190, 10, 10 },
			want:   []string{SoldExactlyStock},
			by:     map[string]int64{SoldExactlyStock: 10},
		},
		{
			name: "stock left over is fine when demand was short",
			change: func(o *Observation) {
				o.LiveUnits, o.LiveOrders, o.DBStock, o.RedisStock, o.DemandUnits = 150, 150, 50, 50, 150
			},
		},
		{
			name: "stock left over is fine after faults",
			change: func(o *Observation) {
				o.LiveUnits, o.LiveOrders, o.DBStock, o.RedisStock, o.Errors = 190, 190, 10, 10, 3
			},
		},
		{
			name: "less than one order's worth left is a sell-out",
			change: func(o *Observation) {
				o.Quantity, o.LiveUnits, o.DBStock, o.RedisStock = 3, 198, 2, 2
			},
		},
		{
			name:   "oversell shows in MySQL",
			change: func(o *Observation) { o.LiveUnits, o.LiveOrders, o.DBStock, o.RedisStock = 213, 213, -13, -13 },
			want:   []string{NoOversell, NonNegativeStocks},
			by:     map[string]int64{NoOversell: 13, NonNegativeStocks: -13},
		},
		{
			name:   "orders the stock row never paid for",
			change: func(o *Observation) { o.LiveUnits, o.LiveOrders = 205, 205 },
			want:   []string{NoOversell, StockAccounting},
			by:     map[string]int64{NoOversell: 5, StockAccounting: -5},
		},
		{
			name:   "a buyer with two live orders",
			change: func(o *Observation) { o.ExtraLiveOrders, o.UsersOverLimit = 37, 30 },
			want:   []string{OneLivePerUser},
			by:     map[string]int64{OneLivePerUser: 37},
		},
		{
			name:   "accepted orders that never became final",
			change: func(o *Observation) { o.Unresolved = []string{"A", "B"} },
			want:   []string{Every202Final},
			by:     map[string]int64{Every202Final: 2},
		},
		{
			name:   "a replayed key answered with another order",
			change: func(o *Observation) { o.ReplayChecked, o.ReplayMismatches = 40, 1 },
			want:   []string{ReplaySameOrder},
			by:     map[string]int64{ReplaySameOrder: 1},
		},
		{
			name:   "Redis and MySQL disagree after draining",
			change: func(o *Observation) { o.RedisStock = 3 },
			want:   []string{MySQLEqualsRedis},
			by:     map[string]int64{MySQLEqualsRedis: 3},
		},
		{
			name:   "Redis lost the stock key",
			change: func(o *Observation) { o.RedisWarmed, o.RedisStock = false, 0 },
			want:   []string{MySQLEqualsRedis},
		},
		{
			name: "not drained: the stocks may differ, but the wait timed out",
			change: func(o *Observation) {
				o.Drained, o.Inflight, o.RedisStock, o.LiveUnits, o.LiveOrders, o.DBStock = false, 4, 0, 196, 196, 4
			},
			want: []string{Drained},
			by:   map[string]int64{Drained: 4},
		},
		{
			name:   "an order nobody was told about, without faults",
			change: func(o *Observation) { o.Unacknowledged = 1 },
			want:   []string{NoPhantomOrders},
		},
		{
			name:   "an order nobody was told about is expected after a 503",
			change: func(o *Observation) { o.Unacknowledged, o.Errors = 1, 1 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := healthy()
			tt.change(&o)
			got := Check(o)
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Fatalf("violations = %v, want %v", got, tt.want)
			}
			for _, v := range got {
				if want, ok := tt.by[v.Invariant]; ok && v.By != want {
					t.Errorf("%s off by %d, want %d", v.Invariant, v.By, want)
				}
				if v.Detail == "" {
					t.Errorf("%s has no detail", v.Invariant)
				}
			}
		})
	}
}

func TestCheckReplays(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name                string
		answers             []Answer
		checked, mismatches int64
	}{
		{
			name:    "keys used once are not checked",
			answers: []Answer{{User: 1, Key: "a", Accepted: true, OrderNo: "X"}, {User: 2, Key: "a", Accepted: true, OrderNo: "Y"}},
		},
		{
			name: "a retry after the 202 gets the same order",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms, Accepted: true, OrderNo: "X"},
				{User: 1, Key: "a", Sent: 10 * ms, Done: 12 * ms, Accepted: true, OrderNo: "X"},
			},
			checked: 1,
		},
		{
			name: "a retry after the 202 gets another order",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms, Accepted: true, OrderNo: "X"},
				{User: 1, Key: "a", Sent: 10 * ms, Done: 12 * ms, Accepted: true, OrderNo: "Y"},
			},
			checked: 1, mismatches: 1,
		},
		{
			name: "a retry after the 202 is refused",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms, Accepted: true, OrderNo: "X"},
				{User: 1, Key: "a", Sent: 10 * ms, Done: 12 * ms},
			},
			checked: 1, mismatches: 1,
		},
		{
			name: "a concurrent duplicate refused before the 202 arrived is no replay",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms, Accepted: true, OrderNo: "X"},
				{User: 1, Key: "a", Sent: 1 * ms, Done: 2 * ms},
			},
			checked: 1,
		},
		{
			name: "a key never accepted has nothing to replay",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms},
				{User: 1, Key: "a", Sent: 10 * ms, Done: 12 * ms},
			},
			checked: 1,
		},
		{
			name: "the same key of two users is two keys",
			answers: []Answer{
				{User: 1, Key: "a", Sent: 0, Done: 5 * ms, Accepted: true, OrderNo: "X"},
				{User: 2, Key: "a", Sent: 10 * ms, Done: 12 * ms, Accepted: true, OrderNo: "Y"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m := CheckReplays(tt.answers)
			if c != tt.checked || m != tt.mismatches {
				t.Fatalf("checked %d, mismatches %d; want %d, %d", c, m, tt.checked, tt.mismatches)
			}
		})
	}
}

func TestCheckItems(t *testing.T) {
	// A sale of three sizes; every size's observation carries the sale's
	// count of buyers over the limit.
	sale := func(change func([]Observation)) []Observation {
		items := []Observation{healthy(), healthy(), healthy()}
		items[1].InitialStock, items[1].LiveUnits, items[1].LiveOrders, items[1].Accepted = 50, 50, 50, 50
		change(items)
		return items
	}
	labels := []string{"EU 41", "EU 42", "EU 43"}
	tests := []struct {
		name   string
		items  []Observation
		want   []string
		detail []string
	}{
		{name: "every size sold out cleanly", items: sale(func([]Observation) {})},
		{
			name: "one size oversold while the others undersell: caught on that size",
			items: sale(func(o []Observation) {
				o[1].LiveUnits, o[1].LiveOrders, o[1].DBStock, o[1].RedisStock = 51, 51, -1, -1
				o[2].LiveUnits, o[2].LiveOrders, o[2].DBStock, o[2].RedisStock, o[2].DemandUnits = 199, 199, 1, 1, 199
			}),
			want:   []string{NoOversell, NonNegativeStocks},
			detail: []string{"EU 42: ", "EU 42: "},
		},
		{
			name:   "Redis and MySQL apart on one size",
			items:  sale(func(o []Observation) { o[2].RedisStock = 3 }),
			want:   []string{MySQLEqualsRedis},
			detail: []string{"EU 43: "},
		},
		{
			name: "a buyer with two live orders across sizes is counted once for the sale",
			items: sale(func(o []Observation) {
				for i := range o {
					o[i].ExtraLiveOrders, o[i].UsersOverLimit = 2, 1
				}
			}),
			want:   []string{OneLivePerUser},
			detail: []string{"1 users hold 2 live orders"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckItems(labels, tt.items)
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Fatalf("violations = %v, want %v", got, tt.want)
			}
			for i, v := range got {
				if !strings.HasPrefix(v.Detail, tt.detail[i]) {
					t.Errorf("violation %d's detail %q does not start with %q", i, v.Detail, tt.detail[i])
				}
			}
		})
	}
}
