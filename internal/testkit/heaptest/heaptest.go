// Package heaptest samples a process's Go heap while a test runs, to
// report the peak of a heavy step (the scale tests).
package heaptest

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Peak samples the process's heap (live and not yet collected objects)
// and the memory the Go runtime has mapped (all it holds but what it gave
// back to the OS), every 2 ms from Start on, and keeps the highest of
// each.
type Peak struct {
	stop        chan struct{}
	done        sync.WaitGroup
	heap, total uint64
}

// Start collects garbage, so the peak is the step's own, and starts
// sampling.
func Start() *Peak {
	runtime.GC()
	debug.FreeOSMemory()
	p := &Peak{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			p.heap, p.total = max(p.heap, s[0].Value.Uint64()), max(p.total, s[1].Value.Uint64()-s[2].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// End stops sampling and returns the peaks, in MiB.
func (p *Peak) End() (heap, total float64) {
	close(p.stop)
	p.done.Wait()
	return float64(p.heap) / (1 << 20), float64(p.total) / (1 << 20)
}
