-- warmup_buckets: the item-tag half of warming a bucketed item: mark the
-- item as bucketed and say how much it may sell. The caller then creates
-- or lowers the bucket keys (bucket_set) so their sum is at most that.
--
-- KEYS[1] bucket marker  <prefix>:{i<item>}:buckets  (the number of buckets)
-- KEYS[2] inflight
-- KEYS[3..] the reservation hashes of the item's pending orders read before
--         the MySQL figure: first ARGV[4] of them whose orders MySQL had
--         committed in the figure's snapshot, then the rest (as in
--         lua/warmup.lua)
-- ARGV[1] MySQL stock (read after KEYS[3..] were listed)
-- ARGV[2] ttl of the marker (ms)
-- ARGV[3] the number of buckets (2..16)
-- ARGV[4] how many of KEYS[3..] MySQL had committed
--
-- Returns sellable(3) (lua/lib/sellable.lua: MySQL stock - what is in
-- flight and not in that stock, at least 0).
--#include sellable
local want = sellable(3)
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
return want
