#!/usr/bin/env bash
# Instructions per request: robotsguard against two pingora pass-throughs (examples/passthrough.rs):
# the bare one, and the production one that sets the timeouts robotsguard's defaults set (the fair
# floor: pingora arms a timer per read and write for each, which any proxy facing the Internet
# needs). Each runs under
# valgrind's callgrind with one worker thread and driven by the same wrk mix as
# bench/proxy-compare.sh (bench/mix.lua, keep-alive, 4 connections).
#
#   bench/proxy-instructions.sh                 # 20 s of load per proxy
#   DURATION=40 KEEP=/tmp/cg bench/proxy-instructions.sh   # keep the profiles for callgrind_annotate
#
# Why a second benchmark: on a small shared machine the wall-clock comparison swings by tens of
# per cent from round to round (docs/BENCHMARKS.md, "Whole proxy"), because the kernel's share of
# each request (loopback TCP, wake-ups of the other CPU) changes with how requests happen to batch.
# Counting the instructions each proxy executes in user space per request is repeatable to under one
# per cent, whatever else the machine is doing, and isolates exactly what the hooks add. It counts
# no kernel work, which both proxies share.
#
# Method: start the proxy under callgrind, warm it with 3 s of load, zero the counters, run
# DURATION seconds of load, dump the counters, divide by the requests wrk completed.
# Needs valgrind, wrk and nginx (installed from Debian packages when missing). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20}
CONNECTIONS=${CONNECTIONS:-4}

. bench/common.sh
need wrk wrk
need nginx nginx
need valgrind valgrind

cargo build --profile profiling --bin robotsguard --example passthrough >/dev/null
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.out* "$work"/*.wrk "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

ORIGIN_PORT=$(free_port); GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); PASS_PORT=$(free_port); PROD_PORT=$(free_port)

write_origin_config "$work" "$ORIGIN_PORT"
nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)

# The same robots.txt and config as bench/proxy-compare.sh, with one worker thread.
write_guard_config "$work" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" 1

measure() { # label port command...
  local label=$1 port=$2 pid requests total
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$work/$label.out" "$@" 2>"$work/$label.valgrind.log" &
  pid=$!
  pids+=("$pid")
  # Under valgrind start-up takes seconds; wait up to 60 s for the first answer.
  for _ in $(seq 1 300); do
    curl -s -o /dev/null -H 'Host: bench.example' "http://127.0.0.1:$port/" && break
    sleep 0.2
  done
  wrk -t1 -c"$CONNECTIONS" -d3s -s bench/mix.lua "http://127.0.0.1:$port/" >/dev/null
  callgrind_control --zero "$pid" >/dev/null 2>&1
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s bench/mix.lua "http://127.0.0.1:$port/" >"$work/$label.wrk"
  callgrind_control --dump "$pid" >/dev/null 2>&1
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  requests=$(grep -oE '[0-9]+ requests in' "$work/$label.wrk" | grep -oE '^[0-9]+')
  # The dump made on request is the file with suffix .1 (the exit dump is the other).
  total=$(awk '/^summary:/ {print $2}' "$work/$label.out.1")
  echo "$label $requests $total" >>"$work/results"
  printf '%s\t%s requests\t%.0f instructions/request\n' "$label" "$requests" "$(python3 -c "print($total / $requests)")"
}

echo "# duration=${DURATION}s connections=$CONNECTIONS threads=1, user-space instructions (callgrind Ir)"
RUST_LOG=warn measure robotsguard "$GUARD_PORT" "${CARGO_TARGET_DIR:-target}"/profiling/robotsguard serve --config "$work/conf/robotsguard.yaml"
measure passthrough "$PASS_PORT" "${CARGO_TARGET_DIR:-target}"/profiling/examples/passthrough "127.0.0.1:$PASS_PORT" "127.0.0.1:$ORIGIN_PORT" 1
measure passthrough-production "$PROD_PORT" "${CARGO_TARGET_DIR:-target}"/profiling/examples/passthrough --production "127.0.0.1:$PROD_PORT" "127.0.0.1:$ORIGIN_PORT" 1

python3 - "$work/results" <<'PY'
import sys
rows = {label: int(total) / int(requests) for label, requests, total in (l.split() for l in open(sys.argv[1]))}
guard, bare, production = rows["robotsguard"], rows["passthrough"], rows["passthrough-production"]
print(f"ratio robotsguard / bare pass-through: {guard / bare:.3f} ({guard - bare:+.0f} instructions per request)")
# The last line is the one the target is set on (docs/BENCHMARKS.md): against the production floor.
print(f"ratio robotsguard / production pass-through: {guard / production:.3f} ({guard - production:+.0f} instructions per request)")
PY
