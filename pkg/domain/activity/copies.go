package activity

import "time"

// How old a process's copy of a sale may be. These bound what an operator's
// change of a sale (an end, a cancel, new times or settings) takes to reach
// every instance, and so when a change must stop (SettingsGuard).

// CopyTTL is how long a process trusts its copy of a sale (Cache): an
// operator may end a sale early or move its times before it starts, and
// every process sees the change within this time while MySQL answers.
const CopyTTL = time.Second

// ReloadTimeout bounds the re-read of an activity a process
// already holds a copy of; when it fails or times out, the process keeps
// serving its last copy, for at most ActivityMaxStale after that copy was
// read.
const ReloadTimeout = 500 * time.Millisecond

// MaxStale bounds how old a copy of an activity a process still
// sells on. A copy is as old as the time since the read that gave it
// started; once its re-reads have failed or been slower than
// ReloadTimeout for this long, Cache.Get answers
// ErrUnavailable (503) until MySQL answers again. An instance whose MySQL
// is slow therefore stops selling within MaxStale of the last read
// that reached it; an order it took in that time after an end or cancel it
// did not see is refused by the consumer (ReasonSaleEnded,
// ReasonSaleCancelled), which decides against MySQL's row, so the bound
// limits how long buyers get a 202 that ends FAILED, not what is sold. It
// is long enough to sell through a MySQL restart or failover (4-7 s
// measured here; the chaos suite stops MariaDB for 10 s under load, and
// with a soak beside it the copy was past 15 s before MariaDB answered
// again), short enough that a MySQL that stays slow stops the sale within
// half a minute.
const MaxStale = 30 * time.Second
