#!/usr/bin/env python3
"""A flood of unique disallowed paths against the reports' bound.

Starts robotsguard (the binary given) in front of a small origin, sends REQUESTS requests of a
crawler to distinct paths its robots.txt disallows (from many addresses, through the trusted
loopback proxy), and prints the process's RSS before and after, and the size of the violations
report, which must stay within `reports.top` rows. docs/BENCHMARKS.md ("Reports") records a run.

Usage: bench/reports-flood.py PATH_TO_ROBOTSGUARD [REQUESTS] [TOP]
"""

import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    binary = sys.argv[1]
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp()
    listen, admin = free_port(), free_port()
    config = f"""listen: ["127.0.0.1:{listen}"]
admin: "127.0.0.1:{admin}"
threads: 2
trusted_proxies: ["127.0.0.1/32"]
reports: {{top: {top}}}
origins:
  - name: shop
    hosts: [shop.example]
    upstream: "127.0.0.1:{origin.server_address[1]}"
    robots: {{source: inline, serve: false, text: "User-agent: *\\nDisallow: /private\\n"}}
"""
    path = os.path.join(work, "robotsguard.yaml")
    with open(path, "w") as f:
        f.write(config)
    proxy = subprocess.Popen([binary, "serve", "--config", path],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        # Warm up: the same mix on a few paths, so that the baseline has every table in use.
        conn = http.client.HTTPConnection("127.0.0.1", listen)

        def send(i):
            conn.request("GET", f"/private/warm/{i % 50}", headers={
                "Host": "shop.example", "User-Agent": "GPTBot/1.2",
                "X-Forwarded-For": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"})
            conn.getresponse().read()

        for i in range(2000):
            send(i)
        before = rss_kib(proxy.pid)
        started = time.time()
        for i in range(requests):
            conn.request("GET", f"/private/{i}/{'x' * 200}", headers={
                "Host": "shop.example", "User-Agent": "GPTBot/1.2",
                "X-Forwarded-For": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"})
            response = conn.getresponse()
            response.read()
            assert response.status == 403, response.status
        elapsed = time.time() - started
        after = rss_kib(proxy.pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/reports/violations?origin=shop") as r:
            report = json.load(r)
        rows = len(report["violations"])
        print(f"requests={requests} unique_paths={requests} top={top} seconds={elapsed:.1f}")
        print(f"rss_before_kib={before} rss_after_kib={after} growth_mib={(after - before) / 1024:.1f}")
        print(f"violation_rows={rows} error_bound={report.get('error_bound', 0)}")
        assert rows <= top, rows
    finally:
        proxy.terminate()
        try:
            proxy.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait()
        origin.shutdown()


if __name__ == "__main__":
    main()
