#!/usr/bin/env bash
# Instructions per request: robotsguard against two pingora pass-throughs (examples/passthrough.rs):
# the bare one, and the production one that sets the timeouts robotsguard's defaults set (the fair
# floor: pingora arms a timer per read and write for each, which any proxy facing the Internet
# needs). Each runs under
# valgrind's callgrind with one worker thread and driven by the same wrk mix as
# bench/proxy-compare.sh (bench/mix.lua, keep-alive, 4 connections).
#
#   bench/proxy-instructions.sh                 # 3 rounds of 20 s of load per proxy
#   ROUNDS=5 DURATION=40 KEEP=/tmp/cg bench/proxy-instructions.sh   # keep the profiles (and logs),
#                                               # which bench/callgrind-diff.py compares by function
#   CACHE_SIM=1 ROUNDS=1 bench/proxy-instructions.sh   # also simulated cache misses and branches
#   PROTOCOL=h2 bench/proxy-instructions.sh     # over TLS: h2 (HTTP/2) or h1-tls (HTTP/1.1), driven
#                                               # by h2load with browser requests as in
#                                               # bench/proxy-tls-h2.sh (CLIENTS connections,
#                                               # STREAMS streams each for h2)
#
# Why a second benchmark: on a small shared machine the wall-clock comparison swings by tens of
# per cent from round to round (docs/BENCHMARKS.md, "Whole proxy"), because the kernel's share of
# each request (loopback TCP, wake-ups of the other CPU) changes with how requests happen to batch.
# Counting the instructions each proxy executes in user space isolates what the hooks add, and
# counts no kernel work, which both proxies share.
#
# Method: start the proxy under callgrind, warm it with WARMUP seconds of load (3; 10 with
# CACHE_SIM=1, under which the end of start-up, loading certificates and building a robots.txt
# copy, fell after 3 s), zero the counters, run DURATION seconds of load, dump the counters,
# divide by the requests wrk completed. The three proxies run one after the other in each of
# ROUNDS rounds, and the ratios reported are the medians of the rounds' ratios: part of what a
# proxy does is done per second rather than per request (the allocator's thread-cache collection
# every 10 ms, pingora's timer tick), so its share per request follows how many requests valgrind
# completed in the round, which moves from round to round by more than a step of tuning does
# (docs/BENCHMARKS.md, issue 34).
# CACHE_SIM=1 also has callgrind simulate the caches and branch predictors (--cache-sim=yes
# --branch-sim=yes; valgrind then completes several times fewer requests) and prints, per request,
# the instruction-cache and data-cache misses and the mispredicted branches of each proxy: equal
# instruction counts can still take unequal time, and this says by how much the code's footprint
# differs (docs/BENCHMARKS.md, issue 34, step 36).
# Needs valgrind, nginx, and wrk (h1) or h2load and openssl (h1-tls, h2), installed from Debian
# packages when missing. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-4}
CACHE_SIM=${CACHE_SIM:-0}
PROTOCOL=${PROTOCOL:-h1}
CLIENTS=${CLIENTS:-4}
STREAMS=${STREAMS:-8}
case "$PROTOCOL" in
  h1 | h2 | h1-tls) ;;
  *) echo "PROTOCOL must be h1, h1-tls or h2, not $PROTOCOL" >&2; exit 2 ;;
esac
simulate=()
if [ "$CACHE_SIM" = 1 ]; then simulate=(--cache-sim=yes --branch-sim=yes); fi
WARMUP=${WARMUP:-$([ "$CACHE_SIM" = 1 ] && echo 10 || echo 3)}

. bench/common.sh
need nginx nginx
need valgrind valgrind
if [ "$PROTOCOL" = h1 ]; then need wrk wrk; else need h2load nghttp2-client; need openssl openssl; fi

proxy_binaries
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.out* "$work"/*.requests "$work"/*.log "$work"/events "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

ORIGIN_PORT=$(free_port)

write_origin_config "$work" "$ORIGIN_PORT"
nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)

tls=()
scheme=http
if [ "$PROTOCOL" != h1 ]; then
  write_tls_pair "$work"
  tls=("$work/cert.pem" "$work/key.pem")
  scheme=https
fi

# load SECONDS PORT: the round's traffic; prints the requests completed.
load() {
  local out
  if [ "$PROTOCOL" = h1 ]; then
    out=$(wrk -t1 -c"$CONNECTIONS" -d"${1}s" -s bench/mix.lua "http://127.0.0.1:$2/")
    grep -oE '[0-9]+ requests in' <<<"$out" | grep -oE '^[0-9]+'
  else
    local streams=(-m "$STREAMS")
    [ "$PROTOCOL" = h1-tls ] && streams=(--h1 -m 1)
    out=$(h2load "${streams[@]}" -c "$CLIENTS" -D "$1" -H "user-agent: $BROWSER_UA" \
      -H ':authority: bench.example' "https://127.0.0.1:$2/articles/1" 2>&1)
    # "requests: T total, S started, D done, ..."
    sed -nE 's/^requests: [0-9]+ total, [0-9]+ started, ([0-9]+) done.*/\1/p' <<<"$out"
  fi
}

measure() { # label port command... (the round is $round)
  local label=$1 port=$2 pid requests total out
  shift 2
  out="$work/$label.r$round"
  valgrind --tool=callgrind ${simulate[@]+"${simulate[@]}"} --callgrind-out-file="$out.out" "$@" 2>"$out.valgrind.log" &
  pid=$!
  pids+=("$pid")
  # Under valgrind start-up takes seconds; wait up to 60 s for the first answer.
  for _ in $(seq 1 300); do
    curl -sk -o /dev/null -H 'Host: bench.example' "$scheme://127.0.0.1:$port/" && break
    sleep 0.2
  done
  load "$WARMUP" "$port" >/dev/null
  callgrind_control --zero "$pid" >/dev/null 2>&1
  requests=$(load "$DURATION" "$port")
  echo "$requests" >"$out.requests"
  callgrind_control --dump "$pid" >/dev/null 2>&1
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ "${requests:-0}" -gt 0 ] || { echo "$label completed no requests in round $round" >&2; exit 1; }
  # The dump made on request is the file with suffix .1 (the exit dump is the other).
  total=$(awk '/^summary:/ {print $2}' "$out.out.1")
  echo "$round $label $requests $total" >>"$work/results"
  # Every event callgrind counted ("events:" names them, "summary:" totals them).
  printf '%s %s %s %s\n' "$round" "$label" "$requests" "$(awk '/^events:/ {sub(/^events: /, ""); e = $0} /^summary:/ {sub(/^summary: /, ""); print e "|" $0}' "$out.out.1")" >>"$work/events"
  printf 'round %s\t%s\t%s requests\t%.0f instructions/request\n' "$round" "$label" "$requests" "$(python3 -c "print($total / $requests)")"
}

case "$PROTOCOL" in
  h1) traffic="wrk mix, connections=$CONNECTIONS" ;;
  h1-tls) traffic="HTTP/1.1 over TLS, h2load, clients=$CLIENTS" ;;
  h2) traffic="HTTP/2 over TLS, h2load, clients=$CLIENTS streams=$STREAMS" ;;
esac
echo "# duration=${DURATION}s $traffic threads=1 rounds=$ROUNDS, user-space instructions (callgrind Ir)"
for round in $(seq 1 "$ROUNDS"); do
  # Fresh ports (and config) each round: a port just closed may still be held by the kernel.
  GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); PASS_PORT=$(free_port); PROD_PORT=$(free_port)
  # The same robots.txt and config as bench/proxy-compare.sh, with one worker thread.
  write_guard_config "$work/r$round" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" 1
  if [ "$PROTOCOL" != h1 ]; then
    listen_with_tls "$work/r$round/conf/robotsguard.yaml" "$GUARD_PORT" "$work"
  fi
  RUST_LOG=${RUST_LOG:-warn} measure robotsguard "$GUARD_PORT" "$guard_bin" serve --config "$work/r$round/conf/robotsguard.yaml"
  measure passthrough "$PASS_PORT" "$pass_bin" "127.0.0.1:$PASS_PORT" "127.0.0.1:$ORIGIN_PORT" 1 ${tls[@]+"${tls[@]}"}
  measure passthrough-production "$PROD_PORT" "$pass_bin" --production "127.0.0.1:$PROD_PORT" "127.0.0.1:$ORIGIN_PORT" 1 ${tls[@]+"${tls[@]}"}
done

if [ "$CACHE_SIM" = 1 ]; then
  python3 - "$work/events" <<'PY'
import statistics, sys
# Instruction-cache misses (I1mr), first-level data-cache read and write misses (D1mr, D1mw),
# mispredicted conditional and indirect branches (Bcm, Bim); the last level is as large as the
# host's and hardly misses.
shown = ("Ir", "I1mr", "D1mr", "D1mw", "Bcm", "Bim")
per = {}
for line in open(sys.argv[1]):
    round_, label, requests, rest = line.split(" ", 3)
    names, _, values = rest.strip().partition("|")
    counts = dict(zip(names.split(), map(int, values.split())))
    per.setdefault(label, []).append({e: counts.get(e, 0) / int(requests) for e in shown})
print("simulated per request (median of rounds): " + "  ".join(shown))
medians = {label: {e: statistics.median(r[e] for r in rows) for e in shown} for label, rows in per.items()}
for label, m in medians.items():
    print(f"{label:<24}" + "  ".join(f"{m[e]:>9,.0f}" for e in shown))
guard, production = medians["robotsguard"], medians["passthrough-production"]
# The ratio of the medians over rounds.
print(f"{'robotsguard / production':<24}" + "  ".join(f"{guard[e] / production[e]:>9.3f}" if production[e] else f"{'-':>9}" for e in shown))
PY
fi

python3 - "$work/results" <<'PY'
import statistics, sys
per_round = {}
for line in open(sys.argv[1]):
    round_, label, requests, total = line.split()
    per_round.setdefault(round_, {})[label] = int(total) / int(requests)
bare_ratios, production_ratios = [], []
for round_, rows in sorted(per_round.items(), key=lambda item: int(item[0])):
    guard, bare, production = rows["robotsguard"], rows["passthrough"], rows["passthrough-production"]
    bare_ratios.append(guard / bare)
    production_ratios.append(guard / production)
    print(f"round {round_}: ratios {guard / bare:.3f} (bare), {guard / production:.3f} (production); "
          f"{guard - production:+.0f} instructions per request against production")
medians = {label: statistics.median(rows[label] for rows in per_round.values())
           for label in ("robotsguard", "passthrough", "passthrough-production")}
print(f"median instructions per request: robotsguard {medians['robotsguard']:.0f}, bare "
      f"{medians['passthrough']:.0f}, production {medians['passthrough-production']:.0f}")
print(f"ratio robotsguard / bare pass-through: {statistics.median(bare_ratios):.3f} (median of {len(bare_ratios)} rounds)")
# The last line is the one the target is set on (docs/BENCHMARKS.md): against the production floor.
print(f"ratio robotsguard / production pass-through: {statistics.median(production_ratios):.3f} (median of {len(production_ratios)} rounds)")
PY
