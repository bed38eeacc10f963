#!/usr/bin/env python3
"""Runs the robotsguard image the way the Helm chart does and checks it works.

    scripts/test-image.py [--image robotsguard:latest] [--testbed robotsguard-testbed:bookworm]

Every container runs with the chart's security context: user 65532, read-only root filesystem,
every capability dropped, no privilege escalation, /tmp a tmpfs. Checks, in order:

1. The image: OCI labels (version, revision, source), the numeric user, STOPSIGNAL, HEALTHCHECK,
   no shell inside; `--version` names the version and commit of the labels.
2. `demo`: the README's curl lines, run inside the container's network namespace (the demo
   listens on loopback), answer as the README's comments say.
3. A mounted config, an nginx origin on a private network: a browser passes, a disallowed
   crawler gets 403, the HEALTHCHECK reports healthy.
4. SIGTERM (docker stop) while a slow download is in flight: the download finishes whole, new
   connections are refused, and the container exits 0 within shutdown.grace plus a second.

Python's standard library and the docker CLI only. Exits non-zero on the first failed check.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECURITY = [
    "--user", "65532:65532",
    "--read-only",
    "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges:true",
    "--tmpfs", "/tmp",
]
RUN_ID = f"rgimg{os.getpid()}"
CREATED = []


def log(message):
    print(f"test-image: {message}", flush=True)


def fail(message):
    print(f"test-image: FAILED: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def docker(*args, check=True, timeout=120):
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        fail(f"docker {' '.join(args)}: {result.stderr.strip()}")
    return result


def container(name, *args):
    CREATED.append(name)
    return docker("run", "-d", "--name", name, *args).stdout.strip()


def cleanup():
    for name in reversed(CREATED):
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    subprocess.run(["docker", "network", "rm", f"{RUN_ID}-net"], capture_output=True)


def wait_for(what, within, check):
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            fail(f"{what}: not within {within} s")
        time.sleep(0.2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, host="localhost", agent="test-image", timeout=10):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Host": host, "User-Agent": agent}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def check_image(image):
    config = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]
    labels = config.get("Labels") or {}
    for key in ("version", "revision"):
        value = labels.get(f"org.opencontainers.image.{key}", "")
        if not value or value == "unknown":
            fail(f"label org.opencontainers.image.{key} is {value!r}")
    # The source is a web address without credentials, or absent (a local clone has none).
    source = labels.get("org.opencontainers.image.source")
    if source is not None and (
        not re.match(r"^https?://[^/@\s]+/\S+$", source) or source.endswith(".git")
    ):
        fail(f"label org.opencontainers.image.source is {source!r}")
    if config.get("User") != "65532:65532":
        fail(f"the image runs as {config.get('User')!r}, not the chart's 65532:65532")
    if config.get("StopSignal") != "SIGTERM":
        fail(f"STOPSIGNAL is {config.get('StopSignal')!r}")
    health = (config.get("Healthcheck") or {}).get("Test") or []
    if "healthcheck" not in health:
        fail(f"HEALTHCHECK is {health!r}")
    version = docker("run", "--rm", *SECURITY, image, "--version").stdout.strip()
    expected = f"robotsguard {labels['org.opencontainers.image.version']} (commit {labels['org.opencontainers.image.revision']})"
    # A tagged build names its tag after the commit (`git describe`).
    if version != expected and not version.startswith(expected + " v"):
        fail(f"--version says {version!r}, the labels {expected!r}")
    shell = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true", check=False)
    if shell.returncode == 0:
        fail("the image has a shell")
    log(f"image: {version}; labels, user 65532, STOPSIGNAL, HEALTHCHECK, no shell")


def readme_demo_lines():
    """The curl lines of the README's demo block, with what each comment promises."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = text.split("prints what to try:", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.splitlines() if line.strip().startswith("curl")]
    if len(lines) < 5:
        fail(f"the README's demo block has {len(lines)} curl lines")
    return lines


def check_demo(image, testbed):
    name = f"{RUN_ID}-demo"
    container(name, *SECURITY, image, "demo")

    def run_in_demo(command):
        return docker("run", "--rm", "--network", f"container:{name}", testbed, "sh", "-c", command, check=False)

    wait_for("the demo proxy", 30, lambda: run_in_demo("curl -sf http://127.0.0.1:9090/readyz").returncode == 0)
    for line in readme_demo_lines():
        command, _, comment = line.partition("#")
        result = run_in_demo(command)
        output = result.stdout
        status = re.match(r"HTTP/\S+ (\d{3})", output)
        promised = re.search(r"\b([1-5]\d\d)\b", comment)
        if "robots.txt always passes" in comment:
            promised_status = 200
        elif promised:
            promised_status = int(promised.group(1))
        else:
            promised_status = None
        if promised_status is not None:
            got = int(status.group(1)) if status else None
            if got != promised_status:
                fail(f"`{command.strip()}` answered {got}, the README says {promised_status}:\n{output}")
            if promised_status == 403 and "robots.txt" not in output:
                fail(f"the 403 does not give its reason:\n{output}")
        elif "/explain" in command:
            explained = json.loads(output)
            if explained.get("decision") != "blocked":
                fail(f"/explain of the blocked request says {explained.get('decision')!r}")
        elif "robotsguard_requests_total" in command:
            if "robotsguard_requests_total{" not in output:
                fail(f"the metrics line printed nothing:\n{result.stderr}")
        else:
            fail(f"no expectation read for `{line}`")
        log(f"demo: {command.strip()[:90]} -> as documented")
    docker("rm", "-f", name)


ORIGIN_NGINX = """
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events { worker_connections 64; }
http {
    access_log off;
    default_type text/html;
    server {
        listen 80;
        root /tmp/site;
        # The slow download of the shutdown check: 3 MB at 1.5 MB/s.
        location = /big { limit_rate 1500k; }
    }
}
"""

CONFIG = """
listen: ["0.0.0.0:8080"]
admin: "0.0.0.0:9090"
threads: 2
shutdown: {grace: 4s}
origins:
  - name: site
    hosts: [site.test]
    upstream: "origin:80"
"""


def check_mounted_config(image, testbed, work):
    network = f"{RUN_ID}-net"
    docker("network", "create", network)
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write(ORIGIN_NGINX)
    with open(os.path.join(work, "robotsguard.yaml"), "w") as f:
        f.write(CONFIG)
    os.chmod(work, 0o755)
    for name in ("nginx.conf", "robotsguard.yaml"):
        os.chmod(os.path.join(work, name), 0o644)
    container(
        f"{RUN_ID}-origin", "--network", network, "--network-alias", "origin",
        "-v", f"{work}/nginx.conf:/etc/origin.conf:ro", testbed, "sh", "-c",
        "mkdir -p /tmp/site && printf 'User-agent: GPTBot\\nDisallow: /\\n' >/tmp/site/robots.txt"
        " && echo hello >/tmp/site/index.html && head -c 3000000 /dev/zero >/tmp/site/big"
        " && exec nginx -c /etc/origin.conf -g 'daemon off;'",
    )
    port, admin = free_port(), free_port()
    name = f"{RUN_ID}-rg"
    container(
        name, *SECURITY, "--network", network,
        "-p", f"127.0.0.1:{port}:8080", "-p", f"127.0.0.1:{admin}:9090",
        "-v", f"{work}/robotsguard.yaml:/etc/robotsguard/robotsguard.yaml:ro",
        "--health-interval", "1s", "--health-start-period", "1s",
        image,
    )

    def ready():
        try:
            return http(admin, "/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    wait_for("/readyz through the published port", 60, ready)
    status, body = http(port, "/", host="site.test", agent="Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
    if status != 200 or "hello" not in body:
        fail(f"a browser got {status}: {body[:200]}")
    status, body = http(port, "/", host="site.test", agent="GPTBot/1.2")
    if status != 403:
        fail(f"GPTBot got {status}, robots.txt disallows it: {body[:200]}")
    health = wait_for(
        "the HEALTHCHECK", 30,
        lambda: docker("inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip() == "healthy" or None,
    )
    log(f"mounted config: browser 200, GPTBot 403, health {health and 'healthy'}")
    return name, port


def check_sigterm(name, port):
    received = {}

    def download():
        started = time.monotonic()
        try:
            status, body = http(port, "/big", host="site.test", agent="Mozilla/5.0 Firefox/128.0", timeout=30)
            received["status"], received["bytes"] = status, len(body)
        except OSError as e:
            received["error"] = repr(e)
        received["seconds"] = time.monotonic() - started

    downloader = threading.Thread(target=download)
    downloader.start()
    time.sleep(0.7)
    stop_started = time.monotonic()
    stopper = threading.Thread(target=lambda: docker("stop", "-t", "30", name, timeout=60))
    stopper.start()
    # Once SIGTERM has arrived the listener is closed: new connections are refused.
    time.sleep(1.0)
    try:
        status, _ = http(port, "/", host="site.test", timeout=3)
        fail(f"a new request during the drain was answered {status}")
    except OSError:
        pass
    stopper.join()
    stopped = time.monotonic() - stop_started
    downloader.join()
    if received.get("status") != 200 or received.get("bytes") != 3000000:
        fail(f"the download in flight did not finish whole: {received}")
    state = json.loads(docker("inspect", name).stdout)[0]["State"]
    if state["ExitCode"] != 0:
        fail(f"exit code {state['ExitCode']} after SIGTERM")
    # The grace bounds the drain; what must never happen is docker's own 30 s timeout and a SIGKILL.
    # The slack is wide because a loaded CI machine takes seconds to start and stop containers.
    grace = 4
    if stopped > grace + 10:
        fail(f"stopping took {stopped:.1f} s, the grace is {grace} s")
    log(f"SIGTERM: the download in flight finished whole ({received['seconds']:.1f} s), new "
        f"connections refused, exit 0 after {stopped:.1f} s (grace {grace} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="robotsguard:latest")
    parser.add_argument("--testbed", default="robotsguard-testbed:bookworm")
    args = parser.parse_args()
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        fail("no Docker engine answers (docker info failed)")
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as work:
            check_image(args.image)
            check_demo(args.image, args.testbed)
            name, port = check_mounted_config(args.image, args.testbed, work)
            check_sigterm(name, port)
    finally:
        cleanup()
    log(f"all checks passed in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
