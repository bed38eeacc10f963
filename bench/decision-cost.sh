#!/usr/bin/env bash
# What a decision costs (issue 54): the same wrk mix (bench/mix.lua: 7 browsers, 2 allowed
# crawlers, 1 refused crawler in 10, keep-alive) through a front nginx three ways:
#   alone     nginx -> origin
#   auth      nginx + auth_request to robotsguard's decision listener (deploy/proxies/nginx.conf's
#             recipe: /auth/nginx, and the named location that fetches a refusal's answer) -> origin
#   inline    nginx -> robotsguard's proxy listener -> origin
# The origin is a second nginx answering 200, as in bench/proxy-instructions.sh.
#
#   bench/decision-cost.sh                        # 3 rounds, 20 s of counted load per way
#   ROUNDS=1 DURATION=10 bench/decision-cost.sh   # quicker
#
# Instructions: the front nginx (one process, master_process off) and robotsguard (one worker
# thread, proxy and decision listeners in one process) run under valgrind's callgrind; for each
# way WARMUP seconds of load, both counters zeroed, DURATION seconds of load, both dumped, divided
# by the requests wrk completed. The origin's instructions are the same in every way and are not
# counted. robotsguard's work in the alone way (it serves nothing then) is its cost per second;
# the summary also gives each way's robotsguard instructions net of it. Wall clock: the same processes without valgrind, WALL_DURATION seconds of wrk per way
# and round, requests per second and wrk's mean latency (loopback, a small shared machine: treat
# them as rough; the instructions are the figures to compare).
# Needs valgrind, nginx and wrk (installed from Debian packages when missing). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20}
WARMUP=${WARMUP:-3}
ROUNDS=${ROUNDS:-3}
WALL_DURATION=${WALL_DURATION:-10}
CONNECTIONS=${CONNECTIONS:-4}
WAYS=(alone auth inline)

. bench/common.sh
need nginx nginx
need valgrind valgrind
need wrk wrk
proxy_binaries

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

ORIGIN_PORT=$(free_port)
mkdir -p "$work/origin"
write_origin_config "$work/origin" "$ORIGIN_PORT"
nginx -c "$work/origin/nginx.conf" -p "$work/origin" & pids+=($!)

# write_front DIR ALONE AUTH INLINE GUARD DECISION: the front nginx, one server per way.
write_front() {
  mkdir -p "$1"
  cat >"$1/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $1/nginx.pid;
error_log $1/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }
  upstream guard { server 127.0.0.1:$5; keepalive 32; }
  upstream robotsguard_decision { server 127.0.0.1:$6; keepalive 32; }
  proxy_http_version 1.1;
  # nginx inherits proxy_set_header only into a location that sets none of its own: each
  # location below that sets any says Connection "" again, or its upstream connections would
  # close after every request (and each way would pay a connection per request).
  proxy_set_header Connection "";

  server {
    listen 127.0.0.1:$2;
    location / { proxy_pass http://origin; }
  }

  server {
    listen 127.0.0.1:$3;
    location / {
      auth_request /.robotsguard/auth;
      auth_request_set \$robotsguard_answer \$upstream_http_x_robotsguard_answer;
      auth_request_set \$robotsguard_decision \$upstream_http_x_robotsguard_decision;
      proxy_set_header X-Robotsguard-Decision \$robotsguard_decision;
      error_page 403 = @robotsguard_refused;
      proxy_pass http://origin;
    }
    location = /.robotsguard/auth {
      internal;
      proxy_pass http://robotsguard_decision/auth/nginx;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header Host \$host;
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
    location @robotsguard_refused {
      rewrite ^ /auth/nginx/answer/\$robotsguard_answer break;
      proxy_pass http://robotsguard_decision;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
    }
  }

  server {
    listen 127.0.0.1:$4;
    location / {
      proxy_pass http://guard;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
}
CONF
}

# start_pair ROUND VALGRIND: robotsguard and the front nginx, with fresh ports; sets port_* and
# guard_pid, front_pid. VALGRIND=1 runs both under callgrind.
start_pair() {
  local dir=$work/$1 grind=() grind_front=()
  GUARD_PORT=$(free_port); ADMIN_PORT=$(free_port); DECISION_PORT=$(free_port)
  declare -gA port=([alone]=$(free_port) [auth]=$(free_port) [inline]=$(free_port))
  write_guard_config "$dir" "$GUARD_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" 1
  # The decision listener beside the proxy's; the front nginx calls it from loopback, which
  # trusted_callers admits by default.
  printf 'decision: {listen: ["127.0.0.1:%s"]}\n' "$DECISION_PORT" >>"$dir/conf/robotsguard.yaml"
  write_front "$dir/front" "${port[alone]}" "${port[auth]}" "${port[inline]}" "$GUARD_PORT" "$DECISION_PORT"
  if [ "$2" = 1 ]; then
    grind=(valgrind --tool=callgrind "--callgrind-out-file=$dir/guard.out")
    grind_front=(valgrind --tool=callgrind "--callgrind-out-file=$dir/front.out")
  fi
  RUST_LOG=${RUST_LOG:-warn} ${grind[@]+"${grind[@]}"} "$guard_bin" serve --config "$dir/conf/robotsguard.yaml" \
    >"$dir/guard.log" 2>&1 &
  guard_pid=$!; pids+=("$guard_pid")
  ${grind_front[@]+"${grind_front[@]}"} nginx -c "$dir/front/nginx.conf" -p "$dir/front" >"$dir/front.log" 2>&1 &
  front_pid=$!; pids+=("$front_pid")
  # Under valgrind start-up takes seconds: up to 60 s for each way's first answer through nginx.
  local way ok
  for way in "${WAYS[@]}"; do
    ok=0
    for _ in $(seq 1 300); do
      if [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.example' "http://127.0.0.1:${port[$way]}/")" = 200 ]; then
        ok=1; break
      fi
      sleep 0.2
    done
    [ "$ok" = 1 ] || { echo "decision-cost: $way never answered 200 (logs in $dir)" >&2; cat "$dir/guard.log" "$dir/front/nginx-error.log" >&2; exit 1; }
  done
}

stop_pair() {
  kill "$guard_pid" "$front_pid" 2>/dev/null || true
  wait "$guard_pid" "$front_pid" 2>/dev/null || true
}

# wrk_run SECONDS PORT: wrk's whole output.
wrk_run() { wrk -t1 -c"$CONNECTIONS" -d"${1}s" -s bench/mix.lua "http://127.0.0.1:$2/"; }
completed() { grep -oE '[0-9]+ requests in' | grep -oE '^[0-9]+'; }

echo "# wrk mix (bench/mix.lua), connections=$CONNECTIONS, robotsguard threads=1, nginx worker_processes=1"
for round in $(seq 1 "$ROUNDS"); do
  start_pair "r$round" 1
  dump=0
  for way in "${WAYS[@]}"; do
    wrk_run "$WARMUP" "${port[$way]}" >/dev/null
    callgrind_control --zero "$guard_pid" >/dev/null 2>&1
    callgrind_control --zero "$front_pid" >/dev/null 2>&1
    requests=$(wrk_run "$DURATION" "${port[$way]}" | completed)
    callgrind_control --dump "$guard_pid" >/dev/null 2>&1
    callgrind_control --dump "$front_pid" >/dev/null 2>&1
    dump=$((dump + 1))
    [ "${requests:-0}" -gt 0 ] || { echo "decision-cost: $way completed no requests" >&2; exit 1; }
    guard_ir=$(awk '/^summary:/ {print $2}' "$work/r$round/guard.out.$dump")
    front_ir=$(awk '/^summary:/ {print $2}' "$work/r$round/front.out.$dump")
    echo "ir $round $way $requests $front_ir $guard_ir" >>"$work/results"
    printf 'round %s\t%-6s\t%s requests\tnginx %.0f\trobotsguard %.0f instructions/request\n' "$round" "$way" "$requests" \
      "$(python3 -c "print($front_ir / $requests)")" "$(python3 -c "print($guard_ir / $requests)")"
  done
  stop_pair

  start_pair "w$round" 0
  for way in "${WAYS[@]}"; do
    wrk_run "$WARMUP" "${port[$way]}" >/dev/null
    out=$(wrk_run "$WALL_DURATION" "${port[$way]}")
    rate=$(sed -nE 's/^Requests\/sec: *([0-9.]+).*/\1/p' <<<"$out")
    latency=$(awk '/^ +Latency/ {print $2}' <<<"$out")
    non2xx=$(sed -nE 's/^ *Non-2xx or 3xx responses: *([0-9]+).*/\1/p' <<<"$out")
    echo "wall $round $way $(completed <<<"$out") $rate $latency ${non2xx:-0}" >>"$work/results"
    printf 'round %s\t%-6s\t%s requests/s\tmean latency %s\t%s non-2xx\n' "$round" "$way" "$rate" "$latency" "${non2xx:-0}"
  done
  stop_pair
done

python3 - "$work/results" <<'PY'
import statistics, sys
ir, wall = {}, {}
def micros(text):
    for unit, scale in (("us", 1), ("ms", 1e3), ("s", 1e6)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)
for line in open(sys.argv[1]):
    kind, round_, way, requests, *rest = line.split()
    if kind == "ir":
        front, guard = map(int, rest)
        ir.setdefault(way, []).append((front / int(requests), guard / int(requests), guard,
                                       int(requests), round_))
    else:
        rate, latency, non2xx = rest
        wall.setdefault(way, []).append((float(rate), micros(latency), int(non2xx) / int(requests)))
rounds = len(ir["alone"])
print(f"\nmedians of {rounds} round(s), per request:")
print(f"{'way':<8}{'nginx Ir':>12}{'robotsguard Ir':>16}{'total Ir':>12}{'req/s':>10}{'mean latency':>14}{'non-2xx':>9}")
med = {}
# robotsguard's work per second, whatever the load (timers, background tasks): what it did in the
# alone way, where it served nothing. Taken from the other ways' totals of the same round, the
# rest is per request.
idle = {round_: total for _, _, total, _, round_ in ir["alone"]}
net = {way: statistics.median((total - idle[round_]) / requests
                              for _, _, total, requests, round_ in ir[way])
       for way in ("auth", "inline")}
for way in ("alone", "auth", "inline"):
    front = statistics.median(f for f, *_ in ir[way])
    guard = statistics.median(g for _, g, *_ in ir[way])
    rate = statistics.median(r for r, _, _ in wall[way])
    latency = statistics.median(l for _, l, _ in wall[way])
    refused = statistics.median(n for _, _, n in wall[way])
    med[way] = (front, guard)
    print(f"{way:<8}{front:>12,.0f}{guard:>16,.0f}{front + guard:>12,.0f}{rate:>10,.0f}{latency:>11,.0f} us{refused:>9.0%}")
ratio = med["auth"][1] / med["inline"][1]
print(f"robotsguard's instructions, decision (auth) / inline: {ratio:.3f} (goal <= 0.25)")
print(f"net of its idle work (the alone way's): auth {net['auth']:,.0f}, inline {net['inline']:,.0f}, "
      f"ratio {net['auth'] / net['inline']:.3f}")
print(f"whole path (nginx + robotsguard), auth / inline: {sum(med['auth']) / sum(med['inline']):.3f}")
PY
