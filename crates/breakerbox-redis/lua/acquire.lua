-- acquire: ask to make one call (model: Operation::Acquire).
-- ARGV[6] = the lease token this call's probe slot is held by, if it takes one.
-- Writes only when something changed (a transition, a probe slot taken, a lease reclaimed).
local now = now_us()
local S, repaired = load_or_repair(now)
if not S then return repaired end
apply_due(S, now)
local tok = ARGV[6]
if tok == nil or tok == '' then tok = '0' end
local d = shadowed(S, acquire(S, now, tok))
if corrupt then return repair(corrupt, now) end
if #transitions > 0 or (d[1] == 'admit' and d[3] == PROBE) or S.dirty then save(S, now) end
return answer(S, now, d)
