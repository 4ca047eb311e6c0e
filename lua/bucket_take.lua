-- bucket_take: take stock for one order from one bucket of a bucketed item
-- (its stock is split over K keys with different hash tags, so they can
-- live on different cluster nodes; docs/adr/0002-stock-buckets.md). Only the
-- stock moves here; the reserve script then records the reservation on the
-- item's own hash tag, and bucket_give puts the units back if it refuses.
-- A take marker beside the bucket (same hash tag) records the order's units,
-- so taking twice for one order takes once, and bucket_give gives back only
-- what this order took.
-- The take is also listed in the bucket's recent takes (a sorted set by the
-- time of the take, in ms of this node's clock: only this node's clock
-- compares with it, so no instance's skew can trim another's entry), until
-- bucket_give gives it back or it is older than the retention. Between this
-- script and the reserve script the units are in neither the bucket nor the
-- item's in-flight counter; the reconciler finds them here and counts them
-- in flight rather than lost.
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- KEYS[2] take marker   <prefix>:{i<item>b<n>}:t:<order_no>
-- KEYS[3] recent takes  <prefix>:{i<item>b<n>}:takes, members "<qty>:<order_no>"
-- ARGV[1] quantity
-- ARGV[2] marker ttl (ms): as long as the order's reservation lives
-- ARGV[3] order_no
-- ARGV[4] retention of the recent takes (ms)
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (now - tonumber(ARGV[4])))
redis.call('ZADD', KEYS[3], now, qty .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return redis.call('DECRBY', KEYS[1], qty)
