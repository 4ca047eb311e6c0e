-- lock_renew: the watchdog's renewal; reset the expiry of a lock we hold.
--
-- The token check keeps a holder from extending a lock that is no longer its
-- own (expired, then taken by someone else).
--
-- KEYS[1]  lock key  <prefix>:lock:{name}  hash: token -> hold count
-- ARGV[1]  holder token
-- ARGV[2]  ttl in milliseconds
--
-- Returns
--   1  renewed; the key now expires in ttl
--   0  the lock is not held by this token (gone or taken); nothing was changed
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
