-- breakerbox: the closed-phase window and rule 21's record of failing nodes (part of the
-- prelude, after common.lua; see common.lua for the arguments and the state).

-- ---------------------------------------------------------------------------------------
-- The closed-phase window (rule 7).

-- The count ring is one field, `ring`: a string of one digit per slot (1 failed + 2 slow),
-- read once when first needed and written back once.
local ring = nil
local ring_dirty = false
local buckets = nil   -- time window: slot -> {index, calls, fails, slow}
local buckets_dirty = {}
local corrupt = nil
-- Rule 21 (C.quorum > 1): the closed phase's recently failing nodes, field `quorum`:
-- "we:calls:from,node:seq:at,..." (the window epoch it belongs to, the non-ignored
-- outcomes of the phase, the sequence of the streak's first failure; then at most
-- C.quorum nodes, oldest first, each with its latest failure's sequence and time). Read
-- once when first needed; a value of another window epoch is an empty record.
local Q = nil
local q_dirty = false
-- The local open this call tells its node to enter, if any: { d = us, reason = name }.
local local_open = nil

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
  if C.quorum > 1 then
    Q, q_dirty = { calls = 0, from = 0, nodes = {} }, true
  end
end

local function load_quorum(S)
  if Q ~= nil then return end
  Q = { calls = 0, from = 0, nodes = {} }
  local raw = redis.call('HGET', KEY, 'quorum')
  if type(raw) ~= 'string' then return end
  local bad = 'field quorum is ' .. string.sub(raw, 1, 64)
  if string.len(raw) > 8192 then corrupt = bad return end
  local we, calls, from = nil, nil, nil
  local nodes = {}
  for part in string.gmatch(raw, '([^,]*)') do
    if part ~= '' then
      local a, b, c = string.match(part, '^(%d+):(%d+):(%d+)$')
      if a == nil or string.len(a) > 20 or string.len(b) > 15 or string.len(c) > 16 then
        corrupt = bad
        return
      end
      if we == nil then
        we, calls, from = a, b, c
      else
        nodes[#nodes + 1] = { node = a, seq = tonumber(b), at = tonumber(c) }
      end
    end
  end
  if we == nil then corrupt = bad return end
  if tonumber(we) ~= S.we then return end
  -- A quorum lowered since keeps the most recent nodes (a loop of a fixed count).
  for _ = C.quorum + 1, #nodes do table.remove(nodes, 1) end
  Q.calls, Q.from, Q.nodes = tonumber(calls), tonumber(from), nodes
end

-- model::QuorumTrack::record: every non-ignored outcome takes the next sequence; a
-- failure makes `node` the most recent failing node.
local function quorum_record(S, node, failed, began, now)
  load_quorum(S)
  Q.calls = Q.calls + 1
  q_dirty = true
  if not failed then return end
  if began then Q.from = Q.calls end
  local kept = {}
  for _, f in ipairs(Q.nodes) do
    if f.node ~= node then kept[#kept + 1] = f end
  end
  kept[#kept + 1] = { node = node, seq = Q.calls, at = now }
  -- Q.nodes holds at most C.quorum nodes (load_quorum, and this function), so one more
  -- node: `kept` holds at most one too many.
  if #kept > C.quorum then table.remove(kept, 1) end
  Q.nodes = kept
end

-- model::QuorumTrack::met: whether the rule that fired has C.quorum nodes whose latest
-- failure is within the streak (consecutive failures) or the window (failure rate).
local function quorum_met(reason, now)
  if reason == 'slow_call_rate' then return true end
  local current = 0
  if C.wk == 't' then current = idiv(now, C.wwidth) end
  local n = 0
  for _, f in ipairs(Q.nodes) do
    local within = true
    if reason == 'consecutive_failures' then
      within = f.seq >= Q.from
    elseif C.wk == 'c' then
      within = f.seq + C.wsize > Q.calls
    elseif C.wk == 't' then
      local index = idiv(f.at, C.wwidth)
      within = index <= current and current - index < C.wbuckets
    end
    if within then n = n + 1 end
  end
  return n >= C.quorum
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

-- Rules 3, 6 and 8 (model::evaluate_trip). Asked only of a window of at least C.minc >= 1
-- calls (parse_config), so never of an empty one.
local function reached(ppm, count, calls)
  return count * 1000000 >= ppm * calls
end

-- model::fired_rules: every rule that says trip, in evaluate_trip's order.
local function fired_rules(S, now)
  local out = {}
  if C.cf > 0 and S.streak >= C.cf then out[#out + 1] = 'consecutive_failures' end
  if C.wk == 'n' then return out end
  local calls, fails, slow = window_counts(S, now)
  if calls < C.minc then return out end
  if C.fppm > 0 and reached(C.fppm, fails, calls) then out[#out + 1] = 'failure_rate' end
  if C.sppm > 0 and reached(C.sppm, slow, calls) then out[#out + 1] = 'slow_call_rate' end
  return out
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
