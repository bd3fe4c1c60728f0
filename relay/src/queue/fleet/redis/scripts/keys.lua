-- dripfeed: one idempotency key of a fleet (RedisKeys), in one key.
--
-- KEYS[1]  the key's record: "STATE|ID|REQUEST", STATE p (its job is being
--          admitted) or a (admitted), REQUEST what the key names (the
--          caller's text: a destination and a body's hash, say)
-- ARGV[1]  "claim": ARGV[2] the request, ARGV[3] an id for a new key,
--          ARGV[4] how long it is remembered (ms). Returns {"new", id} (the
--          record made, pending), {"repeat", id} (admitted before),
--          {"pending", id} (being admitted, or its admission's end was
--          never recorded) or {"conflict", id} (the key names another
--          request)
--          "accept": ARGV[2] the id, ARGV[3] how long it is remembered
--          (ms): a pending record of that id becomes admitted. Returns 1 if
--          it did.
--          "release": ARGV[2] the id: a pending record of that id is
--          deleted (its job was refused; a retry may try again). Returns 1
--          if it was.
local op = ARGV[1]
local had = redis.call('GET', KEYS[1])
local st, id, req = nil, nil, nil
if had then
  st, id, req = string.match(had, '^([pa])|([^|]*)|(.*)$')
end
if op == 'claim' then
  if not had then
    redis.call('SET', KEYS[1], 'p|' .. ARGV[3] .. '|' .. ARGV[2], 'PX', ARGV[4])
    return {'new', ARGV[3]}
  end
  if not st or req ~= ARGV[2] then
    return {'conflict', id or ''}
  end
  if st == 'a' then
    return {'repeat', id}
  end
  return {'pending', id}
elseif op == 'accept' then
  if st ~= 'p' or id ~= ARGV[2] then
    return 0
  end
  redis.call('SET', KEYS[1], 'a|' .. id .. '|' .. req, 'PX', ARGV[3])
  return 1
elseif op == 'release' then
  if st ~= 'p' or id ~= ARGV[2] then
    return 0
  end
  redis.call('DEL', KEYS[1])
  return 1
end
return redis.error_reply('ERR dripfeed keys: bad op')
