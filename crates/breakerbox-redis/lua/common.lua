-- breakerbox: the prelude shared by every script (prepended at compile time).
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

-- Exact floor(a / b) for non-negative integers below 2^53.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  if (q + 1) * b <= a then q = q + 1 end
  return q
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
-- lease, shadow, rppm, rdur. cf/fppm/sppm 0 = rule absent; slow -1 = no threshold; wk is n
-- (none), c (count) or t (time); lease is a probe slot's lease in microseconds; shadow 1 =
-- the config starts in shadow mode (rule 20; the stored switch, once set, wins); rppm 0 =
-- no ramp, else the ramp's start fraction in ppm and rdur its duration in us (rule 23).
local function parse_config(s)
  local f = {}
  for part in string.gmatch(s, '([^,]+)') do f[#f + 1] = part end
  local c = {
    cf = tonumber(f[1]), wk = f[2], wsize = tonumber(f[3]), wwidth = tonumber(f[4]),
    wbuckets = tonumber(f[5]), fppm = tonumber(f[6]), sppm = tonumber(f[7]),
    minc = tonumber(f[8]), slow = tonumber(f[9]), rec = tonumber(f[10]),
    mult = tonumber(f[11]), maxo = tonumber(f[12]), jit = tonumber(f[13]),
    maxp = tonumber(f[14]), reqs = tonumber(f[15]), hot = tonumber(f[16]),
    lease = tonumber(f[17]) or 2000000,
    shadow = f[18] == '1',
    rppm = tonumber(f[19]) or 0, rdur = tonumber(f[20]) or 0,
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

-- Config::open_duration, in microseconds.
local function open_duration(trips, r)
  local cap = C.maxo
  local d = C.rec
  local k = 1
  while k < trips and d < cap do
    d = d * C.mult
    k = k + 1
  end
  if d > cap then d = cap end
  if C.jit > 0 then
    if r < 0 then r = 0 end
    if r > 1 then r = 1 end
    d = d * (1 - C.jit * r)
  end
  return math.floor(d)
end

-- Config::open_duration_with_hint: at least the dependency's hint (-1: none), capped.
local function open_duration_hinted(trips, r, hint)
  local d = open_duration(trips, r)
  if hint ~= nil and hint >= 0 then
    local h = hint
    if h > C.maxo then h = C.maxo end
    if h > d then d = h end
  end
  return d
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

-- ---------------------------------------------------------------------------------------
-- The closed-phase window (rule 7).

-- The count ring is one field, `ring`: a string of one digit per slot (1 failed + 2 slow),
-- read once when first needed and written back once.
local ring = nil
local ring_dirty = false
local buckets = nil   -- time window: slot -> {index, calls, fails, slow}
local buckets_dirty = {}
local corrupt = nil

local function load_ring(S)
  if ring ~= nil then return end
  ring = {}
  local raw = redis.call('HGET', KEY, 'ring')
  if S.rlen == 0 then return end
  if type(raw) ~= 'string' or string.len(raw) ~= S.rlen or not string.match(raw, '^[0-3]+$') then
    corrupt = 'field ring is ' .. tostring(raw) .. ' for ' .. S.rlen .. ' calls'
    return
  end
  for i = 1, S.rlen do ring[i - 1] = string.byte(raw, i) - 48 end
end

local function load_buckets(S)
  if buckets ~= nil then return end
  buckets = {}
  local names = {}
  for i = 0, C.wbuckets - 1 do names[#names + 1] = 'b' .. i end
  local raw = redis.call('HMGET', KEY, unpack(names))
  for i = 0, C.wbuckets - 1 do
    local b = { index = -1, calls = 0, fails = 0, slow = 0 }
    local s = raw[i + 1]
    if s then
      local we, idx, c, f, sl = string.match(s, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
      if we == nil then
        corrupt = 'field b' .. i .. ' is ' .. tostring(s)
      elseif tonumber(we) == S.we then
        b = { index = tonumber(idx), calls = tonumber(c), fails = tonumber(f), slow = tonumber(sl) }
      end
    end
    buckets[i] = b
  end
end

local function window_reset(S)
  S.rpos, S.rlen, S.cc, S.cf, S.cs = 0, 0, 0, 0, 0
  S.we = S.we + 1
  ring, ring_dirty = {}, true
  buckets, buckets_dirty = nil, {}
end

local function window_record(S, failed, slow, now)
  local code = (failed and 1 or 0) + (slow and 2 or 0)
  if C.wk == 'c' then
    load_ring(S)
    if S.rlen == C.wsize then
      local old = ring[S.rpos] or 0
      S.cc = S.cc - 1
      if old % 2 == 1 then S.cf = S.cf - 1 end
      if old >= 2 then S.cs = S.cs - 1 end
    else
      S.rlen = S.rlen + 1
    end
    ring[S.rpos] = code
    ring_dirty = true
    S.cc = S.cc + 1
    if failed then S.cf = S.cf + 1 end
    if slow then S.cs = S.cs + 1 end
    S.rpos = (S.rpos + 1) % C.wsize
  elseif C.wk == 't' then
    load_buckets(S)
    local index = idiv(now, C.wwidth)
    local i = index % C.wbuckets
    local b = buckets[i]
    if b.index ~= index then
      b = { index = index, calls = 0, fails = 0, slow = 0 }
      buckets[i] = b
    end
    b.calls = b.calls + 1
    if failed then b.fails = b.fails + 1 end
    if slow then b.slow = b.slow + 1 end
    buckets_dirty[i] = true
  end
end

-- What the window holds at `now`: calls, failures, slow.
local function window_counts(S, now)
  if C.wk == 'c' then
    return S.cc, S.cf, S.cs
  elseif C.wk == 't' then
    load_buckets(S)
    local current = idiv(now, C.wwidth)
    local calls, fails, slow = 0, 0, 0
    for i = 0, C.wbuckets - 1 do
      local b = buckets[i]
      if b.index >= 0 and b.index <= current and current - b.index < C.wbuckets then
        calls = calls + b.calls
        fails = fails + b.fails
        slow = slow + b.slow
      end
    end
    return calls, fails, slow
  end
  return 0, 0, 0
end

-- Rules 3, 6 and 8 (model::evaluate_trip).
local function reached(ppm, count, calls)
  return calls > 0 and count * 1000000 >= ppm * calls
end

local function evaluate_trip(S, now)
  if C.cf > 0 and S.streak >= C.cf then return 'consecutive_failures' end
  if C.wk == 'n' then return nil end
  local calls, fails, slow = window_counts(S, now)
  if calls < C.minc then return nil end
  if C.fppm > 0 and reached(C.fppm, fails, calls) then return 'failure_rate' end
  if C.sppm > 0 and reached(C.sppm, slow, calls) then return 'slow_call_rate' end
  return nil
end

-- ---------------------------------------------------------------------------------------
-- Transitions (model::ModelState).

local transitions = {}
-- Set by a change other nodes must hear of that is no transition (a shadow switch).
local announce = false

local function transition(S, from, reason)
  transitions[#transitions + 1] = { from, S.phase, S.gen, reason }
  return true
end

local function clear_probes(S)
  S.inflight = 0
  S.psucc = 0
  S.leases = {}
end

-- Rule 23, the ramp (model/ramp.rs): any phase change ends it.
local function end_ramp(S)
  S.rs = nil
  S.rn = 0
end

-- The fraction (ppm) the ramp admits at `now`, or nil when none is active.
local function ramp_fraction(S, now)
  if S.rs == nil or C.rppm == 0 then return nil end
  local e = math.max(0, now - S.rs)
  if e >= C.rdur then return nil end
  return C.rppm + idiv((1000000 - C.rppm) * e, C.rdur)
end

-- A ramp over at `now` ends, and the recovery is complete: `trips` resets.
local function settle_ramp(S, now)
  if S.rs ~= nil and ramp_fraction(S, now) == nil then
    end_ramp(S)
    S.trips = 0
    S.dirty = true
  end
end

-- An acquire in closed: the n-th acquire of an active ramp passes iff
-- (n mod 10^6) * 618031 mod 10^6 < the fraction (breakerbox::config::ramp_admits).
local function ramp_admits(S, now)
  settle_ramp(S, now)
  local f = ramp_fraction(S, now)
  if f == nil then return true end
  local n = S.rn
  S.rn = n + 1
  S.dirty = true
  local x = (n - idiv(n, 1000000) * 1000000) * 618031
  return x - idiv(x, 1000000) * 1000000 < f
end

local function reopen(S, now, reason, hint)
  local from = S.phase
  S.trips = S.trips + 1
  S.phase = OPEN
  S.gen = S.gen + 1
  S.since = now
  S.till = now + open_duration_hinted(S.trips, R, hint)
  clear_probes(S)
  end_ramp(S)
  return transition(S, from, reason)
end

local function enter_closed(S, now)
  S.phase = CLOSED
  S.gen = S.gen + 1
  S.since = now
  S.till = 0
  clear_probes(S)
  S.streak = 0
  S.ss = 0
  window_reset(S)
  end_ramp(S)
end

-- Probe leases: a slot whose lease deadline is not after `now` is free again.
local function purge_leases(S, now)
  if #S.leases == 0 then return end
  local kept = {}
  for _, l in ipairs(S.leases) do
    if l.dl > now then kept[#kept + 1] = l end
  end
  if #kept ~= #S.leases then
    S.leases = kept
    S.inflight = #kept
    S.dirty = true
  end
end

-- Takes the lease of `tok` (true), or finds none (false: expired, reclaimed or foreign).
local function take_lease(S, tok)
  for i, l in ipairs(S.leases) do
    if l.tok == tok then
      table.remove(S.leases, i)
      S.inflight = #S.leases
      return true
    end
  end
  return false
end

-- Rule 1: a timed-out half-open re-opens, an expired `disable` closes; then expired probe
-- leases free their slots.
local function apply_due(S, now)
  local moved = false
  if S.phase == HALF and math.max(0, now - S.since) >= C.hot then
    moved = reopen(S, now, 'half_open_timed_out')
  elseif S.phase == DISABLED and now >= S.till then
    enter_closed(S, now)
    S.trips = 0
    moved = transition(S, DISABLED, 'override_expired')
  end
  purge_leases(S, now)
  return moved
end

-- `tok` names the probe lease if this acquire takes a half-open slot.
local function acquire(S, now, tok)
  if (S.phase == OPEN or S.phase == FORCED) and now >= S.till then
    local from = S.phase
    S.phase = HALF
    S.gen = S.gen + 1
    S.since = now
    clear_probes(S)
    S.till = 0
    transition(S, from, 'cooldown_elapsed')
  end
  if S.phase == CLOSED then
    if ramp_admits(S, now) then return { 'admit', S.gen, NORMAL, '0' } end
    -- Rule 23: the only rejection in closed, with no retry-after.
    return { 'reject', CLOSED, -1, '0' }
  end
  if S.phase == DISABLED then return { 'admit', S.gen, PASS, '0' } end
  if S.phase == HALF then
    if S.inflight < C.maxp then
      S.leases[#S.leases + 1] = { tok = tok, dl = now + C.lease }
      S.inflight = #S.leases
      return { 'admit', S.gen, PROBE, tok }
    end
    return { 'reject', S.phase, math.max(0, S.since + C.hot - now), '0' }
  end
  if S.phase == OPEN then return { 'reject', S.phase, math.max(0, S.till - now), '0' } end
  if S.till == NEVER then return { 'reject', S.phase, -1, '0' } end
  return { 'reject', S.phase, math.max(0, S.till - now), '0' }
end

-- Rule 20: in shadow mode, an acquire that would reject (after its transitions) admits a
-- passthrough permit instead and counts a would-be rejection. The reply's head says what
-- the rejection would have been: { 'shadow', gen, phase, retry_after }.
local function shadowed(S, d)
  if d[1] ~= 'reject' or not S.shadow then return d end
  S.shrej = S.shrej + 1
  S.dirty = true
  return { 'shadow', S.gen, d[2], d[3] }
end

-- A probe's outcome or release counts only while its lease is live.
-- Rule 19: a failure extends the streak (which began at its earliest completion); a
-- success ends it unless it completed before the streak began, while that start is not in
-- the future (Redis time stepped back: then any success ends it).
local function streak_after(S, failed, completed, now)
  if failed then
    if S.streak == 0 or completed < S.ss then S.ss = completed end
    S.streak = S.streak + 1
    if S.streak == ANNOUNCE_AT then warmed = true end
  elseif not (S.streak > 0 and completed < S.ss and S.ss <= now) then
    S.streak = 0
    S.ss = 0
  end
end

-- `age`: how long before `now` the call completed (us).
local function outcome(S, gen, kind, verdict, latency, now, hint, tok, age)
  if gen ~= S.gen then return 'stale' end
  if S.phase == HALF and kind == PROBE and not take_lease(S, tok) then return 'stale' end
  if S.phase == CLOSED and kind == NORMAL then
    if verdict == IGNORE then return 'recorded' end
    local failed = verdict == FAILURE
    local slow = is_slow(latency)
    streak_after(S, failed, math.max(0, now - (age or 0)), now)
    window_record(S, failed, slow, now)
    local reason = evaluate_trip(S, now)
    if reason then
      settle_ramp(S, now)
      reopen(S, now, reason, hint)
    end
    return 'recorded'
  elseif S.phase == HALF and kind == PROBE then
    if verdict == SUCCESS and is_slow(latency) then verdict = FAILURE end
    if verdict == FAILURE then
      reopen(S, now, 'probe_failed', hint)
    elseif verdict == SUCCESS then
      S.psucc = S.psucc + 1
      if S.psucc >= C.reqs then
        enter_closed(S, now)
        -- Rule 23: a ramp begins; `trips` is kept until it ends.
        if C.rppm > 0 then
          S.rs = now
        else
          S.trips = 0
        end
        transition(S, HALF, 'probes_succeeded')
      end
    end
    return 'recorded'
  end
  return 'recorded'
end

-- `gen` nil: a caller cancelling a reservation whose reply it never got (by token).
local function release(S, gen, kind, tok)
  if gen == nil then
    if S.phase == HALF and take_lease(S, tok) then return 'recorded' end
    return 'stale'
  end
  if gen ~= S.gen then return 'stale' end
  if S.phase == HALF and kind == PROBE and not take_lease(S, tok) then return 'stale' end
  return 'recorded'
end

local function manual(S, to, till, now, reason)
  if S.phase == to then
    S.till = till
    return
  end
  local from = S.phase
  S.phase = to
  S.gen = S.gen + 1
  S.since = now
  S.till = till
  clear_probes(S)
  end_ramp(S)
  transition(S, from, reason)
end

-- ---------------------------------------------------------------------------------------
-- Writing back and answering.

local function save(S, now)
  -- The TTL is refreshed when a sixteenth of it has passed (or time went back), so an
  -- abandoned breaker expires between TTL and TTL * 17/16 after its last write.
  local refresh = S.exp < 0 or now < S.exp or now - S.exp >= tonumber(TTL) * 1000 / 16
  if refresh then S.exp = now end
  S.ver = S.ver + 1
  if S.inc == 0 then S.inc = math.max(1, now) end
  local args = { 'v', FORMAT, 'phase', fmt(S.phase), 'gen', fmt(S.gen), 'since', fmt(S.since),
    'until', fmt(S.till), 'trips', fmt(S.trips), 'inflight', fmt(S.inflight),
    'psucc', fmt(S.psucc), 'streak', fmt(S.streak), 'ss', fmt(S.ss), 'rpos', fmt(S.rpos),
    'rlen', fmt(S.rlen), 'cc', fmt(S.cc), 'cf', fmt(S.cf), 'cs', fmt(S.cs),
    'we', fmt(S.we), 'wsig', S.wsig, 'exp', fmt(S.exp), 'ver', fmt(S.ver),
    'inc', fmt(S.inc), 'leases', encode_leases(S.leases), 'shrej', fmt(S.shrej),
    'rs', fmt(S.rs or -1), 'rn', fmt(S.rn) }
  if S.shraw ~= nil then
    args[#args + 1] = 'shadow'
    args[#args + 1] = S.shraw
  end
  if ring_dirty and C.wk == 'c' then
    local digits = {}
    for i = 0, S.rlen - 1 do digits[i + 1] = ring[i] end
    args[#args + 1] = 'ring'
    args[#args + 1] = table.concat(digits)
  end
  for i, _ in pairs(buckets_dirty) do
    local b = buckets[i]
    args[#args + 1] = 'b' .. i
    args[#args + 1] = fmt(S.we) .. ':' .. fmt(b.index) .. ':' .. fmt(b.calls) .. ':'
      .. fmt(b.fails) .. ':' .. fmt(b.slow)
  end
  redis.call('HSET', KEY, unpack(args))
  if refresh or not S.exists then redis.call('PEXPIRE', KEY, TTL) end
  local warm = S.phase == CLOSED and S.streak >= WARM_AT
  if CHANNEL ~= '' and (#transitions > 0 or (warmed and warm) or announce) then
    local left = -1
    if S.till ~= NEVER then left = math.max(0, S.till - now) end
    local w = '0'
    if warm then w = '1' end
    publish(
      fmt(S.phase) .. ',' .. fmt(S.gen) .. ',' .. fmt(left) .. ',' .. fmt(now) .. ','
      .. fmt(S.ver) .. ',' .. fmt(S.inc) .. ',' .. w)
  end
end

-- The reply: { 4 head items, phase, gen, since, until, trips, inflight, psucc, streak,
--              ss, ver, inc, now, shadow (0/1), shrej, ramp start (-1: none), ramp
--              acquires, #transitions,
--              (from, to, gen, reason)... }
local function answer(S, now, head)
  local out = {}
  for _, v in ipairs(head) do out[#out + 1] = v end
  local till = S.till
  if till == NEVER then till = -1 end
  local tail = { S.phase, S.gen, S.since, till, S.trips, S.inflight, S.psucc, S.streak,
    S.ss, S.ver, S.inc, now, S.shadow and 1 or 0, S.shrej, S.rs or -1, S.rn, #transitions }
  for _, v in ipairs(tail) do out[#out + 1] = v end
  for _, t in ipairs(transitions) do
    out[#out + 1] = t[1]
    out[#out + 1] = t[2]
    out[#out + 1] = t[3]
    out[#out + 1] = t[4]
  end
  return out
end

local function fail_corrupt(reason)
  return { 'corrupt', reason }
end

-- A corrupt or foreign value, found by this very script: replaced by a fresh closed state
-- (generation `now`, so permits issued before are stale) in the same atomic step, so only
-- a value that is still corrupt is ever replaced. The operation itself is not applied;
-- the caller runs it again on the repaired state.
local function repair(reason, now)
  redis.call('DEL', KEY)
  ring, ring_dirty, buckets, buckets_dirty, transitions = nil, false, nil, {}, {}
  local S = fresh()
  S.gen = now
  S.since = now
  S.inc = math.max(1, now)
  transition(S, CLOSED, 'reset')
  save(S, now)
  return answer(S, now, { 'repaired', reason, 0, 0 })
end

-- Loads the state; a corrupt value is repaired unless `may_repair` is false.
local function load_or_repair(now, may_repair)
  local S, why = load()
  if S then return S, nil end
  if may_repair == false then return nil, fail_corrupt(why) end
  return nil, repair(why, now)
end
