// Package chaos runs the fault and hostile-input suite: a flash sale against
// the real programs while a consumer, the API, the Kafka broker, MariaDB or
// Redis is killed or stopped, then checks with its own reads that nothing
// was lost, oversold or duplicated and that Redis and MySQL agree.
//
// The tests stop shared services, so they are behind the "chaos" build tag
// and run alone, one at a time: `make chaos` (which `make test` runs after
// the other tests).
package chaos
