-- room_advance: lets the next positions of a sale's waiting room in, and
-- reports where the room stands. Every api instance runs it about once a
-- second per room; it depends only on the time it is given, so running it
-- twice at one time admits nobody twice, and a lost answer needs nothing
-- but the next run.
--
-- From the start (the room frozen first, as in room_join) it drops the
-- admissions that expired unused, then admits positions in order while
-- the rate allows (a token bucket of one second's admissions) and the
-- units the outstanding admissions hold stay within the units left: each
-- admission holds a grant of min(the per-user limit, left - held) units.
-- Until every item of the sale is warmed it admits nobody.
--
-- KEYS[1..6] early, late, seq, frozen, adm, used (see room_join)
-- KEYS[7] held    the units the admissions in adm hold (sum of grants)
-- KEYS[8] next    the last position admitted
-- KEYS[9] tick    hash: at (ms) and tokens, the rate's bucket
-- KEYS[10] gen    the room's generation (see room_join): without it the
--                 script answers {-1} and touches nothing
-- KEYS[11] ctl    hash: rate, paused, pass, ver: the room's live settings
--                 (room_control), which win over the caller's when their
--                 ver is at least the caller's
-- KEYS[12] lane, KEYS[13] lnext: how many of the lane were admitted
-- KEYS[14] lcode, KEYS[15] codes (see room_join)
-- KEYS[16..] the stock key of each item of the sale
-- ARGV[1] now (ms)
-- ARGV[2] the sale's start (ms)
-- ARGV[3] admissions per second, as the caller's copy of the sale says
-- ARGV[4] an admission's lifetime (ms)
-- ARGV[5] the most units one admission holds (the per-user limit, <= 1000)
-- ARGV[6] the room's keys' lifetime (ms)
-- ARGV[7] the most positions this run admits
-- ARGV[8] the latest rate's time (tick's at) this caller saw, 0 for none,
-- ARGV[9] and the generation it saw it in: generations only grow, and at
--         only grows within one, so a room of an older generation, or of
--         that one with an older at, came back from an older copy: the
--         script answers {-2} and touches nothing (the room is to be
--         rebuilt before it admits anyone)
-- ARGV[10] paused (1 or 0), ARGV[11] passthrough (1 or 0) and ARGV[12]
--         the control's version, as the caller's copy of the sale says:
--         a copy of a later version than ctl's (Redis lost the operator's
--         write, or came back from an older copy) is written to ctl first
--
-- While paused nobody is admitted and the rate's bucket stays empty, its
-- clock moving with now: a resume admits at the rate from then on, never
-- the paused time's admissions at once. In passthrough the rate is not
-- applied: positions are admitted in order while units are left (up to
-- ARGV[7] a run).
--
-- The lane (a code_priority sale's code holders) goes first: while it has
-- members not admitted, they are admitted in its order, under the same rate
-- and units; then the line, whose positions held by lane members are passed
-- over (admitted already: the lane is always drained first). An admission
-- that expires unused gives the use its place held back to its code.
--
-- Returns {started, joined, E, next, held, left, admitted, gen, at, rate,
-- paused, passthrough, ver, lane, lnext}, {-1} when the room has no generation, or {-2}
-- when it is older than the caller has seen it: left is -1 while an item
-- is not warmed; before the start only joined (the early joiners so far),
-- gen and the control are set (at 0).
--#include codes
local early, late, seq, frozen, adm = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local held_key, next_key, tick = KEYS[7], KEYS[8], KEYS[9]
local now, starts = tonumber(ARGV[1]), tonumber(ARGV[2])
local rate, life, grant_max, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local cap = tonumber(ARGV[7])

local gen = redis.call('GET', KEYS[10])
if not gen then return {-1} end
gen = tonumber(gen)
local seen = tonumber(ARGV[8])
local seen_gen = tonumber(ARGV[9])
if gen < seen_gen or (seen > 0 and gen == seen_gen and tonumber(redis.call('HGET', tick, 'at') or 0) < seen) then
  return {-2}
end

local ctl = KEYS[11]
local paused, pass, ver = ARGV[10] == '1', ARGV[11] == '1', tonumber(ARGV[12])
local have = redis.call('HMGET', ctl, 'rate', 'paused', 'pass', 'ver')
if have[4] and tonumber(have[4]) >= ver then
  rate, paused, pass, ver = tonumber(have[1]), have[2] == '1', have[3] == '1', tonumber(have[4])
else
  redis.call('HSET', ctl, 'rate', rate, 'paused', ARGV[10], 'pass', ARGV[11], 'ver', ver)
  redis.call('PEXPIRE', ctl, ttl)
end
local function flag(b) if b then return 1 end return 0 end

if now < starts and not redis.call('GET', frozen) then
  return {0, redis.call('ZCARD', early), -1, 0, 0, -1, 0, gen, 0, rate, flag(paused), flag(pass), ver,
    redis.call('ZCARD', KEYS[12]), 0}
end
local e = redis.call('GET', frozen)
if not e then
  e = redis.call('ZCARD', early)
  redis.call('SET', frozen, e, 'PX', ttl)
end
e = tonumber(e)
local joined = e + tonumber(redis.call('GET', seq) or 0)

-- Admissions that expired unused (expiry <= now) give their units back.
local cut = '(' .. string.format('%.0f', (now + 1) * 1024)
local gone = redis.call('ZRANGEBYSCORE', adm, '-inf', cut, 'WITHSCORES')
local held = tonumber(redis.call('GET', held_key) or 0)
local lcode, codes = KEYS[14], KEYS[15]
for i = 2, #gone, 2 do
  held = held - tonumber(gone[i]) % 1024
  local d = redis.call('HGET', lcode, gone[i - 1])
  if d then
    redis.call('HDEL', lcode, gone[i - 1])
    local v = redis.call('HGET', codes, d)
    if v then
      local l, subject = code_value(v)
      redis.call('HSET', codes, d, (l + 1) .. '|' .. subject)
    end
  end
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', adm, '-inf', cut) end
-- Never below nothing: a Redis brought back from an older state may hold
-- a held count older than the admissions the reserves used since.
if held < 0 then held = 0 end

local left = 0
for k = 16, #KEYS do
  local s = redis.call('GET', KEYS[k])
  if not s then
    left = -1
    break
  end
  left = left + math.max(tonumber(s), 0)
end

local at = tonumber(redis.call('HGET', tick, 'at') or starts)
local tokens = tonumber(redis.call('HGET', tick, 'tokens') or 0)
if now > at then
  tokens = math.min(rate, tokens + rate * (now - at) / 1000)
  at = now
end
if paused or pass then tokens = 0 end

local nxt = tonumber(redis.call('GET', next_key) or 0)
local lane, lnext_key = KEYS[12], KEYS[13]
local lanes = redis.call('ZCARD', lane)
local lnext = tonumber(redis.call('GET', lnext_key) or 0)
local admitted, steps = 0, 0
-- steps bounds the line's positions one run passes over (lane members'),
-- as cap bounds those it admits.
while not paused and (lnext < lanes or nxt < joined) and (pass or tokens >= 1) and held < left
  and admitted < cap and steps < 4 * cap do
  local user
  if lnext < lanes then
    user = redis.call('ZRANGE', lane, lnext, lnext)[1]
    lnext = lnext + 1
  else
    if nxt < e then
      user = redis.call('ZRANGE', early, nxt, nxt)[1]
    else
      user = redis.call('ZRANGEBYSCORE', late, nxt - e + 1, nxt - e + 1)[1]
    end
    nxt = nxt + 1
    steps = steps + 1
    if user and lanes > 0 and redis.call('ZSCORE', lane, user) then user = nil end
  end
  if user then
    local g = math.min(grant_max, left - held)
    redis.call('ZADD', adm, string.format('%.0f', (now + life) * 1024 + g), user)
    held = held + g
    if not pass then tokens = tokens - 1 end
    admitted = admitted + 1
  end
end

redis.call('SET', held_key, held, 'PX', ttl)
redis.call('SET', next_key, nxt, 'PX', ttl)
if lanes > 0 then redis.call('SET', lnext_key, lnext, 'PX', ttl) end
redis.call('HSET', tick, 'at', at, 'tokens', tostring(tokens))
redis.call('PEXPIRE', tick, ttl)
redis.call('PEXPIRE', adm, ttl)
return {1, joined, e, nxt, held, left, admitted, gen, at, rate, flag(paused), flag(pass), ver, lanes, lnext}
