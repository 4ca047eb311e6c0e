-- lock_fenced_set: a write guarded by a fencing token.
--
-- The target is a hash holding the value and the fence of the write that put
-- it there. A write is refused when the stored fence is larger than the
-- writer's, so a holder that was paused while its lock expired cannot
-- overwrite what a later holder wrote. An equal fence is accepted: one holder
-- may write the same key several times while it holds the lock.
-- It touches one key, so it works on Redis Cluster for any key name.
--
-- KEYS[1]  target key  hash: value -> the data, fence -> fence of that write
-- ARGV[1]  the writer's fencing token (a positive integer)
-- ARGV[2]  the value to store
--
-- Returns
--   1  written
--   0  refused: the key holds a write with a larger fence; nothing was changed
local stored = redis.call('HGET', KEYS[1], 'fence')
if stored and tonumber(stored) > tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
return 1
