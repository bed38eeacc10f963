#!/usr/bin/env python3
"""Store commands per request (issue 59): robotsguard with `state.backend: redis` against a real
redis-server, for each kind of client, read from the server's `INFO commandstats` before and
after a batch of requests; and the p50 latency of each kind with the store local and behind a
relay that holds every packet DELAY_MS each way (a store in another zone).

    bench/store-commands.py                          # 200 requests per kind, store local and 20 ms away
    REQUESTS=500 DELAY_MS=20 bench/store-commands.py
    ROBOTSGUARD_BIN=target/release/robotsguard bench/store-commands.py

The binary is target/debug/robotsguard unless ROBOTSGUARD_BIN names another (`cargo build` first):
command counts do not depend on the profile, latencies do. The background loop's commands (the
check each second, the mirrors, the reports every 10 s) are measured over an idle window as long as
the batch and subtracted, so a figure is what the requests cost; it is exact to about one command
per batch. Needs redis-server. Loopback only.
"""

import http.client
import http.server
import os
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REQUESTS = int(os.environ.get("REQUESTS", "200"))
DELAY_MS = float(os.environ.get("DELAY_MS", "20"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("ROBOTSGUARD_BIN", os.path.join(ROOT, "target", "debug", "robotsguard"))

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
EXAMPLEBOT = "Mozilla/5.0 (compatible; ExampleBot/1.0)"
SLOWBOT = "Mozilla/5.0 (compatible; SlowBot/1.0)"
TRUSTEDBOT = "Mozilla/5.0 (compatible; TrustedBot/1.0)"
TRUSTED_ADDRESS = "198.51.100.200"
# What the background loop sends whatever the requests: left out of the per-request figures
# besides the idle window's subtraction (a request never sends these).
BACKGROUND = {"mget", "zrangebyscore", "zremrangebyscore", "hgetall", "time", "get", "ping",
              "client", "hello", "select", "subscribe", "script", "expire", "info", "command"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and body in one write: written apart, the proxy's delayed ACK adds 40 ms.
    wbufsize = 1 << 16

    def do_GET(self):
        body = b"origin page\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def relay(listen_port, upstream_port, delay, stop):
    """Holds every chunk `delay` seconds in each direction."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(64)
    server.settimeout(0.2)

    def pump(src, dst):
        chunks = queue.Queue()

        def writer():
            while True:
                due, chunk = chunks.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not chunk:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                try:
                    dst.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=writer, daemon=True).start()
        while not stop.is_set():
            try:
                chunk = src.recv(65536)
            except OSError:
                chunk = b""
            chunks.put((time.monotonic() + delay, chunk))
            if not chunk:
                return

    accepted = 0
    while not stop.is_set() and accepted < 64:
        try:
            client, _ = server.accept()
        except socket.timeout:
            continue
        accepted += 1
        upstream = socket.create_connection(("127.0.0.1", upstream_port))
        for a, b in ((client, upstream), (upstream, client)):
            a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          check=True, timeout=10).stdout


def commandstats(port):
    calls = {}
    for line in redis_cli(port, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            fields = dict(f.split("=", 1) for f in rest.split(","))
            calls[name] = int(fields["calls"])
    return calls


def delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


def start_proxy(work, store_port, origin_port):
    port, admin = free_port(), free_port()
    os.makedirs(os.path.join(work, "ranges"), exist_ok=True)
    with open(os.path.join(work, "ranges", "trusted.json"), "w") as f:
        f.write(f'["{TRUSTED_ADDRESS}"]')
    config = os.path.join(work, "robotsguard.yaml")
    robots = ("User-agent: slowbot\\nCrawl-delay: 30\\nDisallow: /private\\n\\n"
              "User-agent: *\\nDisallow: /private\\n")
    with open(config, "w") as f:
        f.write(f"""listen: ["127.0.0.1:{port}"]
admin: "127.0.0.1:{admin}"
threads: 1
shutdown: {{grace: 1s}}
trusted_proxies: ["127.0.0.1/32"]
state:
  backend: redis
  redis: {{url: "redis://127.0.0.1:{store_port}/0", prefix: "bench:", timeout: 2s}}
defaults:
  crawl_delay: {{action: enforce, max: 60s}}
  offenders: {{action: ban, strikes: 2, window: 10m, ban: 1h}}
crawlers:
  extra:
    - {{name: SlowBot, tokens: [slowbot], pattern: SlowBot, category: ai-training}}
    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}
    - {{name: TrustedBot, tokens: [trustedbot], pattern: TrustedBot, category: search, verify: {{ips: ["file:{work}/ranges/trusted.json"]}}}}
origins:
  - name: bench
    hosts: [bench.example]
    upstream: "127.0.0.1:{origin_port}"
    robots: {{source: inline, text: "{robots}"}}
""")
    log = open(os.path.join(work, "log"), "w")
    proc = subprocess.Popen([BINARY, "serve", "--config", config], stdout=log, stderr=log,
                            env={**os.environ, "RUST_LOG": "warn"})
    for _ in range(300):
        try:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=1).read().decode()
            if "robotsguard_state_backend_up 1" in metrics and "trusted.json" in metrics:
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"robotsguard did not come up: {open(os.path.join(work, 'log')).read()[-2000:]}")


def run_kind(port, requests, want=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies = []
    for n, (agent, client, path) in enumerate(requests):
        started = time.perf_counter()
        conn.request("GET", path, headers={"Host": "bench.example", "User-Agent": agent,
                                           "X-Forwarded-For": client})
        answer = conn.getresponse()
        answer.read()
        latencies.append(time.perf_counter() - started)
        if want is not None and answer.status != want:
            sys.exit(f"request {n} ({agent}, {client}, {path}): {answer.status}, not {want}")
    conn.close()
    return latencies


def kinds(port):
    """(name, warm-up requests, measured requests, status)."""
    n = REQUESTS
    yield ("browser", [], [(BROWSER, "203.0.113.1", "/page" if i % 2 else "/private/x") for i in range(n)], 200)
    yield ("crawler, no Crawl-delay", [], [(EXAMPLEBOT, "203.0.113.2", f"/page/{i}") for i in range(n)], 200)
    yield ("verified crawler", [], [(TRUSTEDBOT, TRUSTED_ADDRESS, f"/page/{i}") for i in range(n)], 200)
    yield ("crawler under Crawl-delay, budget due", [],
           [(SLOWBOT, f"10.{i // 250}.{i % 250}.1", "/page") for i in range(n)], 200)
    yield ("crawler under Crawl-delay, over budget", [(SLOWBOT, "203.0.113.3", "/page")],
           [(SLOWBOT, "203.0.113.3", "/page")] * n, 429)
    yield ("banned client", [(EXAMPLEBOT, "203.0.113.4", "/private/a"), (EXAMPLEBOT, "203.0.113.4", "/private/b")],
           [(EXAMPLEBOT, "203.0.113.4", f"/page/{i}") for i in range(n)], 403)
    yield ("disallowed crawler request (strike)", [],
           [(EXAMPLEBOT, f"10.200.{i // 250}.{i % 250}", "/private/x") for i in range(n)], 403)


def measure(delay_ms, redis_port, origin_port):
    work = tempfile.mkdtemp(prefix="rg-store-commands-")
    stop = threading.Event()
    store_port = redis_port
    if delay_ms > 0:
        store_port = free_port()
        threading.Thread(target=relay, args=(store_port, redis_port, delay_ms / 1000, stop), daemon=True).start()
    redis_cli(redis_port, "FLUSHALL")
    proc, port = start_proxy(work, store_port, origin_port)
    rows = []
    try:
        for name, warm, measured, status in kinds(port):
            if warm:
                run_kind(port, warm)
                time.sleep(1.5)  # the ban mirrored, the background settled
            started = time.monotonic()
            before = commandstats(redis_port)
            latencies = run_kind(port, measured, status)
            took = time.monotonic() - started
            after = commandstats(redis_port)
            # The background over as long a window, requests idle.
            idle_before = commandstats(redis_port)
            time.sleep(took)
            idle_after = commandstats(redis_port)
            idle = delta(idle_before, idle_after)
            spent = delta(before, after)
            per_request = {}
            for command, calls in spent.items():
                if command in BACKGROUND:
                    continue
                calls -= idle.get(command, 0)
                if calls > 0:
                    per_request[command] = calls / len(measured)
            rows.append((name, per_request, statistics.median(latencies) * 1000))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        stop.set()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main():
    if not os.path.exists(BINARY):
        sys.exit(f"{BINARY} is missing: cargo build --bin robotsguard first (or set ROBOTSGUARD_BIN)")
    if not shutil.which("redis-server"):
        sys.exit("redis-server is missing (apt-get install redis-server)")
    redis_port = free_port()
    redis_dir = tempfile.mkdtemp(prefix="rg-store-commands-redis-")
    redis = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
                              "--appendonly", "no", "--dir", redis_dir],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    try:
        for _ in range(100):
            try:
                redis_cli(redis_port, "PING")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.05)
        local = measure(0, redis_port, origin.server_address[1])
        far = measure(DELAY_MS, redis_port, origin.server_address[1]) if DELAY_MS > 0 else None
    finally:
        origin.shutdown()
        redis.terminate()
        redis.wait(timeout=10)
        shutil.rmtree(redis_dir, ignore_errors=True)
    print(f"{REQUESTS} requests per kind, {os.path.relpath(BINARY, ROOT)}\n")
    header = "| client | store commands per request | p50, store local |"
    if far:
        header += f" p50, store {DELAY_MS:g} ms away each way |"
    print(header)
    print("| --- | --- | --- |" + (" --- |" if far else ""))
    for i, (name, per_request, p50) in enumerate(local):
        shown = ", ".join(f"{calls:.2f} {command.upper()}" for command, calls in sorted(per_request.items())) or "0"
        line = f"| {name} | {shown} | {p50:.2f} ms |"
        if far:
            far_commands = far[i][1]
            if far_commands != per_request and any(abs(far_commands.get(k, 0) - per_request.get(k, 0)) > 0.01
                                                   for k in set(far_commands) | set(per_request)):
                line += f" {far[i][2]:.2f} ms ({far_commands}) |"
            else:
                line += f" {far[i][2]:.2f} ms |"
        print(line)


if __name__ == "__main__":
    main()
