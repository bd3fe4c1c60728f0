-- dripfeed: move retries whose time has come back into the stream.
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- ARGV[1]  the most to move
--
-- Atomic: whichever node runs it first moves a retry, and only once.
-- Each member is "public id\nattempts\njob"; it goes back with its public
-- id and attempts as fields. Returns how many were moved.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[2], m)
  local a = string.find(m, '\n', 1, true)
  local b = a and string.find(m, '\n', a + 1, true)
  if a and b then
    redis.call('XADD', KEYS[1], '*', 'id', string.sub(m, 1, a - 1),
      'n', string.sub(m, a + 1, b - 1), 'job', string.sub(m, b + 1))
  end
end
return #due
