package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Lock counts distributed-lock events by lock name (a fixed set: sweep,
// closer, reconcile):
//
//	seckill_lock_acquisitions_total{lock}
//	seckill_lock_losses_total{lock}
//
// Wire it into a Locker with lock.Options{OnAcquire: m.Acquired, OnLost: m.Lost}.
type Lock struct {
	acquisitions, losses *prometheus.CounterVec

	mu    sync.Mutex
	names map[string][2]prometheus.Counter
}

// NewLock registers the lock metrics on reg.
func NewLock(reg prometheus.Registerer) *Lock {
	return &Lock{
		acquisitions: counterVec(reg, "lock", "acquisitions_total",
			"Distributed locks taken (a new holder; re-entries not counted), by lock name.", "lock"),
		losses: counterVec(reg, "lock", "losses_total",
			"Held distributed locks lost rather than released (the lease ran out, or the key was gone or held by another holder), by lock name.",
			"lock"),
		names: map[string][2]prometheus.Counter{},
	}
}

func (m *Lock) counters(name string) [2]prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.names[name]
	if !ok {
		c = [2]prometheus.Counter{m.acquisitions.WithLabelValues(name), m.losses.WithLabelValues(name)}
		m.names[name] = c
	}
	return c
}

// Acquired counts an acquisition of the lock name.
func (m *Lock) Acquired(name string) {
	if m != nil {
		m.counters(name)[0].Inc()
	}
}

// Lost counts a loss of the lock name.
func (m *Lock) Lost(name string) {
	if m != nil {
		m.counters(name)[1].Inc()
	}
}
