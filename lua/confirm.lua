-- confirm: mark reservations whose orders MySQL committed as CONFIRMED
-- (RESERVED|CLAIMED -> CONFIRMED); they no longer count as in flight.
--
-- KEYS[1] inflight, KEYS[2] pending, KEYS[3..n] reservation hashes
-- ARGV[1..n-2] the order numbers of KEYS[3..n], in the same order
--
-- Returns the number of reservations moved to CONFIRMED. Any other state
-- (already CONFIRMED, RELEASED, missing) is left as it is.
local moved = 0
for i = 3, #KEYS do
  local state = redis.call('HGET', KEYS[i], 'state')
  if state == 'RESERVED' or state == 'CLAIMED' then
    local qty = tonumber(redis.call('HGET', KEYS[i], 'qty'))
    redis.call('HSET', KEYS[i], 'state', 'CONFIRMED')
    redis.call('DECRBY', KEYS[1], qty)
    redis.call('ZREM', KEYS[2], ARGV[i - 2])
    moved = moved + 1
  end
end
return moved
