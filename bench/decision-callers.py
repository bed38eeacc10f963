#!/usr/bin/env python3
"""Memory with 2,000 concurrent keep-alive callers (issue 54): the decision listener against the
proxy listener, asked the same way.

For each listener a fresh robotsguard (one config with both listeners, one origin, a stock nginx
answering 200 behind it) is started, warmed with a few requests, and then --connections
keep-alive connections are opened to that listener (--window at a time, each sending its first
request as it opens) and kept open together. Each makes --requests requests in turns (at most
--window in flight at once, every connection waiting its turn with its connection open): to the decision listener nginx's `GET /auth/nginx` with `X-Original-URI`,
`X-Original-Method` and `Host`; to the proxy listener the same request itself. One request in ten
is from a crawler robots.txt refuses, the rest from a browser. robotsguard's RSS is read before
the connections open, after every request was answered (all connections still open and idle),
its peak (VmHWM) over the run, and after they closed.

    python3 bench/decision-callers.py --binary target/profiling/robotsguard
    python3 bench/decision-callers.py --connections 500 --requests 2 --binary target/debug/robotsguard

The binary is ${CARGO_TARGET_DIR:-target}/profiling/robotsguard unless --binary. The script raises
its own open-files limit for the connections (robotsguard raises its own). Everything listens on
127.0.0.1 only; every wait has a deadline; processes and sockets are closed at the end.
"""
import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
REFUSED = "Mozilla/5.0 (compatible; CCBot/2.0; +https://commoncrawl.org/faq/)"
HOST = "bench.example"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_of(pid, field):
    """A /proc/PID/status field in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def wait_for(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    sys.exit(f"decision-callers: {what} within {seconds} s")


def answered(port, request):
    """Whether one request on a fresh connection gets an answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(request)
            return s.recv(64).startswith(b"HTTP/1.1 ")
    except OSError:
        return False


def request_bytes(listener, index):
    agent = REFUSED if index % 10 == 9 else BROWSER
    path = "/private/page" if index % 10 == 9 else f"/page/{index % 100}"
    if listener == "decision":
        return (f"GET /auth/nginx HTTP/1.1\r\nHost: {HOST}\r\nX-Original-URI: {path}\r\n"
                f"X-Original-Method: GET\r\nX-Forwarded-Proto: http\r\nUser-Agent: {agent}\r\n"
                "\r\n").encode()
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {agent}\r\n\r\n".encode()


def read_response(sock, deadline):
    """Reads one response (Content-Length framed, as both listeners answer here); its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed before a response")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(length - len(body))
        if not chunk:
            raise ConnectionError("closed within a body")
        body += chunk
    return status


def write_configs(work, ports):
    os.makedirs(f"{work}/origin", exist_ok=True)
    with open(f"{work}/origin/nginx.conf", "w") as f:
        f.write(f"""worker_processes 1;
daemon off;
pid {work}/origin/nginx.pid;
error_log {work}/origin/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{ports['origin']}; location / {{ return 200 "origin page\\n"; }} }}
}}
""")
    os.makedirs(f"{work}/conf", exist_ok=True)
    with open(f"{work}/conf/robotsguard.yaml", "w") as f:
        f.write(f"""listen: ["127.0.0.1:{ports['proxy']}"]
admin: "127.0.0.1:{ports['admin']}"
decision: {{listen: ["127.0.0.1:{ports['decision']}"]}}
threads: 1
shutdown: {{grace: 1s}}
# One client address opens every connection: it may hold every place.
limits: {{max_connections: 8192, max_requests_in_flight: 1024, max_requests_in_flight_per_client: 1024}}
origins:
  - name: bench
    hosts: [{HOST}]
    upstream: "127.0.0.1:{ports['origin']}"
    robots: {{source: inline, text: "User-agent: CCBot\\nDisallow: /private\\n", serve: false}}
""")


def measure(binary, work, listener, args):
    ports = {name: free_port() for name in ("origin", "proxy", "admin", "decision")}
    write_configs(work, ports)
    origin = subprocess.Popen(["nginx", "-c", f"{work}/origin/nginx.conf", "-p", f"{work}/origin"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(f"{work}/{listener}.log", "w")
    guard = subprocess.Popen([binary, "serve", "--config", f"{work}/conf/robotsguard.yaml"],
                             stdout=log, stderr=log, env={**os.environ, "RUST_LOG": "warn"})
    sockets = []
    try:
        port = ports[listener]
        wait_for(lambda: answered(port, request_bytes(listener, 0)), 30, f"{listener} never answered")
        for index in range(20):
            answered(port, request_bytes(listener, index))
        time.sleep(1)
        before = status_of(guard.pid, "VmRSS")
        deadline = time.monotonic() + args.timeout
        statuses = {}
        for turn in range(args.requests):
            for start in range(0, args.connections, args.window):
                # Each connection sends its first request as it opens: a connection that sends
                # nothing within limits.header_timeout is closed, on either listener.
                while turn == 0 and len(sockets) < min(start + args.window, args.connections):
                    sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                batch = list(enumerate(sockets))[start:start + args.window]
                for index, sock in batch:
                    sock.sendall(request_bytes(listener, index + turn))
                for index, sock in batch:
                    status = read_response(sock, deadline)
                    statuses[status] = statuses.get(status, 0) + 1
        time.sleep(1)
        after = status_of(guard.pid, "VmRSS")
        peak = status_of(guard.pid, "VmHWM")
        for sock in sockets:
            sock.close()
        sockets = []
        time.sleep(2)
        closed = status_of(guard.pid, "VmRSS")
        return before, after, peak, closed, statuses
    finally:
        for sock in sockets:
            sock.close()
        for process in (guard, origin):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    parser.add_argument("--binary", default=f"{target}/profiling/robotsguard")
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=3, help="requests per connection")
    parser.add_argument("--window", type=int, default=250, help="requests in flight at most")
    parser.add_argument("--timeout", type=float, default=120, help="seconds for all requests")
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"{args.binary}: no such executable (build it, or --binary)")
    if not shutil.which("nginx"):
        sys.exit("nginx is needed for the origin (Debian's nginx package)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.connections + 256
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            sys.exit(f"the open-files limit ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    work = tempfile.mkdtemp(prefix="decision-callers-")
    try:
        print(f"# {args.connections} keep-alive connections x {args.requests} requests "
              f"(at most {args.window} in flight), 1 in 10 refused; RSS in MiB")
        print(f"{'listener':<10}{'before':>9}{'after':>9}{'peak':>9}{'closed':>9}"
              f"{'KiB/conn':>10}  statuses")
        for listener in ("decision", "proxy"):
            before, after, peak, closed, statuses = measure(args.binary, work, listener, args)
            per = (after - before) / args.connections
            shown = ", ".join(f"{count} x {status}" for status, count in sorted(statuses.items()))
            print(f"{listener:<10}{before / 1024:>9.1f}{after / 1024:>9.1f}{peak / 1024:>9.1f}"
                  f"{closed / 1024:>9.1f}{per:>10.1f}  {shown}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
