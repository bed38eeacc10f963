#!/usr/bin/env python3
"""Hostile connections: how robotsguard survives clients that try to exhaust its memory and sockets.

Two kinds of attacker, opened together at the start and kept open for --duration seconds:

  trickle  sends a request line, Host and ~1 MB of header lines as fast as the proxy reads them,
           never the blank line that ends the header, then one more byte every --trickle-interval
           seconds so that a plain idle timeout does not see it as idle;
  idle     sends one valid request, reads the answer, then stays silent on the keep-alive.

Every second the proxy's RSS and open fds are sampled and one legitimate browser request
(`GET /ok`, fresh connection, 5 s timeout) is timed. Run from anywhere after `cargo build --release`:

    python3 bench/hostile-connections.py                                  # 2000 connections, 120 s
    python3 bench/hostile-connections.py --connections 300 --duration 30
    python3 bench/hostile-connections.py --limits 'header_timeout: 10s, max_header_bytes: 32KiB'

The binary is ${CARGO_TARGET_DIR:-target}/release/robotsguard (or --binary). --limits is written
verbatim as `limits: {TEXT}` in the config; a binary that does not know `limits` refuses to start.
The proxy inherits this script's raised RLIMIT_NOFILE. Everything listens on 127.0.0.1 only;
every loop has a deadline; processes and sockets are closed at the end, also on Ctrl-C.
"""
import argparse
import collections
import errno
import http.client
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # importing scale.py must not leave bench/__pycache__ behind
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import free_port, origin_server, rss_mib  # noqa: E402  the scale check's origin and helpers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})")
KEEP_RECEIVED = 64 * 1024  # bytes of answers kept per connection, enough to find the status lines


def trickle_payload(total):
    """Request line, Host, then header lines of ~4 KB up to `total` bytes, ending inside a header
    value that the trickled bytes extend. pingora refuses a header of more than 256 lines
    outright, so the lines are long: the attack stays a partial, still-valid header that a
    proxy without a size or time limit keeps buffering (pingora's own cap is 1 MiB - 1)."""
    out = bytearray(b"GET / HTTP/1.1\r\nHost: shop.example\r\n")
    i = 0
    while len(out) < total:
        out += b"X-Pad-%d: %s\r\n" % (i, b"v" * 4096)
        i += 1
    return bytes(out + b"X-Slow: ")


class Conn:
    __slots__ = ("kind", "sock", "opened", "state", "offset", "next_byte", "received", "closed_after", "close_reason")

    def __init__(self, kind, sock):
        self.kind, self.sock, self.opened = kind, sock, time.monotonic()
        self.state = "connecting"  # -> sending (trickle) | waiting (idle) -> trickling | idle -> closed
        self.offset, self.next_byte, self.received = 0, 0.0, b""
        self.closed_after = self.close_reason = None


class Attack:
    """All hostile sockets, driven non-blocking from one selector so no socket can stall the rest."""

    def __init__(self, port, payload, args):
        self.port, self.payload, self.args = port, memoryview(payload), args
        self.sel = selectors.DefaultSelector()
        self.conns, self.reopen, self.local_errors = [], [], collections.Counter()
        self.request = f"GET / HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: {BROWSER}\r\n\r\n".encode()

    def open(self, kind):
        try:
            sock = socket.socket()
        except OSError as e:  # EMFILE here means our own limit, not the proxy's
            self.local_errors[errno.errorcode.get(e.errno, str(e))] += 1
            return
        sock.setblocking(False)
        conn = Conn(kind, sock)
        self.conns.append(conn)
        err = sock.connect_ex(("127.0.0.1", self.port))
        if err not in (0, errno.EINPROGRESS):
            self.close(conn, "connect_failed")
            return
        self.sel.register(sock, selectors.EVENT_WRITE, conn)

    def close(self, conn, reason):
        if conn.state == "closed":
            return
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        conn.state, conn.close_reason = "closed", reason
        conn.closed_after = time.monotonic() - conn.opened
        if reason == "proxy" and self.args.reopen:
            self.reopen.append((time.monotonic() + 0.1, conn.kind))  # small delay: no busy reconnect loop

    def read(self, conn):
        """Reads what the proxy sent; an end of stream or a reset means the proxy closed it."""
        while conn.state != "closed":
            try:
                data = conn.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close(conn, "proxy")
                return
            if len(conn.received) < KEEP_RECEIVED:
                conn.received += data[: KEEP_RECEIVED - len(conn.received)]

    def send(self, conn, data):
        """Non-blocking send; on a reset, first read any answer (a 431 or 408) still queued."""
        try:
            return conn.sock.send(data)
        except BlockingIOError:
            return 0
        except OSError:
            self.read(conn)
            self.close(conn, "proxy")
            return 0

    def on_event(self, conn, mask):
        if conn.state == "connecting":
            if conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.close(conn, "connect_failed")
                return
            if conn.kind == "trickle":
                conn.state = "sending"
                self.sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            else:  # a ~150-byte request always fits an empty send buffer
                conn.state = "waiting"
                self.send(conn, self.request)
                if conn.state != "closed":
                    self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
            return
        if mask & selectors.EVENT_READ:
            self.read(conn)
            if conn.state == "waiting" and b"\r\n\r\n" in conn.received:
                conn.state = "idle"
        if conn.state == "sending" and mask & selectors.EVENT_WRITE:
            conn.offset += self.send(conn, self.payload[conn.offset : conn.offset + 256 * 1024])
            if conn.state == "sending" and conn.offset == len(self.payload):
                conn.state, conn.next_byte = "trickling", time.monotonic() + self.args.trickle_interval
                self.sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def tick(self, now):
        """Twice a second: one more byte on each trickling connection that is due, and reopens."""
        for conn in self.conns:
            if conn.state == "trickling" and conn.next_byte <= now:
                self.send(conn, b"v")
                conn.next_byte = now + self.args.trickle_interval
        due = [kind for at, kind in self.reopen if at <= now]
        self.reopen = [(at, kind) for at, kind in self.reopen if at > now]
        for kind in due:
            self.open(kind)

    def run(self, deadline, proxy):
        next_tick = 0.0
        while time.monotonic() < deadline and proxy.poll() is None:
            for key, mask in self.sel.select(timeout=max(0.0, min(0.5, deadline - time.monotonic()))):
                self.on_event(key.data, mask)
            now = time.monotonic()
            if now >= next_tick:
                self.tick(now)
                next_tick = now + 0.5

    def close_all(self):
        for conn in self.conns:
            if conn.state != "closed":
                conn.sock.close()
        self.sel.close()


def sample(pid):
    """(RSS MiB, open fds) of the proxy; (None, None) once it is gone."""
    try:
        return rss_mib(pid), len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None, None


def legit_request(port, results):
    """One browser request on a fresh connection; 5 s allowed per socket operation."""
    started = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/ok", headers={"Host": "shop.example", "User-Agent": BROWSER})
            response = conn.getresponse()
            response.read()
            results.append((response.status, time.monotonic() - started))
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as e:
        results.append((type(e).__name__, time.monotonic() - started))


def monitor(pid, port, stop, samples, legit):
    """Once a second: RSS, fds, and one legitimate request on a thread of its own (it may take 5 s)."""
    workers, next_at = [], time.monotonic()
    while not stop.is_set():
        samples.append(sample(pid))
        worker = threading.Thread(target=legit_request, args=(port, legit), daemon=True)
        worker.start()
        workers.append(worker)
        next_at += 1.0
        stop.wait(max(0.0, next_at - time.monotonic()))
    for worker in workers:
        worker.join(timeout=6)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))] if values else None


def write_config(directory, port, admin, upstream, limits):
    limits_line = f"limits: {{{limits}}}\n" if limits else ""
    path = os.path.join(directory, "robotsguard.yaml")
    with open(path, "w") as f:
        f.write(
            f'listen: ["127.0.0.1:{port}"]\nadmin: "127.0.0.1:{admin}"\nthreads: 2\nshutdown: {{grace: 1s}}\n'
            f"{limits_line}origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"{upstream}\"\n"
            '    robots: {source: inline, text: "User-agent: GPTBot\\nDisallow: /private\\n"}\n'
        )
    return path


def start_proxy(binary, config, log_path, admin):
    log = open(log_path, "wb")
    # A session of its own: Ctrl-C reaches this script only, which then stops the proxy itself.
    proxy = subprocess.Popen([binary, "serve", "--config", config], stdout=log, stderr=log,
                             env={**os.environ, "RUST_LOG": "warn"}, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proxy.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=1)
            conn.request("GET", "/readyz", headers={"Host": "admin"})
            ready = conn.getresponse().status == 200
            conn.close()
            if ready:
                return proxy
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    with open(log_path, errors="replace") as f:
        tail = f.read()[-2000:]
    stop_process(proxy)
    sys.exit(f"robotsguard did not become ready (exit code {proxy.poll()}); its log:\n{tail}")


def stop_process(proxy):
    proxy.terminate()  # a no-op once it has exited
    try:
        proxy.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy.kill()
        proxy.wait(timeout=10)


def summarise(attack, samples, legit, baseline, proxy):
    rss_values = [r for r, _ in samples if r is not None]
    fd_values = [f for _, f in samples if f is not None]
    hostile = {}
    for kind in ("trickle", "idle"):
        conns = [c for c in attack.conns if c.kind == kind]
        by_proxy = [c.closed_after for c in conns if c.close_reason == "proxy"]
        statuses, first = collections.Counter(), collections.Counter()
        for c in conns:
            found = [int(s) for s in STATUS_LINE.findall(c.received)]
            if kind == "idle" and found:  # the answer to its one valid request, kept apart
                first[found.pop(0)] += 1
            statuses.update(found)
        hostile[kind] = {
            "opened": len(conns),
            "open_at_end": sum(c.state != "closed" for c in conns),
            "closed_by_proxy": len(by_proxy),
            "connect_failed": sum(c.close_reason == "connect_failed" for c in conns),
            "close_s_median": percentile(by_proxy, 50),
            "close_s_max": max(by_proxy) if by_proxy else None,
            "statuses": dict(statuses),
        }
        if kind == "trickle":
            hostile[kind]["header_fully_sent"] = sum(c.offset == len(attack.payload) for c in conns)
        else:
            hostile[kind]["first_response_statuses"] = dict(first)
    answered = [(s, t) for s, t in legit if isinstance(s, int)]
    latencies = [t * 1000 for _, t in answered]
    return {
        "proxy": {
            "exit_code": proxy.poll(),
            "rss_mib_baseline": baseline[0], "rss_mib_peak": max(rss_values, default=None),
            "rss_mib_final": rss_values[-1] if rss_values else None,
            "fds_baseline": baseline[1], "fds_peak": max(fd_values, default=None),
            "fds_final": fd_values[-1] if fd_values else None,
        },
        "hostile": hostile,
        "local_errors": dict(attack.local_errors),
        "legit": {
            "sent": len(legit), "answered": len(answered), "failed": len(legit) - len(answered),
            "statuses": dict(collections.Counter(s for s, _ in answered)),
            "errors": dict(collections.Counter(s for s, _ in legit if not isinstance(s, int))),
            "latency_ms_p50": percentile(latencies, 50), "latency_ms_p99": percentile(latencies, 99),
        },
    }


def fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def print_summary(s):
    p, legit = s["proxy"], s["legit"]
    print(f"proxy RSS MiB: baseline {fmt(p['rss_mib_baseline'])}, peak {fmt(p['rss_mib_peak'])}, final {fmt(p['rss_mib_final'])}")
    print(f"proxy open fds: baseline {p['fds_baseline']}, peak {p['fds_peak']}, final {p['fds_final']}"
          + ("" if p["exit_code"] is None else f"; PROXY EXITED with code {p['exit_code']}"))
    for kind, h in s["hostile"].items():
        extra = (f", header fully sent on {h['header_fully_sent']}" if kind == "trickle"
                 else f", answers to the valid request {h['first_response_statuses']}")
        print(f"{kind}: {h['opened']} opened, {h['open_at_end']} still open, {h['closed_by_proxy']} closed by the proxy "
              f"(time to close median {fmt(h['close_s_median'], '.2f')} s, max {fmt(h['close_s_max'], '.2f')} s), "
              f"{h['connect_failed']} failed to connect{extra}; statuses received {h['statuses'] or 'none'}")
    if s["local_errors"]:
        print(f"sockets this script could not open: {s['local_errors']}")
    print(f"legitimate requests: {legit['sent']} sent, {legit['answered']} answered {legit['statuses']}, "
          f"{legit['failed']} failed {legit['errors'] or ''}; latency p50 {fmt(legit['latency_ms_p50'])} ms, "
          f"p99 {fmt(legit['latency_ms_p99'])} ms")


def main():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=2000, help="hostile connections (default 2000)")
    parser.add_argument("--trickle-share", type=float, default=0.5, help="fraction that trickle headers; the rest idle (0.5)")
    parser.add_argument("--duration", type=float, default=120, help="seconds of attack (120)")
    parser.add_argument("--trickle-interval", type=float, default=20, help="seconds between trickled bytes (20)")
    parser.add_argument("--header-bytes", type=int, default=1_000_000, help="header bytes sent before trickling (1000000)")
    parser.add_argument("--reopen", action="store_true", help="reopen connections the proxy closes")
    parser.add_argument("--limits", default="", help="text of the config's `limits: {...}` (default: no limits section)")
    parser.add_argument("--binary", default=os.path.join(target, "release", "robotsguard"))
    parser.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    args = parser.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"build first: cargo build --release ({args.binary} missing)")

    # Thousands of sockets need more than the usual 1024 descriptors; the proxy inherits the limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"RLIMIT_NOFILE: soft {soft} -> {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, hard {hard}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM cleans up like Ctrl-C

    work = tempfile.mkdtemp(prefix="rg-hostile-")
    conf_dir = os.path.join(work, "conf")  # its own directory: robotsguard watches the config's
    os.mkdir(conf_dir)
    origin = origin_server()
    proxy = attack = None
    stop, samples, legit = threading.Event(), [], []
    monitor_thread, interrupted = None, False
    try:
        port, admin = free_port(), free_port()
        config = write_config(conf_dir, port, admin, "127.0.0.1:%d" % origin.getsockname()[1], args.limits)
        proxy = start_proxy(args.binary, config, os.path.join(work, "robotsguard.log"), admin)
        with open(f"/proc/{proxy.pid}/limits") as f:
            print("proxy " + next(line for line in f if line.startswith("Max open files")).strip())
        check = []
        legit_request(port, check)
        if check[0][0] != 200:
            sys.exit(f"sanity check failed: GET /ok through the proxy gave {check[0][0]}")
        baseline = sample(proxy.pid)

        attack = Attack(port, trickle_payload(args.header_bytes), args)
        trickles = round(args.connections * args.trickle_share)
        print(f"attack: {trickles} trickle ({len(attack.payload)} header bytes, then 1 byte / {args.trickle_interval:g} s), "
              f"{args.connections - trickles} idle, {args.duration:g} s, limits: {args.limits or 'none'}")
        monitor_thread = threading.Thread(target=monitor, args=(proxy.pid, port, stop, samples, legit), daemon=True)
        monitor_thread.start()
        deadline = time.monotonic() + args.duration
        for i in range(args.connections):
            attack.open("trickle" if i < trickles else "idle")
        try:
            attack.run(deadline, proxy)
        except KeyboardInterrupt:
            interrupted = True
            print("interrupted: summary of the attack so far")
        stop.set()
        monitor_thread.join(timeout=10)
        summary = summarise(attack, samples, legit, baseline, proxy)
        summary["args"], summary["interrupted"] = vars(args), interrupted
        print_summary(summary)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
    finally:
        stop.set()
        if attack:
            attack.close_all()
        if proxy:
            stop_process(proxy)
        origin.close()
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(130 if interrupted else 0)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # before or after the attack loop; main's finally has cleaned up
        sys.exit(130)
