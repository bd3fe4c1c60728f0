-- dripfeed: one adaptive rate shared by a fleet (RedisAimd).
--
-- KEYS[1]  the rate in force: a hash {rate, base = the start rate it was
--          made from, pause = unix ms until which nothing is sent}
-- KEYS[2]  the lease: the id of the node deciding, expiring
-- KEYS[3..] "report" only: the window's seconds, oldest first, each a hash
--          of a tally's fields added up over the nodes; the last is the
--          second this report is added to
-- ARGV[1]  "report": ARGV[2] the node, ARGV[3] the lease's life (ms),
--          ARGV[4] how long a second's tally is kept (ms), ARGV[5] the
--          start rate (a rate made from another start rate starts again
--          from it), then field and count pairs (the field "h" keeps the
--          largest, every other adds up). Renews the node's lease or takes
--          a free one. Returns {rate, pause, leading (0/1), taken now (0/1)}
--          and, when leading, each second's fields as HGETALL gives them.
--          "set": ARGV[2] the node, ARGV[3] the rate, ARGV[4] the pause:
--          kept if the node holds the lease. Returns 1 if it was.
-- Rates travel as the caller's strings: a Lua number returned would be
-- cut to an integer.
local op = ARGV[1]
local node = ARGV[2]
if op == 'set' then
  if redis.call('GET', KEYS[2]) ~= node then
    return 0
  end
  redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'pause', ARGV[4])
  return 1
end
if op ~= 'report' then
  return redis.error_reply('ERR dripfeed aimd: bad op')
end
local lease = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
if not lease or not keep or lease < 1 or keep < 1 or #KEYS < 3 then
  return redis.error_reply('ERR dripfeed aimd: bad arguments')
end
local here = KEYS[#KEYS]
for i = 6, #ARGV - 1, 2 do
  local field, n = ARGV[i], tonumber(ARGV[i + 1])
  if n and n > 0 then
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
if #ARGV >= 7 then
  redis.call('PEXPIRE', here, keep)
end
local state = redis.call('HMGET', KEYS[1], 'rate', 'base', 'pause')
local rate, pause = state[1], state[3] or '0'
if not rate or state[2] ~= ARGV[5] then
  rate, pause = ARGV[5], '0'
  redis.call('HSET', KEYS[1], 'rate', rate, 'base', ARGV[5], 'pause', pause)
end
-- A fleet gone for a day starts again from the start rate.
redis.call('PEXPIRE', KEYS[1], 86400000)
local holder = redis.call('GET', KEYS[2])
local leading, taken = 0, 0
if holder == node then
  redis.call('PEXPIRE', KEYS[2], lease)
  leading = 1
elseif not holder then
  redis.call('SET', KEYS[2], node, 'PX', lease)
  leading, taken = 1, 1
end
local out = {rate, pause, leading, taken}
if leading == 1 then
  for i = 3, #KEYS do
    out[#out + 1] = redis.call('HGETALL', KEYS[i])
  end
end
return out
