-- bucket_give: put one order's units back into the bucket it took them from
-- (the reserve script refused after bucket_take, or a release of a bucketed
-- reservation). Only an order whose take marker is still there gives
-- anything, and the marker goes with it: giving twice gives once, and an
-- order that took nothing from this bucket gives nothing. A missing bucket
-- key is not recreated: that would sell units nobody warmed. The order
-- leaves the bucket's recent takes (bucket_take) with its marker.
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- KEYS[2] take marker   <prefix>:{i<item>b<n>}:t:<order_no>
-- KEYS[3] recent takes  <prefix>:{i<item>b<n>}:takes
-- ARGV[1] order_no
--
-- Returns the units given back (0 when there was nothing to give), or -1
-- when the bucket key is missing (the marker is dropped, nothing else).
local qty = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('DEL', KEYS[2])
if qty > 0 then redis.call('ZREM', KEYS[3], qty .. ':' .. ARGV[1]) end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if qty > 0 then redis.call('INCRBY', KEYS[1], qty) end
return qty
