-- dripfeed: end or postpone jobs a consumer holds, in one round trip.
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the jobs' statuses (a hash by id, see queue_admit.lua)
-- KEYS[4]  the ended jobs by end time (a sorted set of ids)
-- KEYS[5]  the dead letters (a stream)
-- KEYS[6]  the queue's counts (a hash: d delivered, x dead-lettered)
-- ARGV[1]  the group
-- ARGV[2]  "ack": ARGV[3] "1" if statuses are kept, ARGV[4] how long an
--          ended status is kept (ms), ARGV[5] how many at most, ARGV[6]
--          how many dead letters the stream keeps (about; 0: none there),
--          then quintuples from ARGV[7]: stream id, "d" (delivered), "x"
--          (dead letter) or "z" (dead letter never sent: its attempts are
--          not one more), the receiver's last status ("" for none), the
--          reason (dead letters), the last attempt's error ("" for none);
--          each entry is acknowledged and deleted, a dead letter first
--          copied to the dead letters' stream (its id, reason, attempts,
--          last status, error and job)
--          "hold": ARGV[3] stream id, ARGV[4] the consumer asking: if it
--          still holds the entry, its idle time starts again (XCLAIM JUSTID)
--          "release": ARGV[3] the consumer asking, ARGV[4] an idle time
--          (ms), then stream ids from ARGV[5]: each entry it still holds is
--          marked idle that long, so that another consumer's take-over
--          scan finds it at once (the consumer is stopping)
--          "retry": ARGV[3] stream id, ARGV[4] delay ms, ARGV[5] the
--          member to keep (public id, "\n", attempts, "\n", job), ARGV[6]
--          the consumer asking: only the entry's holder may retry it;
--          ARGV[7] "1" if statuses are kept, ARGV[8] the receiver's last
--          status, ARGV[9] attempts made, ARGV[10] the public id, ARGV[11]
--          the attempt's error ("" for none)
--
-- A job's last error is kept beside its status, in the field id .. "\ne"
-- (no id holds a newline), and forgotten with it.
-- An entry is acted on only if this group still had it pending (XACK
-- answered 1): one claimed again by another consumer and already ended
-- there is not retried twice. Times are the server's (TIME), so nodes'
-- clocks never matter. Returns how many entries were acted on.
local op = ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A status's fields, or nil.
local function fields(rec)
  if not rec then return nil end
  local f = {string.match(rec,
    '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')}
  if #f == 8 then return f end
  return nil
end

-- Whether `consumer` holds the entry `sid` (pending for it in the group).
local function holds(sid, consumer)
  local held = redis.call('XPENDING', KEYS[1], ARGV[1], sid, sid, 1)
  return #held > 0 and held[1][2] == consumer
end

local function store(id, f)
  redis.call('HSET', KEYS[3], id, table.concat(f, '|'))
end

-- Keeps `err` as job `id`'s last error (none: the one it had stays).
local function noted(id, err)
  if err ~= '' then redis.call('HSET', KEYS[3], id .. '\ne', err) end
end

-- Forgets job `id`'s status and last error.
local function forget(id)
  redis.call('HDEL', KEYS[3], id, id .. '\ne')
end

if op == 'ack' then
  local kept = ARGV[3] == '1'
  local dead_max = tonumber(ARGV[6]) or 0
  local done = 0
  for i = 7, #ARGV, 5 do
    local sid = ARGV[i]
    local dead = ARGV[i + 1] ~= 'd'
    local tried = ARGV[i + 1] ~= 'z' and 1 or 0
    if redis.call('XACK', KEYS[1], ARGV[1], sid) == 1 then
      done = done + 1
      redis.call('HINCRBY', KEYS[6], dead and 'x' or 'd', 1)
    end
    if kept or (dead and dead_max > 0) then
      local entry = redis.call('XRANGE', KEYS[1], sid, sid)
      local id, n, job = nil, '0', nil
      if entry[1] then
        local kv = entry[1][2]
        for k = 1, #kv, 2 do
          if kv[k] == 'id' then id = kv[k + 1] end
          if kv[k] == 'n' then n = kv[k + 1] end
          if kv[k] == 'job' then job = kv[k + 1] end
        end
      end
      if dead and dead_max > 0 and entry[1] then
        redis.call('XADD', KEYS[5], 'MAXLEN', '~', dead_max, '*',
          'id', id or sid, 'reason', ARGV[i + 3], 'n', tostring((tonumber(n) or 0) + tried),
          'last', ARGV[i + 2], 'error', ARGV[i + 4], 'job', job or '')
      end
      local f = kept and id and fields(redis.call('HGET', KEYS[3], id))
      if f then
        f[1] = dead and 'x' or 'd'
        f[2] = tostring((tonumber(f[2]) or 0) + tried)
        if ARGV[i + 2] ~= '' then f[3] = ARGV[i + 2] end
        f[4] = ''
        f[6] = tostring(now)
        store(id, f)
        noted(id, ARGV[i + 4])
        redis.call('ZADD', KEYS[4], now, id)
      end
    end
    redis.call('XDEL', KEYS[1], sid)
  end
  if kept then
    -- Forget ended statuses past their time, and the oldest past the most
    -- kept (a bounded amount of work per call).
    local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[4]),
      'LIMIT', 0, 256)
    for _, id in ipairs(old) do
      forget(id)
      redis.call('ZREM', KEYS[4], id)
    end
    local over = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[5])
    if over > 0 then
      local gone = redis.call('ZPOPMIN', KEYS[4], math.min(over, 256))
      for k = 1, #gone, 2 do
        forget(gone[k])
      end
    end
  end
  return done
elseif op == 'hold' then
  if not holds(ARGV[3], ARGV[4]) then
    return 0
  end
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[4], 0, ARGV[3], 'JUSTID')
  return 1
elseif op == 'release' then
  local done = 0
  for i = 5, #ARGV do
    if holds(ARGV[i], ARGV[3]) then
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[i], 'IDLE', ARGV[4], 'JUSTID')
      done = done + 1
    end
  end
  return done
elseif op == 'retry' then
  -- A consumer whose entry was taken over (it was too slow) does not
  -- retry it behind the new holder's back.
  if not holds(ARGV[3], ARGV[6]) then
    return 0
  end
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[3]) == 0 then
    return 0
  end
  redis.call('XDEL', KEYS[1], ARGV[3])
  local due = now + tonumber(ARGV[4])
  redis.call('ZADD', KEYS[2], due, ARGV[5])
  if ARGV[7] == '1' then
    local f = fields(redis.call('HGET', KEYS[3], ARGV[10]))
    if f then
      f[1] = 'r'
      f[2] = ARGV[9]
      if ARGV[8] ~= '' then f[3] = ARGV[8] end
      f[4] = tostring(due)
      store(ARGV[10], f)
      noted(ARGV[10], ARGV[11] or '')
    end
  end
  return 1
end
return redis.error_reply('ERR dripfeed queue: bad settle')
