-- claim: the consumer takes reservations before writing their orders to
-- MySQL (RESERVED -> CLAIMED). One call claims many orders of one item.
--
-- KEYS[1..n] reservation hashes (same item, same hash tag)
-- ARGV: none
--
-- Returns one state per key, as found before the call:
--   'RESERVED'  now CLAIMED by this call: go ahead
--   'CLAIMED'   already claimed (redelivery or a crashed consumer): go ahead,
--               MySQL's unique order_no makes the insert idempotent
--   'CONFIRMED' the order is already in MySQL
--   'RELEASED'  the API gave the stock back: skip the order
--   'MISSING'   no reservation (Redis lost its data): MySQL decides alone
local out = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HGET', key, 'state')
  if not state then
    out[i] = 'MISSING'
  else
    if state == 'RESERVED' then
      redis.call('HSET', key, 'state', 'CLAIMED')
    end
    out[i] = state
  end
end
return out
