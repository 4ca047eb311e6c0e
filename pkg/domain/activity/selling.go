package activity

// Selling is how a sale sells: the one value the services switch on to
// decide what a buyer's order goes through.
type Selling int

// The ways a sale sells.
const (
	// SellsFirstCome is a sale whose buyers order directly: whoever
	// reserves first buys.
	SellsFirstCome Selling = iota
	// SellsInRoom is a sale with a waiting room: an order must hold an
	// admission of the buyer's, and uses it up.
	SellsInRoom
	// SellsByDraw is a draw: buyers enter instead of ordering, and the
	// draw makes the orders of the entries it picks.
	SellsByDraw
)

// Selling is how the sale sells: by draw when it has a draw, in its room
// when it has a waiting room (never both: CheckDraw), first come otherwise.
func (a Activity) Selling() Selling {
	switch {
	case a.Draw.On():
		return SellsByDraw
	case a.Room.On():
		return SellsInRoom
	}
	return SellsFirstCome
}

// String names the way of selling, for logs and errors.
func (s Selling) String() string {
	switch s {
	case SellsFirstCome:
		return "first come"
	case SellsInRoom:
		return "waiting room"
	case SellsByDraw:
		return "draw"
	}
	return "unknown selling"
}
