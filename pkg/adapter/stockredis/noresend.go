package stockredis

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// UnknownOutcomeError is the error of a script whose request was sent but
// whose answer never came: it may have run. It deliberately wraps nothing
// that go-redis's retry loops recognise (io.EOF, net errors, timeouts), so
// no client library sends the script a second time; callers resolve the
// outcome by reading state (see MayHaveRun).
type UnknownOutcomeError struct {
	Cmd   string
	Cause error
}

func (e *UnknownOutcomeError) Error() string {
	return "redis " + e.Cmd + ": answer lost after sending, the script may have run: " + e.Cause.Error()
}

// noResend is a go-redis hook on every connection's client (each cluster
// node's too) that turns the failure of a script that may have run into an
// UnknownOutcomeError.
type noResend struct{}

func (noResend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (noResend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (noResend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !isScript(cmd.Name()) || !sentAndLost(err) {
			return err
		}
		err = &UnknownOutcomeError{Cmd: cmd.Name(), Cause: err}
		cmd.SetErr(err)
		return err
	}
}

func isScript(name string) bool {
	switch strings.ToLower(name) {
	case "eval", "evalsha", "fcall":
		return true
	}
	return false
}

// sentAndLost reports whether err is a failure after the request may have
// reached Redis: not an answer from Redis (an error reply is an answer), not
// a connection that could not be made or taken from the pool.
func sentAndLost(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, redis.ErrPoolTimeout) && !errors.Is(err, redis.ErrPoolExhausted) &&
		!errors.Is(err, redis.ErrClosed) && !errors.Is(err, context.Canceled)
}
