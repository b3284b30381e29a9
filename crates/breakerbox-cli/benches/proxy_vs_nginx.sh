#!/bin/sh
# breakerbox proxy vs nginx proxy_pass and HAProxy, same loopback upstream, wrk, one run.
# Needs nginx, haproxy and wrk (Debian: apt-get install -y nginx haproxy wrk).
# Tunables: BENCH_DURATION (10s), BENCH_CONNECTIONS (32), BENCH_THREADS (2), BENCH_ROUNDS (3).
set -eu
cd "$(dirname "$0")/../../.."
for tool in nginx haproxy wrk; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool: apt-get install -y nginx haproxy wrk" >&2; exit 1; }
done
exec cargo bench -p breakerbox-cli --bench proxy_vs_nginx "$@"
