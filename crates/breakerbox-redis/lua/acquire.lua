-- acquire: ask to make one call (model: Operation::Acquire). No ARGV of its own.
-- Writes only when something changed (a transition, a probe slot taken).
local S, why = load()
if not S then return fail_corrupt(why) end
local now = now_us()
apply_due(S, now)
local d = acquire(S, now)
if corrupt then return fail_corrupt(corrupt) end
if #transitions > 0 or (d[1] == 'admit' and d[3] == PROBE) or S.dirty then save(S, now) end
return answer(S, now, d)
