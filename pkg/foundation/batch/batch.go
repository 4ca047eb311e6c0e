// Package batch turns a queue of waiting calls into batches without a
// timer: a lone call goes at once, and under load the queue fills while the
// previous batch is in flight, so batches grow with the load (group commit).
package batch

// Drain hands queue's items to handle in batches until queue is closed: the
// first waiting item and every other one already queued, up to max. The
// slice is reused: handle must not keep it.
func Drain[T any](queue <-chan T, max int, handle func([]T)) {
	b := make([]T, 0, max)
	for first := range queue {
		b = append(b[:0], first)
	fill:
		for len(b) < max {
			select {
			case x, ok := <-queue:
				if !ok {
					break fill
				}
				b = append(b, x)
			default:
				break fill
			}
		}
		handle(b)
	}
}

// Start returns a queue holding up to depth items, and starts workers
// goroutines that Drain it into handle in batches of up to max.
func Start[T any](workers, depth, max int, handle func([]T)) chan T {
	queue := make(chan T, depth)
	for range workers {
		go Drain(queue, max, handle)
	}
	return queue
}
