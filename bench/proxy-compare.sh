#!/usr/bin/env bash
# Proxy benchmark: robotsguard (enforcing, medium robots.txt) against pingora pass-throughs built
# from the same pingora version (examples/passthrough.rs): the bare one and the production one
# (robotsguard's default timeouts, the fair floor); same threads, same CPUs, same origin, rounds
# interleaved A B C A B C so drift hits all three (with CONCURRENT=1, the three at once). Also
# measures the origin directly for reference.
#
#   bench/proxy-compare.sh            # defaults: 9 rounds of 5 s, 64 connections
#   ROUNDS=15 DURATION=5 bench/proxy-compare.sh
#   WAKEUPS=1 ROUNDS=3 bench/proxy-compare.sh   # also count the machine's wake-ups per request
#   CONCURRENT=1 bench/proxy-compare.sh         # the three proxies loaded at once (see below)
#   BINARIES=/tmp/b bench/proxy-compare.sh      # a build kept aside (/tmp/b/robotsguard and
#                                               # /tmp/b/passthrough) instead of this checkout's
#
# CPUs: the proxy under test gets its own CPUs (PROXY_CPUS, default: CPU 0) and one worker thread
# per CPU; the load generator and the origin share the others (LOAD_CPUS, default: the rest).
# Without pinning, on a small machine the proxy's threads, wrk and nginx take turns on the same
# cores and the result measures the scheduler as much as the proxy; pinned, the proxy's CPU is
# the bottleneck, so the throughput ratio is the ratio of what each proxy costs per request.
# On a 1-CPU machine nothing is pinned.
#
# WAKEUPS=1 (needs perf from Debian's linux-perf, and the sched and ipi tracepoints) counts, over
# each run, every task wake-up on the machine and the inter-processor interrupts sent, per request:
# the proxy's sends wake wrk and nginx on the other CPU whenever they have caught up and gone to
# sleep, the slower the proxy the more often, and on a virtual machine each such wake-up costs the
# sender microseconds (docs/BENCHMARKS.md, issue 34, step 36).
#
# CONCURRENT=1 loads the three proxies at the same time in each round, each by its own wrk with
# CONNECTIONS connections: the three proxies share PROXY_CPUS, the three wrks and nginx share
# LOAD_CPUS. The scheduler gives each proxy an equal share of the CPU, so each serves requests in
# inverse proportion to what one costs it. On a virtual machine whose host takes its CPU away for
# seconds at a time, rounds run one after the other swing by tens of per cent; run at once, a
# slow phase slows all three alike, and the per-round ratios move by a few per cent
# (docs/BENCHMARKS.md, issue 34, step 38). Taking turns on one CPU, the proxies also evict each
# other's code and data from its caches: a request costs each of them more CPU than alone, so
# req/s, latency and CPU per request are comparable between the three, not with a run in turn.
#
# Traffic: keep-alive; ~70 % browsers, ~20 % crawlers that robots.txt allows, ~10 % crawlers it
# blocks (bench/mix.lua). Needs wrk and nginx (installed from Debian packages when missing).
# Everything listens on 127.0.0.1 only and stops when the script ends.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-9}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-1}
CONCURRENT=${CONCURRENT:-0}
if [ "$CONCURRENT" = 1 ] && [ "${WAKEUPS:-0}" = 1 ]; then
  echo "WAKEUPS=1 counts machine-wide, so it cannot tell apart proxies run with CONCURRENT=1" >&2
  exit 1
fi

. bench/common.sh
pin_cpus
default_threads=1
if [ "$PROXY_CPUS" != all ]; then
  # One worker per proxy CPU ("0", "0-3", "0,2" forms).
  default_threads=$(python3 -c 'import sys
n = 0
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    n += int(b or a) - int(a) + 1
print(n)' "$PROXY_CPUS")
fi
PROXY_THREADS=${PROXY_THREADS:-$default_threads}
need wrk wrk
need nginx nginx

proxy_binaries
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ORIGIN_PORT=$(free_port); GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); PASS_PORT=$(free_port); PROD_PORT=$(free_port)

write_origin_config "$work" "$ORIGIN_PORT"
"${pin_load[@]}" nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)

write_guard_config "$work" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" "$PROXY_THREADS"
RUST_LOG=warn "${pin_proxy[@]}" "$guard_bin" serve --config "$work/conf/robotsguard.yaml" 2>"$work/guard.log" & guard=$!; pids+=($guard)
"${pin_proxy[@]}" "$pass_bin" "127.0.0.1:$PASS_PORT" "127.0.0.1:$ORIGIN_PORT" "$PROXY_THREADS" 2>"$work/pass.log" & pass=$!; pids+=($pass)
"${pin_proxy[@]}" "$pass_bin" --production "127.0.0.1:$PROD_PORT" "127.0.0.1:$ORIGIN_PORT" "$PROXY_THREADS" 2>"$work/prod.log" & prod=$!; pids+=($prod)

for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && curl -s "http://127.0.0.1:$PASS_PORT/" >/dev/null 2>&1 && curl -s "http://127.0.0.1:$PROD_PORT/" >/dev/null 2>&1 && break
  sleep 0.1
done

# Sanity: the mix gets the answers it is meant to get.
check() { # expected-status user-agent path
  got=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.example' -A "$2" "http://127.0.0.1:$GUARD_PORT$3")
  [ "$got" = "$1" ] || { echo "sanity check failed: $2 $3 -> $got, expected $1" >&2; exit 1; }
}
check 200 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' /api/static/admin/print/x
check 200 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' /unlisted/page.html
check 200 'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)' /unlisted/other.html
check 403 'CCBot/2.0 (https://commoncrawl.org/faq/)' /articles/1

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)

WAKEUPS=${WAKEUPS:-0}
wakeup_events=sched:sched_waking,ipi:ipi_send_cpu
if [ "$WAKEUPS" = 1 ] && ! perf stat -e "$wakeup_events" -a -o /dev/null -- true 2>/dev/null; then
  echo "WAKEUPS=1: perf cannot count the tracepoints $wakeup_events here" >&2
  exit 1
fi

run() { # label port pid
  local before after out
  local wrk=(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/mix.lua "http://127.0.0.1:$2/")
  before=$( [ -n "$3" ] && cpu_ticks "$3" || echo 0 )
  if [ "$WAKEUPS" = 1 ]; then
    # Counted over exactly wrk's run, machine-wide (wrk, nginx and the proxy all wake tasks).
    out=$(perf stat -x, -e "$wakeup_events" -a -o "$work/wakeups" -- "${pin_load[@]}" "${wrk[@]}")
  else
    out=$("${pin_load[@]}" "${wrk[@]}")
  fi
  after=$( [ -n "$3" ] && cpu_ticks "$3" || echo 0 )
  python3 - "$1" "$before" "$after" "$TICKS" "$( [ "$WAKEUPS" = 1 ] && echo "$work/wakeups" )" <<PY
import re, sys
label, before, after, ticks = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
wakeups_file = sys.argv[5]
out = """$out"""
def seconds(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
# Anchored at the line start: a stdev column such as "87.50%" must not pass for the 50th percentile.
p50 = seconds(re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1))
p99 = seconds(re.search(r"^\s*99%\s+(\S+)", out, re.M).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
cpu_us = (after - before) / ticks / total * 1e6 if total and after > before else 0.0
row = f"{label}\t{rps:.0f}\t{p50*1e3:.3f}\t{p99*1e3:.3f}\t{cpu_us:.2f}\t{errors.group(1) if errors else 0}"
if wakeups_file:
    # perf's CSV: count,unit,event,...; counted over wrk's run.
    counts = {}
    for line in open(wakeups_file):
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit():
            counts[fields[2]] = int(fields[0])
    per_request = lambda event: counts.get(event, 0) / total if total else 0.0
    row += f"\t{per_request('sched:sched_waking'):.3f}\t{per_request('ipi:ipi_send_cpu'):.3f}"
print(row)
PY
}

echo "# rounds=$ROUNDS duration=${DURATION}s connections=$CONNECTIONS proxy_threads=$PROXY_THREADS wrk_threads=$WRK_THREADS proxy_cpus=$PROXY_CPUS load_cpus=$LOAD_CPUS concurrent=$CONCURRENT"
echo -e "run\treq/s\tp50_ms\tp99_ms\tcpu_us/req\tnon2xx$( [ "$WAKEUPS" = 1 ] && printf '\twakeups/req\tipis/req' )"
results="$work/results.tsv"
run origin-direct "$ORIGIN_PORT" "" | tee -a "$results"
for round in $(seq 1 "$ROUNDS"); do
  run_three "$round"
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]) if line.strip()]
by = {}
wakeups = {}
for label, rps, p50, p99, cpu, _, *woken in rows:
    kind, _, round_ = label.rpartition("-")
    if kind in ("robotsguard", "passthrough", "production"):
        by.setdefault(round_, {})[kind] = (float(rps), float(p50), float(p99), float(cpu))
        if woken:
            wakeups.setdefault(kind, []).append(tuple(map(float, woken)))
complete = {r: pair for r, pair in by.items() if len(pair) == 3}
def ratios(anchor):
    out = []
    for round_, pair in sorted(complete.items(), key=lambda item: int(item[0])):
        g, p = pair["robotsguard"], pair[anchor]
        out.append((round_, (g[0] / p[0], g[1] / p[1], g[2] / p[2], g[3] / p[3] if p[3] else 0.0)))
    return out
print("\nper side, median over rounds: req/s, p50 ms, p99 ms, cpu us/req")
for kind in ("robotsguard", "passthrough", "production"):
    cols = list(zip(*[pair[kind] for pair in complete.values()]))
    print(kind + "\t" + "\t".join(f"{statistics.median(c):.3f}" for c in cols))
if wakeups:
    print("\nwake-ups on the machine per request, median over rounds: task wake-ups, inter-processor interrupts")
    for kind in ("robotsguard", "passthrough", "production"):
        columns = list(zip(*wakeups.get(kind, [])))
        if columns:
            print(kind + "\t" + "\t".join(f"{statistics.median(c):.3f}" for c in columns))
for anchor, name in (("passthrough", "bare pass-through"), ("production", "production pass-through")):
    rows = ratios(anchor)
    print(f"\nrobotsguard / {name}: round\tthroughput_ratio\tp50_ratio\tp99_ratio\tcpu_ratio")
    for round_, r in rows:
        print(f"{round_}\t{r[0]:.3f}\t\t\t{r[1]:.3f}\t\t{r[2]:.3f}\t\t{r[3]:.3f}")
    med = [statistics.median(col) for col in zip(*(r for _, r in rows))]
    print(f"median\t{med[0]:.3f}\t\t\t{med[1]:.3f}\t\t{med[2]:.3f}\t\t{med[3]:.3f}")
print("targets (against the production pass-through): throughput ratio >= 0.95, p99 ratio <= 1.10")
rows = ratios("production")
med = [statistics.median(col) for col in zip(*(r for _, r in rows))]
print(f"production ratio: throughput {med[0]:.3f}, p99 {med[2]:.3f}, cpu {med[3]:.3f}")
PY
