-- reserve: take stock for one order, atomically, in one round trip.
--
-- KEYS[1] stock     units Redis may still sell (string integer); for a
--                   bucketed item (ARGV[10] set) the bucket marker instead
-- KEYS[2] inflight  sum of quantities in RESERVED or CLAIMED
-- KEYS[3] pending   sorted set: order_no by reserved-at (ms)
-- KEYS[4] res       reservation hash of this order
-- KEYS[5] quota     the user's quota in the activity: the order_no holding it
-- KEYS[6] idem      the user's idempotency record: the order_no this key made
-- ARGV[1] order_no, ARGV[2] user_id, ARGV[3] activity_id, ARGV[4] quantity,
-- ARGV[5] now (ms), ARGV[6] idempotency key, ARGV[7] quota/idempotency ttl (ms),
-- ARGV[8] reservation ttl (ms), ARGV[9] item_id
-- ARGV[10] '' for an item with one stock key; for a bucketed item the
--          bucket the caller already took the quantity from (bucket_take):
--          the stock is then neither checked nor taken here, the bucket is
--          recorded in the reservation, and on a refusal the caller gives
--          the units back to it (bucket_give)
--
-- Checks, in this order of precedence (a short stock never burns the quota):
--   {-1}            not warmed (no stock key, or no bucket marker)
--   {-2, order_no}  duplicate idempotency key: the order it produced
--   {-3, order_no}  the user holds a live order in the activity
--   {-4, stock}     not enough stock
--   {1, stock}      reserved; stock is what is left (-1 for a bucketed item)
local stock = redis.call('GET', KEYS[1])
if not stock then return {-1} end
local prior = redis.call('GET', KEYS[6])
if prior then return {-2, prior} end
local holder = redis.call('GET', KEYS[5])
if holder then return {-3, holder} end
local qty = tonumber(ARGV[4])
local bucket = ARGV[10] or ''
local left = -1
if bucket == '' then
  if tonumber(stock) < qty then return {-4, tonumber(stock)} end
  left = redis.call('DECRBY', KEYS[1], qty)
end
redis.call('INCRBY', KEYS[2], qty)
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[4], 'state', 'RESERVED', 'user', ARGV[2], 'activity', ARGV[3],
  'item', ARGV[9], 'qty', qty, 'at', ARGV[5], 'key', ARGV[6])
if bucket ~= '' then redis.call('HSET', KEYS[4], 'bucket', bucket) end
redis.call('PEXPIRE', KEYS[4], ARGV[8])
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[7])
redis.call('SET', KEYS[6], ARGV[1], 'PX', ARGV[7])
return {1, left}
