package lock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/adapter/lock"
)

// The reconciler takes a lock so that one instance at a time runs the
// batch. Writes made under the lock carry its fence; in MySQL:
//
//	UPDATE stock SET qty = ?, fence = ? WHERE sku = ? AND fence < ?
//
// and zero rows affected means a later holder already wrote.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()

	// One Locker per process. (The random prefix keeps runs of this
	// example apart; a service uses a fixed one such as "sk".)
	prefix := "example-" + rand.Text()
	defer rdb.Del(ctx, prefix+":lock:{reconcile}:fence", prefix+":stock:{sku-1}")
	locker := lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "reconciler-1"})

	l, err := locker.Acquire(ctx, "reconcile", lock.WithTTL(5*time.Second), lock.WithWait(2*time.Second))
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	fmt.Println("fence:", l.Fence())

	// Another instance cannot have it meanwhile.
	other := lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "reconciler-2"})
	_, err = other.TryLock(ctx, "reconcile")
	fmt.Println("other instance held off:", errors.Is(err, lock.ErrNotAcquired))

	// Nested work re-enters through the handle and releases its own hold.
	if err := l.Acquire(ctx); err != nil {
		fmt.Println("re-enter:", err)
		return
	}
	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
		return
	}

	// Protected writes carry the fence and stop when the lock is lost.
	select {
	case <-l.Lost():
		fmt.Println("lost:", l.Err())
		return
	default:
	}
	// ... each write passes l.Fence() to a check that refuses a smaller one.

	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
		return
	}
	<-l.Lost() // also closed by the final Release; Err tells it apart
	fmt.Println("released, err:", l.Err())
	// Output:
	// fence: 1
	// other instance held off: true
	// released, err: <nil>
}
