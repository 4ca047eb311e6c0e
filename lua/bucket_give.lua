-- bucket_give: put units back into one bucket of a bucketed item (the
-- reserve script refused after bucket_take, or a release of a bucketed
-- reservation). A missing bucket key is not recreated: that would sell
-- units nobody warmed.
--
-- KEYS[1] bucket stock  <prefix>:{i<item>b<n>}:stock
-- ARGV[1] quantity
--
-- Returns the bucket's stock afterwards, or -1 when the key is missing
-- (nothing was changed).
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]))
