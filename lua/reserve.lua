-- reserve: take stock for one or more orders, of one item or of several
-- items of one sale (its sizes: their keys share the sale's hash tag; on a
-- single node, not a cluster, items of several sales), atomically, in one
-- round trip. The orders are taken one after the other,
-- each exactly as if it ran alone: a batch is only fewer round trips, never
-- other answers.
--
-- ARGV[1] m, the number of items in the batch
-- ARGV[2] '' for items with one stock key each; for a bucketed item (always
--         one item and a batch of one) the bucket the caller already took
--         the quantity from (bucket_take): the stock is then neither checked
--         nor taken here, the bucket is recorded in the reservation, and on
--         a refusal the caller gives the units back to it (bucket_give);
--         'room' for orders of one sale with a waiting room (its items
--         have one stock key each): each order must hold an unused,
--         unexpired admission (see room_join.lua) granting its quantity,
--         and a reserved order uses it up
-- ARGV[3 .. 2+m] the item id of each item j (0-based) of the batch
-- KEYS, three per item j at 1+3j:
--   stock     units Redis may still sell (string integer); for a bucketed
--             item the bucket marker instead
--   inflight  sum of quantities in RESERVED or CLAIMED
--   pending   sorted set: order_no by reserved-at (ms)
-- in room mode, then the room's adm, used, held and lcode keys (r = 4; else
-- r = 0): a buyer whose place in the priority lane holds a code's use
-- (lcode, see room_join.lua) gives it to their order, which records its
-- digest as 'code' and 'lane' '1' and takes no second use
-- then four keys per order i (0-based), at 1+3m+r+4i:
--   res    reservation hash of this order
--   quota  the user's quota in the activity: the order_no holding it
--   idem   the user's idempotency record: the order_no this key made
--   codes  the activity's presale codes (access.LoadedField '.' once
--          loaded, and a field "<left>|<subject>" per usable code by its
--          digest); read only when the order names a code
-- then ten arguments per order i, at 3+m+10i: the index j of its item,
--   order_no, user_id, activity_id, quantity, now (ms), idempotency key,
--   quota/idempotency ttl (ms), reservation ttl (ms), and the digest of the
--   presale code the order uses ('' for none)
--
-- Returns two values per order. Checks, in this order of precedence (a
-- short stock never burns the quota, a retried key never takes a second
-- code's use, and a code is taken only with the stock):
--   -1, 0           not warmed (no stock key, or no bucket marker; or the
--                   order names a code and the sale's codes are not loaded)
--   -2, order_no    duplicate idempotency key: the order it produced
--   -3, order_no    the user holds a live order in the activity
--   -5, 0           room mode: no unused, unexpired admission
--   -6, grant       room mode: the quantity is above the admission's grant
--   -7, 0           no such code: never loaded, revoked, or bound to another
--                   user
--   -8, 0           the code has no use left
--   -4, stock       not enough stock
--    1, stock       reserved; stock is what is left (-1 for a bucketed item);
--                   the code's use is taken (left - 1) and the reservation
--                   records its digest as 'code', for the release
--#include codes
local m = tonumber(ARGV[1])
local bucket = ARGV[2] or ''
local room = bucket == 'room'
local r, used_grants = 0, 0
if room then bucket, r = '', 4 end
local stock, taken, pending = {}, {}, {}
for j = 0, m - 1 do
  stock[j] = redis.call('GET', KEYS[1 + 3 * j])
  if stock[j] and bucket == '' then stock[j] = tonumber(stock[j]) end
  taken[j], pending[j] = 0, {}
end
local out = {}
for i = 0, (#KEYS - 3 * m - r) / 4 - 1 do
  local k = 1 + 3 * m + r + 4 * i
  local res, quota, idem, codes = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local a = 3 + m + 10 * i
  local digest, left, subject = ARGV[a + 9], 0, ''
  local j = tonumber(ARGV[a])
  local no, qty, at = ARGV[a + 1], tonumber(ARGV[a + 4]), ARGV[a + 5]
  local code, val = 1, -1
  local admission
  if not stock[j] then
    code, val = -1, 0
  else
    local prior = redis.call('GET', idem)
    if prior then
      code, val = -2, prior
    else
      local holder = redis.call('GET', quota)
      if holder then
        code, val = -3, holder
      elseif room then
        admission = tonumber(redis.call('ZSCORE', KEYS[1 + 3 * m], ARGV[a + 2]) or -1)
        if admission < 0 or math.floor(admission / 1024) <= tonumber(at) then
          code, val = -5, 0
        elseif qty > admission % 1024 then
          code, val = -6, admission % 1024
        end
      end
      if code == 1 and digest ~= '' then
        -- Each order writes its use below before the next is checked, so
        -- a batch sees every earlier order's take, as runs alone would.
        if redis.call('HEXISTS', codes, '.') == 0 then
          code, val = -1, 0
        else
          local v = redis.call('HGET', codes, digest)
          if v then left, subject = code_value(v) end
          if not v or (subject ~= '' and subject ~= ARGV[a + 2]) then
            code, val = -7, 0
          elseif left <= 0 then
            code, val = -8, 0
          end
        end
      end
      if code == 1 and bucket == '' and stock[j] < qty then
        code, val = -4, stock[j]
      end
    end
  end
  if code == 1 then
    if bucket == '' then
      stock[j] = stock[j] - qty
      val = stock[j]
    end
    taken[j] = taken[j] + qty
    local p = pending[j]
    p[#p + 1] = at
    p[#p + 1] = no
    redis.call('HSET', res, 'state', 'RESERVED', 'user', ARGV[a + 2], 'activity', ARGV[a + 3],
      'item', ARGV[3 + j], 'qty', qty, 'at', at, 'key', ARGV[a + 6])
    if bucket ~= '' then redis.call('HSET', res, 'bucket', bucket) end
    if digest ~= '' then
      redis.call('HSET', codes, digest, (left - 1) .. '|' .. subject)
      redis.call('HSET', res, 'code', digest)
    elseif room then
      local held_code = redis.call('HGET', KEYS[4 + 3 * m], ARGV[a + 2])
      if held_code then
        redis.call('HDEL', KEYS[4 + 3 * m], ARGV[a + 2])
        redis.call('HSET', res, 'code', held_code, 'lane', '1')
      end
    end
    if room then
      -- The admission is used up; the reservation keeps it, so a release
      -- the api's 503 asks for gives it back (release.lua).
      local user, sc = ARGV[a + 2], string.format('%.0f', admission)
      redis.call('ZREM', KEYS[1 + 3 * m], user)
      redis.call('HSET', KEYS[2 + 3 * m], user, sc)
      redis.call('PEXPIRE', KEYS[2 + 3 * m], ARGV[a + 7])
      redis.call('HSET', res, 'adm', sc)
      used_grants = used_grants + admission % 1024
    end
    redis.call('PEXPIRE', res, ARGV[a + 8])
    redis.call('SET', quota, no, 'PX', ARGV[a + 7])
    redis.call('SET', idem, no, 'PX', ARGV[a + 7])
  end
  out[#out + 1] = code
  out[#out + 1] = val
end
if used_grants > 0 then redis.call('DECRBY', KEYS[3 + 3 * m], used_grants) end
-- Each item's sums, written once (the script is atomic: nothing sees the
-- keys in between).
for j = 0, m - 1 do
  if taken[j] > 0 then
    if bucket == '' then redis.call('DECRBY', KEYS[1 + 3 * j], taken[j]) end
    redis.call('INCRBY', KEYS[2 + 3 * j], taken[j])
    redis.call('ZADD', KEYS[3 + 3 * j], unpack(pending[j]))
  end
end
return out
