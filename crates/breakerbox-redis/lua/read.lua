-- read: the stored state and the window's counts at `now`. Changes nothing.
-- Extras in the reply: calls, failures, slow calls in the window (zero outside closed).
local S, why = load()
if not S then return fail_corrupt(why) end
local now = now_us()
local calls, fails, slow = 0, 0, 0
if S.phase == CLOSED then calls, fails, slow = window_counts(S, now) end
if corrupt then return fail_corrupt(corrupt) end
local out = answer(S, now, { 'state', 0, 0 })
out[#out + 1] = calls
out[#out + 1] = fails
out[#out + 1] = slow
return out
