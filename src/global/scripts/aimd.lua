-- dripfeed: one adaptive rate shared by a fleet (RedisAimd).
--
-- KEYS[1]  the rate in force: a hash {rate, base = the start rate it was
--          made from, pause = until when nothing is sent, cut = when the
--          rate was last cut, ref = where the downstream last ran out of
--          room}; times are ms of the server's TIME, so nodes' clocks never
--          matter
-- KEYS[2]  the lease: the id of the node deciding, expiring
-- KEYS[3..10] "report" only: a ring of eight seconds' tallies, second S in
--          KEYS[3 + S % 8], each a hash of a tally's fields added up over
--          the nodes, with "_s" the second it holds
-- ARGV[1]  "report": ARGV[2] the node, ARGV[3] the lease's life (ms),
--          ARGV[4] the start rate (a rate made from another start rate
--          starts again from it), ARGV[5] the seconds a window spans
--          (1..8), then field and count pairs (the field "h" keeps the
--          largest, every other adds up) added to this second's tally.
--          Renews the node's lease or takes a free one. Returns {rate,
--          pause left (ms), leading (0/1), taken now (0/1), ms since the
--          last cut (-1: none), ref ("" none)} and, when leading, the
--          window's seconds oldest first, each as HGETALL gives it.
--          "set": ARGV[2] the node, ARGV[3] the rate, ARGV[4] a pause (ms,
--          0: none), ARGV[5] the start rate the decision was made under,
--          ARGV[6] "1" for a cut, ARGV[7] ref ("" none): kept if the node
--          still holds the lease and the start rate is the same. Returns 1
--          if it was.
--          "release": ARGV[2] the node: its lease ends now (it stops).
-- Rates travel as the caller's strings: a Lua number returned would be
-- cut to an integer.
local op = ARGV[1]
local node = ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if op == 'release' then
  if redis.call('GET', KEYS[2]) == node then
    redis.call('DEL', KEYS[2])
    return 1
  end
  return 0
end
if op == 'set' then
  if redis.call('GET', KEYS[2]) ~= node then
    return 0
  end
  if redis.call('HGET', KEYS[1], 'base') ~= ARGV[5] then
    return 0
  end
  redis.call('HSET', KEYS[1], 'rate', ARGV[3])
  local pause = tonumber(ARGV[4]) or 0
  if pause > 0 then
    redis.call('HSET', KEYS[1], 'pause', now + pause)
  end
  if ARGV[6] == '1' then
    redis.call('HSET', KEYS[1], 'cut', now)
  end
  if ARGV[7] ~= '' then
    redis.call('HSET', KEYS[1], 'ref', ARGV[7])
  end
  return 1
end
if op ~= 'report' then
  return redis.error_reply('ERR dripfeed aimd: bad op')
end
local lease = tonumber(ARGV[3])
local span = tonumber(ARGV[5])
if not lease or lease < 1 or not span or span < 1 or span > 8 or #KEYS ~= 10 then
  return redis.error_reply('ERR dripfeed aimd: bad arguments')
end
local second = math.floor(now / 1000)
local function slot(s)
  return KEYS[3 + s % 8]
end
local here = slot(second)
if #ARGV >= 7 then
  if redis.call('HGET', here, '_s') ~= tostring(second) then
    redis.call('DEL', here)
    redis.call('HSET', here, '_s', second)
  end
  for i = 6, #ARGV - 1, 2 do
    local field, n = ARGV[i], tonumber(ARGV[i + 1])
    if n and n > 0 and field ~= '_s' then
      if field == 'h' then
        local had = tonumber(redis.call('HGET', here, 'h')) or 0
        if n > had then
          redis.call('HSET', here, 'h', n)
        end
      else
        redis.call('HINCRBY', here, field, n)
      end
    end
  end
  redis.call('PEXPIRE', here, 10000)
end
local state = redis.call('HMGET', KEYS[1], 'rate', 'base', 'pause', 'cut', 'ref')
local rate = state[1]
if not rate or state[2] ~= ARGV[4] then
  rate = ARGV[4]
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'rate', rate, 'base', ARGV[4])
  state = {rate, ARGV[4], false, false, false}
end
-- A fleet gone for a day starts again from the start rate.
redis.call('PEXPIRE', KEYS[1], 86400000)
local pause = (tonumber(state[3]) or 0) - now
if pause < 0 then pause = 0 end
local cut = tonumber(state[4])
local since = -1
if cut then since = math.max(0, now - cut) end
local holder = redis.call('GET', KEYS[2])
local leading, taken = 0, 0
if holder == node then
  redis.call('PEXPIRE', KEYS[2], lease)
  leading = 1
elseif not holder then
  redis.call('SET', KEYS[2], node, 'PX', lease)
  leading, taken = 1, 1
end
local out = {rate, pause, leading, taken, since, state[5] or ''}
if leading == 1 then
  for s = second - span + 1, second do
    local key = slot(s)
    if redis.call('HGET', key, '_s') == tostring(s) then
      out[#out + 1] = redis.call('HGETALL', key)
    else
      out[#out + 1] = {}
    end
  end
end
return out
