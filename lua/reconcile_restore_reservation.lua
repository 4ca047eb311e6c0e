-- reconcile_restore_reservation: give CREATED orders MySQL holds their
-- reservation hashes back (Redis lost them: a restore from an older state),
-- CONFIRMED, so that the release after a later close (cancel, unpaid
-- timeout, sale cancel) credits the order's units to Redis once, as it does
-- for an order whose hash was never lost. Each hash is written only if it is
-- missing: a hash that exists, in whatever state, is left alone (a release
-- that already ran on it keeps its RELEASED). The hash has the fields
-- lua/reserve.lua writes, plus 'restored' (the fencing token), which marks
-- it as the reconciler's (lua/reconcile_unrestore_reservation.lua).
-- Guarded by the fencing token of the reconciler's lock. All keys share the
-- item's hash tag.
--
-- KEYS[1] fence (last fencing token used on this item)
-- KEYS[2..n] reservation hashes
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] when the fence key expires (unix ms)
-- ARGV[3] item id
-- then seven arguments for each KEYS[i+1] (i = 1..n-1), at 4+7(i-1):
--   user, activity, quantity, reserved at (ms), idempotency key,
--   bucket ('' for an item with one stock key), hash ttl (ms)
--
-- Returns
--   {1, w1, ..., wn-1}  applied: wi is 1 when hash i was missing and is
--                       written now, else 0
--   {-1, fence}         refused: a later reconciler (this larger fence)
--                       wrote here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local out, written = {1}, 0
for i = 2, #KEYS do
  local a = 4 + 7 * (i - 2)
  if redis.call('EXISTS', KEYS[i]) == 1 then
    out[i] = 0
  else
    redis.call('HSET', KEYS[i], 'state', 'CONFIRMED', 'user', ARGV[a], 'activity', ARGV[a + 1],
      'item', ARGV[3], 'qty', ARGV[a + 2], 'at', ARGV[a + 3], 'key', ARGV[a + 4], 'restored', ARGV[1])
    if ARGV[a + 5] ~= '' then redis.call('HSET', KEYS[i], 'bucket', ARGV[a + 5]) end
    redis.call('PEXPIRE', KEYS[i], ARGV[a + 6])
    out[i] = 1
    written = written + 1
  end
end
if written > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return out
