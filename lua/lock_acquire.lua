-- lock_acquire: take a lock that nobody holds and draw its fencing token.
--
-- The lock is a hash with one field, the holder's token, whose value is the
-- holder's hold count (re-entries). Creating it with its expiry only when the
-- key does not exist is the atomic equivalent of SET key token NX PX ttl; the
-- same step increments the fence counter kept beside the lock, so every
-- acquisition of a lock name gets a larger number than the one before.
-- Both keys carry the hash tag {name}, so they live in one cluster slot.
--
-- KEYS[1]  lock key       <prefix>:lock:{name}        hash: token -> hold count
-- KEYS[2]  fence counter  <prefix>:lock:{name}:fence  integer, never expires
-- ARGV[1]  holder token (instance id + random, unique per holder)
-- ARGV[2]  ttl in milliseconds
--
-- Returns
--   n > 0  acquired with hold count 1; n is the new fencing token
--   0      the lock is held (by anyone); nothing was changed
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local fence = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return fence
