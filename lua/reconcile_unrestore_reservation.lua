-- reconcile_unrestore_reservation: take back the reservation hashes the
-- reconciler restored (lua/reconcile_restore_reservation.lua) for orders
-- MySQL has CLOSED since, while they are still CONFIRMED. Such a hash may
-- stand for a release that already ran and found the hash missing (it
-- credited nothing): left there, the reconciler would count the order as
-- closing, units on their way back, that no release brings. Deleted, every
-- release of the order from now on finds it missing and credits nothing, and
-- the reconciler's read counts the units where MySQL has them. A hash a
-- release moved on (RELEASED: it credited) and a hash the pipeline wrote (no
-- 'restored' field) are left alone. Guarded by the fencing token of the
-- reconciler's lock. All keys share the item's hash tag.
--
-- KEYS[1] fence (last fencing token used on this item)
-- KEYS[2..n] reservation hashes
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] when the fence key expires (unix ms)
--
-- Returns
--   {1, b1, ..., bn-1}  applied: bi is the bucket named by hash i when it
--                       was deleted now ('' for an item with one stock key),
--                       or '-' when it was left alone
--   {-1, fence}         refused: a later reconciler (this larger fence)
--                       wrote here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local out, deleted = {1}, 0
for i = 2, #KEYS do
  local h = redis.call('HMGET', KEYS[i], 'state', 'restored', 'bucket')
  if h[1] == 'CONFIRMED' and h[2] then
    redis.call('DEL', KEYS[i])
    out[i] = h[3] or ''
    deleted = deleted + 1
  else
    out[i] = '-'
  end
end
if deleted > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return out
