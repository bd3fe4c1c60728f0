-- dripfeed: one shared reverse leaky bucket for a fleet's emissions.
--
-- KEYS[1]  the bucket: a hash {d = debt in permits, t = last update in µs of
--          the server's TIME}; it expires when its debt reaches zero.
-- ARGV[1]  "lease" (take up to ARGV[2] permits) or "return" (give ARGV[2] back)
-- ARGV[2]  permits (a whole number >= 0)
-- ARGV[3]  rate, permits per second (> 0)
-- ARGV[4]  size, the most debt a lease may leave once its wait is over (>= 1)
-- ARGV[5]  the longest wait a lease may reserve, µs (>= 0)
--
-- A lease is all or nothing and may be a reservation: it grants want =
-- min(n, floor(size)) permits and adds them to the debt now, usable after
-- wait = max(0, debt_now + want - size) / rate, provided that wait is at most
-- ARGV[5]; else it grants nothing and says the wait. So nodes asking at once
-- queue in arrival order instead of retrying, and each round trip grants.
-- Returns {granted, wait_us, debt_after as a string}.
local key = KEYS[1]
local op = ARGV[1]
local n = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local size = tonumber(ARGV[4])
local max_wait = tonumber(ARGV[5])
if not n or not rate or not size or not max_wait or n < 0 or not (rate > 0)
    or not (size >= 1) or not (max_wait >= 0) then
  return redis.error_reply('ERR dripfeed rate: bad arguments')
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local state = redis.call('HMGET', key, 'd', 't')
local debt = tonumber(state[1]) or 0
local last = tonumber(state[2]) or now
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end
debt = debt - elapsed / 1000000 * rate
if not (debt > 0) then debt = 0 end
if last < now then last = now end

local granted = 0
local wait = 0
if op == 'lease' then
  local want = math.min(math.floor(n), math.floor(size))
  if want >= 1 then
    if debt + want > size then
      wait = math.ceil((debt + want - size) / rate * 1000000)
    end
    if wait <= max_wait then
      granted = want
      debt = debt + want
    end
  end
elseif op == 'return' then
  debt = debt - math.floor(n)
  if not (debt > 0) then debt = 0 end
else
  return redis.error_reply('ERR dripfeed rate: unknown op')
end

if debt > 0 then
  redis.call('HSET', key, 'd', string.format('%.17g', debt), 't', string.format('%d', last))
  local ttl = math.ceil(debt / rate * 1000)
  if ttl < 1 then ttl = 1 end
  if ttl > 1e15 then ttl = 1e15 end
  redis.call('PEXPIRE', key, string.format('%d', ttl))
else
  redis.call('DEL', key)
end
return {granted, wait, string.format('%.17g', debt)}
