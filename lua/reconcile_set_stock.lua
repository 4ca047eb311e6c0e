-- reconcile_set_stock: the reconciler's repair of an item's stock, a
-- compare-and-set guarded by the fencing token of its lock.
--
-- It writes only when the stock and inflight values are still the ones the
-- reconciler read (so no reservation, release or confirm happened since
-- its check) and when no later reconciler has written to this item (its
-- fence is not smaller than the last one used here).
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] fence (last fencing token used
--         on this item)
-- ARGV[1] fencing token of the reconciler's lock (a positive integer)
-- ARGV[2] the stock value read, or '' when the key was missing
-- ARGV[3] the inflight value read ('0' when missing)
-- ARGV[4] the new stock (>= 0)
-- ARGV[5] ttl in ms for a stock key that was missing and is created; an
--         existing key keeps its TTL
-- ARGV[6] when the fence key expires (unix ms)
--
-- Returns
--   {1}                    written; the fence key now holds ARGV[1]
--   {0, stock, inflight}   changed concurrently: the values now (stock ''
--                          when missing); nothing was changed
--   {-1, fence}            refused: a later reconciler (this larger fence)
--                          wrote here; nothing was changed
local last = redis.call('GET', KEYS[3])
if last and tonumber(last) > tonumber(ARGV[1]) then
  return {-1, tonumber(last)}
end
local cur = redis.call('GET', KEYS[1]) or ''
local inflight = redis.call('GET', KEYS[2]) or '0'
if cur ~= ARGV[2] or tonumber(inflight) ~= tonumber(ARGV[3]) then
  return {0, cur, tonumber(inflight)}
end
if cur == '' then
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[4], 'KEEPTTL')
end
redis.call('SET', KEYS[3], ARGV[1], 'PXAT', ARGV[6])
return {1}
