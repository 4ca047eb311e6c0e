-- release: give one reservation's stock and quota back, at most once.
--
-- KEYS[1] stock, KEYS[2] inflight, KEYS[3] pending, KEYS[4] reservation hash,
-- KEYS[5] quota, KEYS[6] idempotency record, KEYS[7] the activity's presale
-- codes (see reserve.lua), KEYS[8] the item's recent give-backs; with
-- ARGV[4] '1', KEYS[9..12] the sale's room's adm, used, held and lcode keys
-- (see room_join.lua)
-- ARGV[1] order_no
-- ARGV[2] the states this release may start from, comma-separated
--         (the API: RESERVED; the consumer: CLAIMED; cancel/timeout: CONFIRMED)
-- ARGV[3] reason
-- ARGV[4] '1' to forget the idempotency record too (the API answered 503, so
--         a retry with the same key must be able to try again), else '0';
--         with '1' an admission the reservation used is given back too,
--         granting the reservation's quantity, so that retry is admitted
-- ARGV[5] MySQL's stock, or '' : when given, stock is then capped at what
--         MySQL can still fulfil (MySQL stock - in flight), so units MySQL
--         refused are not sold again (the consumer's OUT_OF_STOCK release)
-- ARGV[6] '1' to leave the presale code's use taken (the consumer's release
--         of an order MySQL refused for its code: MySQL has no use of it
--         left, so Redis must not offer one), else '0'
-- ARGV[7] the buyer's live order MySQL refused this one for (ALREADY_PURCHASED
--         or DUPLICATE_REQUEST), or '': the quota key, while it
--         holds this order, passes to that one instead of being deleted.
--         Only a quota Redis lost lets such an order through; deleted, the
--         live order would hold no quota and the buyer could pass again.
-- ARGV[8] retention of the recent give-backs (ms)
--
-- Returns {1, from_state} when it released, {0, state} when it did nothing
-- (state is the reservation's current state, or 'MISSING'). RELEASED and
-- MISSING hold nothing: the caller's work is done (a repeated release whose
-- first answer was lost lands here); for a bucketed reservation found
-- RELEASED it returns {0, 'RELEASED', bucket, qty} so the caller can repeat
-- its bucket_give, which is idempotent per order.
-- A reservation of a bucketed item (its hash has a 'bucket' field) does
-- not credit KEYS[1] (the bucket lives in another slot): it returns
-- {1, from_state, bucket, qty} and the caller gives qty back to that
-- bucket (bucket_give), and caps the buckets itself (ARGV[5] is ignored).
-- Until that give-back the units are in neither the bucket nor the in-flight
-- counter: the release lists the order in the item's recent give-backs
-- (KEYS[8], members "<bucket>:<qty>:<order_no>" by the time in ms of this
-- node's clock, trimmed past the retention), and again at each repeat, so
-- the reconciler counts the units in flight rather than lost while the
-- bucket's take marker says the give-back is still to come.
-- RELEASED -> RELEASED is a no-op, so stock is credited once, and so is the
-- use of the presale code the reservation holds ('code': its field's left
-- count + 1, only while the field exists: a code revoked since stays gone).
-- The quota and idempotency keys are deleted (or the quota handed on,
-- ARGV[7]) only while they still hold this order number: releasing an old
-- order never frees the quota of the user's newer one.
-- The quota and idempotency records of an order that holds nothing any more
-- (released before, or its reservation lost with Redis data) are freed too,
-- so a release whose answer was lost can be repeated and finds its work done.
--#include codes
local function moving(bucket, qty)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', '(' .. (now - tonumber(ARGV[8])))
  redis.call('ZADD', KEYS[8], now, bucket .. ':' .. qty .. ':' .. ARGV[1])
  redis.call('PEXPIRE', KEYS[8], ARGV[8])
end
local function forget()
  if redis.call('GET', KEYS[5]) == ARGV[1] then
    if ARGV[7] and ARGV[7] ~= '' then
      redis.call('SET', KEYS[5], ARGV[7], 'KEEPTTL')
    else
      redis.call('DEL', KEYS[5])
    end
  end
  if ARGV[4] == '1' and redis.call('GET', KEYS[6]) == ARGV[1] then
    redis.call('DEL', KEYS[6])
  end
end
local state = redis.call('HGET', KEYS[4], 'state')
if not state then
  forget()
  return {0, 'MISSING'}
end
if state == 'RELEASED' then
  forget()
  local bucket = redis.call('HGET', KEYS[4], 'bucket')
  if bucket then
    local qty = tonumber(redis.call('HGET', KEYS[4], 'qty'))
    moving(bucket, qty)
    return {0, state, bucket, qty}
  end
  return {0, state}
end
local allowed = false
for s in string.gmatch(ARGV[2], '[^,]+') do
  if s == state then allowed = true end
end
if not allowed then return {0, state} end

local qty = tonumber(redis.call('HGET', KEYS[4], 'qty'))
-- A bucketed reservation's units go back to its bucket, in another slot:
-- the caller credits them after this transition (see the return value).
local bucket = redis.call('HGET', KEYS[4], 'bucket')
-- A stock key that is gone (expired after the sale, or lost) is not
-- recreated: that would sell units nobody warmed.
if not bucket and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCRBY', KEYS[1], qty)
end
if state == 'RESERVED' or state == 'CLAIMED' then
  redis.call('DECRBY', KEYS[2], qty)
  redis.call('ZREM', KEYS[3], ARGV[1])
end
if not bucket and ARGV[5] ~= '' then
  local stock = redis.call('GET', KEYS[1])
  if stock then
    local want = tonumber(ARGV[5]) - tonumber(redis.call('GET', KEYS[2]) or '0')
    if want < 0 then want = 0 end
    if tonumber(stock) > want then redis.call('SET', KEYS[1], want, 'KEEPTTL') end
  end
end
forget()
local adm = redis.call('HGET', KEYS[4], 'adm')
if adm and ARGV[4] == '1' and KEYS[11] then
  -- Expired or not: the room's next advance drops it if it is.
  local user = redis.call('HGET', KEYS[4], 'user')
  redis.call('ZADD', KEYS[9], string.format('%.0f', math.floor(tonumber(adm) / 1024) * 1024 + qty), user)
  redis.call('HDEL', KEYS[10], user)
  redis.call('INCRBY', KEYS[11], qty)
end
local digest = redis.call('HGET', KEYS[4], 'code')
if digest and adm and ARGV[4] == '1' and KEYS[12] and redis.call('HGET', KEYS[4], 'lane') == '1' then
  -- The code's use came from the buyer's place in the priority lane, and
  -- the admission is back: so is the place's hold on the use.
  redis.call('HSET', KEYS[12], redis.call('HGET', KEYS[4], 'user'), digest)
  local ttl = redis.call('PTTL', KEYS[9])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[12], ttl) end
elseif digest and ARGV[6] ~= '1' then
  local v = redis.call('HGET', KEYS[7], digest)
  if v then
    local left, subject = code_value(v)
    redis.call('HSET', KEYS[7], digest, (left + 1) .. '|' .. subject)
  end
end
redis.call('HSET', KEYS[4], 'state', 'RELEASED', 'reason', ARGV[3])
if bucket then
  moving(bucket, qty)
  return {1, state, bucket, qty}
end
return {1, state}
