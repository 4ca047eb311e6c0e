-- warmup: load an item's sellable stock into Redis, never more than MySQL
-- can still fulfil. Idempotent.
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] restock record (lua/restock.lua)
-- ARGV[1] MySQL stock (read after ARGV[2])
-- ARGV[2] in-flight quantity read before the MySQL stock
-- ARGV[3] ttl of the stock key (ms)
-- ARGV[4] the id of the item's last restock that ARGV[1] includes (0:
--         none), read in the same MySQL snapshot; '' when not known (a
--         figure that includes no restock: tests and tools only)
--
-- sellable = MySQL stock - max(in flight then, in flight now), at least 0.
-- A missing stock key is set to it; a larger one is lowered to it; a smaller
-- one is kept (those units are reserved by orders still on their way, or
-- restocks whose own step adds them). A key written from the figure records
-- that it holds every restock up to ARGV[4] (upto), in the same script, so
-- those restocks' steps add nothing afterwards. A key to lower that already
-- holds a later restock than ARGV[4] (last or upto larger) is left alone:
-- the figure is older than the key.
--
-- Returns {value, upto}: the stock key's value afterwards and the last
-- restock id it is recorded to hold (ARGV[4] when written from the figure,
-- else the record's, 0 for none); {-1, 0} when the figure is older than
-- the key (read MySQL again).
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
local before = tonumber(ARGV[2])
if before > inflight then inflight = before end
local want = tonumber(ARGV[1]) - inflight
if want < 0 then want = 0 end
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) <= want then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end
  return {tonumber(cur), tonumber(redis.call('HGET', KEYS[3], 'upto') or '0')}
end
if ARGV[4] ~= '' then
  local upto = tonumber(ARGV[4])
  if cur then
    local last = tonumber(redis.call('HGET', KEYS[3], 'last') or '0')
    local held = tonumber(redis.call('HGET', KEYS[3], 'upto') or '0')
    if last > upto or held > upto then return {-1, 0} end
  end
  redis.call('HSET', KEYS[3], 'upto', upto)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  redis.call('SET', KEYS[1], want, 'PX', ARGV[3])
  return {want, upto}
end
redis.call('SET', KEYS[1], want, 'PX', ARGV[3])
return {want, 0}
