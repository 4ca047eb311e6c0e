-- The reserve script as it was before sales had sizes (commit b720968),
-- for TestUpgradeCarriesARunningSaleOver: the previous version's reserve.
-- reserve: take stock for one or more orders of one item, atomically, in one
-- round trip. The orders are taken one after the other, each exactly as if
-- it ran alone: a batch is only fewer round trips, never other answers.
--
-- KEYS[1] stock     units Redis may still sell (string integer); for a
--                   bucketed item (ARGV[2] set) the bucket marker instead
-- KEYS[2] inflight  sum of quantities in RESERVED or CLAIMED
-- KEYS[3] pending   sorted set: order_no by reserved-at (ms)
-- then three keys per order i (0-based), at 4+3i:
--   res    reservation hash of this order
--   quota  the user's quota in the activity: the order_no holding it
--   idem   the user's idempotency record: the order_no this key made
-- ARGV[1] item_id
-- ARGV[2] '' for an item with one stock key; for a bucketed item (always a
--         batch of one) the bucket the caller already took the quantity
--         from (bucket_take): the stock is then neither checked nor taken
--         here, the bucket is recorded in the reservation, and on a refusal
--         the caller gives the units back to it (bucket_give)
-- then eight arguments per order i, at 3+8i: order_no, user_id,
--   activity_id, quantity, now (ms), idempotency key, quota/idempotency
--   ttl (ms), reservation ttl (ms)
--
-- Returns two values per order. Checks, in this order of precedence (a
-- short stock never burns the quota):
--   -1, 0           not warmed (no stock key, or no bucket marker)
--   -2, order_no    duplicate idempotency key: the order it produced
--   -3, order_no    the user holds a live order in the activity
--   -4, stock       not enough stock
--    1, stock       reserved; stock is what is left (-1 for a bucketed item)
local bucket = ARGV[2] or ''
local out = {}
local stock = redis.call('GET', KEYS[1])
local taken, pending = 0, {}
for i = 0, (#KEYS - 3) / 3 - 1 do
  local res, quota, idem = KEYS[4 + 3 * i], KEYS[5 + 3 * i], KEYS[6 + 3 * i]
  local a = 3 + 8 * i
  local no, qty, at = ARGV[a], tonumber(ARGV[a + 3]), ARGV[a + 4]
  local code, val = 1, -1
  local prior, holder
  if not stock then
    code, val = -1, 0
  else
    prior = redis.call('GET', idem)
    if prior then
      code, val = -2, prior
    else
      holder = redis.call('GET', quota)
      if holder then
        code, val = -3, holder
      elseif bucket == '' and tonumber(stock) < qty then
        code, val = -4, tonumber(stock)
      end
    end
  end
  if code == 1 then
    if bucket == '' then
      stock = tonumber(stock) - qty
      val = stock
    end
    taken = taken + qty
    pending[#pending + 1] = at
    pending[#pending + 1] = no
    redis.call('HSET', res, 'state', 'RESERVED', 'user', ARGV[a + 1], 'activity', ARGV[a + 2],
      'item', ARGV[1], 'qty', qty, 'at', at, 'key', ARGV[a + 5])
    if bucket ~= '' then redis.call('HSET', res, 'bucket', bucket) end
    redis.call('PEXPIRE', res, ARGV[a + 7])
    redis.call('SET', quota, no, 'PX', ARGV[a + 6])
    redis.call('SET', idem, no, 'PX', ARGV[a + 6])
  end
  out[#out + 1] = code
  out[#out + 1] = val
end
-- The batch's sums, written once (the script is atomic: nothing sees the
-- keys in between).
if taken > 0 then
  if bucket == '' then redis.call('DECRBY', KEYS[1], taken) end
  redis.call('INCRBY', KEYS[2], taken)
  redis.call('ZADD', KEYS[3], unpack(pending))
end
return out
