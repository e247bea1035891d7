-- fence-next.lua: defines fence_greater(a, b), fence_next(key, floor), the fencing-token
-- dispenser's whole step on one counter key, and fence_issue(counter, epoch, floor, failover), the lock
-- stores' step: fence_next guarded against a counter that went back (fence_epoch). Not a script
-- on its own: the lock stores' acquire and raise scripts are this file followed by their own
-- (store.json "scripts"), and the controller's dispenser is this file followed by
-- "return fence_next(KEYS[1], ARGV[1])".
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
-- fence_epoch: the lock stores' floor for the next token, and the epoch to record after it.
-- The epoch key holds the replication ID (INFO replication master_replid) of the Redis master
-- that last issued a token for this lock. Redis draws a new replication ID whenever a node becomes
-- a master: a replica promoted (REPLICAOF NO ONE, a Sentinel or Cluster failover), an old primary
-- demoted and promoted again (failback, whether or not it resynced meanwhile), a master
-- restarted. Any other value therefore means the counter may be behind tokens already handed out,
-- by an amount nothing here can know: a replica promoted after missing the last grants
-- (asynchronous replication), a node promoted again after another one issued tokens it never
-- saw, a restart from a snapshot or an AOF that lost its last second, a slot moved to another
-- node. No value, or no counter, means the counter is new or lost. On a change the counter first
-- jumps by FENCE_JUMP (INCRBY: exact in int64, where Lua numbers are doubles), so that a node that
-- missed fewer grants than that never repeats one, whatever its clock says; and the floor becomes
-- this server's clock in microseconds (TIME), above the tokens issued by a node whose counter this
-- one never saw, as long as this server's clock is not behind that node's by more than the time
-- since (docs/stores.md "Tokens across failover and lost data"). Returns {floor, changed, id};
-- fence_issue records id in the epoch key after fence_next, when changed is 1.
-- failover is the client's count of failovers, when something other than this server keeps one:
-- Sentinel's config-epoch for the master (SENTINEL MASTER), which every failover raises. The
-- replication ID alone misses a failback to a master that was never demoted: Sentinel promoted a
-- replica, which granted, and then went back to the old master before it had been told to
-- follow; that master's replication ID never changed, its counter is behind the replica's tokens.
-- With failover, the id is "<replid>@<failover>", so the failback is an epoch change. An empty or
-- missing failover leaves the id the bare replication ID (a single Redis, a Cluster, Redlock).
local FENCE_JUMP = 1000
local function fence_epoch(counter, epoch, floor, failover)
  local id = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
    or string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') -- Redis before 4.0: no replid
  if failover and failover ~= '' then id = id .. '@' .. failover end
  local exists = redis.call('EXISTS', counter) == 1
  if exists and redis.call('GET', epoch) == id then
    return {floor, 0, id}
  end
  if exists then redis.call('INCRBY', counter, FENCE_JUMP) end
  local t = redis.call('TIME')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  if fence_greater(now, floor) then return {now, 1, id} end
  return {floor, 1, id}
end
-- fence_issue: the lock stores' token. fence_epoch's floor (never below floor), fence_next from
-- it, then the epoch recorded if it changed: after the token, so that a failing INCR records
-- nothing. failover: as fence_epoch's (nil or '' when none). Returns {token, refloored, hadTtl,
-- existed, epochChanged}.
local function fence_issue(counter, epoch, floor, failover)
  local e = fence_epoch(counter, epoch, floor, failover)
  local f = fence_next(counter, e[1])
  if e[2] == 1 then redis.call('SET', epoch, e[3]) end
  return {f[1], f[2], f[3], f[4], e[2]}
end
