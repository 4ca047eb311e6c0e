-- room_build: writes a sale's waiting room from its record in MySQL, the
-- way the room is rebuilt after Redis lost it (stockredis.BuildRoom). A
-- build is three steps, each one call: begin, add (as often as needed),
-- commit. Between begin and commit the room has no generation, so
-- room_join and room_advance touch nothing and answer {-1}. A build
-- holds a token from begin: a later begin (another build) replaces it, and
-- an add or commit carrying another token does nothing and answers 0, so
-- a build that stalled can never write over the one after it.
--
-- KEYS[1..10] early, late, seq, frozen, adm, used, held, next, tick, gen
--             (see room_join and room_advance)
-- KEYS[11]    ctl: the room's live settings (see room_advance); a build
--             keeps them, and its commit writes its own only when they
--             are of a later version
-- KEYS[12]    building: the token of the build under way
-- KEYS[13]    earlylog (see room_join): an early member added is appended
-- KEYS[14..16] lane, lnext, lcode (see room_join and room_advance)
-- ARGV[1] 'begin', 'add' or 'commit'
-- ARGV[2] the build's token
-- begin:  ARGV[3] the build's lifetime (ms): removes the generation and
--         every other key of the room, then records the token
-- add:    ARGV[3] 'early' or 'late', then score, member pairs for that
--         sorted set (early: the rank; late: the sequence number); or
--         'lane', then score, member, digest triples: the lane's members
--         (scored as room_join scores them) and, for those whose place
--         still holds their code's use, its digest ('' for none)
-- commit: ARGV[3] the generation, ARGV[4] the last sequence number,
--         ARGV[5] the early joiners' count E once the room froze (-1
--         before the start), ARGV[6] the last position admitted, ARGV[7]
--         now (ms), ARGV[8] the room's keys' lifetime (ms): sets them, no
--         admission outstanding (held 0), the rate's bucket empty from
--         now once the room froze (before, it fills from the start as in
--         a room never lost), ARGV[9..12] the room's live settings as
--         MySQL has them (rate, paused 1|0, passthrough 1|0, version;
--         a rate of 0 writes none: the advances write their callers'),
--         ARGV[13] how many of the lane are taken as admitted, and the
--         generation last
--
-- Returns 1, or 0 when the token is not the build's under way (a commit
-- whose generation is already the room's, sent again after its answer was
-- lost, returns 1).
local op, token = ARGV[1], ARGV[2]
local building = KEYS[12]

if op == 'begin' then
  for i = 1, 10 do redis.call('DEL', KEYS[i]) end
  for i = 13, 16 do redis.call('DEL', KEYS[i]) end
  redis.call('SET', building, token, 'PX', ARGV[3])
  return 1
end
if redis.call('GET', building) ~= token then
  -- A commit sent again after its answer was lost finds its own work done.
  if op == 'commit' and redis.call('GET', KEYS[10]) == ARGV[3] then return 1 end
  return 0
end

if op == 'add' and ARGV[3] == 'lane' then
  for i = 4, #ARGV, 3 do
    redis.call('ZADD', KEYS[14], ARGV[i], ARGV[i + 1])
    if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[16], ARGV[i + 1], ARGV[i + 2]) end
  end
  return 1
end
if op == 'add' then
  local key = KEYS[1]
  if ARGV[3] == 'late' then key = KEYS[2] end
  for i = 4, #ARGV, 2 do
    -- Appended to the log only when new: an add sent again after its
    -- answer was lost writes nothing twice.
    if redis.call('ZADD', key, ARGV[i], ARGV[i + 1]) == 1 and key == KEYS[1] then
      redis.call('RPUSH', KEYS[13], ARGV[i + 1])
    end
  end
  return 1
end

local ttl = ARGV[8]
redis.call('SET', KEYS[3], ARGV[4], 'PX', ttl)
if tonumber(ARGV[5]) >= 0 then
  redis.call('SET', KEYS[4], ARGV[5], 'PX', ttl)
  redis.call('HSET', KEYS[9], 'at', ARGV[7], 'tokens', '0')
  redis.call('PEXPIRE', KEYS[9], ttl)
end
redis.call('SET', KEYS[7], 0, 'PX', ttl)
redis.call('SET', KEYS[8], ARGV[6], 'PX', ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[13], ttl)
redis.call('SET', KEYS[15], ARGV[13], 'PX', ttl)
redis.call('PEXPIRE', KEYS[14], ttl)
redis.call('PEXPIRE', KEYS[16], ttl)
local ver = tonumber(redis.call('HGET', KEYS[11], 'ver') or -1)
if tonumber(ARGV[9]) > 0 and tonumber(ARGV[12]) >= ver then
  redis.call('HSET', KEYS[11], 'rate', ARGV[9], 'paused', ARGV[10], 'pass', ARGV[11], 'ver', ARGV[12])
end
redis.call('PEXPIRE', KEYS[11], ttl)
redis.call('SET', KEYS[10], ARGV[3], 'PX', ttl)
redis.call('DEL', building)
return 1
