local dataKey, fenceKey, writesKey = KEYS[1], KEYS[2], KEYS[3]
local token, value, writeId = ARGV[1], ARGV[2], ARGV[3]
local window = tonumber(ARGV[4])
local op = ARGV[5]
local function canonical(s)
  if s == '0' then return true end
  if #s > 19 or string.match(s, '^[1-9][0-9]*$') == nil then return false end
  return #s < 19 or s <= '9223372036854775807'
end
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
if not canonical(token) then
  return redis.error_reply('ERR fencepost: malformed fencing token')
end
if op ~= 'set' and op ~= 'del' and op ~= 'fence' then
  return redis.error_reply('ERR fencepost: unknown operation')
end
local mark = redis.call('GET', fenceKey)
if mark then
  if not canonical(mark) then
    return redis.error_reply('ERR fencepost: fence key ' .. fenceKey .. ' does not hold a fencing token')
  end
  if redis.call('PTTL', fenceKey) >= 0 then redis.call('PERSIST', fenceKey) end
end
local now = 0
if writeId ~= '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', writesKey, '-inf', '(' .. (now - window))
  if redis.call('ZSCORE', writesKey, writeId) then
    return {'duplicate', mark or ''}
  end
end
if mark and less(token, mark) then
  return {'stale', mark}
end
if op == 'set' then
  redis.call('SET', dataKey, value)
elseif op == 'del' then
  redis.call('DEL', dataKey)
end
if mark ~= token then redis.call('SET', fenceKey, token) end
if writeId ~= '' then
  redis.call('ZADD', writesKey, now, writeId)
  redis.call('PEXPIRE', writesKey, window)
end
return {'applied', token}
