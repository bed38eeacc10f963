//! The test origins themselves, asked directly (no proxy): stock nginx and the WHATWG origin
//! really do serve `private/secret.html` for targets that do not spell that path byte for byte.
//! These are the bypasses the proxy must not let through.

use crate::support;

use support::nginx::Nginx;
use support::whatwg::{resolve, WhatwgOrigin, INVALID};
use support::{get, Conn, Request};

const SECRET: &[u8] = b"<p>the secret page</p>\n";
const PUBLIC: &[u8] = b"<p>the public page</p>\n";

fn files() -> [(&'static str, &'static [u8]); 2] {
    [
        ("private/secret.html", SECRET),
        ("public/index.html", PUBLIC),
    ]
}

fn assert_secret(answer: &support::Response, what: &str, target: &str) {
    assert_eq!(
        (answer.status, answer.body.as_slice()),
        (200, SECRET),
        "{what} should serve the secret for {target:?}, got {} {:?}",
        answer.status,
        answer.text()
    );
}

#[test]
fn nginx_serves_files_and_logs_what_it_resolved() {
    let nginx = Nginx::start(&files());
    let public = get(nginx.addr(), "/public/index.html");
    assert_eq!((public.status, public.body.as_slice()), (200, PUBLIC));
    assert_secret(
        &get(nginx.addr(), "/private/secret.html"),
        "nginx",
        "/private/secret.html",
    );
    assert_eq!(get(nginx.addr(), "/private/missing.html").status, 404);

    let access = nginx.access_for("/private/secret.html");
    assert_eq!(
        (access.status, access.uri.as_str()),
        (200, "/private/secret.html")
    );
    assert_eq!(nginx.access_for("/private/missing.html").status, 404);
    // One line per request, in the documented three-field format.
    let log = nginx.access_log();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "access log:\n{log}");
    assert_eq!(lines[0], "200\t/public/index.html\t/public/index.html");
}

/// nginx decodes `%2F` and `%2E` first and resolves `..` and `//` afterwards, so each of these
/// reaches `private/secret.html` without saying `/private/` on the wire.
#[test]
fn nginx_serves_the_secret_for_encoded_slashes_and_dots() {
    let nginx = Nginx::start(&files());
    let targets = [
        "/%2Fprivate/secret.html",
        "/%2fprivate/secret.html",
        "//private/secret.html",
        "/public/..%2Fprivate/secret.html",
        "/public/..%2fprivate/secret.html",
        "/public%2F..%2Fprivate/secret.html",
        "/public%2f..%2fprivate/secret.html",
        "/public/%2e%2e/private/secret.html",
        "/public/%2E%2E/private/secret.html",
        "/public/.%2e/private/secret.html",
        "/public/%2e%2e%2fprivate/secret.html",
        "/private%2Fsecret.html",
        "/private%2fsecret.html",
        "/%70rivate/secret.html",
        "/public/./../private/./secret.html",
    ];
    for target in targets {
        assert_secret(&get(nginx.addr(), target), "nginx", target);
        let access = nginx.access_for(target);
        assert_eq!(
            access.uri, "/private/secret.html",
            "nginx's $uri for {target:?}"
        );
    }
}

/// Where nginx does not find the secret: `\` is data to it, and `..` above the root is refused.
#[test]
fn nginx_keeps_backslashes_and_refuses_to_climb_above_the_root() {
    let nginx = Nginx::start(&files());
    let backslash = get(nginx.addr(), "/public\\..\\private/secret.html");
    assert_eq!(backslash.status, 404, "{}", backslash.text());
    let access = nginx.access_for("/public\\..\\private/secret.html");
    assert_eq!(access.uri, "/public\\..\\private/secret.html");

    let above = get(nginx.addr(), "/..%2Fprivate/secret.html");
    assert_eq!(above.status, 400, "{}", above.text());
}

#[test]
fn whatwg_origin_serves_the_secret_where_new_url_finds_it() {
    let origin = WhatwgOrigin::start(&files());
    let targets = [
        "/private/secret.html",
        "//x/private/secret.html",
        "/\\x/private/secret.html",
        "\\\\x/private/secret.html",
        "///private/private/secret.html",
        "/public/%2e%2e/private/secret.html",
        "/public/%2E./private/secret.html",
        "/public\\..\\private\\secret.html",
        "/public/../private/secret.html?q=1#f",
        "private/secret.html",
    ];
    for target in targets {
        assert_secret(&get(origin.addr(), target), "the WHATWG origin", target);
    }
    let received = origin.received();
    assert_eq!(received.len(), targets.len());
    for ((raw, resolved), target) in received.iter().zip(targets) {
        assert_eq!(
            (raw.as_str(), resolved.as_str()),
            (target, "/private/secret.html")
        );
    }
}

#[test]
fn whatwg_origin_keeps_other_escapes_and_repeated_slashes() {
    let origin = WhatwgOrigin::start(&files());
    let cases = [
        ("/private%2Fsecret.html", "/private%2Fsecret.html"),
        (
            "/public/..%2Fprivate/secret.html",
            "/public/..%2Fprivate/secret.html",
        ),
        (
            "/public//../private/secret.html",
            "/public/private/secret.html",
        ),
        ("/%70rivate/secret.html", "/%70rivate/secret.html"),
    ];
    for (target, want) in cases {
        let answer = get(origin.addr(), target);
        assert_eq!(answer.status, 404, "{target:?}: {}", answer.text());
        assert_eq!(
            origin.received().last().map(|(_, r)| r.clone()).as_deref(),
            Some(want),
            "resolved path of {target:?}"
        );
    }
    // `//` alone has an empty host, which `new URL` rejects.
    assert_eq!(get(origin.addr(), "//").status, 400);
    assert_eq!(
        origin.received().last().map(|(_, r)| r.clone()).as_deref(),
        Some(INVALID)
    );
}

#[test]
fn whatwg_origin_keeps_connections_alive_and_answers_head() {
    let origin = WhatwgOrigin::start(&files());
    let mut conn = Conn::open(origin.addr());
    let host = origin.addr().to_string();
    let head = conn.send(&Request::new("HEAD", "//x/private/secret.html").host(&host));
    assert_eq!((head.status, head.body.len()), (200, 0));
    let again = conn.send(&Request::get("/public/index.html").host(&host));
    assert_eq!((again.status, again.body.as_slice()), (200, PUBLIC));
}

/// `resolve` against what Node 20's `new URL(target, "http://base.example/").pathname` gives
/// (`None` where it throws).
#[test]
fn whatwg_resolve_matches_node() {
    let cases: &[(&str, Option<&str>)] = &[
        ("", Some("/")),
        ("/", Some("/")),
        ("?q", Some("/")),
        ("#f", Some("/")),
        ("foo", Some("/foo")),
        ("..", Some("/")),
        ("./a/../", Some("/")),
        ("/a/..", Some("/")),
        ("/a/.", Some("/a/")),
        ("/a/%2e", Some("/a/")),
        ("/a/%2E/b", Some("/a/b")),
        ("/a//b/../c", Some("/a//c")),
        ("/a/b/%2e%2E/%2E./.%2e/c", Some("/c")),
        ("/a/..%2f/b", Some("/a/..%2f/b")),
        ("/a/...", Some("/a/...")),
        ("//x", Some("/")),
        ("//x?q", Some("/")),
        ("///x/p", Some("/p")),
        ("/\\/\\x/p", Some("/p")),
        ("//u:p@h@x/p", Some("/p")),
        ("//x:80/p", Some("/p")),
        ("//x:/p", Some("/p")),
        ("//x:99999/p", None),
        ("//x:8a/p", None),
        ("//@x/p", Some("/p")),
        ("//x@/p", None),
        ("//%2e/p", Some("/p")),
        ("//a%2Fb/p", None),
        ("//1.2.3.4/p", Some("/p")),
        ("//1.2.3.400/p", None),
        ("//0x7f.1/p", Some("/p")),
        ("//09/p", None),
        ("//a.09/p", None),
        ("//a.b9/p", Some("/p")),
        ("//[::1]/p", Some("/p")),
        ("//[::1/p", None),
        ("//", None),
        ("http://h/p/../q", Some("/q")),
        ("HTTP:/p", Some("/p")),
        ("http:p", Some("/p")),
        ("https:x/p", Some("/p")),
        ("https:", None),
        ("ws:\\\\x\\p", Some("/p")),
        ("file:///etc/passwd", Some("/etc/passwd")),
        ("file:/a\\..\\b", Some("/b")),
        ("foo:/a/../b", Some("/b")),
        ("foo:/a\\..\\b", Some("/a\\..\\b")),
        ("foo://h/a/%2e%2e/b", Some("/b")),
        ("foo://h", Some("")),
        ("foo:bar/../baz", Some("bar/../baz")),
        ("a+b-c.d:x", Some("x")),
        ("1a:b", Some("/1a:b")),
        ("/a^b`{}|c\"<>", Some("/a^b%60%7B%7D|c%22%3C%3E")),
        ("/\u{e4}", Some("/%C3%A4")),
        ("/a b", Some("/a%20b")),
        ("  /a\t/b\n ", Some("/a/b")),
    ];
    let mut wrong = Vec::new();
    for (target, want) in cases {
        let got = resolve(target);
        if got.as_deref() != *want {
            wrong.push(format!("{target:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "resolve differs from Node:\n{}",
        wrong.join("\n")
    );
}
