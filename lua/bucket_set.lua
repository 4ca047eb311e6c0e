-- bucket_set: compare-and-set of one bucket of a bucketed item, used by
-- warmup (create a missing bucket, or lower one), the consumer's capped
-- release (lower) and the reconciler's repair (after its fence check on
-- the item's own hash tag).
--
-- KEYS[1] bucket stock   <prefix>:{i<item>b<n>}:stock
-- KEYS[2] restock record <prefix>:{i<item>b<n>}:restocked (lua/restock.lua)
-- ARGV[1] the value read, or '' for a missing key
-- ARGV[2] the new value (>= 0)
-- ARGV[3] ttl in ms for a key that was missing and is created; an existing
--         key keeps its TTL
-- ARGV[4] warm-up only: the id of the item's last restock that the
--         warm-up's MySQL figure includes (0: none); the bucket then
--         records that it holds every restock up to it (upto), so their
--         steps add nothing to it. '' or absent: no record is written.
--
-- Returns
--   1   written
--   0   the key holds something else now; nothing was changed
--   -1  (ARGV[4] given) the existing bucket holds a later restock than
--       ARGV[4] (last or upto larger): the figure is older than the
--       bucket; nothing was changed
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
local upto = ARGV[4] and ARGV[4] ~= '' and tonumber(ARGV[4])
if upto and cur ~= '' then
  local last = tonumber(redis.call('HGET', KEYS[2], 'last') or '0')
  local held = tonumber(redis.call('HGET', KEYS[2], 'upto') or '0')
  if last > upto or held > upto then return -1 end
end
if cur == '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
if upto then
  redis.call('HSET', KEYS[2], 'upto', upto)
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl == -1 then
    redis.call('PERSIST', KEYS[2])
  else
    local rt = redis.call('PTTL', KEYS[2])
    if rt == -1 or rt < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  end
end
return 1
