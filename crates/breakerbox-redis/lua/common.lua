-- breakerbox: the prelude shared by every script (prepended at compile time, followed by
-- window.lua and transitions.lua).
--
-- The transition model of breakerbox::model, ported line by line. Times are integer
-- MICROSECONDS (Lua numbers are doubles; microseconds since the epoch are exact below
-- 2^53). Every script reads and validates the whole state first, computes in Lua tables,
-- and writes at the end, so a corrupt value is reported before anything is written.
--
-- KEYS[1]  the breaker's hash, e.g. "bb:{payments}"
-- ARGV[1]  now in microseconds, or "" to read Redis TIME
-- ARGV[2]  TTL of the hash in milliseconds (refreshed on every write)
-- ARGV[3]  jitter sample r in [0, 1), used if this operation opens the breaker
-- ARGV[4]  the config, comma separated (see parse_config)
-- ARGV[5]  the pub/sub channel transitions are published on ("" for none), after "p:"
--          (PUBLISH) or "s:" (SPUBLISH: a cluster's sharded pub/sub, so the news stays on
--          the breaker's shard; PUBLISH where the server has no SPUBLISH), as
--          "phase,generation,remaining_us,now_us,version,incarnation,warm" (remaining
--          -1: never; warm 1 when the closed phase's failure streak may trip soon, which
--          is also announced when a failure makes it so). Nodes treat a message as a hint
--          to re-read the hash (and to ask Redis meanwhile), never as state.
-- ARGV[6..] the operation's own arguments
--
-- Every write bumps `ver`, a version that only grows within an incarnation `inc` (set
-- when the hash is created): views order news by (inc, ver), never by Redis time, which
-- can step back. Half-open probe slots are leases (`leases`: "token:deadline_us,..."):
-- a slot whose lease deadline passed is reclaimed by the next operation, so a reservation
-- whose caller timed out, crashed or lost its outcome cannot wedge the half-open phase.
-- Rule numbers ("rule 7") refer to docs/RULES.md in the repository.

local CLOSED, OPEN, HALF, FORCED, DISABLED = 0, 1, 2, 3, 4
local NORMAL, PROBE, PASS = 0, 1, 2
local SUCCESS, FAILURE, IGNORE = 0, 1, 2
local NEVER = math.huge

local KEY = KEYS[1]
local TTL = ARGV[2]
local R = tonumber(ARGV[3]) or 0
local CHANNEL, SHARDED = '', false
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  SHARDED = string.sub(ARGV[5], 1, 2) == 's:'
  CHANNEL = string.sub(ARGV[5], 3)
end

-- Publishes `message` on the breaker's channel: sharded where asked and available.
local function publish(message)
  if SHARDED then
    local sent = redis.pcall('SPUBLISH', CHANNEL, message)
    if type(sent) ~= 'table' or not sent.err then return end
  end
  redis.call('PUBLISH', CHANNEL, message)
end

local function fmt(n)
  if n == NEVER then return '-1' end
  return string.format('%d', n)
end

-- Exact floor(a / b) for integers 0 <= a < 2^53 and b >= 1, which every caller divides
-- (times below 2^53 us; the ramp's (10^6 - start) * elapsed below 10^6 * 3.6e9, as
-- breakerbox::config::MAX_RAMP_DURATION keeps it; the ramp's acquire count; that count's
-- residue mod 10^6 times 618031, below 6.2e11).
-- With a = q * b + r, 0 <= r < b: the quotient a / b is correctly rounded, so it is at
-- least q (a double) and at most a / b + (a / b) * 2^-53 < q + r / b + 1 / b <= q + 1, as
-- a * 2^-53 < 1 <= b - r; its floor is q. No correction is needed (none could fire).
local function idiv(a, b)
  return math.floor(a / b)
end

local function now_us()
  if ARGV[1] ~= nil and ARGV[1] ~= '' then
    return tonumber(ARGV[1])
  end
  -- Redis < 5 replicates scripts verbatim unless told to replicate their effects (a
  -- script that reads TIME and then writes must not be replayed); Redis >= 7 always
  -- replicates effects and keeps this call as a no-op.
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- cf, wk, wsize, wwidth, wbuckets, fppm, sppm, minc, slow, rec, mult, maxo, jit, maxp, reqs, hot,
-- lease, shadow, cdl, pdl, quorum, rppm, rdur. cf/fppm/sppm 0 = rule absent; slow -1 = no
-- threshold; wk is n (none), c (count) or t (time); lease is a probe slot's lease in
-- microseconds; shadow 1 = the config starts in shadow mode (rule 20; the stored switch,
-- once set, wins); cdl and pdl are the deadlines (us, -1 none) of a normal call and of a
-- probe (rule 22); quorum is rule 21's K (1: none); minc is at least 1 (as Config
-- keeps it: no rule is evaluated on an empty window); rppm 0 = no ramp, else the ramp's
-- start fraction in ppm and rdur its duration in us (rule 23).
local function parse_config(s)
  local f = {}
  for part in string.gmatch(s, '([^,]+)') do f[#f + 1] = part end
  local c = {
    cf = tonumber(f[1]), wk = f[2], wsize = tonumber(f[3]), wwidth = tonumber(f[4]),
    wbuckets = tonumber(f[5]), fppm = tonumber(f[6]), sppm = tonumber(f[7]),
    minc = math.max(1, tonumber(f[8])), slow = tonumber(f[9]), rec = tonumber(f[10]),
    mult = tonumber(f[11]), maxo = tonumber(f[12]), jit = tonumber(f[13]),
    maxp = tonumber(f[14]), reqs = tonumber(f[15]), hot = tonumber(f[16]),
    lease = tonumber(f[17]) or 2000000,
    shadow = f[18] == '1',
    cdl = tonumber(f[19]) or -1, pdl = tonumber(f[20]) or -1,
    quorum = math.max(1, tonumber(f[21]) or 1),
    rppm = tonumber(f[22]) or 0, rdur = tonumber(f[23]) or 0,
  }
  c.wsig = c.wk .. ':' .. f[3] .. ':' .. f[4] .. ':' .. f[5]
  return c
end

local C = parse_config(ARGV[4])
-- The failure streak from which the next failures may trip (`warm_at` in breaker.rs):
-- half the threshold, at least 1; 2 without a consecutive-failure rule.
local WARM_AT = 2
if C.cf > 0 then WARM_AT = math.max(1, math.floor(C.cf / 2)) end
-- Set when this script's failure made the streak warm: announced like a transition. A
-- streak of one is not announced (with a threshold of 2 or 3 one failure is already
-- warm): a healthy dependency's stray failure would send every node to Redis.
local ANNOUNCE_AT = math.max(2, WARM_AT)
local warmed = false

local function is_slow(latency)
  return C.slow >= 0 and latency > C.slow
end

-- Rule 22: a call whose latency is past its kind's deadline is a failure, whatever its
-- verdict (Config::past_deadline).
local function past_deadline(kind, verdict, latency)
  local d = -1
  if kind == NORMAL then d = C.cdl elseif kind == PROBE then d = C.pdl end
  if d >= 0 and latency > d then return FAILURE end
  return verdict
end

-- Config::open_duration, in microseconds: the recovery timeout, multiplied once per trip
-- after the first while below the cap, capped; then shortened by the jitter. Each step
-- is `min(d * mult, cap)`, the value Config's loop reaches (it multiplies while below the
-- cap, then caps); the loop ends at the first step that changes nothing (the cap, or a
-- multiplier of 1), after which every step would leave the same value. The sample is
-- clamped to [0, 1] (NaN as 0); without jitter, `d * (1 - 0 * r)` is `d` exactly, as
-- Config's `jitter > 0` guard leaves it.
local function open_duration(trips, r)
  local cap = C.maxo
  local d = math.min(C.rec, cap)
  for _ = 2, trips do
    local grown = math.min(d * C.mult, cap)
    if grown == d then break end
    d = grown
  end
  r = math.max(0, math.min(r, 1))
  return math.floor(d * (1 - C.jit * r))
end

-- Config::open_duration_with_hint: at least the dependency's hint (nil or -1: none; a
-- negative hint never raises a duration, which is at least 0), capped.
local function open_duration_hinted(trips, r, hint)
  return math.max(open_duration(trips, r), math.min(hint or -1, C.maxo))
end

-- ---------------------------------------------------------------------------------------
-- Loading and validating the state.

local FORMAT = '2'
local FIELDS = { 'v', 'phase', 'gen', 'since', 'until', 'trips', 'inflight', 'psucc',
  'streak', 'rpos', 'rlen', 'cc', 'cf', 'cs', 'we', 'exp', 'ver', 'inc', 'wsig', 'leases',
  'ss', 'shadow', 'shrej', 'rs', 'rn' }
local WSIG_AT, LEASES_AT, SS_AT, SHADOW_AT, SHREJ_AT, RS_AT, RN_AT = 19, 20, 21, 22, 23, 24, 25

local function fresh()
  return { phase = CLOSED, gen = 0, since = 0, till = 0, trips = 0, inflight = 0,
    psucc = 0, streak = 0, ss = 0, rpos = 0, rlen = 0, cc = 0, cf = 0, cs = 0, we = 0, exp = -1,
    ver = 0, inc = 0, wsig = C.wsig, leases = {}, exists = false,
    shadow = C.shadow, shraw = nil, shrej = 0, rs = nil, rn = 0 }
end

-- "token:deadline,..." -> { {tok = "token", dl = deadline}, ... }, or nil if malformed.
local function parse_leases(raw)
  local out = {}
  if raw == false or raw == '' then return out end
  if type(raw) ~= 'string' or string.len(raw) > 8192 then return nil end
  for part in string.gmatch(raw, '([^,]*)') do
    if part ~= '' then
      local tok, dl = string.match(part, '^(%d+):(%d+)$')
      if tok == nil or string.len(tok) > 20 or string.len(dl) > 16 then return nil end
      out[#out + 1] = { tok = tok, dl = tonumber(dl) }
    end
  end
  return out
end

local function encode_leases(leases)
  local parts = {}
  for i, l in ipairs(leases) do parts[i] = l.tok .. ':' .. string.format('%d', l.dl) end
  return table.concat(parts, ',')
end

local function nonneg(v)
  if type(v) ~= 'string' or not string.match(v, '^%d+$') or string.len(v) > 16 then
    return nil
  end
  return tonumber(v)
end

-- Returns the state, or nil and the reason it is corrupt. One HMGET in the common case;
-- TYPE and EXISTS only to explain a foreign value.
local function load()
  local v = redis.pcall('HMGET', KEY, unpack(FIELDS))
  if v.err then
    local t = redis.call('TYPE', KEY)
    if type(t) == 'table' then t = t.ok end
    return nil, 'the key holds a ' .. tostring(t) .. ', not a hash'
  end
  if v[1] == false then
    local all_absent = true
    for i = 1, #FIELDS do
      if v[i] ~= false then all_absent = false end
    end
    if all_absent and redis.call('EXISTS', KEY) == 0 then return fresh() end
    return nil, 'field v is missing (a foreign hash?)'
  end
  if v[1] ~= FORMAT then
    return nil, 'field v is ' .. tostring(v[1]) .. ', not ' .. FORMAT
  end
  local S = { exists = true }
  local names = { 'phase', 'gen', 'since', 'till', 'trips', 'inflight', 'psucc', 'streak',
    'rpos', 'rlen', 'cc', 'cf', 'cs', 'we', 'exp', 'ver', 'inc' }
  for i, name in ipairs(names) do
    local raw = v[i + 1]
    local n = nonneg(raw)
    if name == 'till' and raw == '-1' then n = NEVER end
    if n == nil then
      return nil, 'field ' .. FIELDS[i + 1] .. ' is ' .. tostring(raw)
    end
    S[name] = n
  end
  S.wsig = v[WSIG_AT]
  if type(S.wsig) ~= 'string' then return nil, 'field wsig is missing' end
  S.leases = parse_leases(v[LEASES_AT])
  if S.leases == nil then return nil, 'field leases is ' .. tostring(v[LEASES_AT]) end
  -- `ss` came after format 2 began: a hash without it has no streak start (0).
  S.ss = 0
  if v[SS_AT] ~= false then
    S.ss = nonneg(v[SS_AT])
    if S.ss == nil then return nil, 'field ss is ' .. tostring(v[SS_AT]) end
  end
  -- Rule 20: `shadow` is absent until an operator sets it (then the config decides);
  -- `shrej` counts would-be rejections.
  S.shraw, S.shadow, S.shrej = nil, C.shadow, 0
  if v[SHADOW_AT] ~= false then
    if v[SHADOW_AT] ~= '0' and v[SHADOW_AT] ~= '1' then
      return nil, 'field shadow is ' .. tostring(v[SHADOW_AT])
    end
    S.shraw = v[SHADOW_AT]
    S.shadow = S.shraw == '1'
  end
  if v[SHREJ_AT] ~= false then
    S.shrej = nonneg(v[SHREJ_AT])
    if S.shrej == nil then return nil, 'field shrej is ' .. tostring(v[SHREJ_AT]) end
  end
  -- Rule 23: `rs` (when the ramp began, -1 or absent for none) and `rn` (its acquires).
  S.rs, S.rn = nil, 0
  if v[RS_AT] ~= false and v[RS_AT] ~= '-1' then
    S.rs = nonneg(v[RS_AT])
    if S.rs == nil then return nil, 'field rs is ' .. tostring(v[RS_AT]) end
  end
  if v[RN_AT] ~= false then
    S.rn = nonneg(v[RN_AT])
    if S.rn == nil then return nil, 'field rn is ' .. tostring(v[RN_AT]) end
  end
  if #S.leases ~= S.inflight then
    return nil, 'field inflight is ' .. S.inflight .. ' for ' .. #S.leases .. ' leases'
  end
  if S.phase > DISABLED then return nil, 'field phase is ' .. v[2] end
  if S.wsig ~= C.wsig then
    -- The window's shape changed: start an empty window of the new shape.
    S.wsig = C.wsig
    S.rpos, S.rlen, S.cc, S.cf, S.cs = 0, 0, 0, 0, 0
    S.we = S.we + 1
    S.dirty = true
  end
  if C.wk == 'c' and (S.rlen > C.wsize or S.rpos >= C.wsize or S.cf > S.cc or S.cs > S.cc
      or S.cc ~= S.rlen) then
    return nil, 'the count window fields are inconsistent'
  end
  return S
end
