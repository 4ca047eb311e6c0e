package batch_test

import (
	"slices"
	"testing"

	"github.com/seckill/seckill/pkg/foundation/batch"
)

func TestDrainTakesWhatIsQueuedUpToMax(t *testing.T) {
	q := make(chan int, 10)
	for i := range 7 {
		q <- i
	}
	close(q)
	var got [][]int
	batch.Drain(q, 3, func(b []int) { got = append(got, slices.Clone(b)) })
	want := [][]int{{0, 1, 2}, {3, 4, 5}, {6}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

func TestDrainDoesNotWaitForCompany(t *testing.T) {
	q := make(chan int)
	out := make(chan []int)
	go batch.Drain(q, 100, func(b []int) { out <- slices.Clone(b) })
	q <- 1
	if b := <-out; !slices.Equal(b, []int{1}) {
		t.Fatalf("a lone item came as %v, want [1]", b)
	}
	close(q)
}

func TestStartHandsEveryItemToAWorker(t *testing.T) {
	got := make(chan int, 100)
	q := batch.Start(3, 10, 4, func(b []int) {
		for _, x := range b {
			got <- x
		}
	})
	for i := range 100 {
		q <- i
	}
	seen := map[int]bool{}
	for range 100 {
		seen[<-got] = true
	}
	close(q)
	if len(seen) != 100 {
		t.Fatalf("%d distinct items handled, want 100", len(seen))
	}
}
