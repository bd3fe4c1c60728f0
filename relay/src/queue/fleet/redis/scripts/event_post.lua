-- dripfeed: take an event into an application's events (one Redis
-- Cluster slot: the application's hash tag).
--
-- KEYS[1]  the records (a hash: id -> JSON, with the copies' endpoints)
-- KEYS[2]  the payloads (a hash: id -> bytes)
-- KEYS[3]  the ids, oldest first (a sorted set, all scores 0, ids padded
--          to 20 digits so that their order is their text's)
-- KEYS[4]  the ids whose copies are not all queued yet (the same)
-- KEYS[5]  the idempotency keys (a hash: scoped key -> id)
-- KEYS[6]  the copies' ends and resends (a hash: "id\nendpoint\ns" and
--          "id\nendpoint\nr")
-- ARGV[1]  the event's id (padded)
-- ARGV[2]  its record (JSON: copies, the endpoints; scoped, its key)
-- ARGV[3]  its payload
-- ARGV[4]  its scoped idempotency key ("" for none)
-- ARGV[5]  how many copies it has
-- ARGV[6]  the oldest id kept (padded): older events are forgotten
-- ARGV[7]  the most events kept: past it the oldest are forgotten
-- ARGV[8]  how long the application's events are kept after its last
--          post, ms (each key's time to live)
-- ARGV[9]  "1" if the caller waits for replicas (WAIT) after this script:
--          a repeat then writes its key again, so the WAIT covers it
-- ARGV[10] the application's first id (padded): a key naming an earlier
--          event is an earlier application's of the same name (deleted
--          since), and is taken anew
--
-- Forgets at most 64 old events, then: a key seen answers {"repeat",
-- its event's id, its copies}; an id held answers {"taken", id, 0} (the
-- caller draws another); else the event is written, due for fan-out when
-- it has copies, and the answer is {"new", id, copies}. An application
-- that posts nothing more is forgotten whole once its last event is as
-- old as the retention.
local function forget(id)
  local rec = redis.call('HGET', KEYS[1], id)
  if rec then
    local ok, r = pcall(cjson.decode, rec)
    if ok and type(r) == 'table' then
      -- Its key, unless it names a later event now (an application
      -- made again under the name took it anew).
      if type(r.scoped) == 'string' and redis.call('HGET', KEYS[5], r.scoped) == id then
        redis.call('HDEL', KEYS[5], r.scoped)
      end
      if type(r.copies) == 'table' then
        for _, e in ipairs(r.copies) do
          redis.call('HDEL', KEYS[6], id .. '\n' .. e .. '\ns', id .. '\n' .. e .. '\nr')
        end
      end
    end
  end
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
end

for _, id in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '-', '(' .. ARGV[6], 'LIMIT', 0, 64)) do
  forget(id)
end
local over = redis.call('ZCARD', KEYS[3]) - (tonumber(ARGV[7]) or 0)
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, math.min(over, 64) - 1)) do
    forget(id)
  end
end

if ARGV[4] ~= '' then
  local seen = redis.call('HGET', KEYS[5], ARGV[4])
  if seen and seen >= (ARGV[10] or '') then
    local n = 0
    local rec = redis.call('HGET', KEYS[1], seen)
    if rec then
      local ok, r = pcall(cjson.decode, rec)
      if ok and type(r) == 'table' and type(r.copies) == 'table' then
        n = #r.copies
      end
    end
    if ARGV[9] == '1' then
      redis.call('HSET', KEYS[5], ARGV[4], seen)
    end
    return {'repeat', seen, n}
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {'taken', ARGV[1], 0}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
local n = tonumber(ARGV[5]) or 0
if n > 0 then
  redis.call('ZADD', KEYS[4], 0, ARGV[1])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[4], ARGV[1])
end
for k = 1, 6 do
  redis.call('PEXPIRE', KEYS[k], ARGV[8])
end
return {'new', ARGV[1], n}
