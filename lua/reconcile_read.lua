-- reconcile_read: one atomic view of an item's stock for the reconciler.
-- Read-only. The reconciler compares it with MySQL: Redis stock + what is
-- in flight must equal MySQL stock.
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] pending, KEYS[4] bucket marker,
-- KEYS[5] restock record (lua/restock.lua), KEYS[6] the item's recent
-- give-backs (lua/release.lua)
-- KEYS[7..6+m] reservation hashes of the orders MySQL has CLOSED without a
--            recorded Redis release (their units are on their way back)
-- KEYS[7+m..n] restock markers of the restocks MySQL has not recorded as
--            applied in Redis (lua/restock.lua)
-- ARGV[1]    m, the number of reservation hashes
-- ARGV[2]    retention of the recent give-backs (ms)
-- ARGV[3..]  the restock id of each marker, in the same order
--
-- Returns {warmed, stock, inflight, pending, states, buckets, restocked, gives}:
--   warmed    1 when the stock key exists, else 0 (stock is then 0)
--   stock     the stock key's value
--   inflight  the inflight counter (0 when missing)
--   pending   every order number in pending (RESERVED|CLAIMED), oldest first
--   states    the state of each KEYS[7..6+m] reservation, 'MISSING' for none
--   buckets   the bucket marker (0 when missing): K > 1 means the stock
--             lives in K bucket keys in other slots, which the caller reads
--   restocked 1 for each restock the stock holds (its marker exists, or its
--             id is at most the record's upto: a warm-up loaded it), else 0
--   gives     the recent give-backs within the retention,
--             "<bucket>:<qty>:<order_no>" each (a bucketed item's released
--             reservations whose units may not be back in their bucket yet)
local warmed, stock = 0, 0
local s = redis.call('GET', KEYS[1])
if s then
  warmed, stock = 1, tonumber(s)
end
local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
local pending = redis.call('ZRANGE', KEYS[3], 0, -1)
local m = tonumber(ARGV[1])
local states = {}
for i = 7, 6 + m do
  states[i - 6] = redis.call('HGET', KEYS[i], 'state') or 'MISSING'
end
local upto = tonumber(redis.call('HGET', KEYS[5], 'upto') or '0')
local restocked = {}
for i = 7 + m, #KEYS do
  local j = i - 6 - m
  local done = redis.call('EXISTS', KEYS[i])
  if done == 0 and ARGV[2 + j] and tonumber(ARGV[2 + j]) <= upto then done = 1 end
  restocked[j] = done
end
local buckets = tonumber(redis.call('GET', KEYS[4]) or '0')
local gives = {}
if buckets > 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  gives = redis.call('ZRANGEBYSCORE', KEYS[6], now - tonumber(ARGV[2]), '+inf')
end
return {warmed, stock, inflight, pending, states, buckets, restocked, gives}
