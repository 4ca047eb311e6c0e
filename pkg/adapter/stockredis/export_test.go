package stockredis

import "github.com/redis/go-redis/v9"

// ReserveTogether runs rs, all of one unbucketed item, as one batch of the
// reserve script (the batch the reserver would form had they arrived
// together), and returns each order's answer.
func (s *Store) ReserveTogether(rs []Reservation) ([]ReserveResult, []error) {
	calls := make([]reserveCall, len(rs))
	for i, r := range rs {
		calls[i] = reserveCall{r: r, first: s.Keys(r.ItemID).Stock(), reply: make(chan reserveAnswer, 1)}
	}
	s.reserves.run(calls)
	out, errs := make([]ReserveResult, len(rs)), make([]error, len(rs))
	for i, c := range calls {
		a := <-c.reply
		out[i], errs[i] = a.res, a.err
	}
	return out, errs
}

// Client is the store's Redis client, for this package's tests' own reads
// and writes (the store hands out no client to other packages).
func (s *Store) Client() redis.UniversalClient { return s.rdb }
