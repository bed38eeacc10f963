#!/usr/bin/env python3
"""The operator's console in a real browser (Debian's headless Chromium, driven by Playwright).

Starts an origin and the real robotsguard binary on loopback ports, sends a scripted mix of
traffic through the proxy, then loads every console page: checks the tables' contents, signs in
with the read-only and the admin token, lifts a ban with the button, downloads a CSV, explains a
request with the form, and fails on any console error or Content-Security-Policy violation.
Screenshots go to target/console-screenshots/ (CI keeps them).

Usage: console_test.py PATH_TO_ROBOTSGUARD [--screenshots-for-docs]
"""

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

ADMIN_TOKEN = "console-admin-token"
READ_TOKEN = "console-read-token"
GPTBOT = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
CCBOT = "CCBot/2.0 (https://commoncrawl.org/faq/)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin(http.server.BaseHTTPRequestHandler):
    """An origin that answers every path with a short page."""

    def do_GET(self):
        body = f"page {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start_origin():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def wait_for(check, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if check():
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def fetch(url, headers=None, method="GET"):
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    binary = os.path.abspath(sys.argv[1])
    docs = "--screenshots-for-docs" in sys.argv
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shots = os.path.join(root, "target", "console-screenshots")
    os.makedirs(shots, exist_ok=True)
    origin = start_origin()
    work = tempfile.mkdtemp()
    listen, admin = free_port(), free_port()
    with open(os.path.join(work, "admin-token"), "w") as f:
        f.write(ADMIN_TOKEN)
    with open(os.path.join(work, "read-token"), "w") as f:
        f.write(READ_TOKEN)
    config = f"""listen: ["127.0.0.1:{listen}"]
admin: {{address: "127.0.0.1:{admin}", token_file: admin-token, read_token_file: read-token}}
trusted_proxies: ["127.0.0.1/32"]
origins:
  - name: shop
    hosts: [shop.example]
    upstream: "127.0.0.1:{origin.server_address[1]}"
    robots:
      source: inline
      serve: false
      text: "User-agent: *\\nDisallow: /private\\nDisallow: /checkout\\n\\nUser-agent: CCBot\\nDisallow: /\\n"
    offenders: {{action: ban, strikes: 3, window: 10m, ban: 1h}}
  - name: blog
    hosts: [blog.example]
    upstream: "127.0.0.1:{origin.server_address[1]}"
    mode: report
    robots: {{source: inline, serve: false, text: "User-agent: GPTBot\\nDisallow: /\\n"}}
"""
    config_path = os.path.join(work, "robotsguard.yaml")
    with open(config_path, "w") as f:
        f.write(config)
    log = open(os.path.join(work, "robotsguard.log"), "w")
    proxy = subprocess.Popen([binary, "serve", "--config", config_path], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{admin}"
    try:
        wait_for(lambda: fetch(base + "/healthz")[0] == 200, "robotsguard")

        def send(host, path, ua, client):
            return fetch(
                f"http://127.0.0.1:{listen}{path}",
                {"Host": host, "User-Agent": ua, "X-Forwarded-For": client},
            )[0]

        # The scripted mix.
        for i in range(5):
            assert send("shop.example", f"/products/{i}", BROWSER, "198.51.100.10") == 200
        for i in range(4):
            assert send("shop.example", f"/products/{i}", GPTBOT, "192.0.2.1") == 200
        assert send("shop.example", "/robots.txt", GPTBOT, "192.0.2.2") == 200
        for path in ["/private/orders", "/private/orders", "/checkout/cart"]:
            assert send("shop.example", path, GPTBOT, "192.0.2.2") == 403
        # Banned, but a browser passes (offenders.scope: crawlers) and is counted on the ban.
        assert send("shop.example", "/products/1", BROWSER, "192.0.2.2") == 200
        assert send("shop.example", "/products/1", GPTBOT, "192.0.2.2") == 403
        assert send("shop.example", "/products/9", CCBOT, "192.0.2.3") == 403
        assert send("blog.example", "/post/1", GPTBOT, "192.0.2.4") == 200  # report mode
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}

        def counted():
            status, body = fetch(base + "/reports/crawlers?origin=shop", auth)
            rows = {r["name"]: r for r in json.loads(body)["crawlers"]}
            return status == 200 and rows.get("GPTBot", {}).get("requests") == 9

        wait_for(counted, "the crawler report")

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                args=["--no-sandbox"],
            )
            problems = []
            width = 1280

            def watch(page):
                page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

            context = browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True)
            page = context.new_page()
            watch(page)

            # Signed out: the login form; a wrong token is refused.
            page.goto(base + "/ui/")
            assert page.url.startswith(base + "/ui/login"), page.url
            page.fill("input[name=token]", "wrong")
            page.click("button[type=submit]")
            assert page.locator("#login-failed").is_visible()
            page.screenshot(path=os.path.join(shots, "login.png"), full_page=True)

            # The read-only token: every page, no lift button.
            page.fill("input[name=token]", READ_TOKEN)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            assert page.url == base + "/ui/", page.url + page.content()
            rows = page.locator("#origins tbody tr")
            assert rows.count() == 2, rows.count()
            assert "shop" in rows.nth(1).inner_text() or "shop" in rows.nth(0).inner_text()
            page.screenshot(path=os.path.join(shots, "overview.png"), full_page=True)
            # Every origin's crawlers in one table: GPTBot's requests on shop and blog together.
            everywhere = {}
            for row in page.locator("#all-crawlers tbody tr").all():
                cells = [c.inner_text() for c in row.locator("td").all()]
                everywhere[cells[0]] = cells
            assert everywhere["GPTBot"][3] == "10", everywhere["GPTBot"]
            page.goto(base + "/ui/bans")
            bans_text = page.locator("#bans").inner_text()
            assert "192.0.2.2" in bans_text and "NAT?" in bans_text, bans_text
            assert page.locator("#bans button").count() == 0, "read-only: no lift button"

            # Per origin: crawler table, violations, robots.txt copies.
            page.goto(base + "/ui/origin?origin=shop")
            crawler_rows = {}
            for row in page.locator("#crawlers tbody tr").all():
                cells = [c.inner_text() for c in row.locator("td").all()]
                crawler_rows[cells[0]] = cells
            assert crawler_rows["GPTBot"][3] == "9", crawler_rows["GPTBot"]
            assert crawler_rows["GPTBot"][4] == "4", crawler_rows["GPTBot"]  # allowed
            assert crawler_rows["GPTBot"][5] == "3", crawler_rows["GPTBot"]  # blocked
            assert crawler_rows["CCBot"][5] == "1", crawler_rows["CCBot"]
            # A row adds up: allowed, blocked, limited, banned, would refuse, passed, errors.
            headers = [h.inner_text() for h in page.locator("#crawlers thead th").all()]
            assert headers[3:11] == ["Requests", "Allowed", "Blocked", "Limited", "Banned", "Would refuse", "Passed", "Errors"], headers
            for name, cells in crawler_rows.items():
                parts = [int(c.replace("\u202f", "")) for c in cells[3:11]]
                assert parts[0] == sum(parts[1:]), (name, cells)
            violations = [[c.inner_text() for c in r.locator("td").all()] for r in page.locator("#violations tbody tr").all()]
            paths = {v[2]: v for v in violations}
            assert paths["/private/orders"][6] == "2" and paths["/private/orders"][4] == "yes", paths
            assert paths["/checkout/cart"][6] == "1", paths
            assert page.locator("#robots-copies .card").count() == 1
            page.screenshot(path=os.path.join(shots, "origin.png"), full_page=True)
            if docs:
                page.set_viewport_size({"width": 1200, "height": 800})
                page.screenshot(path=os.path.join(root, "docs", "src", "images", "console-origin.png"))

            # The violation filter and the CSV download.
            page.select_option("select[name=read_robots]", "no")
            page.click("#violation-filters button")
            filtered = page.locator("#violations tbody tr")
            assert filtered.count() == 1, filtered.count()  # CCBot, which never read robots.txt
            with page.expect_download() as download:
                page.click("#violations-csv")
            csv_path = os.path.join(shots, "violations.csv")
            download.value.save_as(csv_path)
            with open(csv_path) as f:
                lines = f.read().splitlines()
            assert lines[0].startswith("crawler,verification,path,line"), lines
            assert len(lines) == 2, lines  # the filter applies to the download too

            # The admin token: lift the ban with the button.
            page.click("form.logout button")
            page.goto(base + "/ui/login?next=%2Fui%2Fbans")
            page.fill("input[name=token]", ADMIN_TOKEN)
            page.click("button[type=submit]")
            assert page.url == base + "/ui/bans", page.url
            page.screenshot(path=os.path.join(shots, "bans.png"), full_page=True)
            page.click("#bans button.danger")
            assert page.locator("#lifted").is_visible()
            assert page.locator("#bans").count() == 0 and page.locator("#bans-empty").is_visible()
            assert send("shop.example", "/products/2", GPTBOT, "192.0.2.2") == 200, "lifted"

            # Explain: the judgment as the proxy gives it.
            page.goto(base + "/ui/explain")
            page.fill("input[name=host]", "shop.example")
            page.fill("input[name=ua]", GPTBOT)
            page.fill("input[name=path]", "/checkout/x")
            page.fill("input[name=client]", "192.0.2.50")
            page.click("#explain-form button")
            judgment = page.locator("#judgment")
            assert judgment.get_attribute("data-action") == "refuse", judgment.inner_text()
            assert judgment.get_attribute("data-status") == "403", judgment.inner_text()
            assert "Disallow: /checkout" in judgment.inner_text()
            page.screenshot(path=os.path.join(shots, "explain.png"), full_page=True)

            # The overview on a phone.
            phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
            small = phone.new_page()
            watch(small)
            small.goto(base + "/ui/login")
            small.fill("input[name=token]", READ_TOKEN)
            small.click("button[type=submit]")
            small.screenshot(path=os.path.join(shots, "overview-phone.png"), full_page=True)
            if docs:
                page.goto(base + "/ui/")
                page.set_viewport_size({"width": 1200, "height": 640})
                page.screenshot(path=os.path.join(root, "docs", "src", "images", "console-overview.png"))
            browser.close()
            assert not problems, "\n".join(problems)
        print("console_test: every page loaded with no console error; screenshots in", shots)
    finally:
        proxy.terminate()
        try:
            proxy.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proxy.kill()
        origin.shutdown()
        log.close()
        with open(os.path.join(work, "robotsguard.log")) as f:
            tail = f.read()[-4000:]
        if sys.exc_info()[0] is not None:
            print(tail, file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
