//! The reports and the console, through the real proxy: after a scripted mix of traffic, every
//! figure of `/reports/*` (JSON and CSV) equals what was sent; the read-only token reads but
//! cannot lift a ban; a form without the CSRF token is refused; two replicas on one Redis show
//! the fleet's totals on either.

use crate::support;

use support::{redis::RedisServer, Conn, Origin, Proxy, Request, Response, BROWSER, GPTBOT};

const ADMIN: &str = "admin-secret-0123456789";
const READ: &str = "read-secret-0123456789";

fn config(origin: &Origin, extra: &str) -> String {
    format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n{extra}\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\", serve: false}}\n    \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 1h}}\n",
        origin.addr()
    )
}

fn from(proxy: &Proxy, client: &str, path: &str, user_agent: &str) -> Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(user_agent)
            .header("X-Forwarded-For", client),
    )
}

fn admin(proxy: &Proxy, request: Request) -> Response {
    Conn::open(proxy.admin).send(&request.host(&proxy.admin.to_string()))
}

fn bearer(proxy: &Proxy, token: &str, target: &str) -> Response {
    admin(
        proxy,
        Request::get(target).header("Authorization", &format!("Bearer {token}")),
    )
}

/// The mix: 3 browser requests, 4 allowed GPTBot requests from two addresses, one GPTBot read of
/// robots.txt, 2 blocked GPTBot requests from the reader (same path), 3 blocked from another
/// address (banned at its third), then 2 more from the banned address (refused as banned).
fn traffic(proxy: &Proxy) {
    for _ in 0..3 {
        assert_eq!(from(proxy, "192.0.2.50", "/private/x", BROWSER).status, 200);
    }
    for client in ["192.0.2.1", "192.0.2.1", "192.0.2.2", "192.0.2.2"] {
        assert_eq!(from(proxy, client, "/page", GPTBOT).status, 200);
    }
    assert_eq!(from(proxy, "192.0.2.1", "/robots.txt", GPTBOT).status, 200);
    for _ in 0..2 {
        assert_eq!(from(proxy, "192.0.2.1", "/private/a", GPTBOT).status, 403);
    }
    for path in ["/private/b", "/private/b", "/private/c"] {
        assert_eq!(from(proxy, "192.0.2.9", path, GPTBOT).status, 403);
    }
    for _ in 0..2 {
        let banned = from(proxy, "192.0.2.9", "/page", GPTBOT);
        assert_eq!(banned.status, 403);
        assert!(banned.header("retry-after").is_some());
    }
}

/// Waits until the crawler report counts `requests` GPTBot requests (logging runs after the
/// answer is written).
fn gptbot_row(proxy: &Proxy, token: &str, requests: u64) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let response = bearer(proxy, token, "/reports/crawlers?origin=shop");
        assert_eq!(response.status, 200, "{}", response.text());
        let json = response.json();
        let row = json["crawlers"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == "GPTBot").cloned());
        if let Some(row) = row.filter(|r| r["requests"] == requests) {
            return row;
        }
        assert!(std::time::Instant::now() < deadline, "{json}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_reports_equal_the_traffic_sent_in_json_and_csv() {
    let origin = Origin::start();
    origin
        .route("/page", 200, "0123456789")
        .route("/private/x", 200, "browser")
        .route("/robots.txt", 200, "");
    let proxy = Proxy::builder(&config(&origin, ""))
        .admin_token(ADMIN)
        .read_token(READ)
        .files(&[])
        .start();
    traffic(&proxy);
    let row = gptbot_row(&proxy, READ, 12);
    for (field, want) in [
        ("allowed", 4),
        ("blocked", 5),
        ("banned", 2),
        ("limited", 0),
        ("passed", 1),
        ("distinct_clients", 3),
        ("clients_read_robots", 1),
        ("bytes", 40),
    ] {
        assert_eq!(row[field], want, "{field}: {row}");
    }
    assert_eq!(row["category"], "ai-training");
    assert_eq!(row["operator"], "OpenAI");
    assert!(
        row["first_seen"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{row}"
    );

    let json = bearer(&proxy, READ, "/reports/violations?origin=shop").json();
    let rows = json["violations"].as_array().expect("rows").clone();
    let summary: Vec<(String, u64, bool, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap_or("").to_string(),
                r["count"].as_u64().unwrap_or(0),
                r["read_robots"].as_bool().unwrap_or(false),
                r["distinct_clients"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("/private/a".to_string(), 2, true, 1),
            ("/private/b".to_string(), 2, false, 1),
            ("/private/c".to_string(), 1, false, 1),
        ],
        "{json}"
    );
    assert_eq!(rows[0]["line"], 2);
    assert_eq!(rows[0]["directive"], "Disallow");
    assert_eq!(rows[0]["pattern"], "/private");
    assert!(json.get("error_bound").is_none(), "{json}");
    assert!(
        json["coverage"]
            .as_str()
            .is_some_and(|c| c.contains("this replica")),
        "{json}"
    );
    let filtered = bearer(
        &proxy,
        READ,
        "/reports/violations?origin=shop&read_robots=yes",
    )
    .json();
    assert_eq!(
        filtered["violations"].as_array().map(Vec::len),
        Some(1),
        "{filtered}"
    );

    let csv = bearer(&proxy, READ, "/reports/violations?origin=shop&format=csv");
    assert_eq!(csv.status, 200);
    assert!(csv
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/csv")));
    let text = csv.text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("crawler,verification,path,line,directive,pattern,read_robots"),
        "{text}"
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[1].starts_with("GPTBot,unverified,/private/a,2,Disallow,/private,true,true,2,0,1,"),
        "{text}"
    );
    let crawlers_csv = bearer(&proxy, READ, "/reports/crawlers?origin=shop&format=csv").text();
    assert!(
        crawlers_csv
            .lines()
            .any(|l| l.starts_with("GPTBot,ai-training,OpenAI,12,4,5,0,2,")),
        "{crawlers_csv}"
    );

    let robots = bearer(&proxy, READ, "/reports/robots?origin=shop").json();
    let copies = robots["copies"].as_array().expect("copies");
    assert_eq!(copies.len(), 1, "{robots}");
    assert_eq!(copies[0]["outcome"], "ok");
    assert_eq!(copies[0]["rules"], 1);

    // Ranges and refusals.
    let future = bearer(
        &proxy,
        READ,
        "/reports/crawlers?origin=shop&since=2100-01-01T00:00:00Z",
    )
    .json();
    assert_eq!(
        future["crawlers"].as_array().map(Vec::len),
        Some(0),
        "{future}"
    );
    assert_eq!(
        bearer(
            &proxy,
            READ,
            "/reports/crawlers?origin=shop&since=yesterday"
        )
        .status,
        400
    );
    assert_eq!(
        bearer(&proxy, READ, "/reports/crawlers?origin=nope").status,
        404
    );
    assert_eq!(bearer(&proxy, READ, "/reports/violations").status, 400);
    // Without an origin, the crawler report covers every origin.
    let everywhere = bearer(&proxy, READ, "/reports/crawlers").json();
    assert_eq!(
        everywhere["origins"],
        serde_json::json!(["shop"]),
        "{everywhere}"
    );
    let gptbot = everywhere["crawlers"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "GPTBot"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(gptbot["requests"], 12, "{everywhere}");
    assert_eq!(
        admin(&proxy, Request::get("/reports/crawlers?origin=shop")).status,
        401
    );
    assert_eq!(
        bearer(&proxy, "wrong", "/reports/crawlers?origin=shop").status,
        401
    );
}

#[test]
fn the_read_only_token_reads_but_cannot_lift_and_forms_need_the_csrf_token() {
    let origin = Origin::start();
    let proxy = Proxy::builder(&config(&origin, ""))
        .admin_token(ADMIN)
        .read_token(READ)
        .files(&[])
        .start();
    for path in ["/private/1", "/private/2", "/private/3"] {
        assert_eq!(from(&proxy, "192.0.2.9", path, GPTBOT).status, 403);
    }
    // The read-only token reads everything but cannot act.
    for target in [
        "/metrics",
        "/bans",
        "/explain?host=shop.example&ua=x&path=/",
        "/ui/",
        "/ui/bans",
        "/ui/origin?origin=shop",
    ] {
        assert_eq!(bearer(&proxy, READ, target).status, 200, "{target}");
    }
    let lift = admin(
        &proxy,
        Request::new("DELETE", "/bans?origin=shop&client=192.0.2.9")
            .header("Authorization", &format!("Bearer {READ}")),
    );
    assert_eq!(lift.status, 403, "{}", lift.text());
    // Pages without a session send the browser to the login form.
    let page = admin(&proxy, Request::get("/ui/bans"));
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/ui/login?next=%2Fui%2Fbans"));
    // Signing in with the read token: the page shows the ban, but no lift button.
    let login = admin(
        &proxy,
        Request::new("POST", "/ui/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={READ}&next=%2Fui%2Fbans").as_bytes()),
    );
    assert_eq!(login.status, 303, "{}", login.text());
    let cookie = login
        .header("set-cookie")
        .expect("a session cookie")
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().expect("name=value").to_string();
    let bans = admin(&proxy, Request::get("/ui/bans").header("Cookie", &session));
    assert_eq!(bans.status, 200);
    let page = bans.text();
    assert!(page.contains("192.0.2.9"), "{page}");
    assert!(
        !page.contains("/ui/bans/lift"),
        "a read-only session gets no lift button"
    );
    // The ban table's CSV, through the session cookie.
    let csv = admin(
        &proxy,
        Request::get("/bans?format=csv").header("Cookie", &session),
    );
    assert_eq!(csv.status, 200);
    let csv = csv.text();
    assert!(
        csv.starts_with(
            "origin,client,since,until,remaining_seconds,strikes,browser_requests,cause,crawler,user_agent,state\n"
        ),
        "{csv}"
    );
    assert!(csv.contains("\nshop,192.0.2.9,"), "{csv}");
    assert!(bans
        .header("content-security-policy")
        .is_some_and(|csp| csp.contains("default-src 'none'")));
    // The admin token's session: the form carries a CSRF token; without it, refused.
    let login = admin(
        &proxy,
        Request::new("POST", "/ui/login")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN}").as_bytes()),
    );
    let session = login
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let page = admin(&proxy, Request::get("/ui/bans").header("Cookie", &session)).text();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the lift form")
        .to_string();
    let post = |body: String| {
        admin(
            &proxy,
            Request::new("POST", "/ui/bans/lift")
                .header("Cookie", &session)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.as_bytes()),
        )
    };
    assert_eq!(post("origin=shop&client=192.0.2.9".into()).status, 403);
    assert_eq!(
        post("origin=shop&client=192.0.2.9&csrf=0000".into()).status,
        403
    );
    assert_eq!(
        from(&proxy, "192.0.2.9", "/", GPTBOT).status,
        403,
        "still banned"
    );
    let cross_site = admin(
        &proxy,
        Request::new("POST", "/ui/bans/lift")
            .header("Cookie", &session)
            .header("Origin", "http://evil.example")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("origin=shop&client=192.0.2.9&csrf={csrf}").as_bytes()),
    );
    assert_eq!(cross_site.status, 403);
    let lifted = post(format!("origin=shop&client=192.0.2.9&csrf={csrf}"));
    assert_eq!(lifted.status, 303, "{}", lifted.text());
    assert_eq!(from(&proxy, "192.0.2.9", "/", GPTBOT).status, 200, "lifted");
}

#[test]
fn without_a_token_the_console_is_open_on_loopback_with_csrf_all_the_same() {
    let origin = Origin::start();
    let proxy = Proxy::start(&config(&origin, ""));
    let page = admin(&proxy, Request::get("/ui/"));
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("shop"));
    // A form posted without the page's token (a site the operator visits, say) is refused.
    let post = admin(
        &proxy,
        Request::new("POST", "/ui/bans/lift")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(b"origin=shop&client=192.0.2.9"),
    );
    assert_eq!(post.status, 403);
}

#[test]
fn two_replicas_on_one_store_show_the_fleet_totals() {
    let redis = RedisServer::start();
    let origin = Origin::start();
    origin.route("/page", 200, "page");
    let state = format!(
        "state: {{backend: redis, redis: {{url: \"{}\"}}}}\n",
        redis.url()
    );
    let one = Proxy::start(&config(&origin, &state));
    let two = Proxy::start(&config(&origin, &state));
    for (proxy, client) in [
        (&one, "192.0.2.1"),
        (&two, "192.0.2.2"),
        (&two, "192.0.2.3"),
    ] {
        assert_eq!(from(proxy, client, "/private/x", GPTBOT).status, 403);
        assert_eq!(from(proxy, client, "/page", GPTBOT).status, 200);
    }
    // Each replica writes its counts at most every 10 seconds: either one's report adds both.
    for proxy in [&one, &two] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let json = admin(proxy, Request::get("/reports/crawlers?origin=shop")).json();
            let row = json["crawlers"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["name"] == "GPTBot").cloned());
            if row.as_ref().is_some_and(|r| r["requests"] == 6) {
                let row = row.unwrap_or_default();
                assert_eq!(row["blocked"], 3, "{json}");
                assert_eq!(row["distinct_clients"], 3, "{json}");
                assert!(
                    json["coverage"]
                        .as_str()
                        .is_some_and(|c| c.contains("every replica")),
                    "{json}"
                );
                assert_eq!(json["replicas"], 2, "{json}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{json}");
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let violations = admin(proxy, Request::get("/reports/violations?origin=shop")).json();
        assert_eq!(violations["violations"][0]["count"], 3, "{violations}");
        assert_eq!(
            violations["violations"][0]["distinct_clients"], 3,
            "{violations}"
        );
    }
}

#[test]
fn the_robots_report_lists_each_copy_with_the_diff_from_the_one_before() {
    let origin = Origin::start();
    let body = format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: file, path: robots.txt}}\n",
        origin.addr()
    );
    let proxy = Proxy::builder(&body)
        .files(&[("robots.txt", "User-agent: *\nDisallow: /private\n")])
        .start();
    let path = proxy.dir.path().join("robots.txt");
    let staged = proxy.dir.path().join("robots.txt.new");
    std::fs::write(
        &staged,
        "User-agent: *\nDisallow: /private\nDisallow: /drafts\n",
    )
    .expect("robots.txt written");
    std::fs::rename(&staged, &path).expect("robots.txt replaced");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let copies = loop {
        let json = admin(&proxy, Request::get("/reports/robots?origin=shop")).json();
        let copies = json["copies"].as_array().cloned().unwrap_or_default();
        if copies.len() == 2 {
            break copies;
        }
        assert!(std::time::Instant::now() < deadline, "{json}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(copies[0]["rules"], 1);
    assert_eq!(copies[0]["diff_from_previous"], "");
    assert_eq!(copies[1]["rules"], 2);
    let diff = copies[1]["diff_from_previous"].as_str().unwrap_or("");
    assert!(diff.contains("\n+Disallow: /drafts\n"), "{diff}");
    assert!(diff.contains("\n Disallow: /private\n"), "{diff}");
    let csv = admin(
        &proxy,
        Request::get("/reports/robots?origin=shop&format=csv"),
    )
    .text();
    assert!(
        csv.starts_with("took_effect,outcome,state,source,fetched_at"),
        "{csv}"
    );
    assert!(csv.contains("+Disallow: /drafts"), "{csv}");
}
