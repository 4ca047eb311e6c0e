-- warmup: load an item's sellable stock into Redis, never more than MySQL
-- can still fulfil. Idempotent.
--
-- KEYS[1] stock, KEYS[2] inflight
-- ARGV[1] MySQL stock (read after ARGV[2])
-- ARGV[2] in-flight quantity read before the MySQL stock
-- ARGV[3] ttl of the stock key (ms)
--
-- sellable = MySQL stock - max(in flight then, in flight now), at least 0.
-- A missing stock key is set to it; a larger one is lowered to it; a smaller
-- one is kept (those units are reserved by orders still on their way).
-- Returns the stock key's value afterwards.
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
local before = tonumber(ARGV[2])
if before > inflight then inflight = before end
local want = tonumber(ARGV[1]) - inflight
if want < 0 then want = 0 end
local cur = redis.call('GET', KEYS[1])
if (not cur) or tonumber(cur) > want then
  redis.call('SET', KEYS[1], want, 'PX', ARGV[3])
  return want
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return tonumber(cur)
