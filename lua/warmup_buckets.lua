-- warmup_buckets: the item-tag half of warming a bucketed item: mark the
-- item as bucketed and say how much it may sell. The caller then creates
-- or lowers the bucket keys (bucket_set) so their sum is at most that.
--
-- KEYS[1] bucket marker  <prefix>:{i<item>}:buckets  (the number of buckets)
-- KEYS[2] inflight
-- ARGV[1] MySQL stock (read after ARGV[2])
-- ARGV[2] in-flight quantity read before the MySQL stock
-- ARGV[3] ttl of the marker (ms)
-- ARGV[4] the number of buckets (2..16)
--
-- Returns sellable = MySQL stock - max(in flight then, in flight now), at
-- least 0.
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
local before = tonumber(ARGV[2])
if before > inflight then inflight = before end
local want = tonumber(ARGV[1]) - inflight
if want < 0 then want = 0 end
redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[3])
return want
