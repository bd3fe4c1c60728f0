-- dripfeed: admit one job into a destination's shared queue (a stream).
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the idempotency key (same slot; ignored when ARGV[4] is "0")
-- KEYS[4]  the jobs' statuses (a hash by id; written when ARGV[6] is "1")
-- KEYS[5]  the ended jobs by end time (a sorted set of ids)
-- KEYS[6]  the queue's counts (a hash: a accepted, f refused full)
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
--          the answer is {"seen", id, 0}
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
-- refused, in the queue's counts.
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
if kept and ARGV[9] == '1' then
  local had = redis.call('HGET', KEYS[4], ARGV[5])
  if had then
    if ARGV[8] == '1' then
      redis.call('HSET', KEYS[4], ARGV[5], had)
    end
    return {'seen', ARGV[5], 0}
  end
end
local outstanding = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
if outstanding >= bound then
  redis.call('HINCRBY', KEYS[6], 'f', 1)
  return {'full', '', outstanding}
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
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[4], ARGV[5], 'q|0|||' .. now .. '||' .. sid .. '|' .. ARGV[7])
end
return {'added', ARGV[5], outstanding + 1}
