-- Flow-control limits, atomically, on Redis's clock. One script, three commands (ARGV[1]).
-- Keys are built here under the prefix (ARGV[2]); with a hash-tagged prefix (cluster mode)
-- every key is in one slot. Per task T and concurrency key K:
--   <p>:limits:slots:T / :kslots:T:K    zset slot token -> lease deadline ms (expired = free)
--   <p>:limits:starts:T / :kstarts:T:K  zset slot token -> start ms (the rate's window)
--   <p>:limits:held:T / :kheld:T:K      zset "<queue>|<priority>|<id>" -> when it fell due
--                                       (FIFO; it goes back to ready at that place in line)
--   <p>:limits:later                    zset "<queue>|<priority>|<id>" -> when the rate allows
--   <p>:limits:keys:T                   set of keys seen (for GET /stats)
--   <p>:limits:rebuilt                  present once the above were rebuilt from Postgres;
--                                       missing after a flush, so nothing is granted until
--                                       'restore' puts back the running slots and starts
-- A slot or start put back by 'restore' is kept as "r:<job id>" ("r:<job id>:<attempt>");
-- the attempt's own worker replaces it with its token at its next heartbeat.
-- Ready sets: <p>:{<queue>}:ready, score (PMAX - priority) * SCALE + ms, as the broker's.
local cmd, p = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local L = p .. ':limits:'

-- Back to its ready set at `ms`: when it fell due (a held id; never after now), or now.
local function ready(member, pmax, scale, ms)
  local a = string.find(member, '|', 1, true)
  local b = string.find(member, '|', a + 1, true)
  local queue = string.sub(member, 1, a - 1)
  local prio = tonumber(string.sub(member, a + 1, b - 1))
  local id = string.sub(member, b + 1)
  local score = string.format('%.0f', (pmax - prio) * scale + tonumber(ms))
  redis.call('ZADD', p .. ':{' .. queue .. '}:ready', 'NX', score, id)
end

local function full(key, limit)
  if limit <= 0 then return false end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key) >= limit
end

-- 0 when a start is allowed now, else the ms when the oldest start leaves the window.
-- The window is GUARD ms longer than the period: the start Postgres records follows its
-- grant here by a claim's round trip, and those recorded starts must hold the limit too.
local GUARD = 200
local function rate_wait(key, count, period)
  if count <= 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period - GUARD)
  if redis.call('ZCARD', key) < count then return 0 end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(oldest[2]) + period + GUARD + 1
end

if cmd == 'acquire' then
  -- ARGV[3] lease ms, ARGV[4] n; then per job: token, task, key ('' = none), concurrency,
  -- key_concurrency, rate count, rate ms, key rate count, key rate ms, held member (0 = none),
  -- when it fell due (ms; 0 = now)
  local lease, n = tonumber(ARGV[3]), tonumber(ARGV[4])
  local out = {}
  if redis.call('EXISTS', L .. 'rebuilt') == 0 then
    for i = 1, n do out[i] = 'lost' end
    return out
  end
  for i = 0, n - 1 do
    local b = 5 + i * 11
    local token, task, key = ARGV[b], ARGV[b + 1], ARGV[b + 2]
    local tl, kl = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    local tn, tp = tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
    local kn, kp = tonumber(ARGV[b + 7]), tonumber(ARGV[b + 8])
    local member = ARGV[b + 9]
    local due = tonumber(ARGV[b + 10] or '0')
    if due <= 0 or due > now then due = now end
    if key == '' then kl = 0; kn = 0 else redis.call('SADD', L .. 'keys:' .. task, key) end
    local ts, tr = L .. 'slots:' .. task, L .. 'starts:' .. task
    local ks, kr = L .. 'kslots:' .. task .. ':' .. key, L .. 'kstarts:' .. task .. ':' .. key
    local verdict = 'ok'
    if full(ts, tl) then
      verdict = 'concurrency'
      redis.call('ZADD', L .. 'held:' .. task, 'NX', due, member)
      redis.call('SADD', L .. 'heldsets', L .. 'held:' .. task)
    elseif full(ks, kl) then
      verdict = 'key_concurrency'
      redis.call('ZADD', L .. 'kheld:' .. task .. ':' .. key, 'NX', due, member)
      redis.call('SADD', L .. 'heldsets', L .. 'kheld:' .. task .. ':' .. key)
    else
      local wait = rate_wait(tr, tn, tp)
      if wait > 0 then verdict = 'rate' else
        wait = rate_wait(kr, kn, kp)
        if wait > 0 then verdict = 'key_rate' end
      end
      if wait > 0 then
        redis.call('ZADD', L .. 'later', wait, member)
      else
        if tl > 0 then redis.call('ZADD', ts, now + lease, token) end
        if kl > 0 then redis.call('ZADD', ks, now + lease, token) end
        if tn > 0 then redis.call('ZADD', tr, now, token); redis.call('PEXPIRE', tr, tp + GUARD) end
        if kn > 0 then redis.call('ZADD', kr, now, token); redis.call('PEXPIRE', kr, kp + GUARD) end
      end
    end
    out[i + 1] = verdict
  end
  return out
elseif cmd == 'release' then
  -- ARGV[3] PRIORITY_MAX, ARGV[4] SCALE, ARGV[5] wake per slot; then quads task, key, token,
  -- restored ('r:<job id>' of an attempt that ran, or ''). Each freed slot moves the oldest
  -- held ids of its task and of its key back to ready, where they fell due: ahead of the ids
  -- that came after them (at now, a backlog of other keys' ids could keep them waiting).
  local pmax, scale, wake = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local woken = 0
  for b = 6, #ARGV, 4 do
    local task, key, token, restored = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
    redis.call('ZREM', L .. 'slots:' .. task, token, restored)
    local sets = {L .. 'held:' .. task}
    if key ~= '' then
      redis.call('ZREM', L .. 'kslots:' .. task .. ':' .. key, token, restored)
      sets[2] = L .. 'kheld:' .. task .. ':' .. key
    end
    for _, set in ipairs(sets) do
      local popped = redis.call('ZPOPMIN', set, wake)
      for j = 1, #popped, 2 do
        ready(popped[j], pmax, scale, popped[j + 1])
        woken = woken + 1
      end
    end
  end
  return woken
elseif cmd == 'refresh' then
  -- ARGV[3] lease ms; then quads: the task's slots key and the key's ('' = not limited),
  -- token, restored (the 'r:<job id>' it replaces, or ''). A live attempt (its lease just
  -- renewed in Postgres), or a thread that outlived its attempt, keeps its slots, and gets
  -- them back if Redis lost them.
  local deadline = now + tonumber(ARGV[3])
  for b = 4, #ARGV, 4 do
    local token, restored = ARGV[b + 2], ARGV[b + 3]
    for _, set in ipairs({ARGV[b], ARGV[b + 1]}) do
      if set ~= '' then
        redis.call('ZADD', L .. set, deadline, token)
        redis.call('ZREM', L .. set, restored)
      end
    end
  end
  return 0
elseif cmd == 'restore' then
  -- ARGV[3] how many slots; then per slot: scope key (after <p>:limits:), member, ms left;
  -- then per start: scope key, member, ms ago, window ms. Added only where missing; then the
  -- state counts as rebuilt.
  local ns = tonumber(ARGV[3])
  local b = 4
  for _ = 1, ns do
    redis.call('ZADD', L .. ARGV[b], 'NX', now + tonumber(ARGV[b + 2]), ARGV[b + 1])
    b = b + 3
  end
  while b <= #ARGV do
    local key = L .. ARGV[b]
    redis.call('ZADD', key, 'NX', now - tonumber(ARGV[b + 2]), ARGV[b + 1])
    redis.call('PEXPIRE', key, tonumber(ARGV[b + 3]))
    b = b + 4
  end
  redis.call('SET', L .. 'rebuilt', now)
  return 0
elseif cmd == 'wake' then
  -- ARGV[3] PRIORITY_MAX, ARGV[4] SCALE, ARGV[5] max, ARGV[6] wake per slot, ARGV[7] sets
  -- to look at. Ids whose rate window opened go back to ready; so do the oldest held ids of
  -- a held set whose slots expired (a killed worker never released them).
  local pmax, scale, wake = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
  local due = redis.call('ZRANGEBYSCORE', L .. 'later', '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
  for _, member in ipairs(due) do
    ready(member, pmax, scale, now)
    redis.call('ZREM', L .. 'later', member)
  end
  local woken = #due
  for _, held in ipairs(redis.call('SRANDMEMBER', L .. 'heldsets', tonumber(ARGV[7]))) do
    local rest = string.sub(held, #L + 1)  -- 'held:<task>' or 'kheld:<task>:<key>'
    local slots = L .. 'slots:' .. string.sub(rest, 6)
    if string.sub(rest, 1, 1) == 'k' then slots = L .. 'kslots:' .. string.sub(rest, 7) end
    local expired = redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
    if expired > 0 then
      local popped = redis.call('ZPOPMIN', held, expired * wake)
      for j = 1, #popped, 2 do
        ready(popped[j], pmax, scale, popped[j + 1])
        woken = woken + 1
      end
    end
    if redis.call('EXISTS', held) == 0 then redis.call('SREM', L .. 'heldsets', held) end
  end
  return woken
end
return redis.error_reply('unknown command ' .. tostring(cmd))
