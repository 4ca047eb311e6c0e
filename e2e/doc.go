// Package e2e holds the end-to-end tests of the pipeline: the real api and
// consumer programs as processes, against the real Redis, MySQL and Kafka,
// with exact final values asserted from the test's own reads.
package e2e
