-- dripfeed: move retries whose time has come back into the stream.
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the jobs' statuses (a hash by id)
-- ARGV[1]  the most to move
-- ARGV[2]  'all': every retry, due or not (a queue being emptied)
-- ARGV[3]  the longest a retry may wait, ms (optional): a retry due later
--          than that from now (scheduled under a longer retry_max, since
--          lowered) is moved to that time, and its status says so
--
-- Atomic: whichever node runs it first moves a retry, and only once.
-- Each member is "public id\nattempts\njob"; it goes back with its public
-- id and attempts as fields, and its status (if kept) is queued again
-- under its new stream id. Returns how many were moved.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local upto = now
if ARGV[2] == 'all' then upto = '+inf' end
local longest = tonumber(ARGV[3])
if longest and ARGV[2] ~= 'all' then
  local latest = now + longest
  local far = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. latest, '+inf',
    'LIMIT', 0, tonumber(ARGV[1]))
  for _, m in ipairs(far) do
    redis.call('ZADD', KEYS[2], latest, m)
    local a = string.find(m, '\n', 1, true)
    local rec = a and redis.call('HGET', KEYS[3], string.sub(m, 1, a - 1))
    if rec then
      local st, n, last, _, rest = string.match(rec,
        '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
      if st == 'r' then
        redis.call('HSET', KEYS[3], string.sub(m, 1, a - 1),
          st .. '|' .. n .. '|' .. last .. '|' .. latest .. '|' .. rest)
      end
    end
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', upto, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[2], m)
  local a = string.find(m, '\n', 1, true)
  local b = a and string.find(m, '\n', a + 1, true)
  if a and b then
    local id = string.sub(m, 1, a - 1)
    local sid = redis.call('XADD', KEYS[1], '*', 'id', id,
      'n', string.sub(m, a + 1, b - 1), 'job', string.sub(m, b + 1))
    local rec = redis.call('HGET', KEYS[3], id)
    if rec then
      local st, n, last, _, got, _, _, owner = string.match(rec,
        '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
      if st then
        redis.call('HSET', KEYS[3], id,
          'q|' .. n .. '|' .. last .. '||' .. got .. '||' .. sid .. '|' .. owner)
      end
    end
  end
end
return #due
