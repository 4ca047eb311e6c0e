package lock

// What only the tests use: a holder whose lease runs out (no renewal) and
// the holder token, the field of the lock hash in Redis.

// WithoutWatchdog is withoutWatchdog, for the tests.
var WithoutWatchdog = withoutWatchdog

// Token returns the holder token: the Locker's instance id and a random
// part.
func (l *Lock) Token() string { return l.token }
