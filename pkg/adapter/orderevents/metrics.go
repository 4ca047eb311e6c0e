package orderevents

import (
	"time"
)

// Metrics is what the router records; *metrics.Consumer implements it.
type Metrics interface {
	Batch(n int, d time.Duration)
	// Events records how many of a final batch's Done events had each
	// label.
	Events(byLabel map[string]int)
	Retry()
	CommitFailed()
	FetchFailed()
	DeadLettered()
	Lag(partition int, lag int64)
}

type noMetrics struct{}

func (noMetrics) Batch(int, time.Duration) {}
func (noMetrics) Events(map[string]int)    {}
func (noMetrics) Retry()                   {}
func (noMetrics) CommitFailed()            {}
func (noMetrics) FetchFailed()             {}
func (noMetrics) DeadLettered()            {}
func (noMetrics) Lag(int, int64)           {}
