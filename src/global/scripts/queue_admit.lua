-- dripfeed: admit one job into a destination's shared queue (a stream).
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- KEYS[3]  the idempotency key (same slot; ignored when ARGV[4] is "0")
-- ARGV[1]  the bound: entries outstanding (stream + retries) at most
-- ARGV[2]  the job's bytes
-- ARGV[3]  how long the idempotency key is remembered, ms
-- ARGV[4]  "1" with an idempotency key, "0" without
-- ARGV[5]  the job's id for good (unique in the fleet, chosen by the caller)
--
-- Outstanding is XLEN + ZCARD: entries are deleted once acknowledged, so
-- the stream holds only what is queued or being delivered (never trimmed
-- with MAXLEN, which would drop unacknowledged work). The entry carries its
-- id as a field (a stream id is per stream, so not unique in the fleet).
-- Returns {"added", id, outstanding after}, {"repeat", the first id, 0} or
-- {"full", "", outstanding}.
local keyed = ARGV[4] == '1'
if keyed then
  local had = redis.call('GET', KEYS[3])
  if had then
    return {'repeat', had, 0}
  end
end
local bound = tonumber(ARGV[1])
if not bound then
  return redis.error_reply('ERR dripfeed queue: bad bound')
end
local outstanding = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
if outstanding >= bound then
  return {'full', '', outstanding}
end
redis.call('XADD', KEYS[1], '*', 'id', ARGV[5], 'n', '0', 'job', ARGV[2])
if keyed then
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
end
return {'added', ARGV[5], outstanding + 1}
