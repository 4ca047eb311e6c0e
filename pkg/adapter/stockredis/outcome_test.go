package stockredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/order"
)

// A Redis failure is marked order.ErrOutcomeUnknown (MayHaveRun) unless
// the command was never sent; every failure stays order.ErrUnavailable,
// with its text unchanged.
func TestUnavailableMarksWhatMayHaveRun(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"answer lost", &UnknownOutcomeError{Cmd: "evalsha", Cause: io.EOF}, true},
		{"timeout", fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"an unexpected reply", errors.New("reserve: 1 values for 2 orders"), true},
		{"dial", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{"pool timeout", redis.ErrPoolTimeout, false},
		{"pool exhausted", redis.ErrPoolExhausted, false},
		{"closed client", redis.ErrClosed, false},
		{"not sent", fmt.Errorf("%w: %w", errNotSent, context.Canceled), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unavailable("op", tt.err)
			if !errors.Is(err, order.ErrUnavailable) {
				t.Fatalf("%v is not order.ErrUnavailable", err)
			}
			if got := MayHaveRun(err); got != tt.want {
				t.Fatalf("MayHaveRun(%v) = %v, want %v", err, got, tt.want)
			}
			if got := MayHaveRun(fmt.Errorf("reserve: %w", err)); got != tt.want {
				t.Fatalf("MayHaveRun of the wrapped error = %v, want %v", got, tt.want)
			}
			if want := fmt.Sprintf("redis op: %v: %v", order.ErrUnavailable, tt.err); err.Error() != want {
				t.Fatalf("text %q, want %q", err.Error(), want)
			}
		})
	}
	if MayHaveRun(nil) || MayHaveRun(order.ErrSoldOut) || MayHaveRun(order.ErrUnavailable) {
		t.Fatal("MayHaveRun of a domain error")
	}
}
