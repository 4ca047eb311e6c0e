-- reconcile_restore_missing: give keys Redis lost (a restore from an older
-- state, a FLUSHALL) the values MySQL stands behind: the idempotency records
-- of the orders MySQL holds (a retry with the same Idempotency-Key then gets
-- the same order number instead of reserving a new one) and the quota keys
-- of its live orders (the buyer cannot reserve a second time). Each key is
-- written only if it is missing (SET NX): a key that exists, whatever it
-- holds, is left alone, so nothing the pipeline wrote since is overwritten.
-- Guarded by the fencing token of the reconciler's lock. All keys share the
-- item's hash tag.
--
-- KEYS[1] fence (last fencing token used on this item)
-- KEYS[2..n] the keys to write where missing
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] when the fence key expires (unix ms)
-- ARGV[2i+1], ARGV[2i+2] for KEYS[i+1] (i = 1..n-1): the value (an order
--         number), and its ttl in ms
--
-- Returns
--   {1, written, set}  written: how many keys were missing and are set
--                      now; set: their positions (1..n-1)
--   {-1, fence}        refused: a later reconciler (this larger fence)
--                      wrote here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local written, set = 0, {}
for i = 2, #KEYS do
  local j = 2 * i - 1
  if redis.call('SET', KEYS[i], ARGV[j], 'NX', 'PX', ARGV[j + 1]) then
    written = written + 1
    set[written] = i - 1
  end
end
if written > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return {1, written, set}
