package lock

import (
	"math/rand/v2"
	"time"
)

// backoff returns the pause before retry number attempt (counted from 0):
// the step lo·2^attempt, capped at hi, randomised to between half the step
// and the whole step. The random half spreads waiters that were turned away
// together; the fixed half keeps the pause growing.
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	step := lo
	for i := 0; i < attempt && step < hi; i++ {
		step *= 2
	}
	step = min(step, hi)
	half := step / 2
	return half + rand.N(step-half+1)
}
