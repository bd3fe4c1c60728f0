-- dripfeed: read an event's copies (one Redis Cluster slot).
--
-- KEYS[1]  the copies' ends and resends (a hash)
-- KEYS[2..] each copy's attempts (a list)
-- ARGV[1..] each copy's field prefix ("id\nendpoint"), as KEYS[2..]
--
-- Returns, for each copy, {its end ("" none, "d", "x|reason"), its
-- resends, {its attempts' JSON, oldest first}}.
local out = {}
for i = 1, #ARGV do
  local f = ARGV[i]
  out[i] = {
    redis.call('HGET', KEYS[1], f .. '\ns') or '',
    redis.call('HGET', KEYS[1], f .. '\nr') or '0',
    redis.call('LRANGE', KEYS[i + 1], 0, -1),
  }
end
return out
