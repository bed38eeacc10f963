#!/usr/bin/env bash
# The cost of the shared state store: robotsguard with `state.backend: memory` against the same
# config with `state.backend: redis` (a redis-server on loopback), for three kinds of request
# (bench/state.lua): browsers, crawlers admitted under a Crawl-delay (a new budget each request),
# and crawlers on a disallowed path (a violation each request). Rounds interleave the backends.
# Also counts the store commands each kind sends (INFO commandstats).
#
#   bench/shared-state.sh                       # 3 rounds x 3 kinds x 2 backends, 5 s each
#   ROUNDS=5 DURATION=10 bench/shared-state.sh
#
# Needs wrk, nginx and redis-server (installed from Debian packages when missing). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-8}
PROXY_THREADS=${PROXY_THREADS:-1}

. bench/common.sh
need wrk wrk
need nginx nginx
need redis-server redis-server
pin_cpus

cargo build --profile profiling --bin robotsguard >/dev/null
binary="${CARGO_TARGET_DIR:-target}/profiling/robotsguard"
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ORIGIN_PORT=$(free_port); REDIS_PORT=$(free_port)
write_origin_config "$work" "$ORIGIN_PORT"
"${pin_load[@]}" nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)
"${pin_load[@]}" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no >"$work/redis.log" 2>&1 & pids+=($!)

start_guard() { # name state-yaml
  local dir="$work/$1" port admin
  port=$(free_port); admin=$(free_port)
  mkdir -p "$dir"
  cat >"$dir/robotsguard.yaml" <<CONF
listen: ["127.0.0.1:$port"]
admin: "127.0.0.1:$admin"
threads: $PROXY_THREADS
shutdown: {grace: 1s}
trusted_proxies: ["127.0.0.1/32"]
state: $2
defaults:
  crawl_delay: {action: enforce, max: 60s}
  offenders: {action: report, strikes: 1000000, window: 10m, ban: 1h}
origins:
  - name: bench
    hosts: [bench.example]
    upstream: "127.0.0.1:$ORIGIN_PORT"
    robots: {source: inline, text: "User-agent: *\nCrawl-delay: 10\nDisallow: /private\n"}
CONF
  RUST_LOG=warn "${pin_proxy[@]}" "$binary" serve --config "$dir/robotsguard.yaml" 2>"$dir/log" & pids+=($!)
  for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$admin/metrics" 2>/dev/null | grep -q '^robotsguard_state_backend_up 1'; then
      echo "$port $!"
      return
    fi
    sleep 0.1
  done
  echo "robotsguard ($1) did not come up" >&2; cat "$dir/log" >&2; exit 1
}
read -r MEMORY_PORT memory_pid < <(start_guard memory "{backend: memory}")
read -r REDIS_GUARD_PORT redis_pid < <(start_guard redis "{backend: redis, redis: {url: \"redis://127.0.0.1:$REDIS_PORT/0\", timeout: 50ms}}")
# Started in a subshell: their pids reach the clean-up only through here.
pids+=("$memory_pid" "$redis_pid")

commands() { redis-cli -p "$REDIS_PORT" INFO commandstats | awk -F'[:,=]' '/^cmdstat_(set|pttl|evalsha|eval|exists|incr|hset)/ {sum += $3} END {print sum + 0}'; }

run() { # backend kind port
  local before after out
  before=$(commands)
  out=$(STATE_KIND=$2 "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/state.lua "http://127.0.0.1:$3/")
  after=$(commands)
  python3 - "$1" "$2" "$before" "$after" <<PY
import re, sys
backend, kind, before, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = """$out"""
def ms(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
p50 = ms(re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1))
p99 = ms(re.search(r"^\s*99%\s+(\S+)", out, re.M).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
print(f"{backend}\t{kind}\t{rps:.0f}\t{p50:.3f}\t{p99:.3f}\t{(after - before) / total:.2f}\t{non2xx.group(1) if non2xx else 0}")
PY
}

echo "# rounds=$ROUNDS duration=${DURATION}s connections=$CONNECTIONS proxy_threads=$PROXY_THREADS proxy_cpus=$PROXY_CPUS load_cpus=$LOAD_CPUS"
echo -e "backend\tkind\treq/s\tp50_ms\tp99_ms\tstore_cmds/req\tnon2xx"
results="$work/results.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for kind in browser admitted violation; do
    run memory "$kind" "$MEMORY_PORT" | tee -a "$results"
    run redis "$kind" "$REDIS_GUARD_PORT" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
print("\nkind\tmemory req/s\tredis req/s\tratio\tmemory p99\tredis p99\tstore cmds/req (redis)")
for kind in ("browser", "admitted", "violation"):
    def med(backend, col):
        return statistics.median(float(r[col]) for r in rows if r[0] == backend and r[1] == kind)
    m, r = med("memory", 2), med("redis", 2)
    print(f"{kind}\t{m:.0f}\t\t{r:.0f}\t\t{r / m:.3f}\t{med('memory', 4):.3f}\t\t{med('redis', 4):.3f}\t\t{med('redis', 5):.2f}")
PY
