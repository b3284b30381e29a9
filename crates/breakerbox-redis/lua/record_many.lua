-- record_many: one script for several breakers in one call (a node's periodic flushes of
-- the breakers it serves, or their reads, on one server; the keys may hash to any slot,
-- so never on a cluster). Above this file, store/many.rs puts the prelude and the
-- operation's script whole (record.lua, or read.lua for a node's reads), wrapped as
-- `local function one(KEYS, ARGV) ... end`: each breaker's arguments are applied by that
-- script itself, as one call of it on its key would apply them.
-- KEYS: the breakers' hashes. ARGV: per key in turn, how many arguments, then the ARGV of
-- the script's call for that key.
-- The reply: per key, the script's reply, or { 'error', message } if it raised an error
-- (the other keys' calls are not undone, as separate calls would not be).
local out = {}
local at = 1
for i = 1, #KEYS do
  local m = tonumber(ARGV[at]) or 0
  local argv = {}
  for j = 1, m do argv[j] = ARGV[at + j] end
  at = at + m + 1
  local ok, reply = pcall(one, { KEYS[i] }, argv)
  if ok then
    out[i] = reply
  else
    -- A failed redis.call comes as its message, or (on some servers) as the error
    -- reply's table: its message in `err`.
    if type(reply) == 'table' then reply = reply.err end
    out[i] = { 'error', tostring(reply) }
  end
end
return out
