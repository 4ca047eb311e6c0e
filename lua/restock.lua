-- restock: add one restock's units to an item's stock key (or to one of
-- its buckets), once per restock. MySQL has the units already (the restock
-- is recorded there first). A marker beside the stock key (same hash tag)
-- records the restock, so running this again (a retry after a lost answer,
-- the API and the reconciler finishing the same restock) adds nothing.
--
-- The stock key also carries a restock record (a hash beside it), shared
-- with the warm-up (lua/warmup.lua, lua/bucket_set.lua):
--   upto  every restock of the item with an id up to this one is in the
--         stock key: a warm-up wrote the key from a MySQL figure that
--         included them (restocks of an item commit in id order)
--   last  the largest restock id this script added to the key; a warm-up
--         whose figure does not reach it is stale and reads MySQL again
-- Redis stock holds a restock's units exactly when the stock key exists
-- and the restock's marker is set or its id is at most upto.
--
-- KEYS[1] stock    <prefix>:{i<item>}:stock, or a bucket <prefix>:{i<item>b<n>}:stock
-- KEYS[2] marker   <prefix>:{i<item>}:rs:<restock id> (the bucket's tag for a bucket)
-- KEYS[3] record   <prefix>:{i<item>}:restocked (the bucket's tag for a bucket)
-- ARGV[1] units to add (> 0)
-- ARGV[2] marker ttl (ms)
-- ARGV[3] the restock id
--
-- Returns
--   {1, stock}  added now; stock is the value afterwards
--   {0, stock}  in the stock already (an earlier run, or a warm-up's
--               figure); nothing changed
--   {-1}        the stock key is missing (not warmed): nothing is added and
--               no marker is set; the warm-up that creates the key reads
--               MySQL, which has the units, after this restock committed
--               or before it (then this script, run again, adds them)
local s = redis.call('GET', KEYS[1])
if not s then return {-1} end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {0, tonumber(s)}
end
local id = tonumber(ARGV[3])
if id <= tonumber(redis.call('HGET', KEYS[3], 'upto') or '0') then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return {0, tonumber(s)}
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
if id > tonumber(redis.call('HGET', KEYS[3], 'last') or '0') then
  redis.call('HSET', KEYS[3], 'last', id)
end
-- The record lives at least as long as the stock key.
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 then
  redis.call('PERSIST', KEYS[3])
else
  local rt = redis.call('PTTL', KEYS[3])
  if rt == -1 or rt < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
end
return {1, redis.call('INCRBY', KEYS[1], ARGV[1])}
