#!/usr/bin/env bash
# Where the proxy's CPU time goes, not its instructions: robotsguard against the production
# pass-through (examples/passthrough.rs --production) under the same wrk mix as
# bench/proxy-compare.sh, each sampled by `perf record` on the proxy's CPU with the software
# clock (virtual machines here expose no hardware counters, so cycles and cache misses cannot be
# counted; the clock shows where the time is spent). Rounds alternate A B A B.
#
#   bench/proxy-sampled.sh                  # 3 rounds of 5 s, 64 connections
#   ROUNDS=5 TOP=40 bench/proxy-sampled.sh
#   BINARIES=/tmp/b bench/proxy-sampled.sh  # a build kept aside, as in bench/proxy-compare.sh
#
# Prints, per request on the proxy's CPU (medians over rounds): busy and idle time, the kernel's,
# user-space functions both proxies run (pingora, tokio, the allocator, libc), and functions only
# one runs; then the symbols whose time differs most. docs/BENCHMARKS.md ("Sampled, …") reads these.
# Needs perf, wrk and nginx (installed from Debian packages when missing). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
TOP=${TOP:-25}

. bench/common.sh
pin_cpus
need wrk wrk
need nginx nginx
need perf linux-perf
if [ "$PROXY_CPUS" = all ]; then
  echo "proxy-sampled.sh: needs two CPUs (the proxy's is sampled alone)" >&2
  exit 1
fi

proxy_binaries
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ORIGIN_PORT=$(free_port); GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); PROD_PORT=$(free_port)
write_origin_config "$work" "$ORIGIN_PORT"
"${pin_load[@]}" nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)
write_guard_config "$work" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" 1
RUST_LOG=warn "${pin_proxy[@]}" "$guard_bin" serve --config "$work/conf/robotsguard.yaml" 2>"$work/guard.log" & pids+=($!)
"${pin_proxy[@]}" "$pass_bin" --production "127.0.0.1:$PROD_PORT" "127.0.0.1:$ORIGIN_PORT" 1 2>"$work/prod.log" & pids+=($!)

for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && curl -s "http://127.0.0.1:$PROD_PORT/" >/dev/null 2>&1 && break
  sleep 0.1
done

sample() { # label port round
  local data="$work/$1-$3.data" requests
  "${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d2s -s bench/mix.lua "http://127.0.0.1:$2/" >/dev/null
  # The whole proxy CPU, kernel included: the proxy's sends wake the other CPU from there.
  perf record -q -e cpu-clock -F 4999 -a -C "$PROXY_CPUS" -o "$data" -- sleep "$DURATION" >/dev/null 2>&1 &
  local recorder=$!
  requests=$("${pin_load[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s bench/mix.lua "http://127.0.0.1:$2/" |
    grep -oE '[0-9]+ requests in' | grep -oE '^[0-9]+')
  wait "$recorder" || true
  # One line per (task, binary, symbol) with its sampled time in nanoseconds, tab-separated.
  perf report -i "$data" --no-children --sort comm,dso,sym -F period,comm,dso,sym -g none --stdio \
    -t "$(printf '\t')" 2>/dev/null |
    grep -v '^#' | grep -v '^$' >"$work/$1-$3.syms" || true
  echo "$1 $3 ${requests:-0}" >>"$work/requests"
  echo "sampled $1 round $3: ${requests:-0} requests" >&2
}

echo "# rounds=$ROUNDS duration=${DURATION}s connections=$CONNECTIONS proxy_cpus=$PROXY_CPUS load_cpus=$LOAD_CPUS, perf cpu-clock at 4999 Hz"
for round in $(seq 1 "$ROUNDS"); do
  sample robotsguard "$GUARD_PORT" "$round"
  sample production "$PROD_PORT" "$round"
done

python3 - "$work" "$TOP" <<'PY'
import collections, statistics, sys
work, top = sys.argv[1], int(sys.argv[2])

def load(label, round_, requests):
    """Microseconds per request by (kind, binary, symbol): kind is `idle` for the CPU's idle task,
    else `kernel` or `user`; the two proxies' binaries count as one."""
    times = collections.Counter()
    for text in open(f"{work}/{label}-{round_}.syms"):
        fields = [field.strip() for field in text.rstrip("\n").split("\t")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        period, task, dso, symbol = fields
        marker, _, symbol = symbol.partition(" ")
        if dso in ("robotsguard", "passthrough"):
            dso = "proxy"
        kind = "idle" if task == "swapper" else "kernel" if marker == "[k]" else "user"
        times[(kind, dso, symbol)] += int(period) / 1e3 / requests
    return times

runs = collections.defaultdict(list)
for text in open(f"{work}/requests"):
    label, round_, requests = text.split()
    if int(requests) > 0:
        runs[label].append(load(label, round_, int(requests)))
guard, production = runs["robotsguard"], runs["production"]
if not guard or not production:
    sys.exit("proxy-sampled.sh: a side completed no request")

def median_of(samples, keep):
    return statistics.median(sum(v for k, v in s.items() if keep(k)) for s in samples)

guard_symbols = set().union(*guard)
production_symbols = set().union(*production)
both = guard_symbols & production_symbols
print("\nper request on the proxy's CPU, median over rounds (µs): robotsguard, production")
for name, keep in (
    ("busy (all but idle)", lambda k: k[0] != "idle"),
    ("idle", lambda k: k[0] == "idle"),
    ("kernel, for busy tasks", lambda k: k[0] == "kernel"),
    ("user space, run by both", lambda k: k[0] == "user" and k in both),
    ("user space, robotsguard only", lambda k: k[0] == "user" and k not in production_symbols),
    ("user space, production only", lambda k: k[0] == "user" and k not in guard_symbols),
):
    print(f"{name:30}\t{median_of(guard, keep):8.2f}\t{median_of(production, keep):8.2f}")

def mean_by_symbol(samples):
    total = collections.Counter()
    for s in samples:
        total.update({k: v / len(samples) for k, v in s.items()})
    return total

g, p = mean_by_symbol(guard), mean_by_symbol(production)
print(f"\nthe {top} symbols whose time differs most (µs per request, mean over rounds): difference, robotsguard, production")
for key in sorted(set(g) | set(p), key=lambda k: -abs(g[k] - p[k]))[:top]:
    kind, dso, symbol = key
    print(f"{g[key] - p[key]:+7.3f}\t{g[key]:7.3f}\t{p[key]:7.3f}\t{kind} {symbol[:110]}")
PY
