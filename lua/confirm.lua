-- confirm: mark reservations whose orders MySQL committed as CONFIRMED
-- (RESERVED|CLAIMED -> CONFIRMED); they no longer count as in flight. One
-- call confirms orders of any items of one sale (one hash tag).
--
-- KEYS, item after item: the item's inflight sum, its pending set, then the
--   reservation hashes of its orders
-- ARGV[1] n, the number of items; ARGV[2..n+1] how many orders each item
--   has; then the order numbers, in the order of their reservation keys
--
-- Returns the number of reservations moved to CONFIRMED. Any other state
-- (already CONFIRMED, RELEASED, missing) is left as it is.
local n = tonumber(ARGV[1])
local k, a, moved = 1, n + 2, 0
for g = 1, n do
  local inflight, pending = KEYS[k], KEYS[k + 1]
  k = k + 2
  local qty, done = 0, {}
  for _ = 1, tonumber(ARGV[g + 1]) do
    local r = redis.call('HMGET', KEYS[k], 'state', 'qty')
    if r[1] == 'RESERVED' or r[1] == 'CLAIMED' then
      redis.call('HSET', KEYS[k], 'state', 'CONFIRMED')
      qty = qty + tonumber(r[2])
      done[#done + 1] = ARGV[a]
    end
    k, a = k + 1, a + 1
  end
  -- The sums, written once per item; ZREM in slices that stay within
  -- unpack's limit.
  if #done > 0 then
    redis.call('DECRBY', inflight, qty)
    for j = 1, #done, 1000 do
      redis.call('ZREM', pending, unpack(done, j, math.min(j + 999, #done)))
    end
    moved = moved + #done
  end
end
return moved
