package order

import (
	"slices"
	"testing"
)

// The allowed status changes: in from Redis as CREATED or FAILED, CREATED
// paid or closed, nothing out of FAILED, PAID or CLOSED.
func TestStatusCanBecome(t *testing.T) {
	all := []Status{Pending, Created, Failed, Paid, Closed}
	allowed := map[[2]Status]bool{
		{Pending, Created}: true, {Pending, Failed}: true,
		{Created, Paid}: true, {Created, Closed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				if got, want := from.CanBecome(to), allowed[[2]Status{from, to}]; got != want {
					t.Fatalf("%s.CanBecome(%s) = %v, want %v", from, to, got, want)
				}
			})
		}
	}
	for _, tc := range []struct {
		next Status
		want []Status
	}{
		{Paid, []Status{Created}},
		{Closed, []Status{Created}},
		{Created, []Status{Pending}},
		{Pending, nil},
	} {
		if got := BecomesFrom(tc.next); !slices.Equal(got, tc.want) {
			t.Errorf("BecomesFrom(%s) = %v, want %v", tc.next, got, tc.want)
		}
	}
}
