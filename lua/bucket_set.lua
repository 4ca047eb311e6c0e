-- bucket_set: compare-and-set of one bucket of a bucketed item, used by
-- warmup (create a missing bucket, or lower one), the consumer's capped
-- release (lower) and the reconciler's repair (after its fence check on
-- the item's own hash tag).
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- ARGV[1] the value read, or '' for a missing key
-- ARGV[2] the new value (>= 0)
-- ARGV[3] ttl in ms for a key that was missing and is created; an existing
--         key keeps its TTL
--
-- Returns
--   1  written
--   0  the key holds something else now; nothing was changed
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
if cur == '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
