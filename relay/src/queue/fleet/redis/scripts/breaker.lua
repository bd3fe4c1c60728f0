-- dripfeed: one destination's circuit breaker, shared by the fleet.
--
-- KEYS[1]  the breaker: a hash {s = c (closed), o (open) or h (half open),
--          u = open until (ms), c = the next cool-down (ms), n = times
--          opened, h = the last outcomes, oldest first, "1" failed,
--          p = the relay probing, pu = its probe's lease (ms)}; times are
--          ms of the server's TIME, so relays' clocks never matter
-- ARGV[1]  "look" or "record"
-- ARGV[2]  the relay
-- ARGV[3]  the first cool-down (ms)   ARGV[4] the longest (ms)
-- ARGV[5]  opens after this many failures in a row
-- ARGV[6]  or when this many attempts were seen   ARGV[7] and this share failed
-- ARGV[8]  a probe's lease (ms): another relay probes once it has passed
-- "record": ARGV[9..] the relay's attempts' ends in order: "0" succeeded,
--          "1" failed, "p0"/"p1" its probe's
-- "look": an open breaker whose cool-down has passed, or a half-open one
--          whose probe lease has passed, makes this relay the prober.
-- Returns {state, ms until a probe may go, 1 if this relay probes,
--          times opened, 1 if this call opened it}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op, node = ARGV[1], ARGV[2]
local first, longest = tonumber(ARGV[3]), tonumber(ARGV[4])
local trip, window, share = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local lease = tonumber(ARGV[8])
if not (first and longest and trip and window and share and lease) then
  return redis.error_reply('ERR dripfeed breaker: bad arguments')
end
local b = redis.call('HMGET', KEYS[1], 's', 'u', 'c', 'n', 'h', 'p', 'pu')
local state = b[1] or 'c'
local till = tonumber(b[2]) or 0
local cool = tonumber(b[3]) or first
local opened = tonumber(b[4]) or 0
local history = b[5] or ''
local prober = b[6] or ''
local probe_until = tonumber(b[7]) or 0
local opened_now = 0

local function open()
  state, till, opened, opened_now = 'o', now + cool, opened + 1, 1
  history, prober, probe_until = '', '', 0
end

local function trips()
  local n = #history
  if n >= trip and not string.find(string.sub(history, n - trip + 1), '0', 1, true) then
    return true
  end
  if n >= window then
    local failed = 0
    for i = n - window + 1, n do
      if string.byte(history, i) == 49 then failed = failed + 1 end
    end
    return failed >= share * window
  end
  return false
end

if op == 'look' then
  if (state == 'o' and now >= till) or (state == 'h' and (prober == '' or now >= probe_until)) then
    state, prober, probe_until = 'h', node, now + lease
  end
elseif op == 'record' then
  local keep = math.max(trip, window)
  for i = 9, #ARGV do
    local e = ARGV[i]
    local probe = string.sub(e, 1, 1) == 'p'
    local failed = string.sub(e, -1) == '1'
    if state == 'c' then
      history = history .. (failed and '1' or '0')
      if #history > keep then history = string.sub(history, -keep) end
      if trips() then open() end
    elseif state == 'h' and probe and prober == node then
      if failed then
        cool = math.min(cool * 2, longest)
        open()
      else
        state, cool, history, prober, probe_until = 'c', first, '', '', 0
      end
    end
    -- Open, or another relay's probe out: an attempt begun before is old news.
  end
else
  return redis.error_reply('ERR dripfeed breaker: bad op')
end

redis.call('HSET', KEYS[1], 's', state, 'u', till, 'c', cool, 'n', opened, 'h', history,
  'p', prober, 'pu', probe_until)
redis.call('PEXPIRE', KEYS[1], 86400000)
local left = 0
if state == 'o' then left = math.max(0, till - now) end
local mine = 0
if state == 'h' and prober == node then mine = 1 end
return {state, left, mine, opened, opened_now}
