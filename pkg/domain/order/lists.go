package order

// Filter narrows a user's order list; zero fields do not filter.
type Filter struct {
	ActivityID int64
	Status     Status
}

// Listed is an order with its row id, the position keyset pagination
// resumes from.
type Listed struct {
	ID    int64
	Order Order
}

// StatusTally is what an activity's orders in one status add up to.
type StatusTally struct {
	Orders int64
	Units  int64
	// Amount sums the amounts of the orders that have a price; Priced
	// counts them.
	Amount int64
	Priced int64
}
