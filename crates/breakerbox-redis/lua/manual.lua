-- manual: operator control (model: ForceOpen / Disable / Reset), plus `repair`.
-- ARGV[6] = force_open | disable | reset | trip | repair,
-- ARGV[7] = duration in us or "" (none); for trip: the reason the local breaker tripped.
-- `trip` pushes an open phase tripped elsewhere (a node's fallback breaker during an
-- outage): a Closed breaker re-opens as if its policy tripped; any other phase wins.
-- Manual operations do not apply what is due first (as in the model).
-- `repair` replaces whatever is under the key by a fresh closed state whose generation is
-- `now` (so permits issued before the corruption are stale).
local now = now_us()
local op = ARGV[6]
if op == 'repair' then
  redis.call('DEL', KEY)
  local S = fresh()
  S.gen = now
  S.since = now
  transition(S, CLOSED, 'reset')
  save(S, now)
  return answer(S, now, { 'done', 0, 0 })
end
local S, why = load()
if not S then return fail_corrupt(why) end
if op == 'trip' then
  if S.phase == CLOSED then
    apply_due(S, now)
    reopen(S, now, ARGV[7])
    save(S, now)
  end
  return answer(S, now, { 'done', 0, 0 })
end
local till = NEVER
if ARGV[7] ~= nil and ARGV[7] ~= '' then till = now + tonumber(ARGV[7]) end
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
return answer(S, now, { 'done', 0, 0 })
