-- code_value: a presale code's field in the sale's codes hash,
-- "<left>|<subject>" (access.Code.RedisValue), read as its left count (a
-- number) and its subject ('' for anyone). The reserve script takes a use
-- and the release gives one back through it, so both read the field alike.
local function code_value(v)
  local bar = string.find(v, '|', 1, true)
  if not bar then return 0, '' end
  return tonumber(string.sub(v, 1, bar - 1)) or 0, string.sub(v, bar + 1)
end
