-- Move due members of a delayed set to its ready set, atomically.
-- KEYS[1] = delayed zset (member "<priority>|<job id>", score = run_at epoch ms)
-- KEYS[2] = ready zset   (member "<job id>", score = (PRIORITY_MAX - priority) * SCALE + ms)
-- ARGV[1] = max members to move, ARGV[2] = PRIORITY_MAX, ARGV[3] = SCALE
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local pmax = tonumber(ARGV[2])
local scale = tonumber(ARGV[3])
for i = 1, #due, 2 do
  local member = due[i]
  local sep = string.find(member, '|', 1, true)
  local prio = tonumber(string.sub(member, 1, sep - 1))
  local id = string.sub(member, sep + 1)
  -- "%.0f": Lua's default number format keeps 14 digits and would round the score.
  local score = string.format('%.0f', (pmax - prio) * scale + tonumber(due[i + 1]))
  redis.call('ZADD', KEYS[2], 'NX', score, id)
  redis.call('ZREM', KEYS[1], member)
end
return #due / 2
