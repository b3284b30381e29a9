#!/usr/bin/env bash
# Runs every test of the workspace: unit, integration, property (10,000 cases), loom
# models, and doc tests. Installs what the tests need when it is missing (redis-server,
# from Debian's packages); tests start their own redis-server processes on free ports
# (single servers, a 3-primary 3-replica Redis Cluster, a primary with a replica and
# three Sentinels).
set -euo pipefail
cd "$(dirname "$0")/.."

# redis-server for the Redis engine's tests (also run as Sentinels), redis-cli (Debian's
# redis-tools) to join its Redis Cluster tests' nodes; openssl makes the certificates of
# its TLS test; chromium renders the dashboard page (the proxy's and breakerbox-admin's)
# headless.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# promtool (Debian package prometheus) checks the metrics exposition.
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian's packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export PROPTEST_CASES="${PROPTEST_CASES:-10000}"
export RUST_BACKTRACE=1

echo "== unit, integration and property tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --all-features --no-fail-fast
else
  cargo test --workspace --all-features --no-fail-fast
fi

echo "== loom models: the breaker's concurrent paths, the Redis view's sequence lock"
if [ -f crates/breakerbox/tests/loom.rs ]; then
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p breakerbox --test loom --test loom_seq_cell --release
fi

echo "== doc tests"
cargo test --workspace --all-features --doc
