#!/usr/bin/env bash
# Browser latency under a flood of robots.txt violations, with and without evidence records.
#
# Starts nginx as the origin and robotsguard (the binary given) in front of it, once per round,
# alternating `evidence` off and on (the same config otherwise; off first), so that the machine's
# background load falls on both alike. In each round two wrk run at once: a flood of GPTBot
# requests to distinct disallowed paths from 62,500 addresses (each a violation: a 403 and, with
# evidence on, a signed record), stopped once robotsguard has refused VIOLATIONS of them, and
# browsers asking for an allowed page for as long, whose latency percentiles are reported.
#
# The rounds with evidence on share one directory with `max_file_size: 16MiB` and
# `retention: 20s`: files rotate during a round, and a round's files are pruned when the next
# on-round starts (pruning runs at start and hourly). After each on-round the whole directory is
# exported through `GET /evidence` and the process's RSS read before and after: the export is
# streamed, so it must not grow with the directory.
#
# Prints a row per round (violations sent, records written and dropped, browser requests, p50,
# p99, RSS at start → peak → end, load average), the export's size and RSS, the files rotated and
# pruned, and the medians of the browsers' p50 off and on. docs/BENCHMARKS.md ("Evidence") records
# a run.
#
# Usage: bench/evidence-flood.sh PATH_TO_ROBOTSGUARD [VIOLATIONS] [ROUNDS_EACH]
#        (defaults: 100000 violations, 3 rounds off and 3 on)
set -euo pipefail
binary=$(realpath "$1")
violations=${2:-100000}
rounds=${3:-3}
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
evidence_dir="$work/evidence"
mkdir -p "$evidence_dir"

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

metric() { # admin name labels: the sum of the samples of `name` whose labels contain `labels`
    curl -s "http://$1/metrics" | awk -v name="$2" -v labels="$3" '
        index($1, name "{") == 1 && index($1, labels) > 0 { sum += $2 }
        END { printf "%d\n", sum }'
}

status_kib() { awk -v key="$2:" '$1 == key {print $2}' "/proc/$1/status"; }

records_on_disk() { cat "$evidence_dir"/*.jsonl 2>/dev/null | wc -l; }

files_on_disk() { find "$evidence_dir" -maxdepth 1 -name '*.jsonl' 2>/dev/null | wc -l; }

p50s_off=()
p50s_on=()
rotated=0

run() { # evidence: on|off
    local listen admin evidence
    listen=$(free_port)
    admin=$(free_port)
    evidence=""
    if [ "$1" = on ]; then
        evidence="evidence: {enabled: true, key_file: $work/key.pem, dir: $evidence_dir, replica: bench, max_file_size: 16MiB, retention: 20s}"
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
    local files_before
    files_before=$(files_on_disk)
    "$binary" serve --config "$work/robotsguard.yaml" 2>"$work/serve-$1.log" &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break
        sleep 0.1
    done
    local files_after_start pruned=0
    if [ "$1" = on ]; then
        # The writer prunes as it starts: give it a moment.
        sleep 1
        files_after_start=$(files_on_disk)
        pruned=$((files_before - files_after_start))
    fi
    local rss_before load_before
    rss_before=$(status_kib "$pid" VmRSS)
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    wrk -t1 -c4 -d1h --latency -H "Host: shop.example" \
        -H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0" \
        "http://127.0.0.1:$listen/page" > "$work/browsers-$1.txt" &
    local browsers_pid=$!
    pids+=("$browsers_pid")
    wrk -t1 -c8 -d1h -s "$work/flood.lua" "http://127.0.0.1:$listen" > "$work/flood-$1.txt" &
    local flood_pid=$!
    pids+=("$flood_pid")
    local started=$SECONDS refused=0
    # Bounded: at most 20 minutes a round.
    for _ in $(seq 6000); do
        sleep 0.2
        refused=$(metric "127.0.0.1:$admin" robotsguard_requests_total 'decision="blocked"')
        [ "$refused" -ge "$violations" ] && break
        [ $((SECONDS - started)) -ge 1200 ] && break
    done
    # wrk prints its report on SIGINT.
    kill -INT "$flood_pid" "$browsers_pid"
    wait "$flood_pid" "$browsers_pid" || true
    local took=$((SECONDS - started))
    local load_after
    load_after=$(cut -d' ' -f1 /proc/loadavg)
    sleep 2
    local sent p50 p99 browsers written dropped rss_peak rss_after
    sent=$(metric "127.0.0.1:$admin" robotsguard_requests_total 'decision="blocked"')
    p50=$(awk '$1 == "50%" {print $2}' "$work/browsers-$1.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$work/browsers-$1.txt")
    browsers=$(awk '/requests in/ {print $1}' "$work/browsers-$1.txt")
    written=$(metric "127.0.0.1:$admin" robotsguard_evidence_records_total 'result="written"')
    dropped=$(metric "127.0.0.1:$admin" robotsguard_evidence_records_total 'result="dropped"')
    rss_peak=$(status_kib "$pid" VmHWM)
    rss_after=$(status_kib "$pid" VmRSS)
    printf '| %s | %s | %s s | %s | %s | %s | %s | %s | %s → %s → %s MiB | %s → %s |\n' "$1" "$sent" \
        "$took" "$written" "$dropped" "$browsers" "$p50" "$p99" "$((rss_before / 1024))" \
        "$((rss_peak / 1024))" "$((rss_after / 1024))" "$load_before" "$load_after"
    if [ "$1" = on ]; then
        p50s_on+=("$p50")
        local files_end
        files_end=$(files_on_disk)
        rotated=$((rotated + files_end - files_after_start))
        # The whole directory through the streamed export, and what it cost the process.
        local export_bytes export_lines rss_export_before rss_export_after
        rss_export_before=$(status_kib "$pid" VmRSS)
        export_bytes=$(curl -s "http://127.0.0.1:$admin/evidence" | tee >(wc -l > "$work/export-lines") | wc -c)
        sleep 0.5
        export_lines=$(cat "$work/export-lines")
        rss_export_after=$(status_kib "$pid" VmRSS)
        printf 'on-round files: %s at start, %s pruned at start, %s at end; on disk: %s records, %s; export: %s records, %s MiB, RSS %s → %s MiB\n' \
            "$files_before" "$pruned" "$files_end" "$(records_on_disk)" \
            "$(du -sh "$evidence_dir" | cut -f1)" "$export_lines" "$((export_bytes / 1048576))" \
            "$((rss_export_before / 1024))" "$((rss_export_after / 1024))" >> "$work/notes"
    else
        p50s_off+=("$p50")
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

median() { printf '%s\n' "$@" | python3 -c '
import re, statistics, sys
def ms(text):
    value, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", text.strip()).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
print(f"{statistics.median(ms(line) for line in sys.stdin if line.strip()):.3f}")'; }

echo "| evidence | violations sent | took | records written | dropped | browser requests | browser p50 | browser p99 | RSS start → peak → end | load average |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for _ in $(seq "$rounds"); do
    run off
    run on
done
cat "$work/notes"
off=$(median "${p50s_off[@]}")
on=$(median "${p50s_on[@]}")
echo "record files begun during the on-rounds: $rotated"
python3 -c "print(f'browser p50 median: off {$off} ms, on {$on} ms: {($on / $off - 1) * 100:+.1f} %')"
