-- lock_release: give back one hold of a lock, compare-and-delete style.
--
-- Only the holder named by the token can change the lock, so a holder whose
-- lock expired cannot delete the lock of the next holder. The key is deleted
-- when the hold count reaches zero; otherwise its expiry is reset.
--
-- KEYS[1]  lock key  <prefix>:lock:{name}  hash: token -> hold count
-- ARGV[1]  holder token
-- ARGV[2]  ttl in milliseconds (used while holds remain)
--
-- Returns
--   n > 0  still held; n holds remain and the expiry was reset to ttl
--   0      released; the key was deleted
--   -1     the lock is not held by this token; nothing was changed
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return n
end
redis.call('DEL', KEYS[1])
return 0
