// Package orderevents carries create-order events over Kafka with
// segmentio/kafka-go: a publisher that answers only after every in-sync
// replica acknowledged, topic set-up, and the consumer's Router, which owns
// the consume loop (fetch, per-partition batches, retry, dead letters,
// commit after the handler, drain). It is the only package that imports
// kafka-go (test helpers aside).
package orderevents
