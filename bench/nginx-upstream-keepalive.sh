#!/usr/bin/env bash
# Does nginx keep its upstream connections alive? Counts the connections and requests two small
# keep-alive HTTP/1.1 upstreams (Python, counting what they accept) get from a front nginx under
# 3 s of wrk, for the two front locations bench/decision-cost.sh uses (an auth_request subrequest
# location, and a plain proxy_pass location that sets Host and X-Forwarded-For), each without and
# with its own `proxy_set_header Connection ""`. The http block sets `proxy_http_version 1.1` and
# `proxy_set_header Connection ""` in both cases: nginx does not inherit proxy_set_header into a
# location that sets any of its own.
#
#   bench/nginx-upstream-keepalive.sh
#
# Needs nginx and wrk. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
need nginx nginx
need wrk wrk

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/upstream.py" <<'PY'
import http.server, socketserver, sys, threading, collections, time
stats = collections.Counter()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        super().setup()
        stats["connections"] += 1
    def do_GET(self):
        stats["requests"] += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        pass  # nginx resets its idle connections when it stops
server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
time.sleep(float(sys.argv[2]))
print(f"{stats['connections']} connections for {stats['requests']} requests", flush=True)
server.shutdown()
PY

for location in auth plain; do
  for own in without with; do
    front=$(free_port) origin=$(free_port) upstream=$(free_port)
    keep=""
    [ "$own" = with ] && keep='proxy_set_header Connection "";'
    if [ "$location" = auth ]; then
      body="location / { auth_request /.auth; proxy_pass http://origin; }
    location = /.auth { internal; proxy_pass http://counted/auth/nginx; $keep proxy_pass_request_body off; proxy_set_header Content-Length \"\"; proxy_set_header Host \$host; }"
    else
      body="location / { proxy_pass http://counted; $keep proxy_set_header Host \$host; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; }"
    fi
    cat >"$work/nginx.conf" <<CONF
worker_processes 1; daemon off; master_process off; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  upstream origin { server 127.0.0.1:$origin; keepalive 32; }
  upstream counted { server 127.0.0.1:$upstream; keepalive 32; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server { listen 127.0.0.1:$front; $body }
}
CONF
    python3 "$work/upstream.py" "$origin" 6 >/dev/null & origin_pid=$!
    python3 "$work/upstream.py" "$upstream" 6 >"$work/counted" & counted_pid=$!
    sleep 0.5
    nginx -c "$work/nginx.conf" -p "$work" & nginx_pid=$!
    sleep 0.5
    wrk -t1 -c4 -d3s "http://127.0.0.1:$front/" >/dev/null
    kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true
    wait "$origin_pid" "$counted_pid"
    printf '%-6s location, %-7s its own Connection "": %s\n' "$location" "$own" "$(cat "$work/counted")"
  done
done
