package order

// Status is an order's state as the API reports it and as MySQL stores it.
type Status string

// The statuses. PENDING exists only in Redis (reserved, on its way); the
// others are rows in MySQL.
const (
	Pending Status = "PENDING"
	Created Status = "CREATED"
	Failed  Status = "FAILED"
	Paid    Status = "PAID"
	Closed  Status = "CLOSED"
)

// Live reports whether an order in this status holds stock and the buyer's
// quota (at most one live order per user per activity).
func (s Status) Live() bool { return s == Created || s == Paid }

// Final reports whether the order has left the pipeline (it is in MySQL).
func (s Status) Final() bool { return s != Pending }

// transitions lists, for each status an order may leave, the statuses it
// may become. An order is written to MySQL as CREATED or FAILED when it
// leaves Redis; a CREATED order is paid or closed (cancelled, timed out,
// its sale cancelled); FAILED, PAID and CLOSED are final.
var transitions = map[Status][]Status{
	Pending: {Created, Failed},
	Created: {Paid, Closed},
}

// CanBecome reports whether an order in status s may move to next.
func (s Status) CanBecome(next Status) bool {
	for _, n := range transitions[s] {
		if n == next {
			return true
		}
	}
	return false
}

// BecomesFrom lists the statuses, in a fixed order, that may move to next:
// the WHERE status IN (...) of an update that makes an order next.
func BecomesFrom(next Status) []Status {
	var out []Status
	for _, s := range []Status{Pending, Created, Failed, Paid, Closed} {
		if s.CanBecome(next) {
			out = append(out, s)
		}
	}
	return out
}

// Transition is the result of a compare-and-set on an order's status.
type Transition struct {
	// Won is true when this call moved the order.
	Won bool
	// Order is the order after the attempt (the winner's state if another
	// transition won).
	Order Order
	// SaleCancelled is true when the order was not paid because its sale
	// was cancelled (the closer closes it).
	SaleCancelled bool
}
