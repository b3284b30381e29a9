#!/usr/bin/env bash
# Instructions per protected no-op call on the core's hot paths, counted by valgrind's
# callgrind (deterministic: the count does not move with the machine's load, unlike a
# wall-clock bench on a shared 2-core machine), for this checkout and optionally beside a
# base revision built in a scratch worktree:
#
#     scripts/instructions.sh [BASE_REV]
#
# Each figure is (I(2N) - I(N)) / N for N = 100,000 calls of
# crates/breakerbox/examples/hot_path_loop.rs, so set-up and exit cancel out. Needs
# valgrind (Debian's package valgrind). A base revision without that example gets this
# checkout's copy, with BASE_SED (a sed script) applied to it if set: for example
# BASE_SED='/"deadline" =>/,/\.build(),/d' for a revision before call timeouts (the
# deadline row then reads whatever the default arm measures).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }

N=100000
# "RULE [FAIL_EVERY [call]]": with `call`, through `CircuitBreaker::call` and its judge.
CASES=("consecutive" "count" "time" "deadline" "open" "count 100" "time 100" "count 10" "time 10"
  "consecutive 0 call" "count 0 call" "count 100 call" "time 100 call" "count 10 call")

build() { # dir target -> path of the example binary
  (cd "$1" && CARGO_TARGET_DIR="$2" cargo build --release --quiet -p breakerbox --example hot_path_loop) >&2 ||
    { echo "instructions.sh: the example does not build in $1" >&2; return 1; }
  echo "$2/release/examples/hot_path_loop"
}

per_call() { # binary rule [fail_every]
  local bin=$1; shift
  local a b
  a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$N" "$@" 2>&1 | awk '/I *refs/ {gsub(",","",$NF); print $NF}')
  b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$((2 * N))" "$@" 2>&1 | awk '/I *refs/ {gsub(",","",$NF); print $NF}')
  awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }'
}

label() { # rule [fail_every [call]]
  local l="$1"; [ $# -gt 1 ] && [ "$2" != 0 ] && l="$l, every ${2}th call fails"
  [ $# -gt 2 ] && l="$l, through call"
  echo "$l"
}

here=$(build . "$PWD/target/instructions")
base=""
if [ $# -gt 0 ]; then
  wt="$PWD/target/instructions-base/tree"
  rm -rf "$wt"; git worktree prune
  git worktree add --quiet --detach "$wt" "$1"
  [ -f "$wt/crates/breakerbox/examples/hot_path_loop.rs" ] || {
    cp crates/breakerbox/examples/hot_path_loop.rs "$wt/crates/breakerbox/examples/"
    [ -z "${BASE_SED:-}" ] || sed -i "$BASE_SED" "$wt/crates/breakerbox/examples/hot_path_loop.rs"
  }
  base=$(build "$wt" "$PWD/target/instructions-base/target")
  echo "| case | $1 | this checkout |"
  echo "|---|---:|---:|"
else
  echo "| case | this checkout |"
  echo "|---|---:|"
fi
for c in "${CASES[@]}"; do
  # shellcheck disable=SC2086
  set -- $c
  if [ -n "$base" ]; then
    echo "| $(label "$@") | $(per_call "$base" "$@") | $(per_call "$here" "$@") |"
  else
    echo "| $(label "$@") | $(per_call "$here" "$@") |"
  fi
done
if [ -n "$base" ]; then git worktree remove --force "$wt"; fi
