-- restock: add one restock's units to an item's stock key (or to one of
-- its buckets), once per restock. A marker beside the stock key (same hash
-- tag) records the restock, so running this again (a retry after a lost
-- answer, the API and the reconciler finishing the same restock) adds
-- nothing. MySQL has the units already (the restock is recorded there
-- first).
--
-- KEYS[1] stock   <prefix>:{i<item>}:stock, or a bucket <prefix>:{i<item>b<n>}:stock
-- KEYS[2] marker  <prefix>:{i<item>}:rs:<restock id> (the bucket's tag for a bucket)
-- ARGV[1] units to add (> 0)
-- ARGV[2] marker ttl (ms)
--
-- Returns
--   {1, stock}  added now; stock is the value afterwards
--   {0, stock}  added by an earlier run; nothing changed
--   {-1}        the stock key is missing (not warmed): the marker is set and
--               nothing is added (a warm-up loads the units from MySQL)
local s = redis.call('GET', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  if not s then return {-1} end
  return {0, tonumber(s)}
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
if not s then return {-1} end
return {1, redis.call('INCRBY', KEYS[1], ARGV[1])}
