-- record: a batch of outcomes, all filed at the script's `now` (model: Operation::Outcome,
-- applied in order). ARGV[6] = n, then n times: generation, kind, verdict, latency (us),
-- retry hint (us, -1 for none), lease token, age (us: how long before the script call the
-- call completed, rule 19). Verdict 3 is a release (a permit dropped without an outcome:
-- model Operation::Release).
-- Extras in the reply: one code per outcome, 1 recorded or 0 stale.
local now = now_us()
local S, repaired = load_or_repair(now)
if not S then return repaired end
local n = tonumber(ARGV[6]) or 0
local codes = {}
local changed = S.dirty
for i = 0, n - 1 do
  local base = 7 + i * 7
  apply_due(S, now)
  local gen, kind = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
  local verdict = tonumber(ARGV[base + 2])
  local tok = ARGV[base + 5]
  local r
  if verdict == 3 then
    r = release(S, gen, kind, tok)
  else
    r = outcome(S, gen, kind, verdict, tonumber(ARGV[base + 3]), now,
      tonumber(ARGV[base + 4]), tok, tonumber(ARGV[base + 6]) or 0)
  end
  if r == 'stale' then
    codes[#codes + 1] = 0
  else
    codes[#codes + 1] = 1
    changed = true
  end
end
if corrupt then return repair(corrupt, now) end
if changed or S.dirty or #transitions > 0 then save(S, now) end
local out = answer(S, now, { 'batch', n, 0, 0 })
for _, c in ipairs(codes) do out[#out + 1] = c end
return out
