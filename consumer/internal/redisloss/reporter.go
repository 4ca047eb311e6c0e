package redisloss

import (
	"context"
	"fmt"
)

// Reporter records, in the watches' Record, the orders the consumer wrote
// to MySQL whose reservations Redis did not have (fulfil.Losses): Redis
// lost them, and those orders reached MySQL after it did, possibly after a
// watch had repaired the loss and closed its incident from a MySQL that
// did not have them yet (fulfil.Handler's reportMissing walks through the
// interleaving). A recorded loss is repaired by whichever watch ticks next:
// it opens an incident again (or, when one is open, counts the pass that
// follows as the first again), so a checked repair pass reads MySQL after
// the orders' commit, restores their reservations and quota keys, and
// sets the stock without their units.
type Reporter struct {
	Record Record
	Marker string
}

// ReservationsMissing records one loss for orderNos.
func (r *Reporter) ReservationsMissing(ctx context.Context, orderNos []string) error {
	if len(orderNos) == 0 {
		return nil
	}
	// Makes the record the first time (a consumer whose watch has not
	// ticked yet): a loss counted on no record would be lost.
	if _, err := r.Record.RedisWatch(ctx, r.Marker); err != nil {
		return err
	}
	what := fmt.Sprintf("%s: order %s reached MySQL without its reservation in Redis", ReasonMissingReservation, orderNos[0])
	if len(orderNos) > 1 {
		what = fmt.Sprintf("%s: orders %s and %d more reached MySQL without their reservations in Redis",
			ReasonMissingReservation, orderNos[0], len(orderNos)-1)
	}
	return r.Record.RecordRedisLoss(ctx, r.Marker, what)
}

// ReasonMissingReservation opens the description of a loss a Reporter
// recorded.
const ReasonMissingReservation = "reservation missing"
