-- dripfeed: put dead letters back into a destination's shared queue.
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the jobs' statuses (a hash by id)
-- KEYS[4]  the ended jobs by end time (a sorted set of ids)
-- KEYS[5]  the dead letters (a stream)
-- KEYS[6]  the queue's counts (a hash: a accepted)
-- ARGV[1]  the bound: entries outstanding (stream + retries) at most
-- ARGV[2]  "1" if statuses are kept
-- ARGV[3..] dead letters' entry ids
--
-- Each dead letter goes back with its id and no attempts counted, its
-- status queued again, and leaves the dead letters; once the queue holds
-- its bound the rest stay. Returns {moved, refused (no room), gone (no
-- longer a dead letter: another redrive took it)}.
local bound = tonumber(ARGV[1])
if not bound then
  return redis.error_reply('ERR dripfeed queue: bad bound')
end
local kept = ARGV[2] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local moved, refused, gone = 0, 0, 0
for i = 3, #ARGV do
  local e = ARGV[i]
  local found = redis.call('XRANGE', KEYS[5], e, e)
  local outstanding = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  if not found[1] then
    gone = gone + 1
  elseif outstanding >= bound then
    refused = refused + 1
  else
    local id, job = nil, ''
    local kv = found[1][2]
    for k = 1, #kv, 2 do
      if kv[k] == 'id' then id = kv[k + 1] end
      if kv[k] == 'job' then job = kv[k + 1] end
    end
    id = id or e
    local sid = redis.call('XADD', KEYS[1], '*', 'id', id, 'n', '0', 'job', job)
    if kept then
      local received, owner = tostring(now), ''
      local rec = redis.call('HGET', KEYS[3], id)
      if rec then
        local r, o = string.match(rec, '^[^|]*|[^|]*|[^|]*|[^|]*|([^|]*)|[^|]*|[^|]*|(.*)$')
        if r and r ~= '' then received = r end
        if o then owner = o end
      end
      redis.call('HSET', KEYS[3], id, 'q|0|||' .. received .. '||' .. sid .. '|' .. owner)
      redis.call('HDEL', KEYS[3], id .. '\ne')
      redis.call('ZREM', KEYS[4], id)
    end
    redis.call('XDEL', KEYS[5], e)
    redis.call('HINCRBY', KEYS[6], 'a', 1)
    moved = moved + 1
  end
end
return {moved, refused, gone}
