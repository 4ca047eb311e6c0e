-- reconcile_unrestore_reservation: take back the reservation hashes the
-- reconciler restored (lua/reconcile_restore_reservation.lua) for orders
-- MySQL has CLOSED since, while they are still CONFIRMED. Such a hash may
-- stand for a release that already ran and found the hash missing (it
-- credited nothing): left there, the reconciler would count the order as
-- closing, units on their way back, that no release brings. Deleted, every
-- release of the order from now on finds it missing and credits nothing, and
-- the reconciler's read counts the units where MySQL has them. A restored
-- hash a release moved on (RELEASED: the release took its units back) is
-- kept. A hash the pipeline wrote (no 'restored' field) is left alone.
-- For a bucketed item the caller then deletes the take marker of each
-- restored hash it names (deleted or RELEASED): the release is done with
-- it, and a marker restored after the release would give the units again
-- on a repeated release. Guarded by the fencing token of the reconciler's
-- lock. All keys share the item's hash tag.
--
-- KEYS[1] fence (last fencing token used on this item)
-- KEYS[2..n] reservation hashes
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] when the fence key expires (unix ms)
--
-- Returns
--   {1, deleted, b1, ..., bn-1}  applied: deleted is how many hashes were
--                       deleted; bi is the bucket whose take marker goes for
--                       hash i ('' for none: not restored, not CONFIRMED or
--                       RELEASED, or an item with one stock key)
--   {-1, fence}         refused: a later reconciler (this larger fence)
--                       wrote here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local out, deleted = {1, 0}, 0
for i = 2, #KEYS do
  local h = redis.call('HMGET', KEYS[i], 'state', 'restored', 'bucket')
  out[i + 1] = ''
  if h[2] and h[1] == 'CONFIRMED' then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
    out[i + 1] = h[3] or ''
  elseif h[2] and h[1] == 'RELEASED' then
    out[i + 1] = h[3] or ''
  end
end
out[2] = deleted
if deleted > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return out
