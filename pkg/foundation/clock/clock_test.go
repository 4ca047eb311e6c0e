package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/foundation/clock"
)

// A process whose own clock is off (the test offset) reads MySQL's time
// from its clock once synced: Now follows MySQL's clock (this host's, here)
// and only Wall is shifted.
func TestNowFollowsMySQLNotTheProcessClock(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	for _, offset := range []time.Duration{-10 * time.Second, 0, time.Hour} {
		c := clock.New(db.Now, offset)
		skew, err := c.Sync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := skew - offset; d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("offset %v: skew %v, want about the offset", offset, skew)
		}
		if d := time.Until(c.Now()); d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("offset %v: Now is %v from MySQL's clock, want within 50ms", offset, d)
		}
		if d := time.Until(c.Wall()) - offset; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("offset %v: Wall is %v off the offset", offset, d)
		}
	}
}

// Between samples the time advances by the monotonic clock, and a failed
// sample keeps the last anchor.
func TestNowAdvancesAndSurvivesAFailedSample(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := false
	c := clock.New(func(context.Context) (time.Time, error) {
		if fail {
			return time.Time{}, errors.New("mysql down")
		}
		return anchor, nil
	}, 0)
	if got := c.Now(); time.Until(got) > time.Second || time.Since(got) > time.Second {
		t.Fatalf("before any sample Now = %v, want the process's clock", got)
	}
	if _, err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	first := c.Now()
	if d := first.Sub(anchor); d < 0 || d > 100*time.Millisecond {
		t.Fatalf("Now = %v, want just after %v", first, anchor)
	}
	fail = true
	if _, err := c.Sync(context.Background()); err == nil {
		t.Fatal("a failed sample reported no error")
	}
	for time.Since(start) < 20*time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	if d, el := c.Now().Sub(first), time.Since(start); d < 20*time.Millisecond || d > el+time.Millisecond {
		t.Fatalf("Now advanced %v in %v, want as much as the monotonic clock", d, el)
	}
}
