#!/usr/bin/env bash
# TLS and HTTP/2 benchmark: robotsguard against the bare and the production pingora pass-throughs
# (examples/passthrough.rs; production sets robotsguard's default timeouts), all terminating TLS
# with the same certificate (ECDSA P-256, made here by openssl) and offering h2 by ALPN, driven by
# h2load over HTTP/2 and over HTTP/1.1-in-TLS, rounds interleaved A B C A B C so drift hits all
# (with CONCURRENT=1, the three at once).
#
#   bench/proxy-tls-h2.sh                        # 9 rounds of 5 s per protocol
#   ROUNDS=15 DURATION=5 bench/proxy-tls-h2.sh
#   CONCURRENT=1 bench/proxy-tls-h2.sh          # the three proxies loaded at once, as in
#                                                # bench/proxy-compare.sh
#   BINARIES=/tmp/b bench/proxy-tls-h2.sh       # a build kept aside, as in bench/proxy-compare.sh
#
# Pinning as in bench/proxy-compare.sh: the proxy under test on PROXY_CPUS (default CPU 0, one
# worker thread), h2load and the origin (nginx, `return 200`) on the rest. Traffic: browsers
# (robotsguard decides and passes every request) from CLIENTS clients, each on one connection per
# round with STREAMS concurrent streams (h2) or one request at a time, keep-alive (h1), so the
# handshake cost is amortised as for a browser. CPU per request is the proxy's
# user + system time from /proc over the round, divided by the requests h2load completed.
# Needs h2load (Debian nghttp2-client), nginx and openssl. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-9}
DURATION=${DURATION:-5}
CLIENTS=${CLIENTS:-32}
STREAMS=${STREAMS:-8}
CONCURRENT=${CONCURRENT:-0}

. bench/common.sh
pin_cpus
need h2load nghttp2-client
need nginx nginx
need openssl openssl

proxy_binaries
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ORIGIN_PORT=$(free_port); GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); PASS_PORT=$(free_port); PROD_PORT=$(free_port)

write_tls_pair "$work"

write_origin_config "$work" "$ORIGIN_PORT"
"${pin_load[@]}" nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)

# The same origin, robots.txt and hooks as bench/proxy-compare.sh, on a TLS listener.
write_guard_config "$work" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" 1
listen_with_tls "$work/conf/robotsguard.yaml" "$GUARD_PORT" "$work"
RUST_LOG=warn "${pin_proxy[@]}" "$guard_bin" serve \
  --config "$work/conf/robotsguard.yaml" 2>"$work/guard.log" & guard=$!; pids+=($guard)
"${pin_proxy[@]}" "$pass_bin" "127.0.0.1:$PASS_PORT" \
  "127.0.0.1:$ORIGIN_PORT" 1 "$work/cert.pem" "$work/key.pem" 2>"$work/pass.log" & pass=$!; pids+=($pass)
"${pin_proxy[@]}" "$pass_bin" --production "127.0.0.1:$PROD_PORT" \
  "127.0.0.1:$ORIGIN_PORT" 1 "$work/cert.pem" "$work/key.pem" 2>"$work/prod.log" & prod=$!; pids+=($prod)

for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 &&
    curl -sk "https://127.0.0.1:$PASS_PORT/" >/dev/null 2>&1 &&
    curl -sk "https://127.0.0.1:$PROD_PORT/" >/dev/null 2>&1 && break
  sleep 0.1
done
# Sanity: both answer over h2, robotsguard enforces over h2.
for port in "$GUARD_PORT" "$PASS_PORT" "$PROD_PORT"; do
  got=$(curl -sk --http2 -o /dev/null -w '%{http_code} %{http_version}' -A "$BROWSER_UA" \
    --resolve "bench.example:$port:127.0.0.1" "https://bench.example:$port/articles/1")
  [ "$got" = "200 2" ] || { echo "sanity check failed on $port: $got" >&2; exit 1; }
done
got=$(curl -sk --http2 -o /dev/null -w '%{http_code}' -A 'CCBot/2.0 (https://commoncrawl.org/faq/)' \
  --resolve "bench.example:$GUARD_PORT:127.0.0.1" "https://bench.example:$GUARD_PORT/articles/1")
[ "$got" = 403 ] || { echo "sanity check failed: CCBot got $got over h2" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)

run() { # label port pid protocol
  local before after out protocol_args=(-m "$STREAMS")
  # HTTP/1.1 has no streams: one request at a time per connection (h2load would pipeline).
  [ "$4" = h1 ] && protocol_args=(--h1 -m 1)
  before=$(cpu_ticks "$3")
  out=$("${pin_load[@]}" h2load "${protocol_args[@]}" -c "$CLIENTS" -D "$DURATION" \
    -H "user-agent: $BROWSER_UA" -H ':authority: bench.example' "https://127.0.0.1:$2/articles/1" 2>&1)
  after=$(cpu_ticks "$3")
  python3 - "$1" "$before" "$after" "$TICKS" <<PY
import re, sys
label, before, after, ticks = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
out = """$out"""
rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out).group(1))
ok = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out).group(1)
value, unit = re.match(r"([\d.]+)(us|ms|s)", mean).groups()
mean_ms = float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
cpu_us = (after - before) / ticks / done * 1e6 if done else 0.0
print(f"{label}\t{rps:.0f}\t{mean_ms:.3f}\t{cpu_us:.2f}\t{done - ok}")
PY
}

echo "# rounds=$ROUNDS duration=${DURATION}s clients=$CLIENTS streams=$STREAMS proxy_cpus=$PROXY_CPUS concurrent=$CONCURRENT"
echo -e "run\treq/s\tmean_ms\tcpu_us/req\tnon2xx"
results="$work/results.tsv"
for protocol in h2 h1; do
  for round in $(seq 1 "$ROUNDS"); do
    run_three "$protocol-$round" "$protocol"
  done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
by = {}
for label, rps, mean, cpu, _ in rows:
    kind, protocol, round_ = label.split("-")
    by.setdefault((protocol, round_), {})[kind] = (float(rps), float(mean), float(cpu))
for protocol in ("h2", "h1"):
    for anchor, name in (("passthrough", "bare"), ("production", "production")):
        ratios = [
            (r["robotsguard"][0] / r[anchor][0], r["robotsguard"][1] / r[anchor][1],
             r["robotsguard"][2] / r[anchor][2] if r[anchor][2] else 0.0)
            for (p, _), r in sorted(by.items()) if p == protocol and len(r) == 3
        ]
        if ratios:
            med = lambda i: statistics.median(x[i] for x in ratios)
            print(f"{protocol} over TLS against the {name} pass-through, median of {len(ratios)} rounds: "
                  f"throughput ratio {med(0):.3f}, mean latency ratio {med(1):.3f}, CPU/request ratio {med(2):.3f}")
PY
