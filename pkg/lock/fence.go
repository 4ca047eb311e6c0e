package lock

import (
	"context"
	"fmt"
	"strconv"
)

// SetFenced stores value in the Redis hash key (fields "value" and "fence")
// with this lock's fencing token, unless the key already holds a write with
// a larger fence; then it changes nothing and returns an error matching
// ErrStaleFence. A holder whose lock expired while it was paused is refused
// once a later holder has written, even though it still believes it holds
// the lock. key is used as given (no prefix); it is the only key touched,
// so any name works on Redis Cluster.
func (l *Lock) SetFenced(ctx context.Context, key, value string) error {
	n, err := l.lk.fencedSet.Run(ctx, l.lk.rdb, []string{key}, l.fence, value).Int64()
	if err != nil {
		return fmt.Errorf("fenced write to %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("fenced write to %q with fence %d: %w", key, l.fence, ErrStaleFence)
	}
	return nil
}

// GetFenced reads a value written by Lock.SetFenced and the fence of the
// write that stored it. A key never written gives "", 0 and no error.
func (lk *Locker) GetFenced(ctx context.Context, key string) (value string, fence int64, err error) {
	vals, err := lk.rdb.HMGet(ctx, key, "value", "fence").Result()
	if err != nil {
		return "", 0, fmt.Errorf("read fenced %q: %w", key, err)
	}
	v, _ := vals[0].(string)
	f, _ := vals[1].(string)
	if f == "" {
		return "", 0, nil
	}
	fence, err = strconv.ParseInt(f, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("read fenced %q: fence %q: %w", key, f, err)
	}
	return v, fence, nil
}
