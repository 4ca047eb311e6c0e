-- reconcile_read_bucket: one atomic view of one bucket of a bucketed item
-- for the reconciler (read right after reconcile_read on the item's own
-- hash tag). Read-only. Beside the bucket's value it says which orders'
-- units may be between the bucket and the item's in-flight counter at this
-- instant: the recent takes (lua/bucket_take.lua; a take leaves the list
-- with its marker, at its give-back) and, of the recent give-backs the item
-- listed (lua/release.lua), those whose take marker is still here (their
-- units are not back yet).
--
-- KEYS[1] bucket stock   <prefix>:{i<item>b<n>}:stock
-- KEYS[2] recent takes   <prefix>:{i<item>b<n>}:takes
-- KEYS[3..] the take markers of the give-backs asked about
-- ARGV[1] retention of the recent takes (ms)
--
-- Returns {stock, takes, markers}:
--   stock    the bucket's value, -1 when the key is missing
--   takes    the recent takes within the retention, "<qty>:<order_no>" each
--   markers  for each KEYS[3..] marker its quantity, 0 when it is gone
local stock = tonumber(redis.call('GET', KEYS[1]) or '-1')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local takes = redis.call('ZRANGEBYSCORE', KEYS[2], now - tonumber(ARGV[1]), '+inf')
local markers = {}
for i = 3, #KEYS do
  markers[i - 2] = tonumber(redis.call('GET', KEYS[i]) or '0')
end
return {stock, takes, markers}
