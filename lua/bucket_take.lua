-- bucket_take: take stock for one order from one bucket of a bucketed item
-- (its stock is split over K keys with different hash tags, so they can
-- live on different cluster nodes; docs/adr/0002-stock-buckets.md). Only the
-- stock moves here; the reserve script then records the reservation on the
-- item's own hash tag, and bucket_give puts the units back if it refuses.
-- A take marker beside the bucket (same hash tag) records the order's units,
-- so taking twice for one order takes once, and bucket_give gives back only
-- what this order took.
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- KEYS[2] take marker   <prefix>:{i<item>b<n>}:t:<order_no>
-- ARGV[1] quantity
-- ARGV[2] marker ttl (ms): as long as the order's reservation lives
--
-- Returns
--   n >= 0  taken (now or by an earlier call for this order); n is what the
--           bucket has left
--   -1      not enough stock in this bucket; nothing was changed
--   -2      the bucket key is missing (not warmed); nothing was changed
local stock = redis.call('GET', KEYS[1])
if not stock then return -2 end
if redis.call('EXISTS', KEYS[2]) == 1 then return tonumber(stock) end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then return -1 end
redis.call('SET', KEYS[2], qty, 'PX', ARGV[2])
return redis.call('DECRBY', KEYS[1], qty)
