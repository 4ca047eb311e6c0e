-- reconcile_fence_buckets: the item-tag half of the reconciler's repair of
-- a bucketed item's stock. The bucket keys live in other slots, so this
-- script cannot write them; it checks, like reconcile_set_stock, that the
-- in-flight counter is still the value read and that no later reconciler
-- wrote here, and records this fence. The caller then sets each bucket
-- with bucket_set (compare-and-set on the value it read).
--
-- KEYS[1] inflight, KEYS[2] fence (last fencing token used on this item),
-- KEYS[3] bucket marker
-- ARGV[1] fencing token of the reconciler's lock (a positive integer)
-- ARGV[2] the inflight value read ('0' when missing)
-- ARGV[3] when the fence key expires (unix ms)
--
-- Returns
--   {1}               go ahead; the fence key now holds ARGV[1]
--   {0, '', inflight} changed concurrently (or the item is no longer
--                     bucketed); nothing was changed
--   {-1, fence}       refused: a later reconciler (this larger fence)
--                     wrote here; nothing was changed
local last = redis.call('GET', KEYS[2])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local inflight = redis.call('GET', KEYS[1]) or '0'
if tonumber(inflight) ~= tonumber(ARGV[2]) or redis.call('EXISTS', KEYS[3]) == 0 then
  return {0, '', tonumber(inflight)}
end
redis.call('SET', KEYS[2], ARGV[1], 'PXAT', ARGV[3])
return {1}
