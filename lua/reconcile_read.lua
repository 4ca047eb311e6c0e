-- reconcile_read: one atomic view of an item's stock for the reconciler.
-- Read-only. The reconciler compares it with MySQL: Redis stock + what is
-- in flight must equal MySQL stock.
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] pending, KEYS[4] bucket marker,
-- KEYS[5..4+m] reservation hashes of the orders MySQL has CLOSED without a
--            recorded Redis release (their units are on their way back)
-- KEYS[5+m..n] restock markers of the restocks MySQL has not recorded as
--            applied in Redis (lua/restock.lua)
-- ARGV[1]    m, the number of reservation hashes (all of KEYS[5..n] when
--            left out)
--
-- Returns {warmed, stock, inflight, pending, states, buckets, restocked}:
--   warmed    1 when the stock key exists, else 0 (stock is then 0)
--   stock     the stock key's value
--   inflight  the inflight counter (0 when missing)
--   pending   every order number in pending (RESERVED|CLAIMED), oldest first
--   states    the state of each KEYS[5..n] reservation, 'MISSING' for none
--   buckets   the bucket marker (0 when missing): K > 1 means the stock
--             lives in K bucket keys in other slots, which the caller reads
--   restocked 1 for each restock marker that exists, else 0
local warmed, stock = 0, 0
local s = redis.call('GET', KEYS[1])
if s then
  warmed, stock = 1, tonumber(s)
end
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
local pending = redis.call('ZRANGE', KEYS[3], 0, -1)
local m = tonumber(ARGV[1] or (#KEYS - 4))
local states = {}
for i = 5, 4 + m do
  states[i - 4] = redis.call('HGET', KEYS[i], 'state') or 'MISSING'
end
local restocked = {}
for i = 5 + m, #KEYS do
  restocked[i - 4 - m] = redis.call('EXISTS', KEYS[i])
end
local buckets = tonumber(redis.call('GET', KEYS[4]) or '0')
return {warmed, stock, inflight, pending, states, buckets, restocked}
