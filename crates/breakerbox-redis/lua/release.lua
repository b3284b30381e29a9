-- release: a permit dropped without an outcome (model: Operation::Release).
-- ARGV[6] = generation, ARGV[7] = kind.
local S, why = load()
if not S then return fail_corrupt(why) end
local now = now_us()
apply_due(S, now)
local before = S.inflight
local r = release(S, tonumber(ARGV[6]), tonumber(ARGV[7]))
if corrupt then return fail_corrupt(corrupt) end
if #transitions > 0 or S.inflight ~= before or S.dirty then save(S, now) end
return answer(S, now, { r, 0, 0 })
