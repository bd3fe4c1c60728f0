-- dripfeed: record what happened to an event's copy (one Redis Cluster
-- slot: the application's hash tag).
--
-- KEYS[1]  the records (a hash: id -> JSON)
-- KEYS[2]  the copies' ends and resends (a hash)
-- KEYS[3]  the copy's attempts (a list of JSON, oldest first)
-- ARGV[1]  the event's id (padded)
-- ARGV[2]  the copy's field prefix ("id\nendpoint")
-- ARGV[3]  "a": an attempt (ARGV[4] its JSON; ARGV[7] the copy's end
--          with it, "" for none); "e": the copy ended (ARGV[4] "d"
--          delivered, or "x|reason"); "g": to be sent again, unless it
--          is already (marked "s|ms" within the last ARGV[4] ms): its
--          resends counted
-- ARGV[5]  the most attempts a copy keeps
-- ARGV[6]  how long the attempts are kept, ms
--
-- An event no longer kept is left alone (0); else 1 ("g": 0 if it was
-- already on its way again).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = ARGV[2]
if ARGV[3] == 'a' then
  redis.call('RPUSH', KEYS[3], ARGV[4])
  redis.call('LTRIM', KEYS[3], -(tonumber(ARGV[5]) or 64), -1)
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
  if ARGV[7] and ARGV[7] ~= '' then
    redis.call('HSET', KEYS[2], f .. '\ns', ARGV[7])
  end
elseif ARGV[3] == 'e' then
  redis.call('HSET', KEYS[2], f .. '\ns', ARGV[4])
elseif ARGV[3] == 'g' then
  local was = redis.call('HGET', KEYS[2], f .. '\ns')
  if was and string.sub(was, 1, 2) == 's|' then
    local at = tonumber(string.sub(was, 3)) or 0
    if at > now - (tonumber(ARGV[4]) or 0) then
      return 0
    end
  end
  redis.call('HSET', KEYS[2], f .. '\ns', 's|' .. now)
  redis.call('HINCRBY', KEYS[2], f .. '\nr', 1)
end
return 1
