//! Hardening round 3, the admin listener and the reports, through the real binary: a DNS-rebinding
//! `Host` reads nothing and lifts nothing (421, token or not; probes still pass), `admin.hosts`
//! admits the names it lists and a reload applies it; requests that change something from
//! another site are refused on every path, the JSON API included; the console's session cookie
//! is `__Host-` behind TLS and never reaches an origin; sign-ins back off; short or shared
//! tokens are refused by `validate` and `serve` alike; page loads cannot evict the operator's
//! session; CSV cells are defused after any separator; `/explain`'s DNS lookups and robots.txt
//! refreshes on demand are rate-limited; made-up crawler names never take the rows of catalogue
//! crawlers; `since`/`until` narrow every report table; the console's Explain words a
//! verification as `/explain` does; the crawler tables add up and cover every origin too.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use support::dns::DnsServer;
use support::{Conn, Origin, Proxy, Request, Response, BROWSER, GPTBOT};

const ADMIN_TOKEN: &str = "round3-admin-token-0123456789";
const CLAUDEBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const CCBOT: &str = "CCBot/2.0 (https://commoncrawl.org/faq/)";

/// One origin `shop` (robots.txt inline, `/private` disallowed) banning at the third violation;
/// `extra` goes before `origins`.
fn shop(origin: &Origin, extra: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{extra}\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\", serve: false}}\n    \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 1h}}\n",
        origin.addr()
    )
}

/// A request through the proxy from `client` (forwarded by the trusted loopback peer).
fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

/// `request` on the admin listener, as sent (its `Host` included).
fn admin(proxy: &Proxy, request: &Request) -> Response {
    Conn::open(proxy.admin).send(request)
}

/// `request` on the admin listener under its own address.
fn own(proxy: &Proxy, request: Request) -> Response {
    admin(proxy, &request.host(&proxy.admin.to_string()))
}

/// Bans 192.0.2.9 on `shop` (three violations).
fn ban(proxy: &Proxy) {
    for path in ["/private/1", "/private/2", "/private/3"] {
        assert_eq!(from(proxy, "192.0.2.9", path, GPTBOT).status, 403);
    }
    assert_eq!(from(proxy, "192.0.2.9", "/", GPTBOT).status, 403, "banned");
}

fn banned(proxy: &Proxy) -> bool {
    let bans = own(
        proxy,
        Request::get("/bans?origin=shop").header("Authorization", &format!("Bearer {ADMIN_TOKEN}")),
    )
    .json();
    bans["bans"]
        .as_array()
        .is_some_and(|bans| bans.iter().any(|b| b["client"] == "192.0.2.9"))
}

/// The session cookie (`name=value`) and the CSRF token of a console page answer.
fn session_of(page: &Response) -> (String, String) {
    let cookie = page
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_string();
    let csrf = page
        .text()
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    (cookie, csrf)
}

#[test]
fn a_rebinding_host_reads_nothing_and_lifts_nothing_while_probes_pass() {
    let origin = Origin::start();
    // The token-less loopback admin: the default, the demo, the port-forward set-up.
    let proxy = Proxy::start(&shop(&origin, ""));
    ban(&proxy);
    let port = proxy.admin.port();
    let rebound = format!("attacker.example:{port}");
    for target in [
        "/explain?host=shop.example&ua=GPTBot&path=/private",
        "/reports/crawlers?origin=shop",
        "/reports/violations?origin=shop",
        "/bans",
        "/metrics",
        "/robots?origin=shop",
        "/ui/",
        "/ui/bans",
    ] {
        let answer = admin(&proxy, &Request::get(target).host(&rebound));
        assert_eq!(answer.status, 421, "{target}: {}", answer.text());
        assert!(!answer.text().contains("192.0.2.9"), "{target}");
        // Its own names answer.
        for host in [proxy.admin.to_string(), format!("localhost:{port}")] {
            assert_eq!(
                admin(&proxy, &Request::get(target).host(&host)).status,
                200,
                "{target} via {host}"
            );
        }
    }
    // The console's own lift form, posted through the rebound name: nothing lifted.
    let page = admin(&proxy, &Request::get("/ui/bans").host(&rebound));
    assert_eq!(page.status, 421);
    let own_page = own(&proxy, Request::get("/ui/bans"));
    let (cookie, csrf) = session_of(&own_page);
    let lift = admin(
        &proxy,
        &Request::new("POST", "/ui/bans/lift")
            .host(&rebound)
            .header("Origin", &format!("http://{rebound}"))
            .header("Cookie", &cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("origin=shop&client=192.0.2.9&csrf={csrf}").as_bytes()),
    );
    assert_eq!(lift.status, 421, "{}", lift.text());
    let delete = admin(
        &proxy,
        &Request::new("DELETE", "/bans?origin=shop&client=192.0.2.9").host(&rebound),
    );
    assert_eq!(delete.status, 421);
    assert_eq!(
        from(&proxy, "192.0.2.9", "/", GPTBOT).status,
        403,
        "still banned"
    );
    // Probes keep working whatever Host they send; a name the listener does not answer to
    // learns nothing from /readyz.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            admin(&proxy, &Request::get(path).host(&rebound)).status,
            200,
            "{path}"
        );
    }
    let refused = support::metric(
        &proxy.metrics(),
        "robotsguard_admin_refusals_total",
        &[("reason", "host")],
    );
    assert!(refused >= 10.0, "{refused}");
}

#[test]
fn admin_hosts_admits_the_names_it_lists_and_a_reload_applies_it() {
    let origin = Origin::start();
    let body = shop(&origin, "");
    let proxy = Proxy::start(&body);
    let named = |host: &str| admin(&proxy, &Request::get("/bans").host(host)).status;
    assert_eq!(named("robotsguard-admin.edge.svc:9090"), 421);
    let current = std::fs::read_to_string(proxy.config_path()).expect("config readable");
    let with_hosts = current.replacen(
        &format!("admin: \"{}\"", proxy.admin),
        &format!(
            "admin: {{address: \"{}\", hosts: [robotsguard-admin.edge.svc, Console.Example.COM]}}",
            proxy.admin
        ),
        1,
    );
    assert_ne!(with_hosts, current);
    proxy.replace_config(&with_hosts);
    assert_eq!(
        proxy.wait_reloads("success", 1.0),
        1.0,
        "{}",
        proxy.stderr()
    );
    assert_eq!(named("robotsguard-admin.edge.svc:9090"), 200);
    assert_eq!(named("console.example.com"), 200);
    assert_eq!(named("other.example.com"), 421);
    assert_eq!(
        support::metric(&proxy.metrics(), "robotsguard_config_restart_required", &[]),
        0.0,
        "admin.hosts applies without a restart"
    );
}

#[test]
fn changes_from_another_site_are_refused_on_every_path_and_the_api_wants_a_csrf_token() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: *\nDisallow: /private\n");
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\norigins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 1h}}\n",
        origin.addr()
    );
    // Token-less: a simple cross-origin POST is all another site needs.
    let open = Proxy::start(&body);
    let fetches = origin.robots_fetches();
    for header in [
        ("Origin", "http://attacker.example"),
        ("Origin", "null"),
        ("Sec-Fetch-Site", "cross-site"),
    ] {
        let refresh = own(
            &open,
            Request::new("POST", "/robots/refresh?origin=shop")
                .header(header.0, header.1)
                .header("Content-Type", "text/plain")
                .body(b"x"),
        );
        assert_eq!(refresh.status, 403, "{header:?}: {}", refresh.text());
    }
    assert_eq!(origin.robots_fetches(), fetches, "no fetch was made");
    // A script (no Origin, no Sec-Fetch-Site, no cookie) and the console's own page may.
    let script = own(
        &open,
        Request::new("POST", "/robots/refresh?origin=shop").body(b""),
    );
    assert_eq!(script.status, 200, "{}", script.text());
    drop(open);

    let proxy = Proxy::builder(&body)
        .admin_token(ADMIN_TOKEN)
        .files(&[])
        .start();
    for path in ["/private/1", "/private/2", "/private/3"] {
        assert_eq!(from(&proxy, "192.0.2.9", path, GPTBOT).status, 403);
    }
    let login = own(
        &proxy,
        Request::new("POST", "/ui/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN_TOKEN}").as_bytes()),
    );
    assert_eq!(login.status, 303, "{}", login.text());
    let (cookie, _) = session_of(&login);
    let page = own(&proxy, Request::get("/ui/bans").header("Cookie", &cookie));
    let (_, csrf) = session_of(&page);
    assert!(!csrf.is_empty(), "{}", page.text());
    // The session cookie alone does not lift a ban through the JSON API...
    let lift = |extra: &[(&str, &str)]| {
        let mut request =
            Request::new("DELETE", "/bans?origin=shop&client=192.0.2.9").header("Cookie", &cookie);
        for (name, value) in extra {
            request = request.header(name, value);
        }
        own(&proxy, request)
    };
    assert_eq!(lift(&[]).status, 403);
    assert_eq!(lift(&[("X-CSRF-Token", "0000")]).status, 403);
    assert_eq!(
        lift(&[
            ("Origin", "http://attacker.example"),
            ("X-CSRF-Token", &csrf)
        ])
        .status,
        403
    );
    assert!(banned(&proxy));
    // ...the session's token does, and so does the admin token from a script.
    assert_eq!(lift(&[("X-CSRF-Token", &csrf)]).status, 200);
    for path in ["/private/4", "/private/5", "/private/6"] {
        from(&proxy, "192.0.2.9", path, GPTBOT);
    }
    assert!(banned(&proxy));
    let scripted = own(
        &proxy,
        Request::new("DELETE", "/bans?origin=shop&client=192.0.2.9")
            .header("Authorization", &format!("Bearer {ADMIN_TOKEN}")),
    );
    assert_eq!(scripted.status, 200, "{}", scripted.text());
    // A page of the admin listener itself (same Origin) may act.
    let same_origin = own(
        &proxy,
        Request::new("POST", "/robots/refresh?origin=shop")
            .header("Cookie", &cookie)
            .header("Origin", &format!("http://{}", proxy.admin))
            .body(b""),
    );
    assert_eq!(same_origin.status, 200, "{}", same_origin.text());
}

#[test]
fn the_session_cookie_is_host_prefixed_behind_tls_and_never_reaches_an_origin() {
    let origin = Origin::start();
    let proxy = Proxy::builder(&shop(&origin, ""))
        .admin_token(ADMIN_TOKEN)
        .files(&[])
        .start();
    let login = own(
        &proxy,
        Request::new("POST", "/ui/login")
            .header("X-Forwarded-Proto", "https")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN_TOKEN}").as_bytes()),
    );
    assert_eq!(login.status, 303, "{}", login.text());
    let set = login.header("set-cookie").unwrap_or_default().to_string();
    assert!(set.starts_with("__Host-robotsguard_session="), "{set}");
    for attribute in ["Path=/", "Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Domain"), "{set}");
    let cookie = set.split(';').next().unwrap_or_default();
    let page = own(
        &proxy,
        Request::get("/ui/")
            .header("X-Forwarded-Proto", "https")
            .header("Cookie", cookie),
    );
    assert_eq!(
        page.status,
        200,
        "the __Host- session is honoured: {}",
        page.text()
    );
    // Over plain HTTP the cookie keeps its name (a browser refuses __Host- without TLS).
    let plain = own(
        &proxy,
        Request::new("POST", "/ui/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN_TOKEN}").as_bytes()),
    );
    assert!(plain
        .header("set-cookie")
        .unwrap_or_default()
        .starts_with("robotsguard_session="));

    // A browser sends the admin host's cookies to every port of it, the proxied site included.
    let sent =
        "theme=dark; robotsguard_session=0123; cart=7;__Host-robotsguard_session=abcd; z=\"q\"";
    let answer = proxy.send(
        &Request::get("/page")
            .host("shop.example")
            .ua(BROWSER)
            .header("Cookie", sent),
    );
    assert_eq!(answer.status, 200);
    let received = origin.proxied_to("/page");
    let cookie = received
        .last()
        .and_then(|r| r.header("cookie"))
        .unwrap_or_default();
    assert_eq!(cookie, "theme=dark; cart=7; z=\"q\"");
    let only = proxy.send(
        &Request::get("/only")
            .host("shop.example")
            .ua(BROWSER)
            .header("Cookie", "robotsguard_session=0123"),
    );
    assert_eq!(only.status, 200);
    assert_eq!(
        origin
            .proxied_to("/only")
            .last()
            .and_then(|r| r.header("cookie")),
        None
    );
}

#[test]
fn sign_ins_back_off_and_a_waiting_address_is_not_even_checked() {
    let origin = Origin::start();
    let proxy = Proxy::builder(&shop(&origin, ""))
        .admin_token(ADMIN_TOKEN)
        .files(&[])
        .start();
    let sign_in = |token: &str| {
        own(
            &proxy,
            Request::new("POST", "/ui/login")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("token={token}").as_bytes()),
        )
    };
    let mut throttled = None;
    for attempt in 1..=12 {
        let answer = sign_in("wrong-token-guess-0123456789");
        if answer.status == 429 {
            throttled = Some((attempt, answer));
            break;
        }
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let (attempt, answer) = throttled.expect("wrong tokens are throttled");
    assert!(attempt <= 7, "throttled only at attempt {attempt}");
    let retry: u64 = answer
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=600).contains(&retry), "{retry}");
    // While it waits, even the right token is not checked.
    assert_eq!(sign_in(ADMIN_TOKEN).status, 429);
    // The wait ends (the first are short), and then the right token signs in.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = sign_in(ADMIN_TOKEN);
        if answer.status == 303 {
            break;
        }
        assert_eq!(answer.status, 429, "{}", answer.text());
        assert!(Instant::now() < deadline, "the wait did not end");
        std::thread::sleep(Duration::from_millis(200));
    }
    let metrics = own(
        &proxy,
        Request::get("/metrics").header("Authorization", &format!("Bearer {ADMIN_TOKEN}")),
    )
    .text();
    let throttled = support::metric(
        &metrics,
        "robotsguard_admin_refusals_total",
        &[("reason", "login_throttled")],
    );
    assert!(throttled >= 2.0, "{throttled}");
}

/// Runs `validate` on `config` with `files` beside it: the exit code and stderr.
fn validate(config: &str, files: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).expect("file written");
    }
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(["validate", "--config"])
        .arg(&path)
        .output()
        .expect("robotsguard runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn short_or_shared_tokens_are_refused_by_validate_and_serve_alike() {
    let config = |admin: &str| {
        format!(
            "listen: [\"127.0.0.1:{}\"]\nadmin: {{address: \"127.0.0.1:{}\"{admin}}}\nthreads: 1\n\
             origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n",
            support::free_port(),
            support::free_port()
        )
    };
    let padded = format!("  {ADMIN_TOKEN}\n");
    /// What is wrong, the config, the files beside it, what both commands must say.
    type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 4] = [
        (
            "a one-character token",
            config(", token_file: token"),
            vec![("token", "x\n")],
            "is 1 bytes long; an admin token must have at least 16",
        ),
        (
            "a 15-byte read-only token",
            config(", token_file: token, read_token_file: read"),
            vec![("token", ADMIN_TOKEN), ("read", "fifteen-bytes!!")],
            "is 15 bytes long; an admin token must have at least 16",
        ),
        (
            "the read-only token in the admin token's file",
            config(", token_file: token, read_token_file: ./token"),
            vec![("token", ADMIN_TOKEN)],
            "`admin.read_token_file` is the same file as `admin.token_file`",
        ),
        (
            "the read-only token equal to the admin token",
            config(", token_file: token, read_token_file: read"),
            vec![("token", ADMIN_TOKEN), ("read", &padded)],
            "`admin.read_token_file` holds the same token as `admin.token_file`",
        ),
    ];
    for (name, text, files, said) in cases {
        let (code, stderr) = validate(&text, &files);
        assert_eq!(code, Some(1), "validate, {name}: {stderr}");
        assert!(stderr.contains(said), "validate, {name}: {stderr}");
        // Where: the config file, line 2 (the admin mapping), a column.
        assert!(
            stderr.contains("robotsguard.yaml:2:"),
            "validate, {name}: {stderr}"
        );
        let (code, stderr) = crate::fail_fast::serve_exit(&text, &files);
        assert_eq!(code, Some(1), "serve, {name}: {stderr}");
        assert!(stderr.contains(said), "serve, {name}: {stderr}");
        assert!(
            stderr.contains("robotsguard.yaml:2:"),
            "serve, {name}: {stderr}"
        );
    }
    let (code, stderr) = validate(&config(", token_file: token"), &[("token", ADMIN_TOKEN)]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_thousand_cookieless_page_loads_do_not_evict_the_operators_session() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, ""));
    ban(&proxy);
    let page = own(&proxy, Request::get("/ui/bans"));
    let (cookie, csrf) = session_of(&page);
    assert!(!cookie.is_empty() && !csrf.is_empty());
    // Another page (an <img> of the console on any site: the SameSite cookie is not sent)
    // loads the console without a cookie, over and over.
    let mut conn = Conn::open(proxy.admin);
    for _ in 0..1100 {
        let answer = conn.send(&Request::get("/ui/explain").host(&proxy.admin.to_string()));
        assert_eq!(answer.status, 200);
    }
    let lifted = own(
        &proxy,
        Request::new("POST", "/ui/bans/lift")
            .header("Cookie", &cookie)
            .header("Origin", &format!("http://{}", proxy.admin))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("origin=shop&client=192.0.2.9&csrf={csrf}").as_bytes()),
    );
    assert_eq!(lifted.status, 303, "{}", lifted.text());
    assert_eq!(from(&proxy, "192.0.2.9", "/", GPTBOT).status, 200, "lifted");
}

#[test]
fn csv_cells_are_defused_after_any_separator() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, ""));
    for path in ["/private/a;=cmd()", "/private/b,@SUM(1)", "/private/c;+1"] {
        assert_eq!(
            from(&proxy, "192.0.2.20", path, GPTBOT).status,
            403,
            "{path}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let csv = loop {
        let csv = own(
            &proxy,
            Request::get("/reports/violations?origin=shop&format=csv"),
        )
        .text();
        if csv.lines().count() >= 4 {
            break csv;
        }
        assert!(Instant::now() < deadline, "{csv}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for defused in [";'=cmd()", ",'@SUM(1)", ";'+1"] {
        assert!(csv.contains(defused), "{defused}: {csv}");
    }
    for live in [";=", ",@", ";+"] {
        assert!(!csv.contains(live), "{live}: {csv}");
    }
}

#[test]
fn explain_dns_lookups_are_rate_limited_and_say_so() {
    let dns = DnsServer::start();
    let origin = Origin::start();
    let extra = format!(
        "verify: {{dns: {{servers: [\"{}\"], timeout: 2s}}}}\n\
         crawlers:\n  extra:\n    - name: ZorgBot\n      tokens: [zorgbot]\n      pattern: ZorgBot\n      category: search\n      verify: {{rdns: [zorg.example]}}\n",
        dns.addr
    );
    let proxy = Proxy::start(&shop(&origin, &extra));
    let mut limited = 0;
    for i in 1..=20 {
        let answer = own(
            &proxy,
            Request::get(&format!(
                "/explain?host=shop.example&ua=ZorgBot/1.0&path=/page&client=203.0.113.{i}"
            )),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        let json = answer.json();
        if json["note"]
            .as_str()
            .is_some_and(|n| n.contains("rate") || n.contains("at most"))
        {
            limited += 1;
            assert_eq!(json["verification"]["result"], "unverified", "{json}");
            assert!(
                json["verification"]["how"]
                    .as_str()
                    .unwrap_or("")
                    .contains("not looked up"),
                "{json}"
            );
        }
    }
    assert!(
        limited >= 10,
        "{limited} answers said their lookups were limited"
    );
    let ptr = dns.all_lookups();
    assert!(ptr <= 2 * 10 + 2, "{ptr} DNS lookups for 20 explains");
    // The console's Explain shares the allowance.
    let page = own(
        &proxy,
        Request::get(
            "/ui/explain?host=shop.example&ua=ZorgBot%2F1.0&path=%2Fpage&client=203.0.113.99",
        ),
    );
    assert!(
        page.text().contains("id=\"lookups-limited\""),
        "{}",
        page.text()
    );
}

#[test]
fn robots_refreshes_on_demand_are_spaced_per_origin() {
    let origin = Origin::start();
    origin.robots(200, "User-agent: *\nDisallow: /private\n");
    let other = Origin::start();
    other.robots(200, "User-agent: *\nDisallow: /\n");
    let body = format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n  - name: blog\n    hosts: [\"blog.example\"]\n    upstream: \"{}\"\n",
        origin.addr(),
        other.addr()
    );
    let proxy = Proxy::start(&body);
    let refresh = |name: &str| {
        own(
            &proxy,
            Request::new("POST", &format!("/robots/refresh?origin={name}")).body(b""),
        )
    };
    let before = origin.robots_fetches();
    assert_eq!(refresh("shop").status, 200);
    let again = refresh("shop");
    assert_eq!(again.status, 429, "{}", again.text());
    let retry: u64 = again
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=5).contains(&retry), "{retry}");
    for _ in 0..20 {
        assert_eq!(refresh("shop").status, 429);
    }
    assert_eq!(origin.robots_fetches(), before + 1, "one fetch for 22 asks");
    assert_eq!(refresh("blog").status, 200, "each origin has its own pace");
    assert_eq!(refresh("nowhere").status, 404);
    // After the wait, a refresh is made again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while refresh("shop").status != 200 {
        assert!(Instant::now() < deadline, "no refresh after Retry-After");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn made_up_crawler_names_never_push_catalogue_crawlers_into_other() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, ""));
    let mut conn = proxy.conn();
    for i in 0..512 {
        let answer = conn.send(
            &Request::get("/page")
                .host("shop.example")
                .ua(&format!("Madeup{i}Bot/1.0 (+https://made-up.example/bot)"))
                .header("X-Forwarded-For", "198.51.100.7"),
        );
        assert_eq!(answer.status, 200);
    }
    for ua in [GPTBOT, CLAUDEBOT, CCBOT] {
        assert_eq!(
            from(&proxy, "198.51.100.8", "/page", ua).status,
            200,
            "{ua}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let json = own(&proxy, Request::get("/reports/crawlers?origin=shop")).json();
        let rows = json["crawlers"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
        let counted: u64 = rows.iter().filter_map(|r| r["requests"].as_u64()).sum();
        if counted >= 515 {
            for name in ["GPTBot", "ClaudeBot", "CCBot", "other"] {
                assert!(names.contains(&name), "{name} missing from {names:?}");
            }
            assert!(rows.len() < 300, "{} rows", rows.len());
            break;
        }
        assert!(Instant::now() < deadline, "{json}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `at` as RFC 3339.
fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

#[test]
fn since_and_until_narrow_every_report_table() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, ""));
    assert_eq!(from(&proxy, "192.0.2.30", "/private/x", GPTBOT).status, 403);
    let deadline = Instant::now() + Duration::from_secs(10);
    while own(&proxy, Request::get("/reports/violations?origin=shop")).json()["violations"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        assert!(Instant::now() < deadline, "the violation was not counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let hour = Duration::from_secs(3600);
    let later = rfc3339(SystemTime::now() + hour);
    let earlier = rfc3339(SystemTime::now() - 2 * hour);
    let before = rfc3339(SystemTime::now() - hour);
    for (table, key) in [
        ("violations", "violations"),
        ("crawlers", "crawlers"),
        ("robots", "copies"),
    ] {
        for range in [
            format!("since={later}"),
            format!("since={earlier}&until={before}"),
        ] {
            let json = own(
                &proxy,
                Request::get(&format!("/reports/{table}?origin=shop&{range}")),
            )
            .json();
            assert_eq!(
                json[key].as_array().map(Vec::len),
                Some(0),
                "{table} {range}: {json}"
            );
        }
        let all = own(
            &proxy,
            Request::get(&format!("/reports/{table}?origin=shop")),
        )
        .json();
        assert_ne!(all[key].as_array().map(Vec::len), Some(0), "{table}: {all}");
        let reversed = own(
            &proxy,
            Request::get(&format!(
                "/reports/{table}?origin=shop&since={before}&until={earlier}"
            )),
        );
        assert_eq!(reversed.status, 400, "{table}");
    }
    let csv = own(
        &proxy,
        Request::get(&format!(
            "/reports/violations?origin=shop&format=csv&since={later}"
        )),
    )
    .text();
    assert_eq!(csv.lines().count(), 1, "the header only: {csv}");
}

#[test]
fn the_consoles_explain_words_verification_as_explain_does() {
    let origin = Origin::start();
    let proxy = Proxy::start(&shop(&origin, ""));
    // A refused crawler (nothing to verify for the proxy) from an address that is not public.
    let query = "host=shop.example&ua=GPTBot%2F1.2&path=%2Fprivate%2Fx&client=10.0.0.7";
    let explain = own(&proxy, Request::get(&format!("/explain?{query}"))).json();
    assert_eq!(explain["verification"]["result"], "unverified", "{explain}");
    let page = own(&proxy, Request::get(&format!("/ui/explain?{query}"))).text();
    let shown = page
        .split("<dd id=\"verification\">")
        .nth(1)
        .and_then(|rest| rest.split("</dd>").next())
        .unwrap_or_default();
    assert!(shown.starts_with("unverified"), "{shown}");
    assert!(!page.contains("not checked</dd>"), "{page}");
    // Without a client: still `unverified`, saying why, in both.
    let bare = "host=shop.example&ua=GPTBot%2F1.2&path=%2Fpage";
    let explain = own(&proxy, Request::get(&format!("/explain?{bare}"))).json();
    assert_eq!(explain["verification"]["result"], "unverified", "{explain}");
    let page = own(&proxy, Request::get(&format!("/ui/explain?{bare}"))).text();
    assert!(
        page.contains("<dd id=\"verification\">unverified"),
        "{page}"
    );
}

#[test]
fn crawler_tables_add_up_and_one_covers_every_origin() {
    let origin = Origin::start();
    let body = format!(
        "{}  - name: blog\n    hosts: [\"blog.example\"]\n    upstream: \"{}\"\n    mode: report\n    \
         robots: {{source: inline, text: \"User-agent: GPTBot\\nDisallow: /\\n\", serve: false}}\n",
        shop(&origin, ""),
        origin.addr()
    );
    let proxy = Proxy::start(&body);
    for path in ["/page", "/robots.txt", "/private/a"] {
        from(&proxy, "192.0.2.40", path, GPTBOT);
    }
    proxy.send(&Request::get("/post").host("blog.example").ua(GPTBOT));
    let deadline = Instant::now() + Duration::from_secs(10);
    let everywhere = loop {
        let json = own(&proxy, Request::get("/reports/crawlers")).json();
        let row = json["crawlers"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == "GPTBot").cloned());
        if let Some(row) = row.filter(|r| r["requests"] == 4) {
            break row;
        }
        assert!(Instant::now() < deadline, "{json}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(everywhere["passed"], 1, "{everywhere}");
    assert_eq!(everywhere["would_block"], 1, "{everywhere}");
    let csv = own(&proxy, Request::get("/reports/crawlers?all=1&format=csv")).text();
    assert!(csv.lines().any(|l| l.starts_with("GPTBot,")), "{csv}");
    // The console: the origin's table has a Passed column and each row adds up.
    let page = own(&proxy, Request::get("/ui/origin?origin=shop")).text();
    let table = page
        .split("<table id=\"crawlers\">")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_default();
    assert!(table.contains("<th scope=\"col\">Passed</th>"), "{table}");
    let row = table
        .split("<tr>")
        .find(|row| row.contains("<td>GPTBot</td>"))
        .unwrap_or_default();
    let cells: Vec<u64> = row
        .split("<td>")
        .skip(1)
        .map(|cell| cell.split("</td>").next().unwrap_or_default())
        .map(|cell| {
            cell.replace("<span class=\"num\">", "")
                .replace("</span>", "")
        })
        .map(|cell| cell.replace('\u{202f}', ""))
        .take(11)
        .skip(3)
        .map(|cell| cell.parse().unwrap_or(u64::MAX))
        .collect();
    // Requests, then allowed, blocked, limited, banned, would refuse, passed, errors.
    assert_eq!(cells.len(), 8, "{row}");
    assert_eq!(cells[0], cells[1..].iter().sum::<u64>(), "{row}");
    assert_eq!(cells[0], 3, "{row}");
    // The overview: every origin's crawlers in one table.
    let overview = own(&proxy, Request::get("/ui/")).text();
    let all = overview
        .split("<table id=\"all-crawlers\">")
        .nth(1)
        .unwrap_or_default();
    assert!(all.contains("<td>GPTBot</td>"), "{overview}");
    assert!(all.contains("<span class=\"num\">4</span>"), "{overview}");
}
