// Package periodic runs a piece of periodic work until its context ends: the
// consumer's sweep, closer and scheduled warm-up, and the api's keep-warm.
package periodic

import (
	"context"
	"time"
)

// Every calls f every d, the first time one d after the start, until ctx
// ends. A call that outlasts d delays the next one rather than overlapping
// it.
func Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A tick and the end can be ready at once, and select picks
		// either: the end wins.
		if ctx.Err() != nil {
			return
		}
		f(ctx)
	}
}
