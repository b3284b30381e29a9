-- read: the stored state and the window's counts at `now`. Changes nothing, unless
-- ARGV[6] is "repair": then a corrupt value is repaired (the breaker's own refresh); an
-- operator's read only reports it.
-- Extras in the reply: calls, failures, slow calls in the window (zero outside closed).
local now = now_us()
local S, repaired = load_or_repair(now, ARGV[6] == 'repair')
if not S then return repaired end
local calls, fails, slow = 0, 0, 0
if S.phase == CLOSED then calls, fails, slow = window_counts(S, now) end
if corrupt then
  if ARGV[6] == 'repair' then return repair(corrupt, now) end
  return fail_corrupt(corrupt)
end
local out = answer(S, now, { 'state', 0, 0, 0 })
out[#out + 1] = calls
out[#out + 1] = fails
out[#out + 1] = slow
return out
