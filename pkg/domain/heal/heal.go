// Package heal is what the consumer's data-loss watch keeps of a Redis
// dataset, so that a loss Redis does not show (a restart from an older
// file, a failover to a lagging replica, a restore) is noticed and repaired
// from MySQL (consumer/internal/redisloss).
package heal

// RedisWatch is what the consumer's data-loss watch knows of one Redis
// dataset (in MySQL, the redis_watches row of its generation marker).
// Every write to it is idempotent or only moves it forward, so a write
// whose answer was lost can be sent again, or not, without harm.
type RedisWatch struct {
	Marker string
	// Generation is the highest value a watch wrote to the marker; 0: none
	// yet.
	Generation int64
	// RunIDs are the masters' run ids last seen, "addr=run_id" sorted and
	// comma-separated; "" before the first look.
	RunIDs string
	// Losses counts the losses detected; Healed is the count a finished
	// repair covers. Healed < Losses: a repair is owed.
	Losses, Healed int64
	// LastLoss describes the last loss detected ("" for none).
	LastLoss string
}
