-- release: a permit dropped without an outcome (model: Operation::Release).
-- ARGV[6] = generation ("" to cancel a probe reservation by its token alone, when the
-- caller never got the acquire's reply), ARGV[7] = kind, ARGV[8] = lease token.
local now = now_us()
local S, repaired = load_or_repair(now)
if not S then return repaired end
apply_due(S, now)
local before = S.inflight
local r = release(S, tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] or '0')
if corrupt then return repair(corrupt, now) end
if #transitions > 0 or S.inflight ~= before or S.dirty then save(S, now) end
return answer(S, now, { r, 0, 0, 0 })
