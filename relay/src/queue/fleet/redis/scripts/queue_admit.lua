-- dripfeed: admit one job into a destination's shared queue (a stream).
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the idempotency key (same slot; ignored when ARGV[4] is "0")
-- KEYS[4]  the jobs' statuses (a hash by id; written when ARGV[6] is "1")
-- KEYS[5]  the ended jobs by end time (a sorted set of ids)
-- KEYS[6]  the queue's counts (a hash: a accepted, f refused full, x
--          dead-lettered, e evicted, o overflowed to the dead letters)
-- KEYS[7]  the dead letters (a stream; see queue_settle.lua)
-- ARGV[1]  the bound: entries outstanding (stream + retries) at most
-- ARGV[2]  the job's bytes
-- ARGV[3]  how long the idempotency key is remembered, ms
-- ARGV[4]  "1" with an idempotency key, "0" without
-- ARGV[5]  the job's id for good (unique in the fleet, chosen by the caller)
-- ARGV[6]  "1" to keep the job's status, "0" not to
-- ARGV[7]  the job's owner (e.g. its tenant; "" for none)
-- ARGV[8]  "1" if the caller waits for replicas (WAIT) after this script:
--          a repeat then writes its key again, so the WAIT covers it
-- ARGV[9]  "1" if the id must be new: one with a status (held or ended)
--          answers {"seen", id, 0} and nothing is written (a caller that
--          reserved the id elsewhere, e.g. for an idempotency key, and
--          may be admitting it a second time); "2" for a repeat of the id
--          to confirm: nothing is admitted, its status (if kept) is
--          written again so that a WAIT after this script covers it, and
--          the answer is {"seen", id, 0}; "3" only if its status is
--          dead-lettered or forgotten (a dead letter sent again whose
--          letter is gone), else {"seen", id, 0}
-- ARGV[10] what a full queue does: "t" refuses the arriving job
--          (tail-drop), "h" takes it and moves the oldest entry no
--          consumer has claimed yet to the dead letters (head-drop; with
--          none unclaimed it refuses), "d" moves the arriving job to the
--          dead letters (dead-letter)
-- ARGV[11] the consumers' group (head-drop: which entries are claimed)
-- ARGV[12] how many dead letters the stream keeps (about; 0: none there)
--
-- Outstanding is XLEN + ZCARD: entries are deleted once acknowledged, so
-- the stream holds only what is queued or being delivered (never trimmed
-- with MAXLEN, which would drop unacknowledged work). The entry carries its
-- id as a field (a stream id is per stream, so not unique in the fleet).
-- A status is "state|attempts|last status|next ms|received ms|ended ms|
-- stream id|owner" (state q, r, d or x), its last error in the field
-- id .. "\ne" (queue_settle.lua). Returns {"added", id, outstanding
-- after}, {"repeat", the first id, 0}, {"full", "", outstanding},
-- {"taken", id, 0} when the id is a job still held (the caller picks
-- another) or {"seen", id, 0} (ARGV[9]). An ended job's id may be admitted
-- again (a dead letter redriven keeps its id): its status starts over.
-- Each job added counts as accepted, each refusal for a full queue as
-- refused, in the queue's counts. With head-drop a full queue answers
-- {"evicted", id, outstanding, the evicted job's id}; with dead-letter
-- {"deferred", id, outstanding}: the job is a dead letter at once (its
-- status dead-lettered, its idempotency key remembered), as the local
-- queue's overflow makes one.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A dead letter written for job `id` (reason, attempts made, its job).
local function dead_letter(id, reason, n, job)
  local max = tonumber(ARGV[12]) or 0
  if max > 0 then
    redis.call('XADD', KEYS[7], 'MAXLEN', '~', max, '*',
      'id', id, 'reason', reason, 'n', n, 'last', '', 'error', '', 'job', job)
  end
  redis.call('HINCRBY', KEYS[6], 'x', 1)
end

-- Job `id`'s kept status marked dead-lettered now (kept statuses only).
local function ended_dead(id)
  local had = redis.call('HGET', KEYS[4], id)
  if not had then return end
  local f = {}
  for v in (had .. '|'):gmatch('([^|]*)|') do f[#f + 1] = v end
  f[1] = 'x'
  f[4] = ''
  f[6] = tostring(now)
  redis.call('HSET', KEYS[4], id, table.concat(f, '|'))
  redis.call('ZADD', KEYS[5], now, id)
end
if ARGV[9] == '2' then
  local had = redis.call('HGET', KEYS[4], ARGV[5])
  if had then
    redis.call('HSET', KEYS[4], ARGV[5], had)
  end
  return {'seen', ARGV[5], 0}
end
local keyed = ARGV[4] == '1'
if keyed then
  local had = redis.call('GET', KEYS[3])
  if had then
    if ARGV[8] == '1' then
      redis.call('SET', KEYS[3], had, 'KEEPTTL')
    end
    return {'repeat', had, 0}
  end
end
local bound = tonumber(ARGV[1])
if not bound then
  return redis.error_reply('ERR dripfeed queue: bad bound')
end
local kept = ARGV[6] == '1'
if kept and (ARGV[9] == '1' or ARGV[9] == '3') then
  local had = redis.call('HGET', KEYS[4], ARGV[5])
  -- "3": a dead letter's job admitted again (its letter gone): only while
  -- its status says dead-lettered, or is forgotten.
  if had and not (ARGV[9] == '3' and string.sub(had, 1, 1) == 'x') then
    if ARGV[8] == '1' then
      redis.call('HSET', KEYS[4], ARGV[5], had)
    end
    return {'seen', ARGV[5], 0}
  end
end
local outstanding = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
local evicted = nil
if outstanding >= bound then
  local policy = ARGV[10] or 't'
  -- A job still held under this id: nothing evicted or written for it.
  local held = kept and redis.call('HGET', KEYS[4], ARGV[5])
  if held and policy ~= 't' then
    local st = string.sub(held, 1, 1)
    if st == 'q' or st == 'r' then
      return {'taken', ARGV[5], 0}
    end
  end
  if policy == 'd' then
    dead_letter(ARGV[5], 'overflow', '0', ARGV[2])
    redis.call('HINCRBY', KEYS[6], 'o', 1)
    if keyed then
      redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
    end
    if kept then
      redis.call('HSET', KEYS[4], ARGV[5], 'x|0|||' .. now .. '|' .. now .. '||' .. ARGV[7])
      redis.call('HDEL', KEYS[4], ARGV[5] .. '\ne')
      redis.call('ZADD', KEYS[5], now, ARGV[5])
    end
    return {'deferred', ARGV[5], outstanding}
  end
  if policy == 'h' then
    -- The oldest entry after the group's last delivered one: never
    -- claimed by any consumer (all of them when the group has none yet).
    local after = '-'
    local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
    if ok then
      for _, g in ipairs(groups) do
        local name, last = nil, nil
        for k = 1, #g, 2 do
          if g[k] == 'name' then name = g[k + 1] end
          if g[k] == 'last-delivered-id' then last = g[k + 1] end
        end
        if name == ARGV[11] and last and last ~= '0-0' then after = '(' .. last end
      end
    end
    local oldest = redis.call('XRANGE', KEYS[1], after, '+', 'COUNT', 1)
    if oldest[1] then
      local sid, kv = oldest[1][1], oldest[1][2]
      local id, n, job = sid, '0', ''
      for k = 1, #kv, 2 do
        if kv[k] == 'id' then id = kv[k + 1] end
        if kv[k] == 'n' then n = kv[k + 1] end
        if kv[k] == 'job' then job = kv[k + 1] end
      end
      redis.call('XDEL', KEYS[1], sid)
      dead_letter(id, 'evicted', n, job)
      redis.call('HINCRBY', KEYS[6], 'e', 1)
      ended_dead(id)
      evicted = id
      outstanding = outstanding - 1
    end
  end
  if not evicted then
    redis.call('HINCRBY', KEYS[6], 'f', 1)
    return {'full', '', outstanding}
  end
end
if kept then
  local had = redis.call('HGET', KEYS[4], ARGV[5])
  if had then
    local st = string.sub(had, 1, 1)
    if st == 'q' or st == 'r' then
      return {'taken', ARGV[5], 0}
    end
    redis.call('ZREM', KEYS[5], ARGV[5])
    redis.call('HDEL', KEYS[4], ARGV[5] .. '\ne')
  end
end
local sid = redis.call('XADD', KEYS[1], '*', 'id', ARGV[5], 'n', '0', 'job', ARGV[2])
redis.call('HINCRBY', KEYS[6], 'a', 1)
if keyed then
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
end
if kept then
  redis.call('HSET', KEYS[4], ARGV[5], 'q|0|||' .. now .. '||' .. sid .. '|' .. ARGV[7])
end
if evicted then
  return {'evicted', ARGV[5], outstanding + 1, evicted}
end
return {'added', ARGV[5], outstanding + 1}
