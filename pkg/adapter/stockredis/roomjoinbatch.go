package stockredis

import (
	"context"
	"fmt"
	"sync"

	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/batch"
)

// joinBatch bounds how many joins one run of the place script takes; it
// blocks Redis for a few microseconds a join.
const joinBatch = 64

// joinWorkers is how many runs of joins may be in flight at once.
const joinWorkers = 4

// roomJoiner runs the joins of one room that arrive together in one run of
// the place script, as the reserver does orders: a worker takes the first
// waiting join and every other one already queued (no timer), groups them
// by room and runs the script once per group. A crowd joining before a
// start costs Redis and the api one round trip per batch, not per buyer.
// Each join in a run is handled as if alone, so a lost answer is resolved
// for every buyer of the batch by running it again (roomPlaces).
type roomJoiner struct {
	rooms *Rooms
	queue chan placeCall
	once  sync.Once
}

// join queues c and waits for its place, or for ctx to end: a join whose
// caller left may still have run, and is resolved by joining again.
func (j *roomJoiner) join(ctx context.Context, c placeCall) (room.Place, error) {
	j.once.Do(func() { j.queue = batch.Start(joinWorkers, 4*joinBatch, joinBatch, j.runAll) })
	c.reply = make(chan placeAnswer, 1)
	select {
	case j.queue <- c:
	case <-ctx.Done():
		return room.Place{}, unavailable("room join", fmt.Errorf("%w: %w", errNotSent, ctx.Err()))
	}
	select {
	case a := <-c.reply:
		return a.p, a.err
	case <-ctx.Done():
		return room.Place{}, unavailable("room join", ctx.Err())
	}
}

// runAll runs the script once per room of calls (a sale and its start and
// keys' end: a change of the start before it reaches every instance makes
// two rooms of one sale for a moment), one room after the other.
func (j *roomJoiner) runAll(calls []placeCall) {
	type room struct {
		id            int64
		starts, until int64
	}
	var order []room
	by := map[room][]placeCall{}
	for _, c := range calls {
		k := room{c.r.ActivityID, c.r.StartsAt.UnixMilli(), c.r.KeysUntil.UnixMilli()}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], c)
	}
	for _, k := range order {
		group := by[k]
		ps, err := j.rooms.roomPlaces(context.Background(), "join", group)
		for i, c := range group {
			if err != nil {
				c.reply <- placeAnswer{err: err}
			} else {
				c.reply <- placeAnswer{p: ps[i]}
			}
		}
	}
}
