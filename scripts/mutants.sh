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
# http: the HTTP judge (breakerbox-http's judge, status and business code), tested by that
#   crate's tests.
#
# Extra arguments go to cargo-mutants, e.g. `-F 'check_rules'` to try only the mutants of
# one function, or `--list` to list them. Prints the score and every survivor, and exits
# non-zero when the share of viable mutants caught is below MUTANTS_THRESHOLD (percent,
# default 100; mutants listed as equivalent in .cargo/mutants.toml are not generated).
#
# Not part of .ci/run (a full core run takes about an hour on two cores); run it before
# resolving an issue that touches these files, and record the result in TESTING.md.
# Needs cargo-mutants (`cargo install cargo-mutants --locked`). Outputs go to
# target/mutants-out/<suite>/ (mutants.out with one log per mutant); builds use their own
# target directories (target/mutants, target/mutants-loom) so they never disturb yours.
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
# Auto-set timeouts come from the unmutated run; a mutant that loops is cut off here.
common=(-j 1 --timeout "${MUTANTS_TIMEOUT:-300}" --build-timeout 900 --no-times --colors never)

case "$suite" in
  core)
    src=crates/breakerbox/src
    files=(
      -f "$src/model.rs" -f "$src/model/policy.rs" -f "$src/model/window.rs"
      -f "$src/breaker/engine.rs" -f "$src/breaker/transitions.rs"
      -f "$src/breaker/count_window.rs" -f "$src/breaker/time_window.rs"
      -f "$src/breaker/lanes.rs" -f "$src/breaker/streak.rs" -f "$src/permit.rs"
    )
    # Deterministic tests only: no doc tests, no timed stress test.
    tests=(-C --lib -C --test=model_table -C --test=model_vs_engine -C --test=scenarios
      -C --test=races)
    ;;
  http)
    src=crates/breakerbox-http/src
    files=(
      -f "$src/judge.rs" -f "$src/judge/builder.rs" -f "$src/judgement.rs"
      -f "$src/status.rs" -f "$src/status/reasons.rs" -f "$src/status/table.rs"
      -f "$src/business.rs"
    )
    tests=(-C --lib -C --tests)
    ;;
esac

if [[ " $* " == *" --list "* ]]; then
  exec cargo mutants -p "$(basename "$(dirname "$src")")" "${files[@]}" "$@"
fi

rm -rf "$out"
mkdir -p "$out/plain"
echo "== $suite: mutants against the deterministic tests"
set +e
CARGO_TARGET_DIR="$root/target/mutants" nice -n 19 cargo mutants \
  -p "$(basename "$(dirname "$src")")" "${files[@]}" "${tests[@]}" "${common[@]}" \
  -o "$out/plain" "$@"
status=$?
set -e
# 0: all caught; 2: some missed; 3: some timed out. Anything else is a failed run.
if [[ $status -ne 0 && $status -ne 2 && $status -ne 3 ]]; then
  echo "cargo-mutants failed (exit $status); see $out/plain/mutants.out/debug.log" >&2
  exit "$status"
fi

final="$out/plain/mutants.out"
if [[ "$suite" == core && -s "$final/missed.txt" ]]; then
  echo "== core: the $(wc -l <"$final/missed.txt") survivors against the loom models"
  # --iterate skips what the first pass caught (or could not build).
  cp -r "$out/plain" "$out/loom"
  set +e
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$root/target/mutants-loom" nice -n 19 cargo mutants \
    -p breakerbox "${files[@]}" -C --release -C --test=loom "${common[@]}" --iterate \
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
    if not path.is_file():
        return {}
    return {
        o["scenario"]["Mutant"]["name"]: (o["summary"], o["scenario"]["Mutant"]["file"])
        for o in json.loads(path.read_text())["outcomes"]
        if o["scenario"] != "Baseline"
    }

plain, loom = outcomes("plain"), outcomes("loom")
final = dict(plain)
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
    if kind in ("missed", "timeout", "failure"):
        survivors.append(f"{kind.upper():8} {name}")
loom_caught = sum(1 for s, _ in loom.values() if s == "CaughtMutant")
total = {k: sum(r[k] for r in per_file.values()) for k in columns}
viable = total["caught"] + total["missed"] + total["timeout"] + total["failure"]
score = 100.0 * total["caught"] / viable if viable else 100.0
print()
print(f'{"file":48} {"mutants":>7} {"caught":>7} {"missed":>7} {"unviable":>8} {"timeout":>7}')
for file, r in sorted(per_file.items()) + [("total", total)]:
    print(f'{file:48} {sum(r.values()):7} {r["caught"]:7} {r["missed"]:7} {r["unviable"]:8} {r["timeout"]:7}')
if loom:
    print(f"of those caught, by the loom models only: {loom_caught}")
print(f"score: {score:.1f} % of {viable} viable mutants caught (threshold {threshold:g} %)")
for line in survivors:
    print(line)
sys.exit(0 if score >= threshold else 1)
EOF
