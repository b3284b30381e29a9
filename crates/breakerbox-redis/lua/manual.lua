-- manual: operator control (model: ForceOpen / Disable / Reset), plus what a node pushes
-- when Redis comes back after an outage.
-- ARGV[6] = force_open | disable | reset | trip | restore_open | shadow,
-- ARGV[7] = duration in us or "" (none: until reset); for trip: the reason the local
-- breaker tripped; for restore_open: the time left of the open phase, in us.
-- `trip` pushes an open phase tripped elsewhere (a node's fallback breaker during an
-- outage): a Closed breaker re-opens as if its policy tripped; any other phase wins.
-- `restore_open` gives back an open phase Redis lost (restarted empty, or failed over to
-- a replica behind): a Closed breaker opens for the time left; any other phase wins.
-- `shadow` (ARGV[7] = 1 or 0) switches shadow mode (rule 20): no transition, but other
-- nodes hear of it on the channel.
-- Manual operations do not apply what is due first (as in the model).
-- A corrupt value is repaired by `load_or_repair` (common.lua), as in every script.
local now = now_us()
local op = ARGV[6]
local S, repaired = load_or_repair(now)
if not S then return repaired end
if op == 'trip' or op == 'restore_open' then
  if S.phase == CLOSED then
    apply_due(S, now)
    if op == 'trip' then
      settle_ramp(S, now)
      reopen(S, now, ARGV[7])
    else
      reopen(S, now, 'restored')
      S.till = now + (tonumber(ARGV[7]) or 0)
    end
    save(S, now)
  end
  return answer(S, now, { 'done', 0, 0, 0 })
end
if op == 'shadow' then
  if ARGV[7] ~= '1' and ARGV[7] ~= '0' then
    return { 'error', 'shadow takes 1 or 0, not ' .. tostring(ARGV[7]) }
  end
  S.shraw = ARGV[7]
  S.shadow = ARGV[7] == '1'
  announce = true
  save(S, now)
  return answer(S, now, { 'done', 0, 0, 0 })
end
local till = NEVER
if ARGV[7] ~= nil and ARGV[7] ~= '' then
  local d = tonumber(ARGV[7])
  -- Times must stay exact Lua integers (below 2^53) and fit the 16-digit fields.
  if d == nil or d < 0 or now + d >= 9007199254740992 then
    return { 'error', 'override duration ' .. tostring(ARGV[7]) .. ' us is out of range' }
  end
  till = now + d
end
if op == 'force_open' then
  manual(S, FORCED, till, now, 'forced_open')
elseif op == 'disable' then
  manual(S, DISABLED, till, now, 'disabled')
elseif op == 'reset' then
  local from = S.phase
  enter_closed(S, now)
  S.trips = 0
  transition(S, from, 'reset')
else
  return { 'error', 'unknown manual operation ' .. tostring(op) }
end
save(S, now)
return answer(S, now, { 'done', 0, 0, 0 })
