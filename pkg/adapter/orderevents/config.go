package orderevents

import (
	"time"

	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Config says where Kafka is and which topic carries orders.
type Config struct {
	Brokers    []string
	Topic      string
	Partitions int // when creating the topic (default 12)
	// ReplicationFactor of the topics it creates (default 1: one broker).
	// EnsureTopics refuses topics that exist with fewer replicas.
	ReplicationFactor int
	// MinInsyncReplicas is the topics' min.insync.replicas: how many
	// replicas must hold an event before the publish is acknowledged (with
	// fewer in sync, publishes are refused); 0 leaves the broker's default.
	MinInsyncReplicas int
	// WriteTimeout bounds one publish; past it the outcome is unknown.
	WriteTimeout time.Duration
	// Tracer makes a span of each publish and puts its W3C trace context
	// in the message headers; nil: no span, no headers.
	Tracer *tracing.Tracer
}
