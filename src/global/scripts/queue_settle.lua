-- dripfeed: end or postpone jobs a consumer holds, in one round trip.
--
-- KEYS[1]  the stream        KEYS[2]  the retries (a sorted set)
-- ARGV[1]  the group
-- ARGV[2]  "ack": ARGV[3..] are stream ids to acknowledge and delete
--          "hold": ARGV[3] stream id, ARGV[4] the consumer asking: if it
--          still holds the entry, its idle time starts again (XCLAIM JUSTID)
--          "retry": ARGV[3] stream id, ARGV[4] delay ms, ARGV[5] the
--          member to keep (public id, "\n", attempts, "\n", job), ARGV[6]
--          the consumer asking: only the entry's holder may retry it
--
-- An entry is acted on only if this group still had it pending (XACK
-- answered 1): one claimed again by another consumer and already ended
-- there is not retried twice. Times are the server's (TIME), so nodes'
-- clocks never matter. Returns how many entries were acted on.
local op = ARGV[2]
if op == 'ack' then
  local done = 0
  for i = 3, #ARGV do
    if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
      done = done + 1
    end
    redis.call('XDEL', KEYS[1], ARGV[i])
  end
  return done
elseif op == 'hold' then
  local held = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
  if #held == 0 or held[1][2] ~= ARGV[4] then
    return 0
  end
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[4], 0, ARGV[3], 'JUSTID')
  return 1
elseif op == 'retry' then
  -- A consumer whose entry was taken over (it was too slow) does not
  -- retry it behind the new holder's back.
  local held = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
  if #held == 0 or held[1][2] ~= ARGV[6] then
    return 0
  end
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[3]) == 0 then
    return 0
  end
  redis.call('XDEL', KEYS[1], ARGV[3])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[5])
  return 1
end
return redis.error_reply('ERR dripfeed queue: bad settle')
