-- reconcile_restore_quota: give a user with a live MySQL order its quota
-- key back (Redis lost it, or it holds a stale order number), so the user
-- cannot reserve a second time. A compare-and-set guarded by the fencing
-- token of the reconciler's lock.
--
-- KEYS[1] fence (last fencing token used on this item), KEYS[2] quota
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] the live order's number (the new value)
-- ARGV[3] the value the reconciler read: '' for a missing key, else the
--         stale order number it holds
-- ARGV[4] ttl of the quota key in ms (until the activity ends plus margin)
-- ARGV[5] when the fence key expires (unix ms)
--
-- Returns
--   {1}           written
--   {0, holder}   the key holds something else now ('' when missing);
--                 nothing was changed
--   {-1, fence}   refused: a later reconciler (this larger fence) wrote
--                 here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local cur = redis.call('GET', KEYS[2]) or ''
if cur ~= ARGV[3] then
  return {0, cur}
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[5])
return {1}
