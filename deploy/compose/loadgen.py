"""The compose fleet's load generator: steady requests through every replica, each checked
against the answer it must get, counted per replica and origin.

One worker per replica sends, in turn, the requests of MIX (keep-alive, X-Forwarded-For naming
the client, which the replicas believe from this network), one every --interval. A request fails
when it gets no answer within --timeout or another status than MIX expects.

  GET  /stats                 {"targets": {"rg1": {"site": {"ok": N, "failed": N}, ...}},
                               "errors": [the last 200 failures]}
  POST /pause?target=rg1      the worker stops sending to rg1 (what a load balancer does when a
                              pod leaves the endpoints) and closes its connection; answers once
                              the request in flight has ended
  POST /resume?target=rg1

Python's standard library only: the testbed image has nothing else.
"""

import argparse
import http.client
import http.server
import json
import threading
import time
import urllib.parse

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"

# (origin, Host, path, User-Agent, client address, the statuses that count as right). The
# addresses are documentation ranges, written in X-Forwarded-For only: no traffic goes to them.
# The disallowed crawler strikes and is banned on `other` soon; it gets 403 either way, and the
# browsers use other addresses, so the ban changes nothing they get.
MIX = [
    ("site", "site.test", "/", BROWSER, "192.0.2.10", {200}),
    ("site", "site.test", "/page", BROWSER, "192.0.2.11", {200}),
    ("site", "site.test", "/robots.txt", "MJ12bot/v1.4.8", "192.0.2.12", {200}),
    ("other", "other.test", "/", BROWSER, "192.0.2.20", {200}),
    ("other", "other.test", "/page", BROWSER, "192.0.2.21", {200}),
    ("other", "other.test", "/private/report", "GPTBot/1.2", "198.51.100.200", {403}),
]

MAX_ERRORS = 200


class Stats:
    def __init__(self, targets):
        self.lock = threading.Lock()
        self.counts = {t: {} for t in targets}
        self.errors = []

    def record(self, target, origin, ok, detail=None):
        with self.lock:
            row = self.counts[target].setdefault(origin, {"ok": 0, "failed": 0})
            row["ok" if ok else "failed"] += 1
            if not ok:
                self.errors.append({"time": time.time(), "target": target, "origin": origin, "error": detail})
                del self.errors[:-MAX_ERRORS]

    def snapshot(self):
        with self.lock:
            return {"targets": json.loads(json.dumps(self.counts)), "errors": list(self.errors)}


class Worker(threading.Thread):
    def __init__(self, name, address, stats, interval, timeout):
        super().__init__(daemon=True)
        self.target = name
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        self.stats, self.interval, self.timeout = stats, interval, timeout
        self.connection = None
        self.paused = threading.Event()
        self.idle = threading.Event()

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def run(self):
        turn = 0
        while True:
            if self.paused.is_set():
                self.close()
                self.idle.set()
                time.sleep(0.05)
                continue
            self.idle.clear()
            origin, host, path, agent, client, expected = MIX[turn % len(MIX)]
            turn += 1
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                self.connection.request(
                    "GET", path, headers={"Host": host, "User-Agent": agent, "X-Forwarded-For": client}
                )
                answer = self.connection.getresponse()
                answer.read()
                if answer.status in expected:
                    self.stats.record(self.target, origin, True)
                else:
                    self.stats.record(self.target, origin, False, f"{host}{path} as {agent}: {answer.status}")
                if answer.will_close:
                    self.close()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                self.stats.record(self.target, origin, False, f"{host}{path}: {type(e).__name__}: {e}")
            time.sleep(self.interval)


def serve(listen, workers, stats):
    by_name = {w.target: w for w in workers}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if urllib.parse.urlsplit(self.path).path == "/stats":
                self.answer(200, stats.snapshot())
            else:
                self.answer(404, {"error": "try /stats"})

        def do_POST(self):
            url = urllib.parse.urlsplit(self.path)
            target = urllib.parse.parse_qs(url.query).get("target", [""])[0]
            worker = by_name.get(target)
            if worker is None or url.path not in ("/pause", "/resume"):
                self.answer(404, {"error": "POST /pause?target=NAME or /resume?target=NAME"})
                return
            if url.path == "/pause":
                worker.paused.set()
                # The request in flight ends within the worker's timeout.
                if not worker.idle.wait(worker.timeout + 1):
                    self.answer(504, {"error": f"{target} still busy"})
                    return
            else:
                worker.paused.clear()
            self.answer(200, {url.path[1:]: target})

    host, _, port = listen.rpartition(":")
    http.server.ThreadingHTTPServer((host, int(port)), Handler).serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", required=True, help="name:port,... (rg1:8080,rg2:8080)")
    parser.add_argument("--listen", default="0.0.0.0:8090")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between a worker's requests")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    names = [t.rpartition(":")[0] for t in targets]
    stats = Stats(names)
    workers = [Worker(n, t, stats, args.interval, args.timeout) for n, t in zip(names, targets)]
    for w in workers:
        w.start()
    serve(args.listen, workers, stats)


if __name__ == "__main__":
    main()
