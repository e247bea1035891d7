-- store-renew.lua: the watchdog's renew, on single Redis and on each Redlock master.
-- KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = TTL (ms). 1 if renewed, 0 if not the owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
