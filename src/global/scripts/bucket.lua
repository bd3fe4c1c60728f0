-- dripfeed: one per-key reverse leaky bucket (same maths as keyed::Bucket).
--
-- KEYS[1]  the bucket: a hash {d = debt, t = last update in µs of the
--          server's TIME}, hash-tagged per bucket; it expires when its debt
--          reaches zero (PEXPIRE = time to empty), so idle keys cost nothing.
-- KEYS[2]  the key's quota override: a hash {s = size, r = rate} in the
--          same slot; it never expires (only "clear" removes it).
-- ARGV[1]  "admit" | "check" | "settle" | "set" | "clear"
-- ARGV[2]  size (> 0)    ARGV[3]  rate, units per second (> 0): the default
--          quota, or the override for "set"
-- ARGV[4]  cost (admit, check) or the estimated cost (settle)
-- ARGV[5]  the actual cost (settle only)
--
-- The quota is the override if the key has one, else ARGV's.
-- debt_now = max(0, debt - (now - last) × rate); "admit" adds the cost iff
-- debt_now + cost <= size; "check" writes nothing; "settle" sets the debt to
-- max(0, debt_now + actual - estimated). Returns {written (0/1), debt_now,
-- debt_after, size, rate} (numbers as strings, exact doubles); "clear"
-- returns written = whether an override was removed.
local key = KEYS[1]
local qkey = KEYS[2]
local op = ARGV[1]
local size = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
if not size or not rate or not cost or not (size > 0) or not (rate > 0) or not (cost >= 0) then
  return redis.error_reply('ERR dripfeed bucket: bad arguments')
end

if op == 'set' then
  redis.call('HSET', qkey, 's', string.format('%.17g', size), 'r', string.format('%.17g', rate))
  return {1, '0', '0', string.format('%.17g', size), string.format('%.17g', rate)}
elseif op == 'clear' then
  local removed = redis.call('DEL', qkey)
  return {removed, '0', '0', string.format('%.17g', size), string.format('%.17g', rate)}
end
local own = redis.call('HMGET', qkey, 's', 'r')
local own_size, own_rate = tonumber(own[1]), tonumber(own[2])
if own_size and own_rate and own_size > 0 and own_rate > 0 then
  size = own_size
  rate = own_rate
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local state = redis.call('HMGET', key, 'd', 't')
local debt = tonumber(state[1]) or 0
local last = tonumber(state[2]) or now
local elapsed = now - last
if elapsed < 0 then elapsed = 0 end
local debt_now = debt - elapsed / 1000000 * rate
if not (debt_now > 0) then debt_now = 0 end
if last < now then last = now end

local after = debt_now
local write = false
if op == 'admit' then
  if debt_now + cost <= size then
    after = debt_now + cost
    write = true
  end
elseif op == 'settle' then
  local actual = tonumber(ARGV[5])
  if not actual or not (actual >= 0) then
    return redis.error_reply('ERR dripfeed bucket: bad arguments')
  end
  after = debt_now + (actual - cost)
  if not (after > 0) then after = 0 end
  write = true
elseif op ~= 'check' then
  return redis.error_reply('ERR dripfeed bucket: unknown op')
end

if write then
  if after > 0 then
    redis.call('HSET', key, 'd', string.format('%.17g', after), 't', string.format('%d', last))
    local ttl = math.ceil(after / rate * 1000)
    if ttl < 1 then ttl = 1 end
    if ttl > 1e15 then ttl = 1e15 end
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  else
    redis.call('DEL', key)
  end
end
return {write and 1 or 0, string.format('%.17g', debt_now), string.format('%.17g', after),
  string.format('%.17g', size), string.format('%.17g', rate)}
