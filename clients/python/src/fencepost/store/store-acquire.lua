-- store-acquire.lua (after fence-next.lua): the single-Redis store's grant.
-- KEYS[1] = holder key, KEYS[2] = counter key, KEYS[3] = epoch key; ARGV[1] = owner id, ARGV[2] =
-- TTL (ms), ARGV[3] = token floor (decimal), ARGV[4] = the failover count the client knows
-- (Sentinel's config-epoch; empty or absent for a single Redis or a Cluster: fence_epoch says
-- why). Granted: {1, token, refloored, hadTtl, existed, epochChanged}; held by another: {0, PTTL
-- of the holder key}. epochChanged is 1 when the token was floored at the server's clock
-- (fence_epoch: a new or lost counter, a failover, a restart).
-- The token is issued BEFORE the SET, after checking the key is free: Redis does not roll a
-- script back, so a failing INCR (a counter at 2^63-1) must stop the script before it has written
-- a holder that has no token.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local f = fence_issue(KEYS[2], KEYS[3], ARGV[3], ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f[1], f[2], f[3], f[4], f[5]}
