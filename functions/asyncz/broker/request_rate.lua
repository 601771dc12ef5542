-- A request of an API key with a rate limit: at most ARGV[1] requests in any window of
-- ARGV[2] ms, counted across every api sandbox (a sliding log of admitted requests, times
-- from the Redis server's clock). Returns 0 when admitted, else the ms until one is.
-- KEYS[1] = the key's log (sorted set: member = ARGV[3], unique per request; score = ms)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
if redis.call('ZCARD', KEYS[1]) < limit then
    redis.call('ZADD', KEYS[1], now, ARGV[3])
    redis.call('PEXPIRE', KEYS[1], period)
    return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + period - now)
