-- dripfeed: one job's status in a destination's shared queue.
--
-- KEYS[1]  the stream        KEYS[2]  the jobs' statuses (a hash by id)
-- ARGV[1]  the group         ARGV[2]  the job's id
--
-- Returns false for an unknown id, else {status, "1" if a consumer holds
-- it now (being delivered), else "0", its last error or ""} (the status as
-- queue_admit.lua writes it, the error as queue_settle.lua keeps it).
local rec = redis.call('HGET', KEYS[2], ARGV[2])
if not rec then
  return false
end
local st, sid = string.match(rec, '^([^|]*)|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]*)|')
local held = '0'
if st == 'q' and sid and sid ~= '' then
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], sid, sid, 1)
  if ok and #p > 0 then held = '1' end
end
return {rec, held, redis.call('HGET', KEYS[2], ARGV[2] .. '\ne') or ''}
