-- room_join: a buyer's place in a sale's waiting room, joining it first
-- when asked to. A buyer has one place: joining again returns it, so a
-- lost answer is resolved by joining again.
--
-- Before the start (and until the room is frozen) a join goes in early,
-- scored by the buyer's rank (room.Rank: the committed seed's order); it
-- has no position yet. The first call from the start freezes the room:
-- early joiners then take positions 1..E by rank, and later joiners
-- queue behind them in arrival order (E + their sequence number).
--
-- KEYS[1] early   sorted set: user by rank
-- KEYS[2] late    sorted set: user by sequence number (1, 2, ...)
-- KEYS[3] seq     the last sequence number given
-- KEYS[4] frozen  E, the early joiners' count, set once from the start
-- KEYS[5] adm     sorted set: user by expiry (ms) * 1024 + grant, the
--                 admissions not yet used
-- KEYS[6] used    hash: user -> the score their admission had when an
--                 order used it
-- KEYS[7] gen     the room's generation (activity_rooms.gen), set last by
--                 the room's build from MySQL (stockredis.BuildRoom): a
--                 room without it was never built or was lost, and the
--                 script answers {-1} and touches nothing
-- KEYS[8] earlylog list: every early joiner, in the order they joined (an
--                 api instance reads who joined since its last read from
--                 it, stockredis.RoomMembers; the late ones it reads from
--                 late by sequence number)
-- KEYS[9] lane    sorted set: the priority lane of a code_priority sale,
--                 the buyers who joined with a valid presale code (every
--                 one of them is in early or late too): an early holder
--                 scored rank / 2^53 (below 1), a late one by their
--                 sequence number, so the lane is its early holders by rank,
--                 then its late ones in arrival order; room_advance admits
--                 it before the line
-- KEYS[10] lcode  hash: lane member -> the digest of the code whose use
--                 their place holds (taken at the join; an order that uses
--                 the admission takes it over, reserve.lua; an admission
--                 that expires unused gives it back, room_advance.lua)
-- KEYS[11] codes  the sale's presale codes (see reserve.lua)
-- ARGV[1] the sale's start (ms)
-- ARGV[2] the room's keys' lifetime (ms)
-- ARGV[3] 'join' or 'look' (look never adds a buyer)
-- ARGV[4..] per buyer, four values: user id, rank (an integer below 2^53),
--         now (ms), and the digest of the presale code they joined with
--         ('' for none: the line only). Buyers who asked together share
--         one run, each handled as if alone, in turn.
--
-- A buyer already in the room gets their place back whatever code they
-- give (a lost answer's retry takes no second use). A new buyer's code is
-- checked first: the sale's codes not loaded answer joined -9, a code that
-- is not there or bound to another buyer -7, one with no use left -8, and
-- nothing is written; a good one takes a use and puts them in the lane.
--
-- Returns, per buyer, eight values {joined, position, E, admission, used,
-- count, gen, lane}, or {-1} when the room has no generation: joined 0 when the
-- buyer is not in the room (look only), 1 when they were, 2 when this run
-- added them (their join is to be recorded in MySQL before it is
-- answered); position -1 before the freeze; admission the buyer's unused
-- admission's score or -1; used the score of the admission an order used,
-- or -1; count, for a buyer not in the room, how many are (as
-- room_advance counts them: the early joiners so far before the freeze,
-- E + the sequence after), else -1; lane -1 for a buyer not in the lane,
-- else their place in it from 1 (0 before the freeze, for an early one).
--#include codes
local early, late, seq, frozen, adm, used = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local starts, ttl, join = tonumber(ARGV[1]), ARGV[2], ARGV[3] == 'join'

local gen = redis.call('GET', KEYS[7])
if not gen then return {-1} end
gen = tonumber(gen)

local out = {}
local addedEarly, addedLate = false, false

local function scores(user)
  return tonumber(redis.call('ZSCORE', adm, user) or -1), tonumber(redis.call('HGET', used, user) or -1)
end

local lane, lcode, codes = KEYS[9], KEYS[10], KEYS[11]
local addedLane = false

-- lanePos is user's place in the lane (see the returns), once e is known.
local function lanePos(user, e)
  if not redis.call('ZSCORE', lane, user) then return -1 end
  if e < 0 then return 0 end
  return redis.call('ZRANK', lane, user) + 1
end

-- takeCode takes one use of digest for user, or answers why not (-9,
-- -7, -8).
local function takeCode(user, digest)
  if redis.call('HEXISTS', codes, '.') == 0 then return -9 end
  local v = redis.call('HGET', codes, digest)
  if not v then return -7 end
  local left, subject = code_value(v)
  if subject ~= '' and subject ~= user then return -7 end
  if left <= 0 then return -8 end
  redis.call('HSET', codes, digest, (left - 1) .. '|' .. subject)
  redis.call('HSET', lcode, user, digest)
  addedLane = true
  return 1
end

local function place(user, rank, now, digest)
  local e = redis.call('GET', frozen)
  if not e and now >= starts then
    e = redis.call('ZCARD', early)
    redis.call('SET', frozen, e, 'PX', ttl)
  end
  e = tonumber(e or -1)

  if redis.call('ZSCORE', early, user) then
    local pos = -1
    if e >= 0 then pos = redis.call('ZRANK', early, user) + 1 end
    local a, u = scores(user)
    return 1, pos, e, a, u, -1, lanePos(user, e)
  end
  local s = redis.call('ZSCORE', late, user)
  if s then
    local a, u = scores(user)
    return 1, e + tonumber(s), e, a, u, -1, lanePos(user, e)
  end
  if not join then
    local count = redis.call('ZCARD', early)
    if e >= 0 then count = e + tonumber(redis.call('GET', seq) or 0) end
    return 0, -1, e, -1, -1, count, -1
  end
  if digest ~= '' then
    local took = takeCode(user, digest)
    if took ~= 1 then return took, -1, e, -1, -1, -1, -1 end
  end
  if e < 0 then
    redis.call('ZADD', early, rank, user)
    redis.call('RPUSH', KEYS[8], user)
    addedEarly = true
    if digest == '' then return 2, -1, -1, -1, -1, -1, -1 end
    -- Exact: a rank below 2^53 over 2^53, written with every digit.
    redis.call('ZADD', lane, string.format('%.17g', tonumber(rank) / 9007199254740992), user)
    return 2, -1, -1, -1, -1, -1, 0
  end
  local n = redis.call('INCR', seq)
  redis.call('ZADD', late, n, user)
  addedLate = true
  if digest == '' then return 2, e + n, e, -1, -1, -1, -1 end
  redis.call('ZADD', lane, n, user)
  return 2, e + n, e, -1, -1, -1, lanePos(user, e)
end

for i = 4, #ARGV, 4 do
  local joined, pos, e, a, u, count, lp = place(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3])
  local k = #out
  out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5], out[k + 6], out[k + 7], out[k + 8] =
    joined, pos, e, a, u, count, gen, lp
end
if addedLane then
  redis.call('PEXPIRE', lane, ttl)
  redis.call('PEXPIRE', lcode, ttl)
end
if addedEarly then
  redis.call('PEXPIRE', early, ttl)
  redis.call('PEXPIRE', KEYS[8], ttl)
end
if addedLate then
  redis.call('PEXPIRE', seq, ttl)
  redis.call('PEXPIRE', late, ttl)
end
return out
