-- bucket_take: take stock from one bucket of a bucketed item (its stock is
-- split over K keys with different hash tags, so they can live on
-- different cluster nodes; docs/adr/0002-stock-buckets.md). Only the stock
-- moves here; the reserve script then records the reservation on the
-- item's own hash tag, and bucket_give puts the units back if it refuses.
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- ARGV[1] quantity
--
-- Returns
--   n >= 0  taken; n is what the bucket has left
--   -1      not enough stock in this bucket; nothing was changed
--   -2      the bucket key is missing (not warmed); nothing was changed
local stock = redis.call('GET', KEYS[1])
if not stock then return -2 end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then return -1 end
return redis.call('DECRBY', KEYS[1], qty)
