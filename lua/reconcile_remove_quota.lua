-- reconcile_remove_quota: delete a stale quota key (its order is neither
-- live in MySQL nor RESERVED/CLAIMED in Redis), compare-and-delete style:
-- only while it still holds that stale order number, so a reservation made
-- since the check keeps its quota. Guarded by the fencing token of the
-- reconciler's lock.
--
-- KEYS[1] fence (last fencing token used on this item), KEYS[2] quota
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] the stale order number the key held when checked
-- ARGV[3] when the fence key expires (unix ms)
--
-- Returns
--   {1}           deleted
--   {0, holder}   the key holds something else now ('' when missing);
--                 nothing was changed
--   {-1, fence}   refused: a later reconciler (this larger fence) wrote
--                 here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local cur = redis.call('GET', KEYS[2]) or ''
if cur ~= ARGV[2] then
  return {0, cur}
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[3])
return {1}
