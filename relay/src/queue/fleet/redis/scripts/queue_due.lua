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

-- A status's eight fields ("state|attempts|last|next|got|ended|entry|owner"), or nil.
local function fields(rec)
  if not rec then return nil end
  local f = {string.match(rec,
    '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')}
  if #f == 8 then return f end
  return nil
end

local longest = tonumber(ARGV[3])
if longest and ARGV[2] ~= 'all' then
  local latest = now + longest
  local far = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. latest, '+inf',
    'LIMIT', 0, tonumber(ARGV[1]))
  for _, m in ipairs(far) do
    redis.call('ZADD', KEYS[2], latest, m)
    local a = string.find(m, '\n', 1, true)
    local id = a and string.sub(m, 1, a - 1)
    local f = id and fields(redis.call('HGET', KEYS[3], id))
    if f and f[1] == 'r' then
      f[4] = latest
      redis.call('HSET', KEYS[3], id, table.concat(f, '|'))
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
    local f = fields(redis.call('HGET', KEYS[3], id))
    if f then
      redis.call('HSET', KEYS[3], id,
        'q|' .. f[2] .. '|' .. f[3] .. '||' .. f[5] .. '||' .. sid .. '|' .. f[8])
    end
  end
end
return #due
