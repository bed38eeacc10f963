#!/usr/bin/env python3
"""Three robotsguard replicas as separate hosts (deploy/compose/docker-compose.yml), tested from
this machine while the load generator keeps traffic running through every replica.

    scripts/test-fleet.py [--image robotsguard:latest] [--testbed robotsguard-testbed:bookworm]
                          [--previous-image robotsguard-release:vX.Y.Z] [--only cluster,upgrade]
    KEEP=1 scripts/test-fleet.py     # leave the fleet running afterwards

The upgrade scenario needs the previous release's image: scripts/build-release-image.sh.

Scenarios, in order (each prints how long it took):

  shared       a ban made through rg1 refuses the address on rg2 and rg3 within a second; a
               crawler's Crawl-delay budget spent on rg1 is spent on rg2 and rg3
  partition    the store cut off (docker network disconnect): every replica answers from memory
               (no failed request), robotsguard_state_backend_up 0 and the Helm chart's
               RobotsguardSharedStateDown expression true in Prometheus; a ban made meanwhile;
               reconnected: shared again, and that ban written to the store and held everywhere
  kill         rg1 killed (docker kill) under traffic: no failed request at rg2 and rg3;
               started again: ready, with the same bans
  origin       the origin frozen (docker pause): its requests get 504 after upstream_timeouts.read,
               the other origin's are unaffected; the origin down (nginx stopped): 502, the
               other unaffected; back: 200
  rolling      each replica in turn taken out of the load generator's rotation (as a Service
               drops a terminating pod), restarted with a config that blocks DotBot, put back:
               no request fails, and DotBot is refused exactly by the replicas already rolled
  sentinel     the replicas moved to Redis Sentinel (a primary, a replica, three sentinels); the
               primary killed under traffic: requests answered from memory meanwhile, nothing
               refused that should pass, and after the failover bans and budgets shared again
  cluster      the replicas moved to a Redis Cluster (six nodes joined by redis-cli --cluster
               create: three masters, a replica each): bans, budgets and the merged report
               shared; each origin's report keys in one slot, not the bans'; the master of the
               bans' slot killed under traffic: no failed request, nothing refused that should
               pass, its replica promoted, and bans and budgets shared again through it
  upgrade      the fleet rolled back to the previous release (RELEASES) over the single Redis,
               each version with the fleet config its release shipped, then upgraded to --image
               one replica at a time: no failed request, a ban made on either version refused by
               every replica of both, `schema` written by the first upgraded replica, the merged
               report counting on

Python's standard library, the docker CLI and docker-compose only; every wait is bounded.
Clients are named in X-Forwarded-For (the replicas trust the compose network), from the
documentation address ranges, which no request is sent to.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE_DIR = os.path.join(ROOT, "deploy", "compose")
COMPOSE_FILE = os.path.join(COMPOSE_DIR, "docker-compose.yml")
SUBNET = "172.30.33.0/24"
REPLICAS = ["rg1", "rg2", "rg3"]
PROFILES = ("--profile", "sentinel", "--profile", "cluster")
CLUSTER_NODES = [f"redis-c{n}" for n in range(1, 7)]
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
BYTESPIDER = "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)"
AHREFSBOT = "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"
DOTBOT = "Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot)"
TIMES = []


def log(message):
    print(f"test-fleet: {message}", flush=True)


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)


def wait_for(what, within, probe, every=0.1):
    """Polls `probe` until it returns something true; its value. Fails after `within` s."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {within} s")
        time.sleep(every)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, check_rc=True, timeout=180, env=None):
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)
    if check_rc and result.returncode != 0:
        raise Failed(f"{' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class Fleet:
    def __init__(self, image, testbed, work):
        self.project = f"rgfleet{os.getpid()}"
        self.work = work
        self.image = image
        self.containers = {}
        self.ports = {f"{r}": free_port() for r in REPLICAS}
        self.admin = {r: free_port() for r in REPLICAS}
        self.loadgen = free_port()
        self.prometheus = free_port()
        self.env = dict(os.environ)
        self.env.update(
            TESTBED_IMAGE=testbed,
            LOADGEN_PORT=str(self.loadgen),
            PROMETHEUS_PORT=str(self.prometheus),
        )
        for i, replica in enumerate(REPLICAS, 1):
            self.env[f"RG{i}_IMAGE"] = image
            self.env[f"RG{i}_PORT"] = str(self.ports[replica])
            self.env[f"RG{i}_ADMIN_PORT"] = str(self.admin[replica])
            self.env[f"RG{i}_CONFIG"] = self.write_config(f"{replica}-initial.yaml", self.base_config())

    def base_config(self):
        with open(os.path.join(COMPOSE_DIR, "robotsguard.yaml"), encoding="utf-8") as f:
            return f.read()

    def write_config(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def compose(self, *args, timeout=300):
        return run(
            "docker-compose", "-p", self.project, "-f", COMPOSE_FILE, *args,
            timeout=timeout, env=self.env,
        )

    def container(self, service):
        """The service's container id, remembered (docker-compose takes seconds on a busy
        machine); `roll` forgets a replica's, whose container it replaces."""
        if not self.containers.get(service):
            self.containers[service] = self.compose("ps", "-q", service).stdout.strip()
        return self.containers[service]

    @property
    def network(self):
        return f"{self.project}_default"

    def up(self):
        # A network left by an interrupted run would hold the subnet.
        for line in run("docker", "network", "ls", "--format", "{{.Name}}").stdout.split():
            if line.startswith("rgfleet") and line.endswith("_default"):
                run("docker", "network", "rm", line, check_rc=False)
        self.compose("up", "-d", "--no-color", *REPLICAS, "redis", "origin", "origin-b", "loadgen", "prometheus")
        log("up: the fleet's containers started")
        for replica in REPLICAS:
            self.wait_ready(replica)
        for replica in REPLICAS:
            wait_for(f"{replica} shares its state", 20, lambda r=replica: self.backend_up(r) == 1)

    def down(self):
        self.compose(*PROFILES, "down", "-v", "--remove-orphans", timeout=300)

    def logs(self):
        return self.compose(*PROFILES, "logs", "--no-color", "--tail", "40").stdout

    # --- talking to the replicas -----------------------------------------------------------

    def request(self, replica, path, agent=BROWSER, client="192.0.2.99", host="site.test", timeout=10):
        connection = http.client.HTTPConnection("127.0.0.1", self.ports[replica], timeout=timeout)
        try:
            connection.request("GET", path, headers={"Host": host, "User-Agent": agent, "X-Forwarded-For": client})
            answer = connection.getresponse()
            return answer.status, answer.read().decode(errors="replace")
        finally:
            connection.close()

    def admin_get(self, replica, path, timeout=3):
        connection = http.client.HTTPConnection("127.0.0.1", self.admin[replica], timeout=timeout)
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            return answer.status, answer.read().decode(errors="replace")
        finally:
            connection.close()

    def wait_ready(self, replica, within=60):
        def ready():
            try:
                return self.admin_get(replica, "/readyz")[0] == 200
            except OSError:
                return False

        wait_for(f"{replica} ready", within, ready, every=0.2)

    def metric(self, replica, name):
        try:
            text = self.admin_get(replica, "/metrics")[1]
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def backend_up(self, replica):
        return self.metric(replica, "robotsguard_state_backend_up")

    def banned_on(self, replica, client, origin="site"):
        try:
            status, body = self.admin_get(replica, f"/bans?origin={origin}")
        except OSError:
            return False
        return status == 200 and any(b.get("client") == client for b in json.loads(body).get("bans", []))

    def refuses_as_banned(self, replica, client):
        """Whether the replica refuses a crawler from the address because of a ban (Bytespider is
        refused everywhere by robots.txt too, so the status alone says nothing)."""
        status, body = self.request(replica, "/", agent=BYTESPIDER, client=client)
        return status == 403 and "banned" in body

    def strike_out(self, replica, client):
        """Three requests robots.txt disallows to Bytespider: banned on the third."""
        for n in range(3):
            status, body = self.request(replica, f"/x{n}", agent=BYTESPIDER, client=client)
            check(status == 403, f"Bytespider on {replica} got {status}: {body[:200]}")
        status, body = self.request(replica, "/", agent=BYTESPIDER, client=client)
        check(status == 403 and "banned" in body, f"{client} is not banned on {replica}: {status} {body[:200]}")
        # A ban holds crawlers out (offenders.scope: crawlers, the default); a browser behind the
        # same address (a NAT, an office) still gets the site.
        status, body = self.request(replica, "/", client=client)
        check(status == 200, f"a browser behind the banned {client} got {status} on {replica}: {body[:200]}")

    def redis_cli(self, service, *args):
        return run("docker", "exec", self.container(service), "redis-cli", *args).stdout.strip()

    def address_of(self, service):
        """The container's address on the compose network."""
        return run(
            "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            self.container(service),
        ).stdout.strip()

    def crawler_report(self, replica, origin="site"):
        """(replicas, requests) of `origin`'s crawler report as `replica` serves it (every
        replica's reports merged through the store), or None."""
        try:
            status, body = self.admin_get(replica, f"/reports/crawlers?origin={origin}", timeout=10)
        except OSError:
            return None
        if status != 200:
            return None
        report = json.loads(body)
        return report.get("replicas", 0), sum(int(row.get("requests", 0)) for row in report.get("crawlers", []))

    # --- the load generator and Prometheus --------------------------------------------------

    def loadgen_stats(self):
        connection = http.client.HTTPConnection("127.0.0.1", self.loadgen, timeout=5)
        try:
            connection.request("GET", "/stats")
            return json.loads(connection.getresponse().read())
        finally:
            connection.close()

    def loadgen_control(self, action, target):
        connection = http.client.HTTPConnection("127.0.0.1", self.loadgen, timeout=15)
        try:
            connection.request("POST", f"/{action}?target={target}")
            answer = connection.getresponse()
            body = answer.read()
            check(answer.status == 200, f"loadgen {action} {target}: {answer.status} {body[:200]}")
        finally:
            connection.close()

    def prometheus_query(self, expression):
        query = urllib.parse.urlencode({"query": expression})
        connection = http.client.HTTPConnection("127.0.0.1", self.prometheus, timeout=5)
        try:
            connection.request("GET", f"/api/v1/query?{query}")
            answer = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        check(answer.get("status") == "success", f"Prometheus: {answer}")
        return answer["data"]["result"]


def counts(stats, targets=None, origins=None):
    """(ok, failed) summed over the targets and origins asked for."""
    ok = failed = 0
    for target, by_origin in stats["targets"].items():
        if targets is not None and target not in targets:
            continue
        for origin, row in by_origin.items():
            if origins is not None and origin not in origins:
                continue
            ok += row["ok"]
            failed += row["failed"]
    return ok, failed


class Traffic:
    """What the load generator counted between `start` and `check`."""

    def __init__(self, fleet, targets=None, origins=None):
        self.fleet, self.targets, self.origins = fleet, targets, origins
        self.before = counts(fleet.loadgen_stats(), targets, origins)
        self.errors_before = len(fleet.loadgen_stats()["errors"])

    def check(self, what):
        stats = self.fleet.loadgen_stats()
        ok, failed = counts(stats, self.targets, self.origins)
        ok -= self.before[0]
        failed -= self.before[1]
        errors = [
            e for e in stats["errors"]
            if (self.targets is None or e["target"] in self.targets)
            and (self.origins is None or e["origin"] in self.origins)
        ][-5:]
        check(ok > 0, f"{what}: the load generator sent nothing")
        check(failed == 0, f"{what}: {failed} failed requests (of {ok + failed}): {errors}")
        return ok


def scenario(name):
    def wrap(function):
        def run_it(fleet):
            started = time.monotonic()
            log(f"{name}: ...")
            function(fleet)
            seconds = time.monotonic() - started
            TIMES.append((name, seconds))
            log(f"{name}: passed in {seconds:.1f} s")

        run_it.__name__ = name
        return run_it

    return wrap


@scenario("shared")
def shared(fleet):
    client = "198.51.100.50"
    fleet.strike_out("rg1", client)
    banned_at = time.monotonic()
    for replica in ("rg2", "rg3"):
        wait_for(
            f"the ban reaches {replica}", 1.0,
            lambda r=replica: fleet.refuses_as_banned(r, client), every=0.02,
        )
        log(f"shared: {client} refused on {replica} {time.monotonic() - banned_at:.2f} s after the ban")
    crawler = "198.51.100.60"
    status, _ = fleet.request("rg1", "/page", agent=AHREFSBOT, client=crawler)
    check(status == 200, f"AhrefsBot's first request got {status}")
    for replica in ("rg2", "rg3"):
        status, body = fleet.request(replica, "/page", agent=AHREFSBOT, client=crawler)
        check(status == 429, f"AhrefsBot's budget is not shared with {replica}: {status} {body[:200]}")


def shared_state_down_expression():
    """The chart's RobotsguardSharedStateDown expression, as values.yaml writes it."""
    text = open(os.path.join(ROOT, "helm", "robotsguard", "values.yaml"), encoding="utf-8").read()
    match = re.search(r"alert: RobotsguardSharedStateDown\n\s+expr: (.+)\n", text)
    check(match is not None, "no RobotsguardSharedStateDown rule in the chart's values.yaml")
    return match.group(1).strip()


@scenario("partition")
def partition(fleet):
    expression = shared_state_down_expression()
    redis = fleet.container("redis")
    traffic = Traffic(fleet)
    run("docker", "network", "disconnect", fleet.network, redis)
    for replica in REPLICAS:
        wait_for(f"{replica} sees the store gone", 15, lambda r=replica: fleet.backend_up(r) == 0, every=0.2)
    def pods_down():
        pods = {s["metric"].get("pod") for s in fleet.prometheus_query(expression)}
        return pods if pods >= set(REPLICAS) else None

    firing = wait_for("the chart's alert expression", 20, pods_down, every=0.5)
    log(f"partition: `{expression}` is true for {sorted(firing)}")
    # A ban made while the store is away holds where it was made at once.
    client = "198.51.100.70"
    fleet.strike_out("rg2", client)
    time.sleep(2)
    traffic.check("while the store was cut off")
    run("docker", "network", "connect", "--alias", "redis", fleet.network, redis)
    for replica in REPLICAS:
        wait_for(f"{replica} shares again", 30, lambda r=replica: fleet.backend_up(r) == 1, every=0.2)
    wait_for(
        "the ban made meanwhile is in the store", 10,
        lambda: fleet.redis_cli("redis", "HEXISTS", "robotsguard:bans", f"{client} site") == "1",
    )
    for replica in ("rg1", "rg3"):
        wait_for(f"{replica} refuses {client}", 5, lambda r=replica: fleet.refuses_as_banned(r, client))
    wait_for("the alert expression clears", 20, lambda: fleet.prometheus_query(expression) == [], every=0.5)
    traffic.check("around the partition")


@scenario("kill")
def kill(fleet):
    container = fleet.container("rg1")
    traffic = Traffic(fleet, targets={"rg2", "rg3"})
    run("docker", "kill", container)
    time.sleep(5)
    traffic.check("at rg2 and rg3 while rg1 was killed")
    run("docker", "start", container)
    fleet.wait_ready("rg1")
    wait_for("rg1 shares its state", 20, lambda: fleet.backend_up("rg1") == 1)
    for client in ("198.51.100.50", "198.51.100.70"):
        wait_for(f"rg1 holds the ban of {client} again", 5, lambda c=client: fleet.banned_on("rg1", c))
        check(fleet.refuses_as_banned("rg1", client), f"rg1 lets {client} through after its restart")
    traffic.check("at rg2 and rg3 around rg1's restart")


@scenario("origin")
def origin(fleet):
    origin = fleet.container("origin")
    others = Traffic(fleet, origins={"other"})
    run("docker", "pause", origin)
    try:
        for replica in REPLICAS:
            started = time.monotonic()
            status, _ = fleet.request(replica, "/page", timeout=15)
            took = time.monotonic() - started
            check(status == 504, f"a frozen origin through {replica}: {status}")
            check(1.5 <= took <= 6, f"the 504 came after {took:.1f} s, upstream_timeouts.read is 2s")
            status, _ = fleet.request(replica, "/page", host="other.test", timeout=5)
            check(status == 200, f"the other origin through {replica} while one is frozen: {status}")
    finally:
        run("docker", "unpause", origin)
    run("docker", "exec", origin, "nginx", "-c", "/etc/fleet/nginx.conf", "-s", "stop")
    try:
        for replica in REPLICAS:
            wait_for(f"{replica} answers 502 for the stopped origin", 10,
                     lambda r=replica: fleet.request(r, "/page")[0] == 502)
            status, _ = fleet.request(replica, "/page", host="other.test", timeout=5)
            check(status == 200, f"the other origin through {replica} while one is down: {status}")
    finally:
        run("docker", "exec", origin, "nginx", "-c", "/etc/fleet/nginx.conf")
    for replica in REPLICAS:
        wait_for(f"{replica} reaches the origin again", 20, lambda r=replica: fleet.request(r, "/page")[0] == 200, every=0.5)
    others.check("at the other origin while one was frozen and down")


def roll(fleet, replica, config_path, image=None):
    """Takes `replica` out of rotation, recreates it with `config_path` (and `image`), puts it
    back."""
    fleet.loadgen_control("pause", replica)
    fleet.env[f"RG{REPLICAS.index(replica) + 1}_CONFIG"] = config_path
    if image is not None:
        fleet.env[f"RG{REPLICAS.index(replica) + 1}_IMAGE"] = image
    fleet.containers.pop(replica, None)
    fleet.compose("up", "-d", "--no-deps", "--no-color", replica)
    fleet.wait_ready(replica)
    fleet.loadgen_control("resume", replica)


@scenario("rolling")
def rolling(fleet):
    blocking = fleet.base_config().replace(
        "  mode: enforce\n", "  mode: enforce\n  policy: {crawlers: {DotBot: block}}\n", 1
    )
    check(blocking != fleet.base_config(), "the fleet config has no `mode: enforce` to extend")
    traffic = Traffic(fleet)
    for i, replica in enumerate(REPLICAS):
        roll(fleet, replica, fleet.write_config(f"{replica}-dotbot.yaml", blocking))
        for j, other in enumerate(REPLICAS):
            status, _ = fleet.request(other, "/", agent=DOTBOT, client=f"198.51.100.{90 + j}")
            want = 403 if j <= i else 200
            check(status == want, f"DotBot on {other} after rolling {replica}: {status}, want {want}")
        log(f"rolling: {replica} takes the new config; DotBot refused by {REPLICAS[: i + 1]}")
    traffic.check("during the rolling change")


def shared_after_failover(fleet, scenario, store, killed, client, ban, crawler):
    """After a store failover: every replica shares through the new STORE again, the ban made
    before it still holds, a new ban (an address, reaching the others within seconds) made on rg2
    holds on rg1 and rg3, and a crawler's Crawl-delay budget spent on rg2 is spent on rg1 and rg3."""
    for replica in REPLICAS:
        wait_for(f"{replica} shares through the new {store}", 30, lambda r=replica: fleet.backend_up(r) == 1, every=0.2)
    log(f"{scenario}: all replicas share again {time.monotonic() - killed:.1f} s after the kill")
    check(fleet.refuses_as_banned("rg3", client), "the ban did not survive the failover")
    banned, within = ban
    fleet.strike_out("rg2", banned)
    for replica in ("rg1", "rg3"):
        wait_for(f"the new ban reaches {replica}", within,
                 lambda r=replica: fleet.refuses_as_banned(r, banned), every=0.02)
    check(fleet.request("rg2", "/page", agent=AHREFSBOT, client=crawler)[0] == 200, "AhrefsBot refused")
    for replica in ("rg1", "rg3"):
        check(fleet.request(replica, "/page", agent=AHREFSBOT, client=crawler)[0] == 429,
              f"the budget is not shared with {replica} after the failover")


@scenario("sentinel")
def sentinel(fleet):
    fleet.compose("--profile", "sentinel", "up", "-d", "--no-color",
                  "redis-primary", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3")

    def settled():
        for name in ("sentinel-1", "sentinel-2", "sentinel-3"):
            replicas = run("docker", "exec", fleet.container(name), "redis-cli", "-p", "26379",
                           "SENTINEL", "REPLICAS", "fleet", check_rc=False).stdout
            others = run("docker", "exec", fleet.container(name), "redis-cli", "-p", "26379",
                         "SENTINEL", "SENTINELS", "fleet", check_rc=False).stdout
            if "flags\nslave" not in replicas or others.count("runid") != 2:
                return False
        return True

    wait_for("the sentinels know the replica and each other", 60, settled, every=0.5)
    config = open(os.path.join(COMPOSE_DIR, "robotsguard-sentinel.yaml"), encoding="utf-8").read()
    config = config.replace("  mode: enforce\n", "  mode: enforce\n  policy: {crawlers: {DotBot: block}}\n", 1)
    path = fleet.write_config("sentinel.yaml", config)
    traffic = Traffic(fleet)
    for replica in REPLICAS:
        roll(fleet, replica, path)
    for replica in REPLICAS:
        wait_for(f"{replica} shares through the sentinels' primary", 20, lambda r=replica: fleet.backend_up(r) == 1)
    client = "198.51.100.80"
    fleet.strike_out("rg1", client)
    for replica in ("rg2", "rg3"):
        wait_for(f"the ban reaches {replica}", 1.0, lambda r=replica: fleet.refuses_as_banned(r, client), every=0.02)
    status, _ = fleet.request("rg1", "/page", agent=AHREFSBOT, client="198.51.100.81")
    check(status == 200, f"AhrefsBot got {status}")
    check(fleet.request("rg2", "/page", agent=AHREFSBOT, client="198.51.100.81")[0] == 429, "budget not shared")
    wait_for("the ban is on the replica", 10,
             lambda: fleet.redis_cli("redis-replica", "HEXISTS", "robotsguard:bans", f"{client} site") == "1")

    primary_ip = fleet.redis_cli("sentinel-1", "-p", "26379", "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fleet").split()[0]
    run("docker", "kill", fleet.container("redis-primary"))
    failover_started = time.monotonic()
    fresh = 0

    def promoted():
        nonlocal fresh
        # Whatever should pass passes while the primary is gone: a crawler at a fresh address
        # is within its budget, a browser is a browser; the ban made before still holds.
        for replica in REPLICAS:
            fresh += 1
            address = f"203.0.113.{fresh % 250 + 1}"
            status, body = fleet.request(replica, "/page", agent=AHREFSBOT, client=address)
            check(status == 200, f"AhrefsBot at fresh {address} via {replica} during the failover: {status} {body[:200]}")
            check(fleet.refuses_as_banned(replica, client), f"{replica} forgot the ban during the failover")
        now = run("docker", "exec", fleet.container("sentinel-1"), "redis-cli", "-p", "26379",
                  "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fleet", check_rc=False).stdout.split()
        return bool(now) and now[0] != primary_ip

    wait_for("a sentinel failover", 60, promoted, every=0.2)
    log(f"sentinel: the replica was promoted {time.monotonic() - failover_started:.1f} s after the primary was killed")
    shared_after_failover(fleet, "sentinel", "primary", failover_started, client,
                          ban=("198.51.100.82", 1.0), crawler="198.51.100.83")
    traffic.check("through the move to sentinel and the failover")


def cluster_nodes(fleet, service):
    """CLUSTER NODES as `service` sees it: per node its address, flags, link state and slots."""
    text = run("docker", "exec", fleet.container(service), "redis-cli", "CLUSTER", "NODES",
               check_rc=False).stdout
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        rows.append({
            "address": parts[1].split("@")[0].rsplit(":", 1)[0],
            "flags": set(parts[2].split(",")),
            "link": parts[7],
            "slots": [r for r in parts[8:] if not r.startswith("[")],
        })
    return rows


def slot_owner(rows, slot):
    """The address of the live master serving `slot`, or None."""
    for row in rows:
        if "master" not in row["flags"] or row["flags"] & {"fail", "fail?"}:
            continue
        for span in row["slots"]:
            low, _, high = span.partition("-")
            if int(low) <= slot <= int(high or low):
                return row["address"]
    return None


def form_cluster(fleet):
    """Starts the six nodes and joins them: three masters, each with a replica in sync."""
    fleet.compose("--profile", "cluster", "up", "-d", "--no-color", *CLUSTER_NODES)
    for node in CLUSTER_NODES:
        wait_for(f"{node} answers", 20, lambda n=node: run(
            "docker", "exec", fleet.container(n), "redis-cli", "PING", check_rc=False).stdout.strip() == "PONG",
            every=0.2)
    addresses = [f"{fleet.address_of(node)}:6379" for node in CLUSTER_NODES]
    run("docker", "exec", fleet.container(CLUSTER_NODES[0]), "redis-cli", "--cluster", "create", *addresses,
        "--cluster-replicas", "1", "--cluster-yes", timeout=60)

    def formed():
        rows = cluster_nodes(fleet, CLUSTER_NODES[0])
        masters = [r for r in rows if "master" in r["flags"] and r["slots"]]
        replicas = [r for r in rows if "slave" in r["flags"] and r["link"] == "connected"]
        if len(masters) != 3 or len(replicas) != 3:
            return False
        for node in CLUSTER_NODES:
            info = run("docker", "exec", fleet.container(node), "redis-cli", "INFO", "replication",
                       check_rc=False).stdout
            state = run("docker", "exec", fleet.container(node), "redis-cli", "CLUSTER", "INFO",
                        check_rc=False).stdout
            if "cluster_state:ok" not in state or ("role:slave" in info and "master_link_status:up" not in info):
                return False
        return True

    wait_for("the cluster formed (three masters, each with a replica in sync)", 60, formed, every=0.5)
    log("cluster: six nodes joined, three masters with a replica each")


@scenario("cluster")
def cluster(fleet):
    form_cluster(fleet)
    config = open(os.path.join(COMPOSE_DIR, "robotsguard-cluster.yaml"), encoding="utf-8").read()
    config = config.replace("  mode: enforce\n", "  mode: enforce\n  policy: {crawlers: {DotBot: block}}\n", 1)
    path = fleet.write_config("cluster.yaml", config)
    traffic = Traffic(fleet)
    for replica in REPLICAS:
        roll(fleet, replica, path)
    for replica in REPLICAS:
        wait_for(f"{replica} shares through the cluster", 20, lambda r=replica: fleet.backend_up(r) == 1)
    log("cluster: the replicas share through the cluster")
    client = "198.51.100.110"
    fleet.strike_out("rg1", client)
    for replica in ("rg2", "rg3"):
        wait_for(f"the ban reaches {replica}", 1.0, lambda r=replica: fleet.refuses_as_banned(r, client), every=0.02)
    check(fleet.request("rg1", "/page", agent=AHREFSBOT, client="198.51.100.111")[0] == 200, "AhrefsBot refused")
    for replica in ("rg2", "rg3"):
        check(fleet.request(replica, "/page", agent=AHREFSBOT, client="198.51.100.111")[0] == 429,
              f"the budget is not shared with {replica} through the cluster")
    # Reports: each replica writes its own every 10 s; any replica's report merges all three.
    wait_for("a report of all three replicas through the cluster", 30,
             lambda: (fleet.crawler_report("rg2") or (0, 0))[0] == 3, every=0.5)
    log("cluster: bans, budgets and reports shared")

    # The key layout: what one script or pipeline uses together shares a slot, and no more.
    node = CLUSTER_NODES[0]

    def slot(key):
        return int(fleet.redis_cli(node, "CLUSTER", "KEYSLOT", key))

    bans_slot = slot("{robotsguard:}bans")
    report_slot = slot("{robotsguard:reports:site}:replicas")
    check(fleet.redis_cli(node, "-c", "EXISTS", "{robotsguard:}bans") == "1", "no {robotsguard:}bans in the cluster")
    check(fleet.redis_cli(node, "-c", "EXISTS", "{robotsguard:reports:site}:replicas") == "1",
          "the reports of `site` are not under their own hash tag")
    report_keys = set()
    for member in CLUSTER_NODES:
        report_keys.update(k for k in fleet.redis_cli(member, "KEYS", "*reports:site*").split() if k)
    check(len(report_keys) >= 4, f"the reports of `site`: {sorted(report_keys)}")
    check(all(slot(k) == report_slot for k in report_keys), f"the reports of `site` span slots: {sorted(report_keys)}")
    check(report_slot != bans_slot, "the reports share the bans' slot")
    check(slot("{robotsguard:reports:other}:replicas") != report_slot, "two origins' reports share a slot")

    # The master of the bans' slot killed under traffic: its replica takes over.
    owner = slot_owner(cluster_nodes(fleet, node), bans_slot)
    check(owner is not None, "no master serves the bans' slot")
    by_address = {fleet.address_of(n): n for n in CLUSTER_NODES}
    victim = by_address[owner]
    witness = next(n for n in CLUSTER_NODES if n != victim)
    log(f"cluster: the bans' slot {bans_slot} on {victim}, the reports of `site` in slot {report_slot}; killing {victim}")
    run("docker", "kill", fleet.container(victim))
    killed = time.monotonic()
    fresh = 0

    def promoted():
        nonlocal fresh
        # Whatever should pass passes meanwhile: a crawler at a fresh address is within its
        # budget; the ban made before still holds.
        for replica in REPLICAS:
            fresh += 1
            address = f"2001:db8:c1:{fresh:x}::1"  # one /64 each: budgets are per network
            status, body = fleet.request(replica, "/page", agent=AHREFSBOT, client=address)
            check(status == 200, f"AhrefsBot at fresh {address} via {replica} during the failover: {status} {body[:200]}")
            check(fleet.refuses_as_banned(replica, client), f"{replica} forgot the ban during the failover")
        now = slot_owner(cluster_nodes(fleet, witness), bans_slot)
        return now is not None and now != owner

    wait_for("a replica promoted in the killed master's place", 60, promoted, every=0.2)
    log(f"cluster: {victim}'s replica took its slots {time.monotonic() - killed:.1f} s after the kill")
    shared_after_failover(fleet, "cluster", "master", killed, client,
                          ban=("198.51.100.112", 2.0), crawler="198.51.100.113")
    traffic.check("through the move to the cluster and the failover")


def releases():
    """(tag, commit) of every release in RELEASES, oldest first."""
    listed = []
    with open(os.path.join(ROOT, "RELEASES"), encoding="utf-8") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                check(len(words) >= 2 and re.fullmatch(r"v\d+\.\d+\.\d+", words[0]) is not None
                      and re.fullmatch(r"[0-9a-f]{40}", words[1]) is not None, f"RELEASES: bad line {line!r}")
                listed.append((words[0], words[1]))
    check(listed, "RELEASES lists no release")
    return listed


def previous_release():
    """The newest release in RELEASES that is not the checked-out commit."""
    head = run("git", "-C", ROOT, "rev-parse", "HEAD").stdout.strip()
    earlier = [(tag, commit) for tag, commit in releases() if commit != head]
    check(earlier, "RELEASES names no release before this commit")
    return earlier[-1]


def strike(fleet, replica, client):
    """Three requests robots.txt disallows to Bytespider, which ban the address (either version)."""
    for n in range(3):
        status, body = fleet.request(replica, f"/x{n}", agent=BYTESPIDER, client=client)
        check(status == 403, f"Bytespider on {replica} got {status}: {body[:200]}")
    check(fleet.refuses_as_banned(replica, client), f"{client} is not banned on {replica}")


@scenario("upgrade")
def upgrade(fleet):
    tag, commit = previous_release()
    previous = fleet.previous_image or f"robotsguard-release:{tag}"
    check(run("docker", "image", "inspect", previous, check_rc=False).returncode == 0,
          f"no image {previous}: scripts/build-release-image.sh {tag} builds it")
    for image in (previous, fleet.image):
        log(f"upgrade: {image} is {run('docker', 'run', '--rm', image, '--version').stdout.strip()}")
    # Each version gets the fleet config its release shipped, checked by its own `validate`.
    old_text = run("git", "-C", ROOT, "show", f"{commit}:deploy/compose/robotsguard.yaml").stdout
    configs = {previous: fleet.write_config("previous.yaml", old_text),
               fleet.image: fleet.write_config("current.yaml", fleet.base_config())}
    for image, path in configs.items():
        run("docker", "run", "--rm", "--network", fleet.network, "-v", f"{path}:/etc/robotsguard/robotsguard.yaml:ro",
            image, "validate", "--config", "/etc/robotsguard/robotsguard.yaml")
    traffic = Traffic(fleet)
    # The fleet as the previous release runs it (a rolling downgrade: the way back works too),
    # over a store that release alone wrote: it has no `schema` key.
    for replica in REPLICAS:
        roll(fleet, replica, configs[previous], previous)
    for replica in REPLICAS:
        wait_for(f"{replica} on {tag} shares its state", 20, lambda r=replica: fleet.backend_up(r) == 1)
    fleet.redis_cli("redis", "DEL", "robotsguard:schema")
    old_ban = "198.51.100.120"
    strike(fleet, "rg1", old_ban)
    for replica in ("rg2", "rg3"):
        wait_for(f"the {tag} ban reaches {replica}", 2.0, lambda r=replica: fleet.refuses_as_banned(r, old_ban), every=0.02)
    # Each replica's report reaches the store within 10 s.
    counted = wait_for("a report of the previous release's replicas", 30,
                       lambda: (fleet.crawler_report("rg1") or (0, 0))[1], every=0.5)
    log(f"upgrade: {tag} fleet; the report of `site` counts {counted} crawler requests")
    for i, replica in enumerate(REPLICAS):
        roll(fleet, replica, configs[fleet.image], fleet.image)
        wait_for(f"upgraded {replica} shares its state", 20, lambda r=replica: fleet.backend_up(r) == 1)
        upgraded, old = REPLICAS[: i + 1], REPLICAS[i + 1 :]
        if i == 0:
            wait_for("the upgraded replica writes the key schema", 5,
                     lambda: fleet.redis_cli("redis", "GET", "robotsguard:schema") == "1")
        check(fleet.metric(replica, "robotsguard_state_schema_newer") == 0, f"{replica} finds a newer schema")
        # Bans made on either version are honoured by both.
        check(fleet.refuses_as_banned(replica, old_ban), f"upgraded {replica} lets the {tag} ban through")
        made_new = f"198.51.100.{121 + 2 * i}"
        strike(fleet, replica, made_new)
        for other in REPLICAS:
            wait_for(f"the ban made on upgraded {replica} reaches {other}", 2.0,
                     lambda r=other: fleet.refuses_as_banned(r, made_new), every=0.02)
        if old:
            made_old = f"198.51.100.{122 + 2 * i}"
            strike(fleet, old[0], made_old)
            for other in upgraded:
                wait_for(f"the ban made on {tag} {old[0]} reaches upgraded {other}", 2.0,
                         lambda r=other: fleet.refuses_as_banned(r, made_old), every=0.02)
        # The reports of both versions merged: the count goes on from where it was.
        now = (fleet.crawler_report(replica) or (0, 0))[1]
        check(now >= counted, f"the report on upgraded {replica} counts {now} crawler requests, {counted} before")
        counted = now
        log(f"upgrade: {replica} runs this build ({'old: ' + ', '.join(old) if old else 'all upgraded'}); "
            f"bans shared both ways; the report counts {now}")
    grown = wait_for("the report counting on after the upgrade", 30,
                     lambda: (fleet.crawler_report("rg3") or (0, 0))[1] > counted and fleet.crawler_report("rg3")[1], every=0.5)
    log(f"upgrade: the report of `site` counts {grown} crawler requests")
    traffic.check("through the rolling upgrade")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="robotsguard:latest")
    parser.add_argument("--testbed", default="robotsguard-testbed:bookworm")
    parser.add_argument("--previous-image", help="the previous release's image (default: "
                        "robotsguard-release:TAG, TAG the newest release in RELEASES before this commit)")
    parser.add_argument("--only", help="comma-separated scenarios to run, in their order (all by default)")
    args = parser.parse_args()
    for tool in ("docker", "docker-compose"):
        if shutil.which(tool) is None:
            log(f"FAILED: {tool} is not installed")
            return 1
    if run("docker", "info", check_rc=False).returncode != 0:
        log("FAILED: no Docker engine answers (docker info failed)")
        return 1
    steps = [shared, partition, kill, origin, rolling, sentinel, cluster, upgrade]
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - {s.__name__ for s in steps}
        if unknown:
            log(f"FAILED: no scenario {', '.join(sorted(unknown))}")
            return 2
        steps = [s for s in steps if s.__name__ in wanted]
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="rgfleet")
    os.chmod(work, 0o755)
    fleet = Fleet(args.image, args.testbed, work)
    fleet.previous_image = args.previous_image
    failed = None
    try:
        fleet.up()
        TIMES.append(("up", time.monotonic() - started))
        for step in steps:
            step(fleet)
    except Exception as e:  # noqa: BLE001 - any failure ends the run with the fleet's logs

        failed = e
        print(fleet.logs()[-20000:], file=sys.stderr)
    finally:
        if os.environ.get("KEEP") != "1":
            try:
                fleet.down()
            except Failed as e:
                log(f"down: {e}")
            shutil.rmtree(work, ignore_errors=True)
    summary = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in TIMES)
    if failed is not None:
        log(f"FAILED: {failed} ({summary})")
        return 1
    log(f"all scenarios passed in {time.monotonic() - started:.0f} s ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
