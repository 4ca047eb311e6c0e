-- entry_take: a buyer's entry in a draw sale, adding it when the sale takes
-- entries. A buyer has one entry: taking it again returns it, whatever the
-- window says then, so a lost answer, and a retry after the close, find
-- the entry that was made (ADR 7).
--
-- KEYS[1] entries hash: user -> "<entry id>|<item>|<quantity>|<accepted ms>",
--         then "|<code digest>" for an entry holding a presale code's use
-- KEYS[2] closed  set by the sale's end or cancel: no entry after it
-- KEYS[3] the sale's presale codes (see reserve.lua): read only for an
--         entry that names a code
-- ARGV[1] the sale's start (ms)
-- ARGV[2] the entries' close (ms)
-- ARGV[3] the keys' lifetime from now (ms)
-- ARGV[4..] per buyer, six values: user id, entry id, item, quantity,
--         now (ms, the shared clock's), the digest of the presale code the
--         entry uses ('' for none). Buyers who asked together share one
--         run, each handled as if alone, in turn.
--
-- Returns, per buyer, two values {state, entry}: state 2 when this run
-- added the entry, 1 when the buyer had it, 0 when it was refused (entry
-- is then "closed", "early", "late", "codes" (the sale's codes are not
-- loaded), "invalid" (no such code: never loaded, revoked, or bound to
-- another user) or "used" (the code has no use left)).
-- The buyer's entry is looked for first: a retry, with or without its
-- code, answers the entry made and takes no second use. A new entry with a
-- code takes one use (left - 1) with the entry, after the window's checks,
-- so a refused entry uses nothing; the use is not given back (an entry
-- never ends unsold before its draw).
--#include codes
local entries, closed, codes = KEYS[1], KEYS[2], KEYS[3]
local starts, closes, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]

local out, added = {}, false
for i = 4, #ARGV, 6 do
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
      local digest, refused = ARGV[i + 5], nil
      local left, subject = 0, ''
      if digest ~= '' then
        -- Each buyer's use is written before the next is checked, so a
        -- run sees every earlier buyer's take, as runs alone would.
        if redis.call('HEXISTS', codes, '.') == 0 then
          refused = 'codes'
        else
          local v = redis.call('HGET', codes, digest)
          if v then left, subject = code_value(v) end
          if not v or (subject ~= '' and subject ~= user) then
            refused = 'invalid'
          elseif left <= 0 then
            refused = 'used'
          end
        end
      end
      if refused then
        out[#out + 1], out[#out + 2] = 0, refused
      else
        local e = ARGV[i + 1] .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 3] .. '|' .. ARGV[i + 4]
        if digest ~= '' then
          redis.call('HSET', codes, digest, (left - 1) .. '|' .. subject)
          e = e .. '|' .. digest
        end
        redis.call('HSET', entries, user, e)
        added = true
        out[#out + 1], out[#out + 2] = 2, e
      end
    end
  end
end
if added then
  redis.call('PEXPIRE', entries, ttl)
end
return out
