-- reconcile_restore_idem: give orders MySQL holds their idempotency records
-- back (Redis lost them: a restore from an older state), so a retry with
-- the same Idempotency-Key gets the same order number instead of reserving
-- a new one. Each record is written only if its key is missing (SET NX): a
-- record that exists, whatever order it names, is left alone. Guarded by
-- the fencing token of the reconciler's lock. All keys share the item's
-- hash tag.
--
-- KEYS[1] fence (last fencing token used on this item)
-- KEYS[2..n] idempotency records
-- ARGV[1] fencing token of the reconciler's lock
-- ARGV[2] when the fence key expires (unix ms)
-- ARGV[2i+1], ARGV[2i+2] for KEYS[i+1] (i = 1..n-1): the order number it
--         should hold, and its ttl in ms (until the activity ends plus
--         margin)
--
-- Returns
--   {1, written}  written: how many records were missing and are set now
--   {-1, fence}   refused: a later reconciler (this larger fence) wrote
--                 here; nothing was changed
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local written = 0
for i = 2, #KEYS do
  local j = 2 * i - 1
  if redis.call('SET', KEYS[i], ARGV[j], 'NX', 'PX', ARGV[j + 1]) then
    written = written + 1
  end
end
if written > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
end
return {1, written}
