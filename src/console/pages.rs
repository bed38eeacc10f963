//! The console's pages: overview, one origin (crawlers, violations, robots.txt copies, bans), bans
//! (with a lift button), explain (the judgment as the proxy would make it), and the login form.
//! Every page reads without JavaScript; every form that acts carries the session's CSRF token.

use std::fmt::Write;

use http::Response;

use super::access::{csrf_matches, Level, SECURE_SESSION_COOKIE, SESSION_COOKIE, SESSION_LIFETIME};
use super::api::{self, Filters, Scope};
use super::html::{self, escape, number, url_value, Section};
use super::{chart, Asked, Console};
use crate::judge::Answer;
use crate::metrics::METRICS;
use crate::reports::rfc3339;
use crate::snapshot::{CopyOutcome, Policy};
use crate::store::Lifted;

/// Who is asking, once admitted.
struct Viewer {
    level: Level,
    csrf: String,
    /// A cookie to set (a session opened for this request).
    set_cookie: Option<String>,
    /// Signed in with a token (shows "Sign out").
    signed_in: bool,
}

impl Viewer {
    /// A page for this viewer (with a sign-out form when a token signed it in).
    fn page(&self, status: u16, title: &str, section: Section, body: &str) -> Response<Vec<u8>> {
        let csrf = self.signed_in.then_some(self.csrf.as_str());
        html::page(status, title, section, csrf, body)
    }
}

/// Answers `/ui…`.
pub(crate) async fn respond(console: &Console, asked: &Asked) -> Response<Vec<u8>> {
    let path = asked.path.as_str();
    if path == "/ui/console.css" {
        let mut answer = html::reply(
            200,
            "text/css; charset=utf-8",
            html::STYLESHEET.as_bytes().to_vec(),
        );
        answer.headers_mut().insert(
            "cache-control",
            http::HeaderValue::from_static("private, max-age=300"),
        );
        return answer;
    }
    if path == "/ui/icon.svg" {
        let mut answer = html::reply(200, "image/svg+xml", html::ICON.as_bytes().to_vec());
        answer.headers_mut().insert(
            "cache-control",
            http::HeaderValue::from_static("private, max-age=300"),
        );
        return answer;
    }
    if path == "/ui" {
        return html::see_other("/ui/");
    }
    let get = asked.method == http::Method::GET || asked.method == http::Method::HEAD;
    let post = asked.method == http::Method::POST;
    if !get && !post {
        return html::with_allow(html::text(405, "GET, HEAD or POST\n"), "GET, HEAD, POST");
    }
    if path == "/ui/login" {
        return login(console, asked, get);
    }
    let viewer = match admit(console, asked) {
        Ok(viewer) => viewer,
        Err(answer) => return *answer,
    };
    if post {
        // Every form that acts: same origin, and the CSRF token of the session.
        let token_ok = asked
            .field("csrf")
            .is_some_and(|given| csrf_matches(&viewer.csrf, given));
        if !token_ok || viewer.set_cookie.is_some() {
            return message(
                403,
                "Refused",
                "The form did not carry this session's CSRF token (or came from another site). Reload the page and try again.",
                &viewer,
            );
        }
    }
    let answer = match (path, post) {
        ("/ui/", false) => overview(console, &viewer).await,
        ("/ui/origin", false) => origin_page(console, asked, &viewer).await,
        ("/ui/bans", false) => bans_page(console, asked, &viewer),
        ("/ui/explain", false) => explain_page(console, asked, &viewer).await,
        ("/ui/preview", _) => preview_page(console, asked, &viewer, post).await,
        ("/ui/bans/lift", true) => lift(console, asked, &viewer).await,
        ("/ui/bans/lift-all", true) => lift_all(console, asked, &viewer).await,
        ("/ui/logout", true) => {
            if let Some(id) = &asked.session_id {
                console.access.close_session(id);
            }
            let mut answer = html::see_other("/ui/login");
            set_cookie(&mut answer, &expired_cookie(asked.secure));
            return answer;
        }
        _ => message(404, "Not found", "There is no such page.", &viewer),
    };
    with_cookie(answer, viewer.set_cookie.as_deref())
}

/// Admits a page request: a session or token of at least read level; an open console (no token
/// configured, loopback admin address) opens an admin session of its own.
fn admit(console: &Console, asked: &Asked) -> Result<Viewer, Box<Response<Vec<u8>>>> {
    if let Some(session) = &asked.session {
        return Ok(Viewer {
            level: session.level,
            csrf: session.csrf.clone(),
            set_cookie: None,
            signed_in: console.access.has_tokens(),
        });
    }
    if asked.level >= Level::Read && console.access.has_tokens() {
        // A bearer token (a script reading a page): no session, so no form it could post.
        return Ok(Viewer {
            level: asked.level,
            csrf: String::new(),
            set_cookie: None,
            signed_in: false,
        });
    }
    if console.access.console_open() {
        let Some((id, session)) = console.access.open_session(Level::Admin, asked.client) else {
            return Err(Box::new(html::text(
                500,
                "no random numbers for a session\n",
            )));
        };
        return Ok(Viewer {
            level: Level::Admin,
            csrf: session.csrf,
            set_cookie: Some(session_cookie(&id, asked.secure)),
            signed_in: false,
        });
    }
    if !console.access.has_tokens() {
        let body = "<h1>The console is closed</h1>\n<div class=\"card\"><p>The admin listener is not on a loopback address and no admin token is configured, so the console would be open to anyone who can reach it.</p>\n<p>Set <code>admin.token_file</code> (and, for read-only users, <code>admin.read_token_file</code>) in the config, or listen on a loopback address (<code>admin: {address: \"127.0.0.1:9090\"}</code>) and reach it through <code>kubectl port-forward</code> or an SSH tunnel.</p></div>\n";
        return Err(Box::new(html::page(
            403,
            "Console closed",
            Section::Login,
            None,
            body,
        )));
    }
    if asked.method == http::Method::POST {
        return Err(Box::new(html::text(403, "sign in first\n")));
    }
    let next = if asked.path.starts_with("/ui/") {
        asked.path.clone()
    } else {
        "/ui/".to_string()
    };
    Err(Box::new(html::see_other(&format!(
        "/ui/login?next={}",
        url_value(&next)
    ))))
}

/// The session cookie: `HttpOnly; SameSite=Strict`, and over TLS `__Host-` prefixed and
/// `Secure` (so no other host of the site can set or shadow it).
fn session_cookie(id: &str, secure: bool) -> String {
    cookie(id, SESSION_LIFETIME.as_secs(), secure)
}

fn expired_cookie(secure: bool) -> String {
    cookie("", 0, secure)
}

fn cookie(value: &str, max_age: u64, secure: bool) -> String {
    if secure {
        format!("{SECURE_SESSION_COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={max_age}")
    } else {
        format!("{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}")
    }
}

fn set_cookie(answer: &mut Response<Vec<u8>>, cookie: &str) {
    if let Ok(value) = http::HeaderValue::from_str(cookie) {
        answer.headers_mut().append(http::header::SET_COOKIE, value);
    }
}

fn with_cookie(mut answer: Response<Vec<u8>>, cookie: Option<&str>) -> Response<Vec<u8>> {
    if let Some(cookie) = cookie {
        set_cookie(&mut answer, cookie);
    }
    answer
}

/// A page with one message.
fn message(status: u16, title: &str, text: &str, viewer: &Viewer) -> Response<Vec<u8>> {
    let body = format!(
        "<h1>{}</h1>\n<div class=\"card\"><p>{}</p><p><a href=\"/ui/\">Back to the overview</a></p></div>\n",
        escape(title),
        escape(text)
    );
    viewer.page(status, title, Section::Overview, &body)
}

/// `/ui/login`: the token form, and its post. Failed sign-ins from one address make the next
/// wait, twice as long each time ([`super::access::Access::login_failed`]); while it waits, a
/// token is not even checked.
fn login(console: &Console, asked: &Asked, get: bool) -> Response<Vec<u8>> {
    let next = asked
        .param("next")
        .or_else(|| asked.field("next"))
        .filter(|n| n.starts_with("/ui/") && !n.starts_with("//"))
        .unwrap_or("/ui/")
        .to_string();
    if !console.access.has_tokens() {
        return html::see_other("/ui/");
    }
    let mut failed = false;
    let mut wait = None;
    if !get {
        if let Some(left) = console.access.login_wait(asked.client) {
            METRICS
                .admin_refusals
                .with_label_values(&["login_throttled"])
                .inc();
            wait = Some(left);
        } else {
            let token = asked.field("token").unwrap_or("").trim().as_bytes();
            let level = console.access.level_of_token(token);
            if level > Level::None {
                if let Some((id, _)) = console.access.open_session(level, asked.client) {
                    console.access.login_succeeded(asked.client);
                    let mut answer = html::see_other(&next);
                    set_cookie(&mut answer, &session_cookie(&id, asked.secure));
                    return answer;
                }
            }
            METRICS
                .admin_refusals
                .with_label_values(&["login_failed"])
                .inc();
            let next_wait = console.access.login_failed(asked.client);
            failed = true;
            if !next_wait.is_zero() {
                wait = Some(next_wait);
            }
        }
    }
    let mut body = String::from("<h1>Sign in</h1>\n");
    if failed {
        body.push_str("<p class=\"alert\" id=\"login-failed\">That token is not the admin token nor the read-only token.</p>\n");
    }
    let seconds = wait.map(|w| (w.as_secs() + u64::from(w.subsec_nanos() > 0)).max(1));
    if let Some(seconds) = seconds {
        let _ = writeln!(
            body,
            "<p class=\"alert\" id=\"login-wait\">Too many wrong tokens from your address: the next sign-in is checked in {seconds} s (each wrong token doubles the wait).</p>"
        );
    }
    let _ = writeln!(
        body,
        "<form method=\"post\" action=\"/ui/login\" class=\"login\">\n\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\n\
         <label>Token (admin.token_file or admin.read_token_file)<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>\n\
         <button type=\"submit\">Sign in</button>\n</form>\n\
         <p class=\"note\">The read-only token shows every page; lifting a ban needs the admin token.</p>",
        escape(&next)
    );
    // 200 even for a wrong token: the page is the answer, and a browser logs any other status
    // of a page as an error. A sign-in that was not checked is 429, with Retry-After.
    match seconds.filter(|_| !failed) {
        Some(seconds) => {
            let mut answer = html::page(429, "Sign in", Section::Login, None, &body);
            if let Ok(value) = http::HeaderValue::from_str(&seconds.to_string()) {
                answer
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, value);
            }
            answer
        }
        None => html::page(200, "Sign in", Section::Login, None, &body),
    }
}

fn coverage_badge(scope: &Scope) -> String {
    format!(
        "<span class=\"coverage\" id=\"coverage\">{}</span>",
        escape(&scope.coverage_text())
    )
}

/// A robots.txt copy in a few words, and whether it refuses every crawler for want of one.
fn robots_state(copy: &crate::snapshot::RobotsCopy, now: std::time::SystemTime) -> (String, bool) {
    let age = copy
        .fetched_at
        .and_then(|at| now.duration_since(at).ok())
        .map(|d| html::ago(d.as_secs()));
    let never = matches!(copy.policy, Policy::DisallowAll)
        && matches!(
            copy.outcome,
            CopyOutcome::Unreachable | CopyOutcome::Pending
        );
    let text = format!(
        "{} ({}{})",
        copy.outcome.as_str(),
        copy.policy.state_label(),
        age.map(|a| format!(", fetched {a}")).unwrap_or_default()
    );
    (text, never)
}

/// Refused requests of apps' HTTP libraries and monitors: a sign of an API behind the origin.
fn refused_apps(rows: &[crate::reports::CrawlerReport]) -> u64 {
    rows.iter()
        .filter(|row| row.category == "library" || row.category == "monitoring")
        .map(|row| row.tally.blocked + row.tally.banned + row.tally.limited)
        .sum()
}

async fn overview(console: &Console, viewer: &Viewer) -> Response<Vec<u8>> {
    let snapshot = console.live.load();
    let now = std::time::SystemTime::now();
    let now_s = console.reports.now();
    let mut rows = Vec::new();
    let mut alerts = String::new();
    let mut coverage = String::new();
    for origin in &snapshot.origins {
        let (published, cover) = console
            .store
            .reports_of(&console.reports, origin.name())
            .await;
        let merged = console.reports.merge(&published);
        let scope = Scope {
            origin: origin.clone(),
            since: now_s.saturating_sub(console.reports.window().as_secs()),
            until: now_s + 1,
            merged,
            coverage: cover,
        };
        if coverage.is_empty() {
            coverage = coverage_badge(&scope);
        }
        let hour = scope.merged.totals(now_s.saturating_sub(3600), now_s + 1);
        let day = scope.merged.totals(now_s.saturating_sub(86_400), now_s + 1);
        let copy = origin.robots.current();
        let (state, never) = robots_state(&copy, now);
        let crawlers = api::crawler_rows(console, &scope);
        let apps = refused_apps(&crawlers);
        let name = escape(origin.name());
        if never {
            let _ = writeln!(
                alerts,
                "<p class=\"alert\" data-origin=\"{name}\">{name}: robots.txt was never obtained ({}), so every crawler is refused, Googlebot included.</p>",
                escape(&copy.reason)
            );
        }
        if apps > 0 {
            let _ = writeln!(
                alerts,
                "<p class=\"alert\" data-origin=\"{name}\">{name}: {apps} requests of apps' HTTP libraries or monitors were refused in the window — is an API behind this origin?</p>",
            );
        }
        let refused = |t: &crate::reports::Tally| t.blocked + t.banned + t.limited;
        let class = if never || apps > 0 {
            " class=\"bad\""
        } else {
            ""
        };
        rows.push(format!(
            "<tr{class}><td><a href=\"/ui/origin?origin={}\">{name}</a></td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            url_value(origin.name()),
            escape(&origin.config.hosts.join(", ")),
            origin.config.mode.as_str(),
            escape(&state),
            number(hour.requests),
            number(refused(&hour)),
            number(day.requests),
            number(refused(&day)),
            chart::spark(&scope.merged.series(None, now_s.saturating_sub(86_400), now_s + 1)),
        ));
    }
    let mut body = String::from("<h1>Overview</h1>\n");
    let _ = writeln!(body, "<p>{coverage}</p>");
    body.push_str(&alerts);
    body.push_str("<div class=\"scroll\"><table id=\"origins\">\n<thead><tr><th scope=\"col\">Origin</th><th scope=\"col\">Hosts</th><th scope=\"col\">Mode</th><th scope=\"col\">robots.txt</th><th scope=\"col\" class=\"num\">Requests, 1 h</th><th scope=\"col\" class=\"num\">Refused, 1 h</th><th scope=\"col\" class=\"num\">Requests, 24 h</th><th scope=\"col\" class=\"num\">Refused, 24 h</th><th scope=\"col\">24 h</th></tr></thead>\n<tbody>\n");
    for row in rows {
        body.push_str(&row);
        body.push('\n');
    }
    body.push_str("</tbody></table></div>\n");
    let (everywhere, _, _) = api::every_origin(console).await;
    let since = now_s.saturating_sub(console.reports.window().as_secs());
    let all_rows = api::crawler_rows_of(console, &everywhere, since, now_s + 1);
    body.push_str("<h2 id=\"all-crawlers-heading\">Crawlers on every origin</h2>\n");
    body.push_str("<p class=\"downloads\"><a href=\"/reports/crawlers?format=csv\" download id=\"all-crawlers-csv\">Download CSV</a><a href=\"/reports/crawlers\" id=\"all-crawlers-json\">JSON</a></p>\n");
    body.push_str(&crawler_table(
        "all-crawlers",
        &all_rows,
        &everywhere,
        since,
        now_s + 1,
    ));
    let _ = writeln!(
        body,
        "<p class=\"note\">Signed in with {} access. Counts cover the last {} at most (<code>reports.window</code>).</p>",
        if viewer.level == Level::Admin { "admin" } else { "read-only" },
        html::span(console.reports.window().as_secs())
    );
    viewer.page(200, "Overview", Section::Overview, &body)
}

fn downloads(which: &str, query: &str) -> String {
    format!(
        "<p class=\"downloads\"><a href=\"/reports/{which}?{query}&amp;format=csv\" download id=\"{which}-csv\">Download CSV</a><a href=\"/reports/{which}?{query}\" id=\"{which}-json\">JSON</a></p>\n"
    )
}

fn verification_tag(verification: &str) -> String {
    format!(
        "<span class=\"tag {}\">{}</span>",
        escape(verification),
        escape(verification)
    )
}

/// The crawler table (of one origin or of all): every request counted in exactly one of
/// allowed, passed, blocked, limited, banned, would refuse and errors, so a row adds up to its
/// requests.
fn crawler_table(
    id: &str,
    rows: &[crate::reports::CrawlerReport],
    merged: &crate::reports::Merged,
    since: u64,
    until: u64,
) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let t = &row.tally;
            vec![
                escape(&row.name),
                escape(&row.category),
                escape(&row.operator),
                format!("<span class=\"num\">{}</span>", number(t.requests)),
                number(t.allowed),
                // The signals' rows (`trap`, `disguised`) show their refusals as blocked.
                number(t.blocked + t.trap + t.disguised),
                // Crawl-delay's and the operator's rate budgets' refusals alike.
                number(t.limited + t.rate_limited),
                number(t.banned),
                number(
                    t.would_block
                        + t.would_limit
                        + t.would_trap
                        + t.would_disguised
                        + t.would_ban
                        + t.would_rate_limit,
                ),
                // A request whose ban was suspended (a rollback) was answered as without it.
                number(t.passed + t.ban_suspended),
                number(t.errors),
                format!(
                    "{} / {} / {}",
                    number(t.verified),
                    number(t.unverified),
                    number(t.impostor)
                ),
                format!("~{}", number(row.distinct_clients)),
                format!("~{}", number(row.clients_read_robots)),
                html::bytes(t.bytes),
                rfc3339(row.last_seen),
                chart::spark(&merged.series(Some(&row.name), since, until)),
            ]
        })
        .collect();
    html::table(
        id,
        &[
            "Crawler",
            "Category",
            "Operator",
            "Requests",
            "Allowed",
            "Blocked",
            "Limited",
            "Banned",
            "Would refuse",
            "Passed",
            "Errors",
            "Verified / unverified / impostor",
            "Clients",
            "Read robots.txt",
            "Bytes",
            "Last seen",
            "Over the window",
        ],
        &cells,
        "No crawler requests in this range.",
    )
}

async fn origin_page(console: &Console, asked: &Asked, viewer: &Viewer) -> Response<Vec<u8>> {
    let scope = match api::scope(console, asked).await {
        Ok(scope) => scope,
        Err(_) => {
            return message(
                404,
                "No such origin",
                "The config has no origin of that name.",
                viewer,
            )
        }
    };
    let name = scope.origin.name().to_string();
    let origin_q = format!("origin={}", url_value(&name));
    let mut range_q = origin_q.clone();
    for key in ["since", "until"] {
        if let Some(value) = asked.param(key).filter(|v| !v.is_empty()) {
            let _ = write!(range_q, "&amp;{key}={}", url_value(value));
        }
    }
    let copy = scope.origin.robots.current();
    let (state, never) = robots_state(&copy, std::time::SystemTime::now());
    let crawlers = api::crawler_rows(console, &scope);
    let mut body = format!(
        "<h1>{}</h1>\n<p>{}</p>\n",
        escape(&name),
        coverage_badge(&scope)
    );
    if never {
        let _ = writeln!(
            body,
            "<p class=\"alert\">robots.txt was never obtained ({}): every crawler is refused.</p>",
            escape(&copy.reason)
        );
    }
    let apps = refused_apps(&crawlers);
    if apps > 0 {
        let _ = writeln!(body, "<p class=\"alert\">{apps} requests of apps' HTTP libraries or monitors were refused — is an API behind this origin?</p>");
    }
    let _ = writeln!(
        body,
        "<div class=\"card\"><dl class=\"facts\"><dt>Hosts</dt><dd>{}</dd><dt>Mode</dt><dd>{}</dd><dt>robots.txt</dt><dd>{}</dd><dt>Range</dt><dd>{} — {}</dd></dl></div>",
        escape(&scope.origin.config.hosts.join(", ")),
        scope.origin.config.mode.as_str(),
        escape(&state),
        rfc3339(scope.since),
        rfc3339(scope.until),
    );
    let _ = writeln!(
        body,
        "<p><a href=\"/ui/preview?origin={}\">Preview a robots.txt change</a>: what a candidate file would change for the recent crawler requests, and what the last change flipped.</p>",
        url_value(scope.origin.name())
    );
    body.push_str(&chart::bars(
        &scope.merged.series(None, scope.since, scope.until),
        "requests and refusals over the window",
    ));

    body.push_str("<h2 id=\"crawlers-heading\">Crawlers</h2>\n");
    body.push_str(&downloads("crawlers", &range_q));
    body.push_str(&crawler_table(
        "crawlers",
        &crawlers,
        &scope.merged,
        scope.since,
        scope.until,
    ));

    body.push_str("<h2 id=\"violations-heading\">Violations</h2>\n<p class=\"note\">Requests a robots.txt rule disallowed to the crawler (refused, or reported in report mode), by path.</p>\n");
    let filters = Filters::of(asked);
    let report = scope.merged.violations(scope.since, scope.until);
    let _ = write!(body, "<form method=\"get\" action=\"/ui/origin\" class=\"filters\" id=\"violation-filters\"><input type=\"hidden\" name=\"origin\" value=\"{}\">", escape(&name));
    let mut names: Vec<&str> = report.rows.iter().map(|r| r.key.crawler.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    body.push_str("<label>Crawler<select name=\"crawler\"><option value=\"\">any</option>");
    for crawler in names {
        let selected = if filters.crawler.as_deref() == Some(crawler) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{}</option>", escape(crawler));
    }
    body.push_str("</select></label><label>Verification<select name=\"verification\"><option value=\"\">any</option>");
    for v in ["verified", "unverified", "impostor"] {
        let selected = if filters.verification.as_deref() == Some(v) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{v}</option>");
    }
    body.push_str("</select></label><label>Read robots.txt<select name=\"read_robots\"><option value=\"\">either</option>");
    for (value, shown, want) in [
        ("yes", "read it", Some(true)),
        ("no", "did not", Some(false)),
    ] {
        let selected = if filters.read_robots == want {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option value=\"{value}\"{selected}>{shown}</option>");
    }
    body.push_str("</select></label><button type=\"submit\">Filter</button></form>\n");
    let mut filter_q = range_q.clone();
    for (key, value) in [
        ("crawler", filters.crawler.clone()),
        ("verification", filters.verification.clone()),
        (
            "read_robots",
            filters.read_robots.map(|r| {
                if r {
                    "yes".to_string()
                } else {
                    "no".to_string()
                }
            }),
        ),
    ] {
        if let Some(value) = value {
            let _ = write!(filter_q, "&amp;{key}={}", url_value(&value));
        }
    }
    body.push_str(&downloads("violations", &filter_q));
    if report.error_bound > 0 {
        let _ = writeln!(body, "<p class=\"warn\">More distinct rows than <code>reports.top</code> were seen: a row not listed was requested at most {} times, and a count may be over by its error.</p>", report.error_bound);
    }
    let violation_rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .filter(|row| filters.keeps(row))
        .map(|row| {
            vec![
                escape(&row.key.crawler),
                verification_tag(&row.key.verification),
                format!("<code>{}</code>", escape(&row.key.path)),
                format!(
                    "line {}: <code>{}: {}</code>",
                    row.key.line,
                    escape(&row.key.directive),
                    escape(&row.key.pattern)
                ),
                if row.key.read_robots {
                    "yes".into()
                } else {
                    "no".into()
                },
                if row.key.enforced {
                    "refused".into()
                } else {
                    "reported".into()
                },
                if row.count_error > 0 {
                    format!("{} (±{})", number(row.count), number(row.count_error))
                } else {
                    number(row.count)
                },
                format!("~{}", number(row.distinct_clients)),
                rfc3339(row.first_seen),
                rfc3339(row.last_seen),
            ]
        })
        .collect();
    body.push_str(&html::table(
        "violations",
        &[
            "Crawler",
            "Verification",
            "Path",
            "Rule",
            "Read robots.txt",
            "Answer",
            "Requests",
            "Clients",
            "First seen",
            "Last seen",
        ],
        &violation_rows,
        "No violations in this range.",
    ));

    body.push_str("<h2 id=\"robots-heading\">robots.txt copies</h2>\n");
    body.push_str(&downloads("robots", &range_q));
    let copies = api::robots_rows(&scope);
    if copies.is_empty() {
        body.push_str("<p class=\"empty\">No copy in force in this range.</p>\n");
    }
    body.push_str("<div id=\"robots-copies\">\n");
    for row in copies.iter().rev() {
        let copy = &row.copy;
        let _ = writeln!(
            body,
            "<div class=\"card\"><dl class=\"facts\"><dt>In force from</dt><dd>{}</dd><dt>Outcome</dt><dd>{} ({})</dd><dt>Source</dt><dd>{}</dd><dt>Rules</dt><dd>{}</dd><dt>Why</dt><dd>{}</dd></dl>",
            rfc3339(row.took_effect),
            copy.outcome.as_str(),
            copy.policy.state_label(),
            escape(&copy.source),
            copy.rule_count(),
            escape(&copy.reason),
        );
        if !row.diff.is_empty() {
            let _ = writeln!(body, "<details open><summary>Changes from the copy before</summary><pre class=\"diff\">{}</pre></details>", escape(&row.diff));
        }
        let _ = writeln!(
            body,
            "<details><summary>The copy</summary><pre class=\"robots\">{}</pre></details></div>",
            escape(&String::from_utf8_lossy(&copy.served().body))
        );
    }
    body.push_str("</div>\n");

    body.push_str("<h2 id=\"bans-heading\">Bans</h2>\n");
    body.push_str(&bans_table(console, Some(&name), viewer));
    viewer.page(200, &name, Section::Origin, &body)
}

fn bans_table(console: &Console, origin: Option<&str>, viewer: &Viewer) -> String {
    let query = origin.map_or(String::new(), |o| format!("origin={}", url_value(o)));
    let links = format!(
        "<p class=\"downloads\"><a href=\"/bans?{query}&amp;format=csv\" download id=\"bans-csv\">Download CSV</a><a href=\"/bans?{query}\" id=\"bans-json\">JSON</a></p>\n"
    );
    let bans = console.store.bans(origin);
    links + &lift_all_forms(&bans, viewer) + &bans_rows(console, &bans, viewer)
}

/// A "Lift all" button per origin that has bans (admin sessions only), each a form with the
/// session's CSRF token.
fn lift_all_forms(bans: &[crate::tables::offenders::Ban], viewer: &Viewer) -> String {
    if viewer.level < Level::Admin || viewer.csrf.is_empty() {
        return String::new();
    }
    let mut per_origin: Vec<(&str, usize)> = Vec::new();
    for ban in bans {
        match per_origin
            .iter_mut()
            .find(|(name, _)| *name == &*ban.origin)
        {
            Some((_, count)) => *count += 1,
            None => per_origin.push((&ban.origin, 1)),
        }
    }
    per_origin.sort_unstable();
    let mut out = String::new();
    for (origin, count) in per_origin {
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/ui/bans/lift-all\" class=\"inline lift-all\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"origin\" value=\"{}\"><button type=\"submit\" class=\"danger\">Lift all {} on {}</button></form>",
            escape(&viewer.csrf),
            escape(origin),
            if count == 1 { "1 ban".to_string() } else { format!("{} bans", number(count as u64)) },
            escape(origin),
        );
    }
    if out.is_empty() {
        return out;
    }
    format!("<p class=\"lift-all\" id=\"lift-all\">{out}</p>\n")
}

fn bans_rows(console: &Console, bans: &[crate::tables::offenders::Ban], viewer: &Viewer) -> String {
    let now = std::time::SystemTime::now();
    let snapshot = console.live.load();
    let rows: Vec<Vec<String>> = bans
        .iter()
        .map(|ban| {
            let since = crate::reports::text::unix_seconds(ban.since);
            let until = crate::reports::text::unix_seconds(ban.until);
            let left = ban.until.duration_since(now).map_or(0, |d| d.as_secs());
            let action = if viewer.level == Level::Admin {
                format!(
                    "<form method=\"post\" action=\"/ui/bans/lift\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"origin\" value=\"{}\"><input type=\"hidden\" name=\"client\" value=\"{}\"><button type=\"submit\" class=\"danger\">Lift</button></form>",
                    escape(&viewer.csrf),
                    escape(&ban.origin),
                    escape(&crate::client_address::shown_network(&ban.client)),
                )
            } else {
                "<span class=\"note\">admin token needed</span>".to_string()
            };
            let browsers = ban.browser_requests();
            let browsers = if browsers > 0 {
                format!(
                    "<span class=\"tag impostor\" title=\"browsers behind this address: a NAT, an office, a load balancer missing from trusted_proxies?\">{} — NAT?</span>",
                    number(browsers)
                )
            } else {
                "0".to_string()
            };
            // What earned it, and the exact User-Agent it binds (a browser's at a trap).
            let earned = match &ban.agent {
                Some(agent) => format!(
                    "{} ({})<br><code class=\"agent\">{}</code>",
                    escape(&ban.crawler),
                    ban.cause.as_str(),
                    escape(agent.shown())
                ),
                None => format!("{} ({})", escape(&ban.crawler), ban.cause.as_str()),
            };
            let state = match crate::judge::ban_state(&snapshot, ban) {
                "would_ban" => "<span class=\"tag\" title=\"mode: report or offenders.action: report: proxied, logged would_ban\">reported only</span>".to_string(),
                "ban_suspended" => "<span class=\"tag\" title=\"mode: off or offenders.action: off: proxied, logged ban_suspended\">suspended</span>".to_string(),
                _ => "refused".to_string(),
            };
            vec![
                escape(&ban.origin),
                format!(
                    "<code>{}</code>",
                    escape(&crate::client_address::shown_network(&ban.client))
                ),
                earned,
                rfc3339(since),
                rfc3339(until),
                html::span(left),
                number(u64::from(ban.strikes)),
                state,
                browsers,
                action,
            ]
        })
        .collect();
    html::table(
        "bans",
        &[
            "Origin",
            "Client",
            "Earned by",
            "Since",
            "Until",
            "Remaining",
            "Strikes",
            "Answer",
            "Browser requests",
            "",
        ],
        &rows,
        "No bans in force.",
    )
}

fn bans_page(console: &Console, asked: &Asked, viewer: &Viewer) -> Response<Vec<u8>> {
    let mut body = String::from("<h1>Bans</h1>\n");
    if let Some(done) = asked.param("lifted") {
        let _ = writeln!(
            body,
            "<p class=\"warn\" id=\"lifted\">Lifted {}.</p>",
            escape(done)
        );
    }
    body.push_str("<p class=\"note\">Addresses banned for repeated requests of paths robots.txt disallows. Many browser requests from a banned address suggest a NAT or an office behind it.</p>\n");
    body.push_str(&bans_table(console, None, viewer));
    viewer.page(200, "Bans", Section::Bans, &body)
}

/// "Lift all" on an origin: every ban on it, here and in the shared store.
async fn lift_all(console: &Console, asked: &Asked, viewer: &Viewer) -> Response<Vec<u8>> {
    if viewer.level < Level::Admin {
        return message(
            403,
            "Read-only",
            "The read-only token cannot lift bans; sign in with the admin token.",
            viewer,
        );
    }
    let Some(origin) = asked.field("origin") else {
        return message(400, "Missing fields", "The form names no origin.", viewer);
    };
    if console.live.load().origin_named(origin).is_none() {
        return message(
            404,
            "No such origin",
            "The config has no origin of that name.",
            viewer,
        );
    }
    let lifted = console.store.lift_all(Some(origin)).await;
    tracing::info!(
        origin,
        count = lifted.count,
        "an origin's bans lifted from the console"
    );
    if !lifted.everywhere {
        return message(503, "Lifted here only", "The shared state store is unreachable: the bans are lifted in this replica only and come back from the store when it is reachable. Try again.", viewer);
    }
    let done = match lifted.count {
        1 => format!("1 ban on {origin}"),
        count => format!("{count} bans on {origin}"),
    };
    html::see_other(&format!("/ui/bans?lifted={}", url_value(&done)))
}

async fn lift(console: &Console, asked: &Asked, viewer: &Viewer) -> Response<Vec<u8>> {
    if viewer.level < Level::Admin {
        return message(
            403,
            "Read-only",
            "The read-only token cannot lift bans; sign in with the admin token.",
            viewer,
        );
    }
    let (Some(origin), Some(client)) = (asked.field("origin"), asked.field("client")) else {
        return message(
            400,
            "Missing fields",
            "The form names no origin or client.",
            viewer,
        );
    };
    let Some(prefix) = console
        .live
        .load()
        .origin_named(origin)
        .map(|named| named.config.offenders.prefix)
    else {
        return message(
            404,
            "No such origin",
            "The config has no origin of that name.",
            viewer,
        );
    };
    let address = match crate::client_address::parse_client(client, prefix) {
        Ok(network) => network,
        Err(e) => return message(400, "Not an address or a network", &e.to_string(), viewer),
    };
    let shown = crate::client_address::shown_network(&address);
    match console.store.lift(origin, address).await {
        Lifted::Yes => {
            tracing::info!(origin, client = %shown, "ban lifted from the console");
            html::see_other(&format!("/ui/bans?lifted={}", url_value(&format!("the bans of {shown} on {origin}"))))
        }
        Lifted::NotBanned => message(404, "Not banned", "That address is not banned there (the ban may have ended).", viewer),
        Lifted::HereOnly => message(503, "Lifted here only", "The shared state store is unreachable: the ban is lifted in this replica only and comes back from the store when it is reachable. Try again.", viewer),
    }
}

/// `/ui/preview?origin=NAME`: the form, and on POST what the candidate would change
/// ([`super::preview_page`]).
async fn preview_page(
    console: &Console,
    asked: &Asked,
    viewer: &Viewer,
    post: bool,
) -> Response<Vec<u8>> {
    let origin = if post {
        asked.field("origin")
    } else {
        asked.param("origin")
    }
    .unwrap_or("");
    let submitted = post.then(|| {
        (
            asked.field("robots").unwrap_or(""),
            asked.field("config").unwrap_or(""),
        )
    });
    match super::preview_page::body(console, origin, &viewer.csrf, submitted).await {
        Some(body) => viewer.page(200, "Preview", Section::Origin, &body),
        None => message(
            404,
            "Not found",
            &format!("There is no origin named {origin}."),
            viewer,
        ),
    }
}

use super::preview::{ExplainQuery, ExplainQueryError};

async fn explain_page(console: &Console, asked: &Asked, viewer: &Viewer) -> Response<Vec<u8>> {
    let host = asked.param("host").unwrap_or("");
    let ua = asked.param("ua").unwrap_or("");
    let path = asked.param("path").unwrap_or("/");
    let client = asked.param("client").unwrap_or("");
    let method = asked.param("method").unwrap_or("GET");
    let snapshot = console.live.load();
    let mut body = String::from("<h1>Explain a request</h1>\n<p class=\"note\">The judgment the proxy would make for this request now, with bans, Crawl-delay and verification; asking changes nothing.</p>\n");
    let _ = write!(body, "<form method=\"get\" action=\"/ui/explain\" class=\"explain\" id=\"explain-form\"><label>Host<input name=\"host\" value=\"{}\" list=\"hosts\" required></label><datalist id=\"hosts\">", escape(host));
    for origin in &snapshot.origins {
        for h in &origin.config.hosts {
            let _ = write!(body, "<option value=\"{}\">", escape(h));
        }
    }
    let _ = writeln!(
        body,
        "</datalist><label class=\"wide\">User-Agent<input name=\"ua\" value=\"{}\"></label><label class=\"wide\">Path<input name=\"path\" value=\"{}\"></label><label>Client address<input name=\"client\" value=\"{}\" placeholder=\"optional\"></label><label>Method<input name=\"method\" value=\"{}\"></label><button type=\"submit\">Explain</button></form>",
        escape(ua),
        escape(path),
        escape(client),
        escape(method)
    );
    let asked_for = match ExplainQuery::parse(|name| asked.param(name)) {
        Ok(asked_for) => asked_for,
        Err(error) => {
            body.push_str(match error {
                ExplainQueryError::Client => {
                    "<p class=\"alert\">The client is not an IP address.</p>\n"
                }
                ExplainQueryError::Method => "<p class=\"alert\">That is not an HTTP method.</p>\n",
                ExplainQueryError::NoHost => "",
            });
            let status = if error == ExplainQueryError::NoHost {
                200
            } else {
                400
            };
            return viewer.page(status, "Explain", Section::Explain, &body);
        }
    };
    let facts = asked_for.facts();
    let preview = super::preview::preview(
        &snapshot,
        &console.verifier,
        &console.store,
        &console.throttles,
        asked.client,
        &facts,
    )
    .await;
    let judgment = &preview.judgment;
    let answer = match &judgment.answer {
        Answer::Proxy => "proxied to the origin".to_string(),
        Answer::ServeRobots(_) => {
            "answered by robotsguard with its robots.txt copy (200)".to_string()
        }
        Answer::Refuse(refusal) => format!("refused by robotsguard with {}", refusal.status),
    };
    let _ = write!(
        body,
        "<div class=\"card\" id=\"judgment\" data-action=\"{}\" data-status=\"{}\"><dl class=\"facts\"><dt>Answer</dt><dd id=\"answer\">{}</dd>",
        judgment.answer.action(),
        judgment.answer.status().map(|s| s.to_string()).unwrap_or_default(),
        escape(&answer)
    );
    if let Some(decision) = &judgment.decision {
        let crawler = decision
            .crawler
            .as_ref()
            .map_or("not a crawler".to_string(), |c| {
                format!("{} ({})", c.name(), c.category().as_str())
            });
        // Worded as /explain words it (one preview for both): a crawler not checked is
        // `unverified`, with why.
        let verification = preview
            .verification
            .as_ref()
            .map_or("not a crawler".to_string(), |v| {
                format!("{} — {}", v.result.as_str(), v.how)
            });
        let rule = decision.rule.as_ref().map_or("none".to_string(), |r| {
            format!("line {}: {}", r.line, r.text())
        });
        let _ = write!(
            body,
            "<dt>Origin</dt><dd>{}</dd><dt>Decision</dt><dd id=\"decision\">{}</dd><dt>Policy</dt><dd>{}</dd><dt>Crawler</dt><dd>{}</dd><dt>Verification</dt><dd id=\"verification\">{}</dd><dt>Group</dt><dd>{}</dd><dt>Rule</dt><dd><code>{}</code></dd><dt>Reason</dt><dd>{}</dd>",
            escape(decision.origin.name()),
            decision.outcome.as_str(),
            escape(&decision.policy()),
            escape(&crawler),
            escape(&verification),
            escape(decision.group.as_deref().unwrap_or("none")),
            escape(&rule),
            escape(&decision.reason()),
        );
        if let Some(read) = judgment.read_robots {
            let _ = write!(
                body,
                "<dt>Read robots.txt</dt><dd>{}</dd>",
                if read { "yes, within 24 hours" } else { "no" }
            );
        }
        if let Answer::Refuse(refusal) = &judgment.answer {
            if let Some(seconds) = refusal.why.retry_after() {
                let _ = write!(body, "<dt>Retry-After</dt><dd>{seconds} s</dd>");
            }
        }
    }
    body.push_str("</dl></div>\n");
    if preview.lookups_limited {
        let _ = writeln!(
            body,
            "<p class=\"warn\" id=\"lookups-limited\">The claim was not checked with reverse DNS: Explain looks up at most {} client addresses a minute per viewer and {} in all. Ask again in a minute.</p>",
            super::throttle::EXPLAIN_LOOKUPS_PER_CALLER,
            super::throttle::EXPLAIN_LOOKUPS_OVERALL,
        );
    }
    viewer.page(200, "Explain", Section::Explain, &body)
}
