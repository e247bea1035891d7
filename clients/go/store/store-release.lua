-- store-release.lua: release, on single Redis and on each Redlock master.
-- KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = release channel. Deletes the key only if it
-- still holds this owner, then publishes the owner id on the channel: waiters retry at once on any
-- message, and an observer (the controller) tells a release from an expiry by it. 1 if released,
-- 0 if not the owner (expired, taken over: nothing to do).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
