-- record: a batch of outcomes, all filed at the script's `now` (model: Operation::Outcome,
-- applied in order). ARGV[6] = n entries, then per entry: generation, kind, verdict,
-- latency (us), retry hint (us, -1 for none), lease token, age (us: how long before the
-- script call the call completed, rule 19), count (the entry stands for that many like
-- outcomes in a row, applied one by one). Verdict 3 is a release (a permit dropped
-- without an outcome: model Operation::Release). After the entries, the reporting node's
-- id (digits; rule 21's quorum counts distinct nodes).
-- The reply's head: 'batch', n, and the local open this node should enter (rule 21: its
-- duration in us and the rule that fired, or -1 and ''). Extras: per entry, its count
-- and how many of them were recorded (the rest were stale).
local now = now_us()
local S, repaired = load_or_repair(now)
if not S then return repaired end
local n = tonumber(ARGV[6]) or 0
local node = ARGV[7 + n * 8]
if type(node) ~= 'string' or not string.match(node, '^%d+$') or string.len(node) > 20 then
  node = '0'
end
local codes = {}
local changed = S.dirty
for i = 0, n - 1 do
  local base = 7 + i * 8
  local gen, kind = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
  local verdict = tonumber(ARGV[base + 2])
  local latency, hint = tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local tok = ARGV[base + 5]
  local age = tonumber(ARGV[base + 6]) or 0
  local count = math.max(1, tonumber(ARGV[base + 7]) or 1)
  local recorded = 0
  for _ = 1, count do
    apply_due(S, now)
    local r
    if verdict == 3 then
      r = release(S, gen, kind, tok)
    else
      r = outcome(S, gen, kind, verdict, latency, now, hint, tok, age, node)
    end
    if r ~= 'stale' then
      recorded = recorded + 1
      changed = true
    end
  end
  codes[#codes + 1] = count
  codes[#codes + 1] = recorded
end
if corrupt then return repair(corrupt, now) end
if changed or S.dirty or #transitions > 0 then save(S, now) end
local lo_d, lo_reason = -1, ''
if local_open then lo_d, lo_reason = local_open.d, local_open.reason end
local out = answer(S, now, { 'batch', n, lo_d, lo_reason })
for _, c in ipairs(codes) do out[#out + 1] = c end
return out
