#!/usr/bin/env bash
# Mutation testing of the decision code: does every wrong decision fail a test?
#
#   scripts/mutants.sh [core|http] [extra cargo-mutants arguments...]
#
# core (default): the core's decision code (the model, the engine, its transitions, the
#   windows, the permits), tested by the core's deterministic tests (unit tests, the model
#   table, the model-vs-engine property test, the scenarios, the replayed races); then every
#   mutant those miss is tried again against the loom models (tests/loom.rs), the only test
#   of some race paths.
# http: the HTTP judge (breakerbox-http's judge, status, business and gRPC code), tested by that
#   crate's tests.
#
# Extra arguments go to cargo-mutants, e.g. `-F 'check_rules'` to try only the mutants of
# one function, or `--list` to list them. MUTANTS_FILES="a.rs b.rs" narrows the files (paths
# from the repository root). MUTANTS_RESUME=1 keeps the previous results and tries only
# what they did not catch (cargo-mutants' --iterate): run it again after adding tests.
# MUTANTS_LOOM=0 skips the loom pass (its release build is long; run it before recording
# a result: only the loom models catch some race-path mutants).
# Prints the score and every survivor, and exits non-zero when the share of viable
# mutants caught is below MUTANTS_THRESHOLD (percent, default 100; the equivalent mutants
# listed in .cargo/mutants.toml are not generated).
#
# Not part of .ci/run (a full core run takes over an hour on two cores); run it before
# resolving an issue that touches these files, and record the result in TESTING.md.
# Needs cargo-mutants (`cargo install cargo-mutants --locked`). Outputs go to
# target/mutants-out/<suite>/ (mutants.out with one log per mutant); builds use target
# directories of their own (target/mutants-<suite>, target/mutants-loom).
set -euo pipefail
cd "$(dirname "$0")/.."

suite="${1:-core}"
case "$suite" in
  core | http) shift || true ;;
  -*) suite=core ;;
  *) echo "usage: $0 [core|http] [cargo-mutants arguments...]" >&2; exit 2 ;;
esac
threshold="${MUTANTS_THRESHOLD:-100}"
out="target/mutants-out/$suite"
root="$(pwd)"

if ! cargo mutants --version >/dev/null 2>&1; then
  echo "cargo-mutants is missing: cargo install cargo-mutants --locked" >&2
  exit 2
fi

export PROPTEST_CASES="${PROPTEST_CASES:-256}"
# A caught mutant needs one failing case, not the smallest one: shrinking takes minutes.
export PROPTEST_MAX_SHRINK_ITERS=0
# The unmutated tests take a few seconds; a mutant that makes them loop is cut off (and
# counted as caught: a timeout) after MUTANTS_TIMEOUT seconds, the loom models' after 10 min.
common=(-j 1 --build-timeout 900 --no-times --colors never)

case "$suite" in
  core)
    src=crates/breakerbox/src
    files=(
      -f "$src/model.rs" -f "$src/model/policy.rs" -f "$src/model/window.rs"
      -f "$src/model/quorum.rs" -f "$src/model/ramp.rs"
      -f "$src/breaker/engine.rs" -f "$src/breaker/engine/outcomes.rs" -f "$src/breaker/transitions.rs" -f "$src/breaker/ramp.rs"
      -f "$src/breaker/count_window.rs" -f "$src/breaker/time_window.rs"
      -f "$src/breaker/lanes.rs" -f "$src/breaker/streak.rs" -f "$src/permit.rs"
    )
    # Deterministic tests only: no doc tests, no timed stress test.
    tests=(-C --lib -C --test=model_table -C --test=model_quorum -C --test=model_vs_engine
      -C --test=scenarios -C --test=races)
    ;;
  http)
    src=crates/breakerbox-http/src
    files=(
      -f "$src/judge.rs" -f "$src/judge/builder.rs" -f "$src/judgement.rs"
      -f "$src/status.rs" -f "$src/status/reasons.rs" -f "$src/status/table.rs"
      -f "$src/business.rs"
      -f "$src/grpc.rs" -f "$src/grpc/code.rs" -f "$src/grpc/config.rs"
      -f "$src/grpc/status.rs" -f "$src/grpc/table.rs" -f "$src/grpc/deadline.rs"
    )
    tests=(-C --lib -C --tests)
    ;;
esac

if [[ -n "${MUTANTS_FILES:-}" ]]; then
  files=()
  for f in $MUTANTS_FILES; do files+=(-f "$f"); done
fi
if [[ " $* " == *" --list "* ]]; then
  exec cargo mutants -p "$(basename "$(dirname "$src")")" "${files[@]}" "$@"
fi

iterate=()
if [[ "${MUTANTS_RESUME:-0}" == 1 && -f "$out/plain/mutants.out/outcomes.json" ]]; then
  iterate=(--iterate)
  # Keep what the earlier runs found: the summary below merges them, latest last.
  stamp="$(date +%s)"
  cp "$out/plain/mutants.out/outcomes.json" "$out/earlier-$stamp.json"
  if [[ -f "$out/loom/mutants.out/outcomes.json" ]]; then
    cp "$out/loom/mutants.out/outcomes.json" "$out/loom-earlier-$stamp.json"
  fi
  rm -rf "$out/loom"
else
  rm -rf "$out"
fi

mkdir -p "$out/plain"
echo "== $suite: mutants against the deterministic tests"
set +e
CARGO_TARGET_DIR="$root/target/mutants-$suite" nice -n 19 cargo mutants \
  -p "$(basename "$(dirname "$src")")" "${files[@]}" "${tests[@]}" "${common[@]}" \
  --timeout "${MUTANTS_TIMEOUT:-60}" "${iterate[@]}" -o "$out/plain" "$@"
status=$?
set -e
# 0: all caught; 2: some missed; 3: some timed out. Anything else is a failed run.
if [[ $status -ne 0 && $status -ne 2 && $status -ne 3 ]]; then
  echo "cargo-mutants failed (exit $status); see $out/plain/mutants.out/debug.log" >&2
  exit "$status"
fi

final="$out/plain/mutants.out"
if [[ "$suite" == core && -s "$final/missed.txt" && "${MUTANTS_LOOM:-1}" != 0 ]]; then
  echo "== core: the $(wc -l <"$final/missed.txt") survivors against the loom models"
  # --iterate skips what the first pass caught (or could not build).
  cp -r "$out/plain" "$out/loom"
  set +e
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$root/target/mutants-loom" nice -n 19 cargo mutants \
    -p breakerbox "${files[@]}" -C --release -C --test=loom "${common[@]}" --timeout 600 --iterate \
    -o "$out/loom" "$@"
  status=$?
  set -e
  if [[ $status -ne 0 && $status -ne 2 && $status -ne 3 ]]; then
    echo "cargo-mutants (loom) failed (exit $status); see $out/loom/mutants.out/debug.log" >&2
    exit "$status"
  fi
fi

python3 - "$out" "$threshold" <<'EOF'
import json, pathlib, sys

out, threshold = pathlib.Path(sys.argv[1]), float(sys.argv[2])

def outcomes(run):
    path = out / run / "mutants.out" / "outcomes.json"
    if run.endswith(".json"):
        path = out / run
    if not path.is_file():
        return {}
    return {
        o["scenario"]["Mutant"]["name"]: (o["summary"], o["scenario"]["Mutant"]["file"])
        for o in json.loads(path.read_text())["outcomes"]
        if o["scenario"] != "Baseline"
    }

earlier = sorted((p.name for p in out.glob("earlier-*.json")), key=lambda n: int(n[8:-5]))
final = {}
for run in earlier + ["plain"]:
    final.update(outcomes(run))
# Mutants excluded since an earlier run (equivalent ones, .cargo/mutants.toml) count no more.
try:
    import re, tomllib
    with open(".cargo/mutants.toml", "rb") as f:
        excluded = [re.compile(r) for r in tomllib.load(f).get("exclude_re", [])]
except (ImportError, OSError):
    excluded = []
final = {n: v for n, v in final.items() if not any(r.search(n) for r in excluded)}
loom = {}
for run in sorted(p.name for p in out.glob("loom-earlier-*.json")) + ["loom"]:
    loom.update(outcomes(run))
for name, (summary, file) in loom.items():
    # A mutant the loom build cannot build stays missed: the plain build was fine.
    if summary in ("CaughtMutant", "Timeout"):
        final[name] = (summary, file)
kinds = {"CaughtMutant": "caught", "MissedMutant": "missed", "Unviable": "unviable",
         "Timeout": "timeout", "Failure": "failure"}
columns = ("caught", "missed", "unviable", "timeout", "failure")
per_file, survivors = {}, []
for name, (summary, file) in sorted(final.items()):
    kind = kinds.get(summary, "failure")
    row = per_file.setdefault(file, dict.fromkeys(columns, 0))
    row[kind] += 1
    if kind != "caught" and kind != "unviable":
        survivors.append(f"{kind.upper():8} {name}")
loom_caught = sum(1 for s, _ in loom.values() if s == "CaughtMutant")
total = {k: sum(r[k] for r in per_file.values()) for k in columns}
viable = total["caught"] + total["missed"] + total["timeout"] + total["failure"]
# A mutant that makes the tests hang is caught too (the run never passes), listed apart.
score = 100.0 * (total["caught"] + total["timeout"]) / viable if viable else 100.0
print()
print(f'{"file":48} {"mutants":>7} {"caught":>7} {"missed":>7} {"unviable":>8} {"timeout":>7}')
for file, r in sorted(per_file.items()) + [("total", total)]:
    print(f'{file:48} {sum(r.values()):7} {r["caught"]:7} {r["missed"]:7} {r["unviable"]:8} {r["timeout"]:7}')
if loom:
    print(f"of those caught, by the loom models only: {loom_caught}")
print(f"score: {score:.1f} % of {viable} viable mutants caught or timed out (threshold {threshold:g} %)")
for line in survivors:
    print(line)
sys.exit(0 if score >= threshold else 1)
EOF
