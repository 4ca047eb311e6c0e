package placing

import (
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A request that repeats an Idempotency-Key while the first request with
// it is still placing its order must not be promised that order: the first
// may yet fail to publish it and answer 503, and a 202 given meanwhile
// would name an order nobody writes (the replicated soak's seed 2,
// docs/soak.md). So this instance remembers the orders it is placing and
// those it placed lately, with their answers: a repeat it sees waits for
// the first's answer and gets the same. A repeat on another instance
// cannot see them; it is answered order.ErrInProgress while the order is
// in neither MySQL nor a final state and younger than inFlightFor (replay).

// recentFor is how long a placed order's answer is kept after the flight
// began (between recentFor and twice that): a repeat after it finds the
// order in MySQL, written by then.
const recentFor = 5 * time.Second

// inFlightFor bounds how long a request may still be placing its order
// after the reserve: the publish (2 × the publisher's write timeout, 6 s by
// default) and then its give-up (5 s), within the api's 15 s write timeout.
const inFlightFor = 15 * time.Second

// flight is one order this instance is placing: done is closed once the
// request has its answer (p, err).
type flight struct {
	activity, item int64
	quantity       int
	done           chan struct{}
	p              Placed
	err            error
}

// finish records the first request's answer and lets the repeats have it.
func (f *flight) finish(p Placed, err error) {
	f.p, f.err = p, err
	close(f.done)
}

// sameRequest reports whether a repeat of the key asks what the first did.
func (f *flight) sameRequest(r PlaceRequest, item reservation.Item) bool {
	return f.activity == r.ActivityID && f.item == item.ID && f.quantity == r.Quantity
}

// flights are the orders this instance placed in the last recentFor to
// twice that, by number: two maps, the older dropped as a whole.
type flights struct {
	mu        sync.Mutex
	cur, prev map[string]*flight
	rotated   time.Time
}

// start records that the request r is placing order no at now.
func (fs *flights) start(no string, r PlaceRequest, item reservation.Item, now time.Time) *flight {
	f := &flight{activity: r.ActivityID, item: item.ID, quantity: r.Quantity, done: make(chan struct{})}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.cur == nil || now.Sub(fs.rotated) >= recentFor {
		fs.prev, fs.cur, fs.rotated = fs.cur, make(map[string]*flight), now
	}
	fs.cur[no] = f
	return f
}

// find is the flight of order no on this instance, nil when there is none
// (another instance's order, or one placed longer ago).
func (fs *flights) find(no string) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.cur[no]; ok {
		return f
	}
	return fs.prev[no]
}
