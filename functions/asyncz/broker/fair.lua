-- Enqueue a due id of a job with a concurrency key, fairly across keys (start-time fair
-- queuing): each key's ids are spaced SPACING ms apart in the ready set's order, from the
-- later of now and the key's last one, so a key with a large backlog interleaves with the
-- keys (and the unkeyed jobs) that come after it instead of going before all of them.
-- KEYS[1] = ready zset, KEYS[2] = hash key -> the key's last virtual time (ms)
-- ARGV[1] = job id, ARGV[2] = key, ARGV[3] = priority band (score base), ARGV[4] = SPACING,
-- ARGV[5] = the hash's TTL ms (a key idle that long starts afresh)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
local vt = math.max(now, last + tonumber(ARGV[4]))
-- "%.0f": Lua's default number format keeps 14 digits and would round the score.
local added = redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', tonumber(ARGV[3]) + vt), ARGV[1])
if added == 1 then
  redis.call('HSET', KEYS[2], ARGV[2], vt)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
end
return added
