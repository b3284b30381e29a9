#!/bin/sh
# breakerbox proxy vs nginx proxy_pass and HAProxy, same loopback upstream, one run, one table
# per protocol: http1 (wrk), http2 (h2load, h2c from the client), tls (wrk, HTTPS upstream).
# Needs nginx, haproxy, wrk, h2load and openssl
# (Debian: apt-get install -y nginx haproxy wrk nghttp2-client openssl).
# Tunables: BENCH_PROTOCOLS (http1,http2,tls), BENCH_DURATION (10s), BENCH_CONNECTIONS (32),
# BENCH_THREADS (2), BENCH_H2_CLIENTS (8), BENCH_H2_STREAMS (4), BENCH_ROUNDS (3).
set -eu
cd "$(dirname "$0")/../../.."
for tool in nginx haproxy wrk h2load openssl; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool: apt-get install -y nginx haproxy wrk nghttp2-client openssl" >&2; exit 1; }
done
exec cargo bench -p breakerbox-cli --bench proxy_vs_nginx "$@"
