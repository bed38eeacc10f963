//! Web Bot Auth end to end: requests signed in the test (an RFC 9421 signer written here, apart
//! from the verifier, over keys made here) through the real proxy; keys from a JWKS file, and
//! from an agent's key directory served over HTTPS by `openssl s_server` with a certificate of a
//! CA made by `openssl` for this test.

use crate::support;

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha256};
use support::tls::{self, HttpsServer};
use support::{metric, Origin, Proxy, Request, BROWSER};

const HOST: &str = "shop.example";
const AGENT: &str = "https://bot.example";

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// The RFC 7638 thumbprint of an Ed25519 public key, base64url.
fn thumbprint(key: &SigningKey) -> String {
    let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    let canonical = format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}");
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

fn jwks(keys: &[&SigningKey]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|key| {
            let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
            format!("{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{x}\",\"use\":\"sig\"}}")
        })
        .collect();
    format!("{{\"keys\":[{}]}}", keys.join(","))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// How a test request is signed.
struct Signing<'a> {
    key: &'a SigningKey,
    /// The `keyid`; the key's thumbprint unless a test lies.
    keyid: String,
    /// The `@authority` signed (a tampered one makes the signature another request's).
    authority: &'a str,
    agent: &'a str,
    /// `Signature-Agent` as a dictionary member (`sig1="…"`) or the older bare string.
    dictionary: bool,
    created: i64,
    expires: i64,
    tag: &'a str,
    cover_agent: bool,
}

impl<'a> Signing<'a> {
    fn new(key: &'a SigningKey) -> Signing<'a> {
        Signing {
            key,
            keyid: thumbprint(key),
            authority: HOST,
            agent: AGENT,
            dictionary: true,
            created: now() - 10,
            expires: now() + 300,
            tag: "web-bot-auth",
            cover_agent: true,
        }
    }

    /// The three headers: Signature-Agent, Signature-Input, Signature (RFC 9421 §2.5 base).
    fn headers(&self) -> [(&'static str, String); 3] {
        let agent_header = if self.dictionary {
            format!("sig1=\"{}\"", self.agent)
        } else {
            format!("\"{}\"", self.agent)
        };
        let agent_component = if self.dictionary {
            "\"signature-agent\";key=\"sig1\""
        } else {
            "\"signature-agent\""
        };
        let mut components = vec!["\"@authority\"".to_string()];
        let mut base = format!("\"@authority\": {}\n", self.authority);
        if self.cover_agent {
            components.push(agent_component.to_string());
            base.push_str(&format!("{agent_component}: \"{}\"\n", self.agent));
        }
        let params = format!(
            "({});created={};expires={};keyid=\"{}\";alg=\"ed25519\";tag=\"{}\"",
            components.join(" "),
            self.created,
            self.expires,
            self.keyid,
            self.tag
        );
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = STANDARD.encode(self.key.sign(base.as_bytes()).to_bytes());
        [
            ("Signature-Agent", agent_header),
            ("Signature-Input", format!("sig1={params}")),
            ("Signature", format!("sig1=:{signature}:")),
        ]
    }
}

/// A browser-looking request (ChatGPT's agent sends a browser's User-Agent), signed.
fn signed(proxy: &Proxy, path: &str, signing: &Signing<'_>) -> support::Response {
    let mut request = Request::get(path).host(HOST).ua(BROWSER);
    for (name, value) in signing.headers() {
        request = request.header(name, &value);
    }
    proxy.send(&request)
}

/// A site whose robots.txt disallows /private to `SignedBot`, with `agent_keys` as the agent's
/// `keys:` line (or none for its directory).
fn setup(agent: &str, agent_keys: &str, files: &[(&str, &str)]) -> (Origin, Proxy) {
    setup_with(agent, agent_keys, files, "")
}

/// [`setup`] with `extra` top-level config keys.
fn setup_with(
    agent: &str,
    agent_keys: &str,
    files: &[(&str, &str)],
    extra: &str,
) -> (Origin, Proxy) {
    let origin = Origin::start();
    let config = format!(
        "{extra}verify:
  web_bot_auth:
    agents:
      - {{agent: \"{agent}\", crawler: SignedBot{agent_keys}}}
crawlers:
  extra:
    - name: SignedBot
      category: ai-assistant
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{}\"
    robots: {{source: inline, text: \"User-agent: SignedBot\\nDisallow: /private\\n\"}}
",
        origin.addr()
    );
    let proxy = Proxy::builder(&config).files(files).start();
    let loaded = (0..200).any(|_| {
        let keys = metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_keys",
            &[("agent", agent)],
        );
        std::thread::sleep(Duration::from_millis(25));
        keys >= 1.0
    });
    assert!(loaded, "the agent's keys did not load:\n{}", proxy.stderr());
    (origin, proxy)
}

#[test]
fn a_valid_signature_identifies_the_crawler_whatever_the_user_agent() {
    let good = key(1);
    let (origin, proxy) = setup(
        AGENT,
        ", keys: \"file:keys.json\"",
        &[("keys.json", &jwks(&[&good]))],
    );
    // Signed: it is SignedBot, so robots.txt's group for it applies.
    let answer = signed(&proxy, "/private/report", &Signing::new(&good));
    assert_eq!(answer.status, 403, "{}", answer.text());
    assert!(answer.text().contains("SignedBot"), "{}", answer.text());
    let answer = signed(&proxy, "/public", &Signing::new(&good));
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The older bare-string Signature-Agent is accepted too.
    let bare = Signing {
        dictionary: false,
        ..Signing::new(&good)
    };
    assert_eq!(signed(&proxy, "/private/report", &bare).status, 403);
    // Unsigned, the same browser User-Agent is a browser.
    assert_eq!(proxy.get(HOST, "/private/report", BROWSER).status, 200);
    assert_eq!(origin.proxied_to("/private/report").len(), 1);
    let verified = proxy.wait_metric(
        "robotsguard_crawler_verifications_total",
        &[("crawler", "SignedBot"), ("result", "verified")],
        3.0,
    );
    assert!(verified >= 3.0, "{verified}");
}

#[test]
fn a_signed_crawler_s_evidence_record_names_the_agent_and_the_key_that_verified_it() {
    let good = key(1);
    // Another key of the same agent: the record names the one that signed.
    let other = key(2);
    // The evidence signing key: a raw 32-byte seed in base64.
    let seed = STANDARD.encode([7_u8; 32]);
    let (_origin, proxy) = setup_with(
        AGENT,
        ", keys: \"file:keys.json\"",
        &[
            ("keys.json", &jwks(&[&other, &good])),
            ("evidence.key", &seed),
        ],
        "evidence: {enabled: true, key_file: evidence.key, dir: evidence, replica: r1}\n",
    );
    let answer = signed(&proxy, "/private/report", &Signing::new(&good));
    assert_eq!(answer.status, 403, "{}", answer.text());
    let dir = proxy.dir.path().join("evidence");
    let lines = wait_until_lines(&dir, 1);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let record: serde_json::Value = serde_json::from_str(&lines[0]).expect("a record");
    let verification = &record["verification"];
    assert_eq!(verification["verdict"], "verified", "{record}");
    assert_eq!(verification["method"], "web_bot_auth", "{record}");
    assert_eq!(verification["agent"], AGENT, "{record}");
    assert_eq!(
        verification["key_id"],
        thumbprint(&good).as_str(),
        "{record}"
    );
    assert_ne!(verification["key_id"], thumbprint(&other).as_str());
    assert_eq!(record["crawler"], "SignedBot", "{record}");
    assert!(
        record["rule"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("/private")),
        "{record}"
    );
}

/// The record lines in `dir`'s files, once there are `count` (waited for, bounded).
fn wait_until_lines(dir: &Path, count: usize) -> Vec<String> {
    let read = || crate::evidence::lines_in(dir);
    let mut lines = read();
    for _ in 0..200 {
        if lines.len() >= count {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
        lines = read();
    }
    lines
}

#[test]
fn signatures_that_do_not_hold_identify_nobody() {
    let good = key(1);
    let stranger = key(2);
    let other_agents = key(3);
    let (_origin, proxy) = setup(
        AGENT,
        ", keys: \"file:keys.json\"",
        &[("keys.json", &jwks(&[&good]))],
    );
    let cases: Vec<(&str, Signing<'_>)> = vec![
        (
            "expired",
            Signing {
                created: now() - 3600,
                expires: now() - 600,
                ..Signing::new(&good)
            },
        ),
        (
            "created in the future",
            Signing {
                created: now() + 600,
                expires: now() + 900,
                ..Signing::new(&good)
            },
        ),
        (
            "a lifetime over 24 hours",
            Signing {
                expires: now() + 3 * 86400,
                ..Signing::new(&good)
            },
        ),
        (
            "signed by a key the agent did not publish",
            Signing::new(&stranger),
        ),
        (
            "another key's keyid",
            Signing {
                keyid: thumbprint(&other_agents),
                ..Signing::new(&good)
            },
        ),
        (
            "signed for another host",
            Signing {
                authority: "other.example",
                ..Signing::new(&good)
            },
        ),
        (
            "Signature-Agent not covered",
            Signing {
                cover_agent: false,
                ..Signing::new(&good)
            },
        ),
        (
            "no web-bot-auth tag",
            Signing {
                tag: "something-else",
                ..Signing::new(&good)
            },
        ),
        (
            "an agent that is not configured",
            Signing {
                agent: "https://unknown.example",
                ..Signing::new(&good)
            },
        ),
    ];
    for (what, signing) in &cases {
        let answer = signed(&proxy, "/private/report", signing);
        assert_eq!(answer.status, 200, "{what}: {}", answer.text());
    }
    // Malformed signature headers: never a panic, never an identification.
    for (input, signature) in [
        ("sig1=(", "sig1=:AAAA:"),
        ("sig1=(\"@authority\");created=x", "nonsense"),
        ("", ""),
        (&"x".repeat(9000)[..], "sig1=:AAAA:"),
    ] {
        let request = Request::get("/private/report")
            .host(HOST)
            .ua(BROWSER)
            .header("Signature-Agent", "sig1=\"https://bot.example\"")
            .header("Signature-Input", input)
            .header("Signature", signature);
        assert_eq!(proxy.send(&request).status, 200, "{input}");
    }
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_crawler_verifications_total",
            &[("crawler", "SignedBot"), ("result", "verified")]
        ),
        0.0
    );
}

/// An HTTPS server over `root` with the test CA's certificate.
fn https_server(root: &Path) -> HttpsServer {
    let (_, cert, key) = tls::trusted_server_certificate();
    HttpsServer::start(root, cert, key, None)
}

#[test]
fn keys_come_from_the_agents_directory_over_https() {
    let good = key(7);
    let root = tempfile::tempdir().expect("temp dir");
    let directory = root.path().join(".well-known");
    std::fs::create_dir_all(&directory).expect("directory made");
    std::fs::write(
        directory.join("http-message-signatures-directory"),
        jwks(&[&good]),
    )
    .expect("key directory written");
    let server = https_server(root.path());
    let agent = format!("https://127.0.0.1:{}", server.port);
    let (_origin, proxy) = setup(&agent, "", &[]);
    let signing = Signing {
        agent: &agent,
        ..Signing::new(&good)
    };
    let answer = signed(&proxy, "/private/report", &signing);
    assert_eq!(answer.status, 403, "{}", answer.text());
    assert!(
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_key_fetches_total",
            &[("agent", &agent), ("outcome", "ok")]
        ) >= 1.0
    );
}

#[test]
fn a_missing_directory_leaves_signatures_unchecked() {
    let good = key(8);
    // The server has no directory (`openssl s_server -WWW` answers with an error text).
    let root = tempfile::tempdir().expect("temp dir");
    let server = https_server(root.path());
    let agent = format!("https://127.0.0.1:{}", server.port);
    let origin = Origin::start();
    let config = format!(
        "verify:\n  web_bot_auth:\n    agents:\n      - {{agent: \"{agent}\", crawler: SignedBot}}\n\
         crawlers:\n  extra:\n    - name: SignedBot\n\
         origins:\n  - name: shop\n    hosts: [\"{HOST}\"]\n    upstream: \"{}\"\n\
         \x20   robots: {{source: inline, text: \"User-agent: SignedBot\\nDisallow: /private\\n\"}}\n",
        origin.addr()
    );
    let proxy = Proxy::start(&config);
    let failed = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_key_fetches_total",
            &[("agent", &agent), ("outcome", "failed")],
        ) >= 1.0
    });
    assert!(failed, "{}", proxy.stderr());
    let signing = Signing {
        agent: &agent,
        ..Signing::new(&good)
    };
    assert_eq!(signed(&proxy, "/private/report", &signing).status, 200);
    // Log lines reach stderr through a queue, a moment after the metric is counted.
    assert!(
        proxy.wait_log(
            "signatures cannot be checked until they load",
            1,
            Duration::from_secs(5)
        ),
        "{}",
        proxy.stderr()
    );
}

/// A robotsguard-format feed entry for `TeamBot` whose signing agent is `agent` (none: the
/// entry names no agent).
fn team_feed(agent: Option<&str>) -> String {
    let agents = agent.map_or(String::new(), |agent| {
        format!(", signing_agents: [\"{agent}\"]")
    });
    format!(
        "crawlers:\n  - {{name: TeamBot, tokens: [teambot], pattern: TeamBot, category: ai-assistant, operator: Team, source: \"https://team.example/bot\"{agents}}}\n"
    )
}

/// A proxy for shop.example (`required`) and blog.example (`optional`), whose catalogue gets
/// `TeamBot` from a `file:` feed; `private` is the `private_agents` line (or none).
fn feed_setup(feed: &str, private: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let robots = "robots: {source: inline, text: \"User-agent: TeamBot\\nDisallow: /private\\n\"}";
    let config = format!(
        "verify:
  web_bot_auth:
    mode: required
{private}crawlers:
  feeds:
    - {{url: \"file:team.yaml\", format: robotsguard, refresh: 1h}}
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{addr}\"
    {robots}
  - name: blog
    hosts: [blog.example]
    upstream: \"{addr}\"
    {robots}
    web_bot_auth: {{mode: optional}}
",
        addr = origin.addr()
    );
    let proxy = Proxy::builder(&config)
        .files(&[("team.yaml", feed)])
        .start();
    (origin, proxy)
}

fn wait_until(mut check: impl FnMut() -> bool) -> bool {
    (0..400).any(|_| {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
        false
    })
}

/// Checks the answer `/explain` gives for `ua` on `host` and `path` is `status`.
fn assert_explained(proxy: &Proxy, host: &str, ua: &str, path: &str, status: u16) {
    let (code, explain) = proxy.explain(host, ua, path);
    assert_eq!(code, 200, "{explain}");
    let shown = explain["answer"]["status"].as_u64();
    match status {
        200 => assert_eq!(explain["answer"]["action"], "proxy", "{explain}"),
        _ => assert_eq!(shown, Some(u64::from(status)), "{explain}"),
    }
}

#[test]
fn a_feed_entrys_signing_agent_verifies_its_signatures_and_required_asks_for_them() {
    let good = key(31);
    let root = tempfile::tempdir().expect("temp dir");
    let directory = root.path().join(".well-known");
    std::fs::create_dir_all(&directory).expect("directory made");
    std::fs::write(
        directory.join("http-message-signatures-directory"),
        jwks(&[&good]),
    )
    .expect("key directory written");
    let server = https_server(root.path());
    let agent = format!("https://127.0.0.1:{}", server.port);
    // The agent lives on loopback: only the operator's `private_agents` lets it be fetched.
    let (origin, proxy) = feed_setup(
        &team_feed(Some(&agent)),
        &format!("    private_agents: [\"{agent}\"]\n"),
    );
    let loaded = wait_until(|| {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_keys",
            &[("agent", &agent)],
        ) >= 1.0
    });
    assert!(
        loaded,
        "the feed agent's keys did not load:\n{}",
        proxy.stderr()
    );
    let claim = "TeamBot/1.0 (+https://team.example/bot)";
    // Signed by the feed entry's agent: TeamBot, whatever the User-Agent says.
    let signing = Signing {
        agent: &agent,
        ..Signing::new(&good)
    };
    let answer = signed(&proxy, "/private/report", &signing);
    assert_eq!(answer.status, 403, "{}", answer.text());
    assert!(answer.text().contains("TeamBot"), "{}", answer.text());
    assert!(answer.header("accept-signature").is_none());
    assert_eq!(signed(&proxy, "/public", &signing).status, 200);
    // Unsigned, the claim is asked for a signature under `required`, and /explain agrees.
    let answer = proxy.get(HOST, "/public", claim);
    assert_eq!(answer.status, 403, "{}", answer.text());
    assert!(
        answer.header("accept-signature").is_some(),
        "{:?}",
        answer.headers
    );
    assert_explained(&proxy, HOST, claim, "/public", 403);
    // Under `optional` (the blog) it passes as before, and /explain agrees.
    assert_eq!(proxy.get("blog.example", "/public", claim).status, 200);
    assert_explained(&proxy, "blog.example", claim, "/public", 200);
    assert_eq!(origin.proxied_to("/public").len(), 2);
    // The feed drops the agent: TeamBot no longer signs, and is no longer asked to.
    std::fs::write(proxy.dir.path().join("team.yaml"), team_feed(None)).expect("written");
    assert!(
        wait_until(|| proxy.get(HOST, "/public", claim).status == 200),
        "the dropped agent is still required:\n{}",
        proxy.stderr()
    );
    assert_explained(&proxy, HOST, claim, "/public", 200);
    let answer = signed(&proxy, "/private/report", &signing);
    assert_eq!(
        answer.status,
        200,
        "no agent, no identification: {}",
        answer.text()
    );
}

#[test]
fn a_feed_agent_on_loopback_is_not_fetched_and_its_signed_claims_are_told_to_come_back() {
    let good = key(32);
    let root = tempfile::tempdir().expect("temp dir");
    let directory = root.path().join(".well-known");
    std::fs::create_dir_all(&directory).expect("directory made");
    std::fs::write(
        directory.join("http-message-signatures-directory"),
        jwks(&[&good]),
    )
    .expect("key directory written");
    let server = https_server(root.path());
    let agent = format!("https://127.0.0.1:{}", server.port);
    // The same feed, without the operator's word: the directory is never fetched.
    let (_origin, proxy) = feed_setup(&team_feed(Some(&agent)), "");
    let failed = wait_until(|| {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_key_fetches_total",
            &[("agent", &agent), ("outcome", "failed")],
        ) >= 1.0
    });
    assert!(failed, "{}", proxy.stderr());
    assert!(
        proxy.wait_log("not a public address", 1, Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    let claim = "TeamBot/1.0 (+https://team.example/bot)";
    // Signed, but its agent's keys are not loaded: neither let through nor asked to sign.
    let mut request = Request::get("/public").host(HOST).ua(claim);
    for (name, value) in (Signing {
        agent: &agent,
        ..Signing::new(&good)
    })
    .headers()
    {
        request = request.header(name, &value);
    }
    let answer = proxy.send(&request);
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.header("retry-after"), Some("60"));
    assert!(answer.header("accept-signature").is_none());
    // Unsigned: asked for a signature, as any claim of a signing crawler.
    assert_eq!(proxy.get(HOST, "/public", claim).status, 403);
    // A browser's signed request is not a claim: it passes, unidentified.
    let signing = Signing {
        agent: &agent,
        ..Signing::new(&good)
    };
    assert_eq!(signed(&proxy, "/private/report", &signing).status, 200);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_web_bot_auth_refusals_total",
            &[("origin", "shop"), ("reason", "keys_unavailable")]
        ),
        1.0
    );
    // One warning for the run of failures, however many retries follow.
    assert_eq!(
        proxy
            .stderr()
            .lines()
            .filter(|line| line.contains("WARN") && line.contains(&agent))
            .count(),
        1,
        "{}",
        proxy.stderr()
    );
}

/// `signing`'s request from `client` (forwarded by the trusted proxy the test is).
fn signed_from(
    proxy: &Proxy,
    path: &str,
    signing: &Signing<'_>,
    client: &str,
) -> support::Response {
    let mut request = Request::get(path)
        .host(HOST)
        .ua(BROWSER)
        .header("X-Forwarded-For", client);
    for (name, value) in signing.headers() {
        request = request.header(name, &value);
    }
    proxy.send(&request)
}

/// A site behind a trusted proxy whose SignedBot signs with `good`'s key (a JWKS file), with
/// `extra` lines in `verify.web_bot_auth` (and `state`, when it starts with `state:`).
fn nonceless_setup(good: &SigningKey, extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start();
    let (state, extra) = match extra.strip_prefix("state:") {
        Some(state) => (format!("state:{state}"), ""),
        None => (String::new(), extra),
    };
    let config = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]
{state}verify:
  web_bot_auth:
{extra}    agents:
      - {{agent: \"{AGENT}\", crawler: SignedBot, keys: \"file:keys.json\"}}
crawlers:
  extra:
    - name: SignedBot
      category: ai-assistant
origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{}\"
    robots: {{source: inline, text: \"User-agent: SignedBot\\nDisallow: /private\\n\"}}
",
        origin.addr()
    );
    let proxy = Proxy::builder(&config)
        .files(&[("keys.json", &jwks(&[good]))])
        .start();
    let loaded = (0..200).any(|_| {
        let keys = metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_keys",
            &[("agent", AGENT)],
        );
        std::thread::sleep(Duration::from_millis(25));
        keys >= 1.0
    });
    assert!(
        loaded,
        "the agent's keys did not load:
{}",
        proxy.stderr()
    );
    (origin, proxy)
}

#[test]
fn a_signature_without_a_nonce_is_bound_to_its_first_address_and_a_short_window() {
    let good = key(41);
    let (origin, proxy) = nonceless_setup(&good, "");
    // A fresh signature (made 10 s ago), no nonce: the address that sent it first may send it
    // again; another address may not.
    let fresh = Signing::new(&good);
    assert_eq!(
        signed_from(&proxy, "/public", &fresh, "192.0.2.1").status,
        200
    );
    assert_eq!(
        signed_from(&proxy, "/public", &fresh, "192.0.2.1").status,
        200
    );
    let elsewhere = signed_from(&proxy, "/public", &fresh, "198.51.100.7");
    assert_eq!(elsewhere.status, 429, "{}", elsewhere.text());
    let offered = elsewhere
        .header("accept-signature")
        .unwrap_or_default()
        .to_string();
    assert!(offered.contains("nonce="), "{offered}");
    // Still SignedBot from its first address: robots.txt's group for it applies.
    assert_eq!(
        signed_from(&proxy, "/private/x", &fresh, "192.0.2.1").status,
        403
    );
    // Valid for two hours, but made an hour ago: past the 5-minute window, from any address.
    let kept = Signing {
        created: now() - 3600,
        expires: now() + 3600,
        ..Signing::new(&good)
    };
    let stale = signed_from(&proxy, "/public", &kept, "192.0.2.2");
    assert_eq!(stale.status, 429, "{}", stale.text());
    assert_eq!(origin.proxied_to("/public").len(), 2);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_web_bot_auth_refusals_total",
            &[("origin", "shop"), ("reason", "replayed")]
        ),
        2.0
    );
}

#[test]
fn an_agent_the_operator_lists_may_sign_without_a_nonce_from_anywhere_while_valid() {
    let good = key(42);
    let (origin, proxy) = nonceless_setup(
        &good,
        &format!("    nonceless_agents: [\"{AGENT}\"]\n    nonceless_window: 1m\n"),
    );
    let kept = Signing {
        created: now() - 3600,
        expires: now() + 3600,
        ..Signing::new(&good)
    };
    for client in ["192.0.2.1", "198.51.100.7", "203.0.113.9"] {
        assert_eq!(
            signed_from(&proxy, "/public", &kept, client).status,
            200,
            "{client}"
        );
        assert_eq!(
            signed_from(&proxy, "/private/x", &kept, client).status,
            403,
            "{client}: still SignedBot"
        );
    }
    assert_eq!(origin.proxied_to("/public").len(), 3);
}

#[test]
fn a_signature_without_a_nonce_replayed_on_another_replica_from_another_address_is_refused() {
    let redis = support::redis::RedisServer::start();
    let good = key(43);
    let state = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"wba-sender\", timeout: 2s}}\n",
        redis.url()
    );
    let (_first_origin, first) = nonceless_setup(&good, &state);
    let (_second_origin, second) = nonceless_setup(&good, &state);
    for proxy in [&first, &second] {
        let up = (0..400).any(|_| {
            std::thread::sleep(Duration::from_millis(25));
            metric(&proxy.metrics(), "robotsguard_state_backend_up", &[]) == 1.0
        });
        assert!(up, "{}", proxy.stderr());
    }
    let fresh = Signing::new(&good);
    assert_eq!(
        signed_from(&first, "/public", &fresh, "192.0.2.1").status,
        200
    );
    let elsewhere = signed_from(&second, "/public", &fresh, "198.51.100.7");
    assert_eq!(elsewhere.status, 429, "{}", elsewhere.text());
    assert_eq!(
        signed_from(&second, "/public", &fresh, "192.0.2.1").status,
        200
    );
    // The first address is kept in the store with the signature's time, no longer.
    let keys = redis.command(&["KEYS", "wba-sender*signature*"]);
    let keys: Vec<&str> = keys.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl: i64 = redis
        .command(&["PTTL", keys[0].trim()])
        .trim()
        .parse()
        .unwrap_or(-1);
    assert!(ttl > 0 && ttl <= 6 * 60 * 1000, "{ttl}");
}
