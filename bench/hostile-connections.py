#!/usr/bin/env python3
"""Hostile connections: how robotsguard survives clients that try to exhaust its memory and sockets.

--scenario trickle-idle (the default): two kinds of attacker, opened together at the start and kept
open for --duration seconds:

  trickle  sends a request line, Host and ~1 MB of header lines as fast as the proxy reads them,
           never the blank line that ends the header, then one more byte every --trickle-interval
           seconds so that a plain idle timeout does not see it as idle;
  idle     sends one valid request, reads the answer, then stays silent on the keep-alive.

Every second the proxy's RSS and open fds are sampled and one legitimate browser request
(`GET /ok`, fresh connection, 5 s timeout) is timed. Run from anywhere after `cargo build --release`:

    python3 bench/hostile-connections.py                                  # 2000 connections, 120 s
    python3 bench/hostile-connections.py --connections 300 --duration 30
    python3 bench/hostile-connections.py --limits 'header_timeout: 10s, max_header_bytes: 32KiB'

The other scenarios (issue 26) run against a stock nginx origin serving a 4 MB file, and check
every second that a fresh client is served and that /metrics answers:

  stalled          2 x max_connections connections that never become useful, in equal shares:
                   the h2c preface alone (plain listener, http2: true), a TLS ClientHello and then
                   silence (the handshake stalls), and a full TLS handshake with ALPN h2 and then
                   silence; each is reopened when the proxy closes it;
  h2-headers       --h2-connections (40) HTTP/2 connections x --streams (128) streams, each with
                   --header-kb (29) KB of headers and a body that is never sent;
  h2-zero-window   --h2-connections HTTP/2 connections advertising a zero receive window, x
                   --streams GETs of the 4 MB file;
  nonreading       --connections HTTP/1.1 clients that GET the 4 MB file and never read;
  throughput       a 200 MB download with curl, alone and beside one and four non-reading clients
                   under a small request cap (what narrowing the upstream window costs a download).

    python3 bench/hostile-connections.py --scenario stalled --max-connections 500 --duration 60
    python3 bench/hostile-connections.py --scenario h2-headers --nofile 4096
    python3 bench/hostile-connections.py --scenario h2-zero-window --h2-connections 20 --nofile 4096
    python3 bench/hostile-connections.py --scenario nonreading --connections 2000 --nofile 8192

The issue-26 scenarios' connections come from --attackers loopback addresses (127.0.0.2, .3, ...,
one by default), the fresh client from 127.0.0.1: requests in flight are shared per client address.

    python3 bench/hostile-connections.py --scenario h2-zero-window --h2-connections 20 --attackers 10

The binary is ${CARGO_TARGET_DIR:-target}/release/robotsguard (or --binary). --limits is written
verbatim as `limits: {TEXT}` in the config; a binary that does not know `limits` refuses to start.
The proxy inherits this script's raised RLIMIT_NOFILE, or --nofile. Everything listens on 127.0.0.1
only; every loop has a deadline; processes and sockets are closed at the end, also on Ctrl-C.
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
import ssl
import struct
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


def start_proxy(binary, config, log_path, admin, nofile=None):
    log = open(log_path, "wb")

    def limit_files():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    # A session of its own: Ctrl-C reaches this script only, which then stops the proxy itself.
    proxy = subprocess.Popen([binary, "serve", "--config", config], stdout=log, stderr=log,
                             env={**os.environ, "RUST_LOG": "warn"}, start_new_session=True,
                             preexec_fn=limit_files)
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


# ------------------------------------------------------------------------------------------------
# Flood scenarios (issue 26): stalled HTTP/2 and TLS connections, HTTP/2 stream floods, clients
# that never read. Each runs against a stock nginx origin.

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
BIG_FILE = "big.bin"
BIG_BYTES = 4 << 20


def h2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    """HPACK integer with a `prefix_bits` prefix (RFC 7541, 5.1), `first` holding the flag bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = bytearray([first | limit]), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """A literal header field without indexing, no Huffman coding."""
    return (b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value)


def h2_request(stream, path, user_agent, end_stream, extra=()):
    """HEADERS (and CONTINUATION frames past 16 KiB) of a GET."""
    block = b"".join(hpack_literal(n, v) for n, v in [
        (b":method", b"GET"), (b":scheme", b"http"), (b":path", path.encode()),
        (b":authority", b"shop.example"), (b"user-agent", user_agent.encode()), *extra])
    pieces = [block[i:i + 16384] for i in range(0, len(block), 16384)] or [b""]
    out = bytearray()
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        flags = (0x4 if last else 0) | (0x1 if end_stream and i == 0 else 0)
        out += h2_frame(0x1 if i == 0 else 0x9, flags, stream, piece)
    return bytes(out)


def h2_settings(pairs):
    return h2_frame(0x4, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


class FloodConn:
    __slots__ = ("kind", "sock", "tls", "opened", "state", "out", "closed_after", "close_reason", "read_bytes")

    def __init__(self, kind, sock):
        self.kind, self.sock, self.tls, self.opened = kind, sock, None, time.monotonic()
        self.state, self.out, self.read_bytes = "connecting", b"", 0
        self.closed_after = self.close_reason = None


class Flood:
    """Non-blocking hostile clients of several kinds driven from one selector. Kinds:
    h2c-preface, tls-hello, tls-h2-silent, h2-headers, h2-zero-window, nonreading."""

    def __init__(self, args, plain_port, tls_port):
        self.args, self.plain_port, self.tls_port = args, plain_port, tls_port
        self.opened = 0
        self.sel = selectors.DefaultSelector()
        self.conns, self.reopen, self.local_errors = [], [], collections.Counter()
        self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.tls_context.check_hostname = False
        self.tls_context.verify_mode = ssl.CERT_NONE
        self.tls_context.set_alpn_protocols(["h2"])
        pad = b"v" * 1000
        self.big_headers = [(b"x-pad-%d" % i, pad) for i in range(args.header_kb)]

    def payload(self, kind):
        if kind == "h2c-preface":
            return H2_PREFACE
        if kind == "nonreading":
            return (f"GET /{BIG_FILE} HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: {BROWSER}\r\n\r\n").encode()
        if kind == "h2-headers":
            out = bytearray(H2_PREFACE + h2_settings([]))
            for n in range(self.args.streams):
                out += h2_request(2 * n + 1, "/ok", BROWSER, False, self.big_headers)
            return bytes(out)
        if kind == "h2-zero-window":
            out = bytearray(H2_PREFACE + h2_settings([(0x4, 0)]))
            for n in range(self.args.streams):
                out += h2_request(2 * n + 1, f"/{BIG_FILE}", BROWSER, True)
            return bytes(out)
        return b""

    def open(self, kind):
        try:
            sock = socket.socket()
        except OSError as e:
            self.local_errors[errno.errorcode.get(e.errno, str(e))] += 1
            return
        sock.setblocking(False)
        # Attackers are other hosts than the fresh client (127.0.0.1): robotsguard shares
        # requests in flight per client address.
        try:
            sock.bind((f"127.0.0.{2 + self.opened % self.args.attackers}", 0))
        except OSError as e:
            sock.close()
            self.local_errors[errno.errorcode.get(e.errno, str(e))] += 1
            return
        self.opened += 1
        conn = FloodConn(kind, sock)
        self.conns.append(conn)
        port = self.tls_port if kind.startswith("tls") else self.plain_port
        err = sock.connect_ex(("127.0.0.1", port))
        if err not in (0, errno.EINPROGRESS):
            self.close(conn, "connect_failed")
            return
        self.sel.register(sock, selectors.EVENT_WRITE, conn)

    def close(self, conn, reason):
        if conn.state == "closed":
            return
        try:
            self.sel.unregister(conn.tls or conn.sock)
        except (KeyError, ValueError):
            pass
        (conn.tls or conn.sock).close()
        conn.state, conn.close_reason = "closed", reason
        conn.closed_after = time.monotonic() - conn.opened
        if reason == "proxy" and self.args.reopen:
            self.reopen.append((time.monotonic() + 0.1, conn.kind))

    def start(self, conn):
        """The connection is up: queue what its kind sends first."""
        if conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.close(conn, "connect_failed")
            return
        if conn.kind == "tls-hello":
            # A real ClientHello from a memory BIO, sent as raw bytes; nothing after it.
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            obj = self.tls_context.wrap_bio(incoming, outgoing, server_hostname="shop.example")
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            conn.out, conn.state = outgoing.read(), "sending"
        elif conn.kind == "tls-h2-silent":
            conn.tls = self.tls_context.wrap_socket(conn.sock, server_hostname="shop.example",
                                                    do_handshake_on_connect=False)
            self.sel.unregister(conn.sock)
            self.sel.register(conn.tls, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            conn.state = "handshaking"
            self.handshake(conn)
            return
        else:
            conn.out, conn.state = self.payload(conn.kind), "sending"
        self.sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def handshake(self, conn):
        try:
            conn.tls.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except (ssl.SSLError, OSError):
            self.close(conn, "proxy")
            return
        conn.state = "silent"
        self.sel.modify(conn.tls, selectors.EVENT_READ, conn)

    def on_event(self, conn, mask):
        if conn.state == "connecting":
            self.start(conn)
            return
        if conn.state == "handshaking":
            self.handshake(conn)
            return
        if mask & selectors.EVENT_WRITE and conn.out:
            try:
                sent = conn.sock.send(conn.out[:256 * 1024])
                conn.out = conn.out[sent:]
            except BlockingIOError:
                pass
            except OSError:
                self.close(conn, "proxy")
                return
            if not conn.out:
                conn.state = "silent"
                self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
            return
        if mask & selectors.EVENT_READ:
            if conn.kind == "nonreading":
                # Readable means data or a close: peek without consuming, to see which.
                try:
                    peeked = conn.sock.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    return
                except OSError:
                    peeked = b""
                if not peeked:
                    self.close(conn, "proxy")
                else:
                    self.unwatch(conn)
                return
            self.drain(conn)

    def unwatch(self, conn):
        """A non-reading client's socket has data it will never read: stop polling it (a poll
        would wake at once forever); it is closed at the end."""
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.state = "stalled"

    def drain(self, conn):
        sock = conn.tls or conn.sock
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError:
                data = b""
            if not data:
                self.close(conn, "proxy")
                return
            conn.read_bytes += len(data)

    def run(self, deadline, proxy):
        next_tick = 0.0
        while time.monotonic() < deadline and proxy.poll() is None:
            for key, mask in self.sel.select(timeout=max(0.0, min(0.5, deadline - time.monotonic()))):
                self.on_event(key.data, mask)
            now = time.monotonic()
            if now >= next_tick:
                due = [kind for at, kind in self.reopen if at <= now]
                self.reopen = [(at, kind) for at, kind in self.reopen if at > now]
                for kind in due:
                    self.open(kind)
                next_tick = now + 0.5

    def close_all(self):
        for conn in self.conns:
            if conn.state != "closed":
                (conn.tls or conn.sock).close()
        self.sel.close()


def start_nginx(work):
    root = os.path.join(work, "root")
    os.makedirs(root)
    with open(os.path.join(root, BIG_FILE), "wb") as f:
        f.write(os.urandom(BIG_BYTES))
    with open(os.path.join(root, "ok"), "w") as f:
        f.write("ok")
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"daemon off; master_process off; worker_rlimit_nofile 60000; error_log {work}/nginx-error.log;"
                f" pid {work}/nginx.pid; events {{ worker_connections 30000; }}\n"
                f"http {{ access_log off; large_client_header_buffers 8 64k; server {{ listen 127.0.0.1:{port};"
                f" root {root}; keepalive_requests 100000; }} }}\n")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    process = subprocess.Popen([nginx, "-p", work, "-e", f"{work}/nginx-error.log", "-c", conf],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    stop_process(process)
    sys.exit("nginx did not start")


def make_certificate(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=shop.example", "-addext", "subjectAltName=DNS:shop.example",
                    "-keyout", key, "-out", cert], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def metrics_text(admin):
    conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=2)
    try:
        conn.request("GET", "/metrics", headers={"Host": "admin"})
        response = conn.getresponse()
        body = response.read().decode(errors="replace")
        return body if response.status == 200 else None
    finally:
        conn.close()


def metric_sum(text, name, label=""):
    total = 0.0
    for line in (text or "").splitlines():
        if line.startswith(name) and (line[len(name):len(name) + 1] in (" ", "{")) and label in line:
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


def flood_monitor(pid, port, admin, stop, samples, legit, probes):
    """Once a second: RSS and fds, one legitimate request, one /metrics probe (each on a thread of
    its own: either may take seconds)."""
    workers, next_at = [], time.monotonic()

    def probe():
        started = time.monotonic()
        try:
            ok = metrics_text(admin) is not None
        except (OSError, http.client.HTTPException):
            ok = False
        probes.append((ok, time.monotonic() - started))

    while not stop.is_set():
        samples.append(sample(pid))
        for target, args in ((legit_request, (port, legit)), (probe, ())):
            worker = threading.Thread(target=target, args=args, daemon=True)
            worker.start()
            workers.append(worker)
        next_at += 1.0
        stop.wait(max(0.0, next_at - time.monotonic()))
    for worker in workers:
        worker.join(timeout=6)


def run_throughput(args):
    """A 200 MB download through the proxy with curl, alone and then beside clients that never
    read, under `max_requests_in_flight: 16` (so the download's upstream is narrowed, then
    squeezed)."""
    work = tempfile.mkdtemp(prefix="rg-throughput-")
    conf_dir = os.path.join(work, "conf")
    os.mkdir(conf_dir)
    nginx = proxy = None
    held = []
    try:
        nginx, origin_port = start_nginx(work)
        with open(os.path.join(work, "root", "huge.bin"), "wb") as f:
            f.write(os.urandom(200 << 20))
        port, admin = free_port(), free_port()
        config = os.path.join(conf_dir, "robotsguard.yaml")
        with open(config, "w") as f:
            f.write(f'listen: ["127.0.0.1:{port}"]\nadmin: "127.0.0.1:{admin}"\nthreads: 2\n'
                    "limits: {max_requests_in_flight: 16}\n"
                    f'origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: "127.0.0.1:{origin_port}"\n'
                    '    robots: {source: inline, text: ""}\n')
        proxy = start_proxy(args.binary, config, os.path.join(work, "robotsguard.log"), admin)

        def download():
            out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}", "-H", "Host: shop.example",
                                  f"http://127.0.0.1:{port}/huge.bin"], capture_output=True, text=True, timeout=120)
            return float(out.stdout or 0) / 1e6

        def hold(count):
            for _ in range(count):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: shop.example\r\n\r\n")
                held.append(sock)
            time.sleep(0.5)

        # With a cap of 16, more than 1 request in flight narrows, more than 4 squeezes.
        alone = [download() for _ in range(2)]
        hold(1)
        narrow = [download() for _ in range(2)]
        hold(3)
        squeezed = [download() for _ in range(2)]
        show = lambda values: ", ".join(f"{v:.0f}" for v in values)
        print(f"200 MB download, MB/s: alone {show(alone)}; beside 1 non-reading client (narrow, "
              f"8 KiB) {show(narrow)}; beside 4 (squeezed, 2 KiB) {show(squeezed)}")
    finally:
        for sock in held:
            sock.close()
        if proxy:
            stop_process(proxy)
        if nginx:
            stop_process(nginx)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run_flood(args):
    """One of the issue-26 scenarios; returns the exit code."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    work = tempfile.mkdtemp(prefix="rg-flood-")
    conf_dir = os.path.join(work, "conf")
    os.mkdir(conf_dir)
    nginx = proxy = flood = None
    stop, samples, legit, probes = threading.Event(), [], [], []
    monitor_thread, interrupted = None, False
    try:
        nginx, origin_port = start_nginx(work)
        port, tls_port, admin = free_port(), free_port(), free_port()
        limits = args.limits
        if args.max_connections:
            limits = ", ".join(filter(None, [limits, f"max_connections: {args.max_connections}"]))
        listen = [f'{{address: "127.0.0.1:{port}", http2: true}}']
        if args.scenario == "stalled":
            cert, key = make_certificate(work)
            listen.append(f'{{address: "127.0.0.1:{tls_port}", tls: {{cert: "{cert}", key: "{key}"}}}}')
        config = os.path.join(conf_dir, "robotsguard.yaml")
        with open(config, "w") as f:
            f.write(f"listen: [{', '.join(listen)}]\nadmin: \"127.0.0.1:{admin}\"\nthreads: 2\nshutdown: {{grace: 1s}}\n"
                    + (f"limits: {{{limits}}}\n" if limits else "")
                    + f"origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:{origin_port}\"\n"
                    + '    robots: {source: inline, text: "User-agent: GPTBot\\nDisallow: /private\\n"}\n')
        nofile = args.nofile or hard
        proxy = start_proxy(args.binary, config, os.path.join(work, "robotsguard.log"), admin, nofile)
        text = metrics_text(admin)
        caps = (metric_sum(text, "robotsguard_downstream_connections_max"),
                metric_sum(text, "robotsguard_requests_in_flight_max"))
        check = []
        legit_request(port, check)
        if check[0][0] != 200:
            sys.exit(f"sanity check failed: GET /ok through the proxy gave {check[0][0]}")
        baseline = sample(proxy.pid)
        flood = Flood(args, port, tls_port)
        kinds = {"stalled": ["h2c-preface", "tls-hello", "tls-h2-silent"],
                 "h2-headers": ["h2-headers"], "h2-zero-window": ["h2-zero-window"],
                 "nonreading": ["nonreading"]}[args.scenario]
        count = {"stalled": 2 * int(caps[0]), "h2-headers": args.h2_connections,
                 "h2-zero-window": args.h2_connections, "nonreading": args.connections}[args.scenario]
        print(f"proxy: max_connections {caps[0]:.0f}, max_requests_in_flight {caps[1]:.0f}, nofile {nofile}; "
              f"attack: {count} x {'/'.join(kinds)} for {args.duration:g} s")
        monitor_thread = threading.Thread(target=flood_monitor, args=(proxy.pid, port, admin, stop, samples, legit, probes),
                                          daemon=True)
        monitor_thread.start()
        for i in range(count):
            flood.open(kinds[i % len(kinds)])
        try:
            flood.run(time.monotonic() + args.duration, proxy)
        except KeyboardInterrupt:
            interrupted = True
        stop.set()
        monitor_thread.join(timeout=10)
        final = metrics_text(admin) if proxy.poll() is None else None
        summary = flood_summary(args, flood, samples, legit, probes, baseline, proxy, final, caps, nofile, count)
        print_flood_summary(summary)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
    finally:
        stop.set()
        if flood:
            flood.close_all()
        if proxy:
            stop_process(proxy)
        if nginx:
            stop_process(nginx)
        shutil.rmtree(work, ignore_errors=True)
    return 130 if interrupted else 0


def flood_summary(args, flood, samples, legit, probes, baseline, proxy, final, caps, nofile, count):
    rss = [r for r, _ in samples if r is not None]
    fds = [f for _, f in samples if f is not None]
    kinds = {}
    for kind in sorted({c.kind for c in flood.conns}):
        conns = [c for c in flood.conns if c.kind == kind]
        by_proxy = [c.closed_after for c in conns if c.close_reason == "proxy"]
        kinds[kind] = {"opened": len(conns), "closed_by_proxy": len(by_proxy),
                       "open_at_end": sum(c.state != "closed" for c in conns),
                       "close_s_median": percentile(by_proxy, 50), "close_s_max": max(by_proxy) if by_proxy else None}
    answered = [(s, t) for s, t in legit if isinstance(s, int)]
    latencies = [t * 1000 for _, t in answered]
    return {
        "scenario": args.scenario, "connections": count, "nofile": nofile,
        "max_connections": caps[0], "max_requests_in_flight": caps[1],
        "proxy": {"exit_code": proxy.poll(), "rss_mib_baseline": baseline[0], "rss_mib_peak": max(rss, default=None),
                  "rss_mib_final": rss[-1] if rss else None, "fds_peak": max(fds, default=None)},
        "hostile": kinds, "local_errors": dict(flood.local_errors),
        "legit": {"sent": len(legit), "answered": len(answered),
                  "statuses": dict(collections.Counter(s for s, _ in answered)),
                  "errors": dict(collections.Counter(s for s, _ in legit if not isinstance(s, int))),
                  "latency_ms_p50": percentile(latencies, 50), "latency_ms_max": max(latencies, default=None)},
        "metrics_probes": {"sent": len(probes), "answered": sum(ok for ok, _ in probes),
                           "latency_ms_max": max((t * 1000 for _, t in probes), default=None)},
        "counters": {name: metric_sum(final, *key) for name, key in {
            "evicted": ("robotsguard_downstream_connections_evicted_total",),
            "refused_max_connections": ("robotsguard_connections_refused_total", 'reason="max_connections"'),
            "refused_handshake_timeout": ("robotsguard_connections_refused_total", 'reason="handshake_timeout"'),
            "streams_refused_per_connection": ("robotsguard_requests_refused_total", 'reason="max_streams_per_connection"'),
            "requests_refused_in_flight": ("robotsguard_requests_refused_total", 'reason="max_requests_in_flight"'),
            "windows_narrowed": ("robotsguard_upstream_windows_narrowed_total",),
        }.items()} if final else None,
    }


def print_flood_summary(s):
    p, legit, probes = s["proxy"], s["legit"], s["metrics_probes"]
    print(f"proxy RSS MiB: baseline {fmt(p['rss_mib_baseline'])}, peak {fmt(p['rss_mib_peak'])}, "
          f"final {fmt(p['rss_mib_final'])}; fds peak {p['fds_peak']}"
          + ("" if p["exit_code"] is None else f"; PROXY EXITED with code {p['exit_code']}"))
    for kind, h in s["hostile"].items():
        print(f"{kind}: {h['opened']} opened, {h['closed_by_proxy']} closed by the proxy (median "
              f"{fmt(h['close_s_median'], '.2f')} s, max {fmt(h['close_s_max'], '.2f')} s), {h['open_at_end']} open at the end")
    if s["local_errors"]:
        print(f"sockets this script could not open: {s['local_errors']}")
    print(f"fresh clients: {legit['sent']} sent, {legit['answered']} answered {legit['statuses']} {legit['errors'] or ''}; "
          f"latency p50 {fmt(legit['latency_ms_p50'])} ms, max {fmt(legit['latency_ms_max'])} ms")
    print(f"/metrics: {probes['answered']}/{probes['sent']} answered, max {fmt(probes['latency_ms_max'])} ms")
    print(f"counters: {s['counters']}")


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
    parser.add_argument("--scenario", default="trickle-idle",
                        choices=["trickle-idle", "stalled", "h2-headers", "h2-zero-window", "nonreading",
                                 "throughput"])
    parser.add_argument("--nofile", type=int, help="the proxy's RLIMIT_NOFILE (default: this script's hard limit)")
    parser.add_argument("--max-connections", type=int, help="limits.max_connections (default: derived)")
    parser.add_argument("--h2-connections", type=int, default=40, help="HTTP/2 connections (40)")
    parser.add_argument("--streams", type=int, default=128, help="streams per HTTP/2 connection (128)")
    parser.add_argument("--attackers", type=int, default=1,
                        help="loopback addresses (127.0.0.2, .3, ...) the issue-26 scenarios' connections come from, "
                             "in turn; the fresh client is 127.0.0.1 (1)")
    parser.add_argument("--header-kb", type=int, default=29, help="KB of headers per h2-headers stream (29)")
    args = parser.parse_args()
    if not 1 <= args.attackers <= 250:
        sys.exit("--attackers: 1 to 250 loopback addresses")
    if not os.path.exists(args.binary):
        sys.exit(f"build first: cargo build --release ({args.binary} missing)")
    if args.scenario == "throughput":
        sys.exit(run_throughput(args))
    if args.scenario != "trickle-idle":
        sys.exit(run_flood(args))

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
