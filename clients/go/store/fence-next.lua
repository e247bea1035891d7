-- fence-next.lua: defines fence_greater(a, b) and fence_next(key, floor), the fencing-token
-- dispenser's whole step on one counter key. Not a script on its own: the lock stores' acquire and
-- raise scripts are this file followed by their own (store.json "scripts"), and the controller's
-- dispenser is this file followed by "return fence_next(KEYS[1], ARGV[1])".
-- fence_next: floor is a decimal string (the highest token recorded elsewhere for this lock, or
-- 0); returns {token, refloored, hadTtl, existed} with token a decimal string. Values travel as
-- strings because Lua numbers are doubles and lose precision above 2^53: the comparison is on
-- decimal strings (length first, then lexicographic, valid for canonical non-negative integers).
-- A TTL found on the counter is removed: the counter must never expire.
local function fence_greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local function fence_next(key, floor)
  local existed = redis.call('EXISTS', key)
  local hadTtl = 0
  if redis.call('PTTL', key) >= 0 then
    redis.call('PERSIST', key)
    hadTtl = 1
  end
  redis.call('INCR', key)
  local v = redis.call('GET', key)
  local refloored = 0
  if not fence_greater(v, floor) then
    redis.call('SET', key, floor)
    redis.call('INCR', key)
    v = redis.call('GET', key)
    refloored = 1
  end
  return {v, refloored, hadTtl, existed}
end
