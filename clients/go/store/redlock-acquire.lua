-- redlock-acquire.lua (after fence-next.lua): one Redlock master's part of a grant.
-- KEYS[1] = holder key, KEYS[2] = counter key, KEYS[3] = epoch key; ARGV[1] = owner id, ARGV[2] =
-- TTL (ms), ARGV[3] = floor (decimal). Held by another: {0, PTTL}. Taken: {1, v, existed,
-- epochChanged} where v is this master's counter after fence_next advanced it, from a floor at
-- this master's clock when its epoch changed (fence_epoch: a master restarted or new). The token
-- is decided by the client over the majority that granted (store.json "redlock").
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local f = fence_issue(KEYS[2], KEYS[3], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f[1], f[4], f[5]}
