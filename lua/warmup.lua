-- warmup: load an item's sellable stock into Redis, never more than MySQL
-- can still fulfil. Idempotent.
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] restock record (lua/restock.lua),
-- KEYS[4..] the reservation hashes of the item's pending orders read before
--         the MySQL figure: first ARGV[4] of them whose orders MySQL had
--         committed (CREATED or PAID) in the figure's snapshot, then the rest
-- ARGV[1] MySQL stock (read after KEYS[4..] were listed)
-- ARGV[2] ttl of the stock key (ms)
-- ARGV[3] the id of the item's last restock that ARGV[1] includes (0:
--         none), read in the same MySQL snapshot; '' when not known (a
--         figure that includes no restock: tests and tools only)
-- ARGV[4] how many of KEYS[4..] MySQL had committed
--
-- It may sell sellable(4) (lua/lib/sellable.lua: MySQL stock - what is in flight
-- and not in that stock, at least 0).
-- A missing stock key is set to it; a larger one is lowered to it; a smaller
-- one is kept (those units are reserved by orders still on their way, or
-- restocks whose own step adds them). A key written from the figure records
-- that it holds every restock up to ARGV[3] (upto), in the same script, so
-- those restocks' steps add nothing afterwards. A key to lower that already
-- holds a later restock than ARGV[3] (last or upto larger) is left alone:
-- the figure is older than the key.
--
-- Returns {value, upto}: the stock key's value afterwards and the last
-- restock id it is recorded to hold (ARGV[3] when written from the figure,
-- else the record's, 0 for none); {-1, 0} when the figure is older than
-- the key (read MySQL again).
--#include sellable
local want = sellable(4)
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) <= want then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
  return {tonumber(cur), tonumber(redis.call('HGET', KEYS[3], 'upto') or '0')}
end
if ARGV[3] ~= '' then
  local upto = tonumber(ARGV[3])
  if cur then
    local last = tonumber(redis.call('HGET', KEYS[3], 'last') or '0')
    local held = tonumber(redis.call('HGET', KEYS[3], 'upto') or '0')
    if last > upto or held > upto then return {-1, 0} end
  end
  redis.call('HSET', KEYS[3], 'upto', upto)
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  redis.call('SET', KEYS[1], want, 'PX', ARGV[2])
  return {want, upto}
end
redis.call('SET', KEYS[1], want, 'PX', ARGV[2])
return {want, 0}
