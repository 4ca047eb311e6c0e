-- entry_take: a buyer's entry in a draw sale, adding it when the sale takes
-- entries. A buyer has one entry: taking it again returns it, whatever the
-- window says then, so a lost answer, and a retry after the close, find
-- the entry that was made (ADR 7).
--
-- KEYS[1] entries hash: user -> "<entry id>|<item>|<quantity>|<accepted ms>"
-- KEYS[2] closed  set by the sale's end or cancel: no entry after it
-- ARGV[1] the sale's start (ms)
-- ARGV[2] the entries' close (ms)
-- ARGV[3] the keys' lifetime from now (ms)
-- ARGV[4..] per buyer, five values: user id, entry id, item, quantity,
--         now (ms, the shared clock's). Buyers who asked together share
--         one run, each handled as if alone, in turn.
--
-- Returns, per buyer, two values {state, entry}: state 2 when this run
-- added the entry, 1 when the buyer had it, 0 when it was refused (entry
-- is then "closed", "early" or "late").
local entries, closed = KEYS[1], KEYS[2]
local starts, closes, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]

local out, added = {}, false
for i = 4, #ARGV, 5 do
  local user = ARGV[i]
  local had = redis.call('HGET', entries, user)
  if had then
    out[#out + 1], out[#out + 2] = 1, had
  else
    local now = tonumber(ARGV[i + 4])
    if redis.call('EXISTS', closed) == 1 then
      out[#out + 1], out[#out + 2] = 0, 'closed'
    elseif now < starts then
      out[#out + 1], out[#out + 2] = 0, 'early'
    elseif now >= closes then
      out[#out + 1], out[#out + 2] = 0, 'late'
    else
      local e = ARGV[i + 1] .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 3] .. '|' .. ARGV[i + 4]
      redis.call('HSET', entries, user, e)
      added = true
      out[#out + 1], out[#out + 2] = 2, e
    end
  end
end
if added then
  redis.call('PEXPIRE', entries, ttl)
end
return out
