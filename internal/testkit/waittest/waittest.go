// Package waittest waits in tests for a condition to hold, polling it
// until a deadline, instead of sleeping for a guessed time.
package waittest

import (
	"testing"
	"time"
)

// Every is how often Until polls.
const Every = 50 * time.Millisecond

// Until polls cond every Every until it holds, and fails the test, naming
// what, once d passed without it (or when the test's context ends).
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilEvery(t, d, Every, what, cond)
}

// UntilEvery is Until polling every interval: short for a moment that
// passes quickly (a process mid-stream), long for a costly cond.
//
// In a cleanup the test's context has already ended (testing cancels it
// before cleanups run): there only the deadline stops the wait.
func UntilEvery(t testing.TB, d, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	ended := t.Context().Done()
	if t.Context().Err() != nil {
		ended = nil
	}
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		select {
		case <-time.After(interval):
		case <-ended:
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		}
	}
}
