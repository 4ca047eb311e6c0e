-- lock_reenter: take a lock again that this holder already holds.
--
-- Adds one to the holder's hold count and resets the expiry. It never creates
-- the lock: a holder whose lock expired or was taken must not get it back
-- through a re-entry (its count and fence would be wrong).
--
-- KEYS[1]  lock key  <prefix>:lock:{name}  hash: token -> hold count
-- ARGV[1]  holder token
-- ARGV[2]  ttl in milliseconds
--
-- Returns
--   n > 0  re-entered; n is the new hold count
--   0      the lock is not held by this token; nothing was changed
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
