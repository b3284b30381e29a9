-- record: a batch of outcomes, all filed at the script's `now` (model: Operation::Outcome,
-- applied in order). ARGV[6] = n, then n times: generation, kind, verdict, latency (us).
-- Extras in the reply: one code per outcome, 1 recorded or 0 stale.
local S, why = load()
if not S then return fail_corrupt(why) end
local now = now_us()
local n = tonumber(ARGV[6]) or 0
local codes = {}
local changed = S.dirty
for i = 0, n - 1 do
  local base = 7 + i * 4
  apply_due(S, now)
  local r = outcome(S, tonumber(ARGV[base]), tonumber(ARGV[base + 1]),
    tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), now)
  if r == 'stale' then
    codes[#codes + 1] = 0
  else
    codes[#codes + 1] = 1
    changed = true
  end
end
if corrupt then return fail_corrupt(corrupt) end
if changed or #transitions > 0 then save(S, now) end
local out = answer(S, now, { 'batch', n, 0 })
for _, c in ipairs(codes) do out[#out + 1] = c end
return out
