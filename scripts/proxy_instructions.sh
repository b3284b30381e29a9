#!/usr/bin/env bash
# Instructions per proxied request in `breakerbox proxy`'s own process (user space),
# counted by valgrind's callgrind: deterministic (the same figure to 0.01 % run after run,
# whatever else the machine does), unlike wrk's throughput on a shared 2-core machine.
# Use it to A/B a change to the proxy's request path before the wall-clock bench
# (crates/breakerbox-cli/benches/proxy_vs_nginx.sh), which stays the judge of speed:
#
#     scripts/proxy_instructions.sh [BASE_BINARY]
#
# Builds this checkout's release binary (or takes BREAKERBOX_BIN), runs it under callgrind
# in front of a loopback nginx that answers every request with a small 200, warms it up,
# zeroes the counters, sends REQUESTS (5,000) keep-alive HTTP/1.1 requests one at a time
# with h2load, and divides. Needs valgrind, nginx and h2load (Debian: apt-get install -y
# valgrind nginx nghttp2-client). The kernel's share (about three quarters of the proxy's
# CPU on loopback) is not counted: callgrind sees user space only.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
for tool in valgrind callgrind_control nginx h2load; do
  command -v "$tool" >/dev/null || { echo "proxy_instructions.sh: needs $tool (apt-get install -y valgrind nginx nghttp2-client)" >&2; exit 1; }
done
REQUESTS=${REQUESTS:-5000}

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$dir/nginx.pid" ] && kill "$(cat "$dir/nginx.pid")" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() { # port
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "proxy_instructions.sh: nothing listens on port $1" >&2
  return 1
}

upstream=$(free_port)
cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon on;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 10000000;
  server {
    listen 127.0.0.1:$upstream;
    location / { default_type text/plain; return 200 "hello from the upstream, a small answer as most are\n"; }
  }
}
EOF
nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/nginx-error.log"
wait_port "$upstream"

per_request() { # binary -> instructions per request
  local bin=$1 listen admin out pid
  listen=$(free_port)
  admin=$(free_port)
  cat >"$dir/proxy.toml" <<EOF
workers = 1
listen = "127.0.0.1:$listen"
[admin]
listen = "127.0.0.1:$admin"
[[upstream]]
name = "bench"
route = "/"
url = "http://127.0.0.1:$upstream"
[upstream.breaker]
failure_rate = 0.5
window = "count:100"
min_calls = 20
consecutive_failures = 50
[upstream.judge]
slow_threshold = "2s"
EOF
  out="$dir/callgrind.out"
  rm -f "$out"*
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" proxy --config "$dir/proxy.toml" \
    >"$dir/proxy.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_port "$listen"
  h2load --h1 -n 300 -c 1 "http://127.0.0.1:$listen/" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  h2load --h1 -n "$REQUESTS" -c 1 "http://127.0.0.1:$listen/" | grep -q "$REQUESTS succeeded" ||
    { echo "proxy_instructions.sh: not every request succeeded through $bin" >&2; return 1; }
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # The dump after zeroing is the numbered file; its totals line counts every thread.
  awk -v n="$REQUESTS" '/^totals:/ { printf "%.0f", $2 / n }' "$out".1
}

if [ -n "${BREAKERBOX_BIN:-}" ]; then
  here=$BREAKERBOX_BIN
else
  cargo build --release --quiet -p breakerbox-cli
  here=target/release/breakerbox
fi
echo "instructions per proxied request (user space, callgrind, $REQUESTS requests one at a time)"
if [ $# -gt 0 ]; then
  echo "| binary | instructions |"
  echo "|---|---:|"
  echo "| $1 | $(per_request "$1") |"
fi
echo "| $here | $(per_request "$here") |"
