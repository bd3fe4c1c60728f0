-- dripfeed: dead-letter a job that never entered a destination's queue (a
-- copy fanned out as its destination was deleted), once.
--
-- KEYS as queue_redrive.lua: KEYS[3] the jobs' statuses, KEYS[4] the
-- ended jobs by end time, KEYS[5] the dead letters (a stream)
-- ARGV[1]  the job's id      ARGV[2]  the reason     ARGV[3]  the job
-- ARGV[4]  how many dead letters the stream keeps (about; 0: none there)
-- ARGV[5]  the job's owner ("" for none)
-- ARGV[6]  "1" if statuses are kept
--
-- With statuses kept, written only if the id has none here (it never
-- entered this queue, nor was dead-lettered so before), and its status
-- becomes dead-lettered with no attempts: a second fan-out of the event,
-- or one that comes after the copy was queued or delivered, writes
-- nothing. Returns 1 if written, else 0.
local id = ARGV[1]
local kept = ARGV[6] == '1'
if kept and redis.call('HEXISTS', KEYS[3], id) == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if kept then
  redis.call('HSET', KEYS[3], id, 'x|0|||' .. now .. '|' .. now .. '||' .. ARGV[5])
  redis.call('ZADD', KEYS[4], now, id)
end
local max = tonumber(ARGV[4]) or 0
if max > 0 then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', max, '*', 'id', id, 'reason', ARGV[2],
    'n', '0', 'last', '', 'error', '', 'job', ARGV[3])
end
return 1
