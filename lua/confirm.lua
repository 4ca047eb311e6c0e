-- confirm: mark reservations whose orders MySQL committed as CONFIRMED
-- (RESERVED|CLAIMED -> CONFIRMED); they no longer count as in flight.
--
-- KEYS[1] inflight, KEYS[2] pending, KEYS[3..n] reservation hashes
-- ARGV[1..n-2] the order numbers of KEYS[3..n], in the same order
--
-- Returns the number of reservations moved to CONFIRMED. Any other state
-- (already CONFIRMED, RELEASED, missing) is left as it is.
local moved, qty, done = 0, 0, {}
for i = 3, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'state', 'qty')
  if r[1] == 'RESERVED' or r[1] == 'CLAIMED' then
    redis.call('HSET', KEYS[i], 'state', 'CONFIRMED')
    qty = qty + tonumber(r[2])
    done[#done + 1] = ARGV[i - 2]
    moved = moved + 1
  end
end
-- The sums, written once; ZREM in slices that stay within unpack's limit.
if moved > 0 then
  redis.call('DECRBY', KEYS[1], qty)
  for j = 1, #done, 1000 do
    redis.call('ZREM', KEYS[2], unpack(done, j, math.min(j + 999, #done)))
  end
end
return moved
