#!/usr/bin/env python3
"""Scale check: robotsguard with many origins whose robots.txt come from files of mixed sizes.

Measures, for each origin count: start-up time (spawn to /readyz 200), resident memory once
ready, config reload time (config rewritten to the moment the new snapshot is in force, seen
through the reload-timestamp metric), and failed requests while reloading (a client loop runs
throughout). Run from the repo root after `cargo build --release`:

    python3 bench/scale.py                 # 10, 1000 and 10000 origins
    python3 bench/scale.py 10000           # one size

Everything runs on 127.0.0.1; every loop has a deadline; processes are stopped at the end.
"""
import http.client
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

BINARY = os.path.join("target", "release", "robotsguard")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def robots_text(rng, index):
    """70 % small (~10 rules), 25 % medium (~200 rules), 5 % large (up to ~100 KB)."""
    roll = rng.random()
    rules = 10 if roll < 0.70 else 200 if roll < 0.95 else rng.randint(1500, 3000)
    lines = ["User-agent: *"]
    for r in range(rules):
        lines.append(f"Disallow: /section{index}/part{r}/" + ("*.php$" if r % 7 == 0 else ""))
    lines.append(f"User-agent: GPTBot\nDisallow: /")
    return "\n".join(lines) + "\n"


def write_site(directory, count, upstream, mode):
    rng = random.Random(count)
    robots_dir = os.path.join(directory, "robots")
    os.makedirs(robots_dir, exist_ok=True)
    config = [f"origins:"]
    for i in range(count):
        path = os.path.join(robots_dir, f"o{i}.txt")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(robots_text(rng, i))
        origin_mode = mode if i == 0 else "enforce"
        config.append(
            f"  - name: o{i}\n    hosts: [o{i}.example]\n    upstream: \"{upstream}\"\n"
            f"    mode: {origin_mode}\n    robots: {{source: file, path: robots/o{i}.txt, refresh: 1h}}"
        )
    return "\n".join(config) + "\n"


def get(port, path, host="o0.example", ua="Mozilla/5.0 (compatible; GPTBot/1.2)", timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", path, headers={"Host": host, "User-Agent": ua})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def metric(admin, name):
    _, body = get(admin, "/metrics", host=f"127.0.0.1:{admin}")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def origin_server():
    """A minimal keep-alive origin answering 200 to everything, on its own threads."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)

    def handle(conn):
        buffer = b""
        conn.settimeout(30)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    _, buffer = buffer.split(b"\r\n\r\n", 1)
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        except OSError:
            return

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener


def run(count, upstream):
    directory = tempfile.mkdtemp(prefix=f"rg-scale-{count}-")
    listen, admin = free_port(), free_port()
    header = f'listen: ["127.0.0.1:{listen}"]\nadmin: "127.0.0.1:{admin}"\nthreads: 2\nshutdown: {{grace: 1s}}\n'
    config_path = os.path.join(directory, "robotsguard.yaml")
    with open(config_path, "w") as f:
        f.write(header + write_site(directory, count, upstream, "enforce"))
    robots_bytes = sum(os.path.getsize(os.path.join(directory, "robots", n)) for n in os.listdir(os.path.join(directory, "robots")))
    started = time.monotonic()
    process = subprocess.Popen([BINARY, "serve", "--config", config_path], stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
    try:
        ready = None
        deadline = started + 120
        while time.monotonic() < deadline:
            try:
                status, _ = get(admin, "/readyz", host="admin", timeout=1)
                if status == 200:
                    ready = time.monotonic() - started
                    break
            except OSError:
                pass
            time.sleep(0.01)
        if ready is None:
            print(f"{count} origins: not ready within 120 s")
            return
        rss = rss_mib(process.pid)
        assert get(listen, "/x")[0] == 403, "GPTBot is blocked on o0"

        # Reload under traffic: a client keeps requesting while the config switches o0 to report.
        failures, requests, stop = [0], [0], threading.Event()

        def traffic():
            while not stop.is_set():
                try:
                    status, _ = get(listen, "/x", host=f"o{random.randrange(count)}.example", ua="Mozilla/5.0 Firefox/128.0")
                    requests[0] += 1
                    if status != 200:
                        failures[0] += 1
                except OSError:
                    failures[0] += 1

        clients = [threading.Thread(target=traffic, daemon=True) for _ in range(4)]
        for client in clients:
            client.start()
        time.sleep(0.5)
        before = metric(admin, "robotsguard_config_last_reload_timestamp_seconds") or 0.0
        changed = time.monotonic()
        with open(config_path + ".tmp", "w") as f:
            f.write(header + write_site(directory, count, upstream, "report"))
        os.replace(config_path + ".tmp", config_path)
        reload_seconds = None
        while time.monotonic() < changed + 60:
            if get(listen, "/x")[0] == 200:  # o0 in report mode: GPTBot passes
                reload_seconds = time.monotonic() - changed
                break
            time.sleep(0.005)
        time.sleep(0.5)
        stop.set()
        for client in clients:
            client.join(timeout=10)
        after = metric(admin, "robotsguard_config_last_reload_timestamp_seconds") or 0.0
        reload_text = f"{reload_seconds * 1000:.0f} ms" if reload_seconds is not None else "not seen"
        print(
            f"{count} origins ({robots_bytes / 1e6:.1f} MB of robots.txt): start-up {ready * 1000:.0f} ms, "
            f"RSS {rss:.0f} MiB, reload {reload_text} (file change to new policy, debounce included), "
            f"{requests[0]} requests during reload, {failures[0]} failed, reload timestamp advanced: {after > before}"
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(directory, ignore_errors=True)


def main():
    if not os.path.exists(BINARY):
        sys.exit(f"build first: cargo build --release ({BINARY} missing)")
    counts = [int(a) for a in sys.argv[1:]] or [10, 1000, 10000]
    listener = origin_server()
    upstream = "127.0.0.1:%d" % listener.getsockname()[1]
    for count in counts:
        run(count, upstream)
    listener.close()


if __name__ == "__main__":
    main()
