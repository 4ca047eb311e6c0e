-- room_control: writes the operator's live settings of a sale's waiting
-- room (the PATCH of its room, after MySQL committed them), unless the
-- room already holds those of this version or a later one: a change sent
-- again after its answer was lost, or one overtaken by a later change,
-- writes nothing.
--
-- The rate's bucket is settled at now under the settings it ran with,
-- then counts under the new ones from now on: a resume starts with an
-- empty bucket (no admissions for the paused time), a change of rate does
-- not reprice the time before it.
--
-- KEYS[1] ctl   hash: rate, paused, pass, ver (see room_advance)
-- KEYS[2] tick  hash: at (ms) and tokens, the rate's bucket (see
--               room_advance); untouched before the room's first advance
--               from the start
-- ARGV[1] admissions per second, ARGV[2] paused (1 or 0), ARGV[3]
--         passthrough (1 or 0), ARGV[4] the settings' version
-- ARGV[5] now (ms)
-- ARGV[6] the room's keys' lifetime (ms)
--
-- Returns 1 when it wrote the settings, 0 when the room held those of
-- this version or a later one.
local ctl, tick = KEYS[1], KEYS[2]
local rate, paused, pass, ver = tonumber(ARGV[1]), ARGV[2] == '1', ARGV[3] == '1', tonumber(ARGV[4])
local now = tonumber(ARGV[5])

local have = redis.call('HMGET', ctl, 'rate', 'paused', 'pass', 'ver')
if have[4] and tonumber(have[4]) >= ver then return 0 end

local at = redis.call('HGET', tick, 'at')
if at then
  at = tonumber(at)
  local tokens = tonumber(redis.call('HGET', tick, 'tokens') or 0)
  local was_rate = tonumber(have[1] or rate)
  if now > at then
    if have[2] == '1' or have[3] == '1' then
      tokens = 0
    else
      tokens = math.min(was_rate, tokens + was_rate * (now - at) / 1000)
    end
    at = now
  end
  if paused or pass then tokens = 0 end
  redis.call('HSET', tick, 'at', at, 'tokens', tostring(math.min(tokens, rate)))
end

redis.call('HSET', ctl, 'rate', rate, 'paused', ARGV[2], 'pass', ARGV[3], 'ver', ver)
redis.call('PEXPIRE', ctl, ARGV[6])
return 1
