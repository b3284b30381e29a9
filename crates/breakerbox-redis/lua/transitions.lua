-- breakerbox: the transitions, writing back and answering (part of the prelude, after
-- window.lua; see common.lua for the arguments and the state).

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
    if S.streak == 0 then S.ss = completed else S.ss = math.min(S.ss, completed) end
    S.streak = S.streak + 1
    if S.streak == ANNOUNCE_AT then warmed = true end
  elseif not (S.streak > 0 and completed < S.ss and S.ss <= now) then
    S.streak = 0
    S.ss = 0
  end
end

-- `age`: how long before `now` the call completed (us); `node`: who reported it (rule 21).
local function outcome(S, gen, kind, verdict, latency, now, hint, tok, age, node)
  verdict = past_deadline(kind, verdict, latency)
  if gen ~= S.gen then return 'stale' end
  if S.phase == HALF and kind == PROBE and not take_lease(S, tok) then return 'stale' end
  if S.phase == CLOSED and kind == NORMAL then
    if verdict == IGNORE then return 'recorded' end
    local failed = verdict == FAILURE
    local slow = is_slow(latency)
    local began = failed and S.streak == 0
    streak_after(S, failed, math.max(0, now - (age or 0)), now)
    window_record(S, failed, slow, now)
    if C.quorum > 1 then
      -- Rule 21: the first rule that fired with its quorum trips; one without tells the
      -- node to open locally (the longest such open phase of the call is answered).
      quorum_record(S, node, failed, began, now)
      local first = nil
      for _, reason in ipairs(fired_rules(S, now)) do
        if quorum_met(reason, now) then
          settle_ramp(S, now)
          reopen(S, now, reason, hint)
          return 'recorded'
        end
        first = first or reason
      end
      if first and failed then
        local d = open_duration_hinted(S.trips + 1, 0, hint)
        if local_open == nil or d > local_open.d then local_open = { d = d, reason = first } end
      end
      return 'recorded'
    end
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
  -- q_dirty is set only with Q (quorum_record, window_reset; repair clears both).
  if q_dirty then
    local parts = { fmt(S.we) .. ':' .. fmt(Q.calls) .. ':' .. fmt(Q.from) }
    for _, f in ipairs(Q.nodes) do
      parts[#parts + 1] = f.node .. ':' .. fmt(f.seq) .. ':' .. fmt(f.at)
    end
    args[#args + 1] = 'quorum'
    args[#args + 1] = table.concat(parts, ',')
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
  Q, q_dirty, local_open = nil, false, nil
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
