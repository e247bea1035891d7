-- redlock-raise.lua (after fence-next.lua, for fence_greater): raise a Redlock master's counter
-- to the grant's token. KEYS[1] = holder key, KEYS[2] = counter key; ARGV[1] = owner id, ARGV[2] =
-- token (decimal). Sets the counter to the token if the token is greater (raise-only: a late or
-- failed grant's write never lowers it; SET also drops any TTL), whoever holds the key; returns 1
-- if ARGV[1] still holds the key here, else 0: only then does the acknowledgement count.
local v = redis.call('GET', KEYS[2])
if (not v) or fence_greater(ARGV[2], v) then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
