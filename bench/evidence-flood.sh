#!/usr/bin/env bash
# Browser latency under a flood of robots.txt violations, with and without evidence records.
#
# Starts nginx as the origin and robotsguard (the binary given) in front of it twice, with
# `evidence` off and on (the same config otherwise), and in each runs two wrk at once for SECONDS:
# a flood of GPTBot requests to distinct disallowed paths from 62,500 addresses (each a violation:
# a 403 and, with evidence on, a signed record), and browsers asking for an allowed page, whose
# latency percentiles are reported. Prints the violations sent, the records written and dropped,
# the browsers' p50/p99 and the process's RSS. docs/BENCHMARKS.md ("Evidence") records a run.
#
# Usage: bench/evidence-flood.sh PATH_TO_ROBOTSGUARD [SECONDS]
set -euo pipefail
binary=$(realpath "$1")
seconds=${2:-40}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

origin_port=$(free_port)
cat > "$work/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 1024; }
http {
    access_log off;
    server { listen 127.0.0.1:$origin_port; location / { return 200 "ok\n"; } }
}
EOF
nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
openssl genpkey -algorithm ed25519 -out "$work/key.pem" 2>/dev/null

cat > "$work/flood.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  local ip = "10." .. (math.floor(n / 62500) % 250) .. "." .. (math.floor(n / 250) % 250) .. "." .. (n % 250 + 1)
  return wrk.format("GET", "/private/" .. n, {
    ["Host"] = "shop.example",
    ["User-Agent"] = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    ["X-Forwarded-For"] = ip,
  })
end
EOF

metric() { # admin name labels
    curl -s "http://$1/metrics" | awk -v name="$2" -v labels="$3" '$1 == name labels { print $2 }'
}

run() { # evidence: on|off
    local listen admin evidence
    listen=$(free_port)
    admin=$(free_port)
    evidence=""
    if [ "$1" = on ]; then
        evidence="evidence: {enabled: true, key_file: $work/key.pem, dir: $work/evidence-$$, replica: bench}"
    fi
    cat > "$work/robotsguard.yaml" <<EOF
listen: ["127.0.0.1:$listen"]
admin: "127.0.0.1:$admin"
threads: 2
trusted_proxies: ["127.0.0.1/32"]
$evidence
origins:
  - name: shop
    hosts: [shop.example]
    upstream: "127.0.0.1:$origin_port"
    robots: {source: inline, text: "User-agent: GPTBot\nDisallow: /private\n"}
    offenders: {action: off}
EOF
    "$binary" serve --config "$work/robotsguard.yaml" 2>"$work/serve-$1.log" &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break
        sleep 0.1
    done
    local rss_before
    rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    wrk -t1 -c8 -d"${seconds}s" -s "$work/flood.lua" "http://127.0.0.1:$listen" > "$work/flood-$1.txt" &
    local flood=$!
    wrk -t1 -c4 -d"${seconds}s" --latency -H "Host: shop.example" \
        -H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0" \
        "http://127.0.0.1:$listen/page" > "$work/browsers-$1.txt"
    wait "$flood"
    sleep 2
    local sent p50 p99 written dropped rss_after
    sent=$(awk '/requests in/ {print $1}' "$work/flood-$1.txt")
    p50=$(awk '$1 == "50%" {print $2}' "$work/browsers-$1.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$work/browsers-$1.txt")
    browsers=$(awk '/requests in/ {print $1}' "$work/browsers-$1.txt")
    written=$(metric "127.0.0.1:$admin" robotsguard_evidence_records_total '{result="written"}')
    dropped=$(metric "127.0.0.1:$admin" robotsguard_evidence_records_total '{result="dropped"}')
    rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s → %s MiB |\n' "$1" "$sent" "$written" "$dropped" \
        "$browsers" "$p50" "$p99" "$((rss_before / 1024))" "$((rss_after / 1024))"
    if [ "$1" = on ]; then
        du -sh "$work/evidence-$$" | awk '{print "evidence on disk: " $1}' >&2
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

echo "| evidence | violations sent | records written | dropped | browser requests | browser p50 | browser p99 | RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
run off
run on
