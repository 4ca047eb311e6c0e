-- sellable(first): how many units an item may sell, from MySQL's figure:
-- MySQL stock (ARGV[1]) minus what is in flight and not in that stock, at
-- least 0. In flight is the inflight counter now (KEYS[2]), corrected order
-- by order over the reservation hashes KEYS[first..], read before the
-- figure, of which the first ARGV[4] are orders MySQL had committed in the
-- figure's snapshot: a committed order still RESERVED or CLAIMED is out of
-- MySQL's stock already (its confirm has not run), so it is not in flight;
-- an order MySQL had not committed that is CONFIRMED now was committed
-- after the figure, which still holds its units, so it is. An order
-- released since gave its units back and left the counter: nothing to
-- correct. (lua/warmup.lua and lua/warmup_buckets.lua include this.)
local function sellable(first)
  local inflight = tonumber(redis.call('GET', KEYS[2]) or '0')
  local committed = tonumber(ARGV[4])
  for i = first, #KEYS do
    local r = redis.call('HMGET', KEYS[i], 'state', 'qty')
    if i - first < committed then
      if r[1] == 'RESERVED' or r[1] == 'CLAIMED' then inflight = inflight - tonumber(r[2]) end
    elseif r[1] == 'CONFIRMED' then
      inflight = inflight + tonumber(r[2])
    end
  end
  if inflight < 0 then inflight = 0 end
  local want = tonumber(ARGV[1]) - inflight
  if want < 0 then want = 0 end
  return want
end
