//! Web Bot Auth as the IETF working-group draft profiles it, end to end through the real proxy:
//! the `observe`/`optional`/`required` modes (per origin too), `required`'s 403 with an
//! `Accept-Signature`, replayed nonces refused 429 (here, and on another replica through a real
//! Redis), RSA-PSS-SHA512 and ECDSA P-256 keys besides Ed25519, agents from a registry of
//! signature-agent cards (`file:` and `data:`), and a `Signature-Agent` on loopback never
//! fetched. Keys and signatures are made here with the RustCrypto crates (RSA keys by
//! `openssl genpkey`), apart from the verifier.

use crate::support;

use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ed25519_dalek::Signer as _;
use rsa::pkcs8::DecodePrivateKey;
use rsa::signature::RandomizedSigner;
use rsa::traits::PublicKeyParts;
use sha2::{Digest, Sha256};
use support::redis::RedisServer;
use support::{metric, Origin, Proxy, Request, BROWSER};

const HOST: &str = "shop.example";
const OTHER_HOST: &str = "blog.example";
const AGENT: &str = "https://bot.example";
const UA: &str = "Mozilla/5.0 (compatible; SignedBot/1.0)";

/// A signing key of one of the three algorithms.
enum Key {
    Ed25519(ed25519_dalek::SigningKey),
    Rsa(Box<rsa::RsaPrivateKey>),
    P256(p256::ecdsa::SigningKey),
}

impl Key {
    fn ed25519(seed: u8) -> Key {
        Key::Ed25519(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    fn p256(seed: u8) -> Key {
        Key::P256(p256::ecdsa::SigningKey::from_slice(&[seed; 32]).expect("a P-256 scalar"))
    }

    /// A 2048-bit RSA key made by `openssl genpkey`.
    fn rsa() -> Key {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rsa.pem");
        let status = crate::support::programs::command("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
            ])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(status.success());
        let pem = std::fs::read_to_string(&path).expect("key written");
        Key::Rsa(Box::new(
            rsa::RsaPrivateKey::from_pkcs8_pem(&pem).expect("a PKCS#8 RSA key"),
        ))
    }

    fn alg(&self) -> &'static str {
        match self {
            Key::Ed25519(_) => "ed25519",
            Key::Rsa(_) => "rsa-pss-sha512",
            Key::P256(_) => "ecdsa-p256-sha256",
        }
    }

    /// The public JWK members, in RFC 7638 order (the thumbprint's input).
    fn members(&self) -> Vec<(&'static str, String)> {
        match self {
            Key::Ed25519(key) => vec![
                ("crv", "Ed25519".into()),
                ("kty", "OKP".into()),
                ("x", URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())),
            ],
            Key::Rsa(key) => vec![
                ("e", URL_SAFE_NO_PAD.encode(key.e().to_bytes_be())),
                ("kty", "RSA".into()),
                ("n", URL_SAFE_NO_PAD.encode(key.n().to_bytes_be())),
            ],
            Key::P256(key) => {
                let point = key.verifying_key().to_encoded_point(false);
                vec![
                    ("crv", "P-256".into()),
                    ("kty", "EC".into()),
                    ("x", URL_SAFE_NO_PAD.encode(point.x().expect("x"))),
                    ("y", URL_SAFE_NO_PAD.encode(point.y().expect("y"))),
                ]
            }
        }
    }

    fn canonical(&self) -> String {
        let members: Vec<String> = self
            .members()
            .iter()
            .map(|(name, value)| format!("\"{name}\":\"{value}\""))
            .collect();
        format!("{{{}}}", members.join(","))
    }

    fn thumbprint(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.canonical().as_bytes()))
    }

    /// The JWK, with a `kid` that is not its thumbprint (as some directories publish).
    fn jwk(&self) -> String {
        let canonical = self.canonical();
        format!(
            "{},\"kid\":\"not-a-thumbprint\"}}",
            &canonical[..canonical.len() - 1]
        )
    }

    fn sign(&self, base: &[u8]) -> Vec<u8> {
        match self {
            Key::Ed25519(key) => key.sign(base).to_bytes().to_vec(),
            Key::Rsa(key) => {
                let signer = rsa::pss::BlindedSigningKey::<sha2::Sha512>::new((**key).clone());
                let signature = signer.sign_with_rng(&mut rsa::rand_core::OsRng, base);
                Box::<[u8]>::from(signature).to_vec()
            }
            Key::P256(key) => {
                let signature: p256::ecdsa::Signature =
                    p256::ecdsa::signature::Signer::sign(key, base);
                signature.to_bytes().to_vec()
            }
        }
    }
}

fn jwks(keys: &[&Key]) -> String {
    let keys: Vec<String> = keys.iter().map(|key| key.jwk()).collect();
    format!("{{\"keys\":[{}]}}", keys.join(","))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The three signature headers of a request to `authority` by `agent`, signed with `key`:
/// covering `@authority` and the `Signature-Agent` member, with `nonce` when given.
fn signature_headers(
    key: &Key,
    agent: &str,
    authority: &str,
    nonce: Option<&str>,
    alg: Option<&str>,
) -> [(&'static str, String); 3] {
    let component = "\"signature-agent\";key=\"sig1\"";
    let mut params = format!(
        "(\"@authority\" {component});created={};expires={};keyid=\"{}\";alg=\"{}\";tag=\"web-bot-auth\"",
        now() - 5,
        now() + 300,
        key.thumbprint(),
        alg.unwrap_or(key.alg()),
    );
    if let Some(nonce) = nonce {
        params.push_str(&format!(";nonce=\"{nonce}\""));
    }
    let base = format!(
        "\"@authority\": {authority}\n{component}: \"{agent}\"\n\"@signature-params\": {params}"
    );
    let signature = STANDARD.encode(key.sign(base.as_bytes()));
    [
        ("Signature-Agent", format!("sig1=\"{agent}\"")),
        ("Signature-Input", format!("sig1={params}")),
        ("Signature", format!("sig1=:{signature}:")),
    ]
}

fn signed_request(
    host: &str,
    path: &str,
    user_agent: &str,
    headers: &[(&'static str, String)],
) -> Request {
    let mut request = Request::get(path).host(host).ua(user_agent);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request
}

/// robots.txt disallowing /private to SignedBot (and CardBot, DataBot).
const ROBOTS: &str = "robots: {source: inline, text: \"User-agent: SignedBot\\nUser-agent: CardBot\\nUser-agent: DataBot\\nDisallow: /private\\n\"}";

const CRAWLERS: &str = "crawlers:
  extra:
    - {name: SignedBot, pattern: SignedBot, tokens: [signedbot], category: ai-assistant}
    - {name: CardBot, pattern: CardBot, tokens: [cardbot], category: ai-assistant}
    - {name: DataBot, pattern: DataBot, tokens: [databot], category: ai-assistant}
";

/// Two origins (shop, blog) behind one proxy; `verify` and the origins' extra lines as given.
fn start(
    verify: &str,
    defaults: &str,
    shop: &str,
    blog: &str,
    files: &[(&str, &str)],
) -> (Origin, Proxy) {
    let origin = Origin::start();
    let config = format!(
        "{verify}{CRAWLERS}{defaults}origins:
  - name: shop
    hosts: [\"{HOST}\"]
    upstream: \"{addr}\"
    {ROBOTS}
{shop}  - name: blog
    hosts: [\"{OTHER_HOST}\"]
    upstream: \"{addr}\"
    {ROBOTS}
{blog}",
        addr = origin.addr()
    );
    let proxy = Proxy::builder(&config).files(files).start();
    (origin, proxy)
}

fn wait_for(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    for _ in 0..2_000 {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

fn wait_keys(proxy: &Proxy, agent: &str) {
    let loaded = wait_for(Duration::from_secs(10), || {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_keys",
            &[("agent", agent)],
        ) >= 1.0
    });
    assert!(
        loaded,
        "the keys of {agent} did not load:\n{}",
        proxy.stderr()
    );
}

/// Checks an `Accept-Signature` asks for what the draft's profile signs.
fn assert_accept_signature(answer: &support::Response) -> String {
    let value = answer
        .header("accept-signature")
        .unwrap_or_else(|| panic!("no Accept-Signature: {:?}", answer.headers))
        .to_string();
    for part in [
        "sig1=(",
        "\"@authority\"",
        "\"signature-agent\";key=\"sig1\"",
        ";created",
        ";expires",
        ";nonce=\"",
        ";tag=\"web-bot-auth\"",
    ] {
        assert!(value.contains(part), "{part} missing from {value}");
    }
    value
}

#[test]
fn required_refuses_an_unsigned_claim_with_accept_signature_and_origins_override_the_mode() {
    let key = Key::ed25519(1);
    let verify = "verify:\n  web_bot_auth:\n    agents:\n      - {agent: \"https://bot.example\", crawler: SignedBot, keys: \"file:keys.json\"}\n";
    // `verify` leaves the mode at optional; `defaults` asks for signatures, the blog does not.
    let (origin, proxy) = start(
        verify,
        "defaults:\n  web_bot_auth: {mode: required}\n",
        "",
        "    web_bot_auth: {mode: optional}\n",
        &[("keys.json", &jwks(&[&key]))],
    );
    wait_keys(&proxy, AGENT);
    // Unsigned, claiming SignedBot (which signs): refused, told what to sign.
    let answer = proxy.get(HOST, "/public", UA);
    assert_eq!(answer.status, 403, "{}", answer.text());
    let first = assert_accept_signature(&answer);
    assert!(answer.text().contains("Web Bot Auth"), "{}", answer.text());
    // Each refusal offers a fresh nonce.
    let again = assert_accept_signature(&proxy.get(HOST, "/other", UA));
    assert_ne!(first, again);
    // robots.txt stays readable; a browser is no claim; the blog keeps signatures optional.
    assert_eq!(proxy.get(HOST, "/robots.txt", UA).status, 200);
    assert_eq!(proxy.get(HOST, "/public", BROWSER).status, 200);
    assert_eq!(proxy.get(OTHER_HOST, "/public", UA).status, 200);
    // Signed, the same claim is let through (and /private is still robots.txt's to refuse).
    let headers = signature_headers(&key, AGENT, HOST, None, None);
    let answer = proxy.send(&signed_request(HOST, "/public", UA, &headers));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.header("accept-signature").is_none());
    let answer = proxy.send(&signed_request(HOST, "/private/a", UA, &headers));
    assert_eq!(answer.status, 403);
    assert!(
        answer.header("accept-signature").is_none(),
        "a robots.txt block, not a signature request"
    );
    // A signature by a key the agent did not publish is no signature.
    let stranger = Key::ed25519(2);
    let forged = signature_headers(&stranger, AGENT, HOST, None, None);
    let answer = proxy.send(&signed_request(HOST, "/public", UA, &forged));
    assert_eq!(answer.status, 403);
    assert_accept_signature(&answer);
    // The browser's, the blog's (both origins share one upstream) and the signed one.
    assert_eq!(origin.proxied_to("/public").len(), 3);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_web_bot_auth_refusals_total",
            &[("origin", "shop"), ("reason", "signature_required")]
        ),
        3.0
    );
    // Counted as blocked: the three refusals and robots.txt's block of /private.
    let blocked = proxy.wait_metric(
        "robotsguard_requests_total",
        &[("origin", "shop"), ("decision", "blocked")],
        4.0,
    );
    assert_eq!(blocked, 4.0);
}

#[test]
fn observe_verifies_and_counts_but_never_changes_a_decision() {
    let key = Key::ed25519(3);
    let verify = "verify:\n  web_bot_auth:\n    mode: observe\n    agents:\n      - {agent: \"https://bot.example\", crawler: SignedBot, keys: \"file:keys.json\"}\n";
    // The blog goes further than the proxy-wide `observe`: identification by signature.
    let (_origin, proxy) = start(
        verify,
        "",
        "",
        "    web_bot_auth: {mode: optional}\n",
        &[("keys.json", &jwks(&[&key]))],
    );
    wait_keys(&proxy, AGENT);
    let headers = signature_headers(&key, AGENT, HOST, Some("n-observe"), None);
    // A browser User-Agent, validly signed as SignedBot: under observe, still a browser.
    let answer = proxy.send(&signed_request(HOST, "/private/a", BROWSER, &headers));
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The same nonce again: no replay refusal under observe.
    let answer = proxy.send(&signed_request(HOST, "/private/a", BROWSER, &headers));
    assert_eq!(answer.status, 200, "{}", answer.text());
    // Where signatures identify, the same signature is SignedBot's, and /private is refused.
    let blog = signature_headers(&key, AGENT, OTHER_HOST, None, None);
    let answer = proxy.send(&signed_request(OTHER_HOST, "/private/a", BROWSER, &blog));
    assert_eq!(answer.status, 403, "{}", answer.text());
    let metrics = proxy.metrics();
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_web_bot_auth_signatures_total",
            &[("mode", "observe"), ("outcome", "verified")]
        ),
        2.0
    );
    assert_eq!(
        metric(
            &metrics,
            "robotsguard_web_bot_auth_signatures_total",
            &[("mode", "optional"), ("outcome", "verified")]
        ),
        1.0
    );
}

#[test]
fn a_replayed_nonce_is_refused_429_with_a_fresh_accept_signature() {
    let key = Key::ed25519(4);
    let verify = "verify:\n  web_bot_auth:\n    agents:\n      - {agent: \"https://bot.example\", crawler: SignedBot, keys: \"file:keys.json\"}\n";
    let (origin, proxy) = start(verify, "", "", "", &[("keys.json", &jwks(&[&key]))]);
    wait_keys(&proxy, AGENT);
    let headers = signature_headers(&key, AGENT, HOST, Some("nonce-1"), None);
    assert_eq!(
        proxy
            .send(&signed_request(HOST, "/a", BROWSER, &headers))
            .status,
        200
    );
    let replay = proxy.send(&signed_request(HOST, "/a", BROWSER, &headers));
    assert_eq!(replay.status, 429, "{}", replay.text());
    let offered = assert_accept_signature(&replay);
    assert!(!offered.contains("nonce-1"));
    // A fresh nonce is a fresh signature; one without a nonce cannot be told from a replay.
    let fresh = signature_headers(&key, AGENT, HOST, Some("nonce-2"), None);
    assert_eq!(
        proxy
            .send(&signed_request(HOST, "/a", BROWSER, &fresh))
            .status,
        200
    );
    let bare = signature_headers(&key, AGENT, HOST, None, None);
    for _ in 0..2 {
        assert_eq!(
            proxy
                .send(&signed_request(HOST, "/a", BROWSER, &bare))
                .status,
            200
        );
    }
    // The same nonce by another host's signature is still the agent's nonce, seen before.
    let other = signature_headers(&key, AGENT, OTHER_HOST, Some("nonce-1"), None);
    assert_eq!(
        proxy
            .send(&signed_request(OTHER_HOST, "/a", BROWSER, &other))
            .status,
        429
    );
    assert_eq!(origin.proxied_to("/a").len(), 4);
    assert_eq!(
        metric(
            &proxy.metrics(),
            "robotsguard_web_bot_auth_refusals_total",
            &[("origin", "shop"), ("reason", "replayed")]
        ),
        1.0
    );
}

#[test]
fn a_nonce_replayed_on_another_replica_is_refused_there_through_the_shared_store() {
    let redis = RedisServer::start();
    let key = Key::ed25519(5);
    let verify = format!(
        "state:\n  backend: redis\n  redis: {{url: \"{}\", prefix: \"wba-replay\", timeout: 2s}}\n\
         verify:\n  web_bot_auth:\n    agents:\n      - {{agent: \"https://bot.example\", crawler: SignedBot, keys: \"file:keys.json\"}}\n",
        redis.url()
    );
    let keys = jwks(&[&key]);
    let (_first_origin, first) = start(&verify, "", "", "", &[("keys.json", &keys)]);
    let (_second_origin, second) = start(&verify, "", "", "", &[("keys.json", &keys)]);
    for proxy in [&first, &second] {
        wait_keys(proxy, AGENT);
        let up = wait_for(Duration::from_secs(10), || {
            metric(&proxy.metrics(), "robotsguard_state_backend_up", &[]) == 1.0
        });
        assert!(up, "{}", proxy.stderr());
    }
    let headers = signature_headers(&key, AGENT, HOST, Some("shared-nonce"), None);
    assert_eq!(
        first
            .send(&signed_request(HOST, "/a", BROWSER, &headers))
            .status,
        200
    );
    let replay = second.send(&signed_request(HOST, "/a", BROWSER, &headers));
    assert_eq!(replay.status, 429, "{}", replay.text());
    assert_accept_signature(&replay);
    assert_eq!(
        first
            .send(&signed_request(HOST, "/a", BROWSER, &headers))
            .status,
        429
    );
    // Nonces are kept in the store for as long as the signature is valid (about 5 minutes).
    let keys = redis.command(&["KEYS", "wba-replay*nonce*"]);
    assert!(
        keys.lines().filter(|l| !l.trim().is_empty()).count() == 1,
        "{keys}"
    );
    let fresh = signature_headers(&key, AGENT, HOST, Some("another"), None);
    assert_eq!(
        second
            .send(&signed_request(HOST, "/a", BROWSER, &fresh))
            .status,
        200
    );
}

#[test]
fn rsa_pss_and_ecdsa_p256_signatures_verify_under_recomputed_thumbprints() {
    let rsa = Key::rsa();
    let ec = Key::p256(9);
    let ed = Key::ed25519(6);
    let verify = "verify:\n  web_bot_auth:\n    agents:\n      - {agent: \"https://bot.example\", crawler: SignedBot, keys: \"file:keys.json\"}\n";
    // Each JWK's `kid` lies; keys are found by the thumbprint computed from them.
    let (_origin, proxy) = start(
        verify,
        "",
        "",
        "",
        &[("keys.json", &jwks(&[&rsa, &ec, &ed]))],
    );
    let loaded = wait_for(Duration::from_secs(10), || {
        metric(
            &proxy.metrics(),
            "robotsguard_verify_signature_keys",
            &[("agent", AGENT)],
        ) == 3.0
    });
    assert!(loaded, "{}", proxy.stderr());
    for key in [&rsa, &ec, &ed] {
        // Identified as SignedBot: robots.txt's /private rule applies to the browser UA.
        let headers = signature_headers(key, AGENT, HOST, None, None);
        let answer = proxy.send(&signed_request(HOST, "/private/a", BROWSER, &headers));
        assert_eq!(answer.status, 403, "{}: {}", key.alg(), answer.text());
        // Signed for another host: not this request's signature.
        let elsewhere = signature_headers(key, AGENT, OTHER_HOST, None, None);
        let answer = proxy.send(&signed_request(HOST, "/private/a", BROWSER, &elsewhere));
        assert_eq!(answer.status, 200, "{}", key.alg());
    }
    // An `alg` that is not the key's is refused, whatever the signature.
    let lying = signature_headers(&ec, AGENT, HOST, None, Some("rsa-pss-sha512"));
    assert_eq!(
        proxy
            .send(&signed_request(HOST, "/private/a", BROWSER, &lying))
            .status,
        200
    );
    let verified = metric(
        &proxy.metrics(),
        "robotsguard_web_bot_auth_signatures_total",
        &[("mode", "optional"), ("outcome", "verified")],
    );
    assert_eq!(verified, 3.0);
}

#[test]
fn a_registry_of_file_and_data_cards_adds_agents() {
    let card_key = Key::ed25519(11);
    let data_key = Key::p256(12);
    let card = format!(
        "{{\"client_id\":\"https://cards.example\",\"client_name\":\"Card agent\",\
         \"rfc9309-product-token\":\"CardBot\",\"jwks\":{}}}",
        jwks(&[&card_key])
    );
    let inline = format!(
        "{{\"client_id\":\"https://data.example\",\"web_bot_auth\":{{\"rfc9309-product-token\":\"DataBot\"}},\
         \"jwks\":{}}}",
        jwks(&[&data_key])
    );
    let registry = format!(
        "# agents this site knows\nfile:cards/card.json\n\ndata:application/json;base64,{} # inline\n",
        STANDARD.encode(inline.as_bytes())
    );
    let verify =
        "verify:\n  web_bot_auth:\n    mode: required\n    registries: [\"file:registry.txt\"]\n";
    let (_origin, proxy) = start(
        verify,
        "",
        "",
        "",
        &[("registry.txt", &registry), ("cards/card.json", &card)],
    );
    let listed = wait_for(Duration::from_secs(10), || {
        metric(
            &proxy.metrics(),
            "robotsguard_web_bot_auth_registry_agents",
            &[],
        ) >= 2.0
    });
    assert!(listed, "{}\n{}", proxy.metrics(), proxy.stderr());
    for (key, agent, crawler) in [
        (&card_key, "https://cards.example", "CardBot"),
        (&data_key, "https://data.example", "DataBot"),
    ] {
        // The registry's agents sign for their crawlers: required refuses unsigned claims…
        let claim = format!("Mozilla/5.0 (compatible; {crawler}/2.0)");
        let answer = proxy.get(HOST, "/public", &claim);
        assert_eq!(answer.status, 403, "{crawler}: {}", answer.text());
        assert_accept_signature(&answer);
        // …and a valid signature identifies them, whatever the User-Agent.
        let headers = signature_headers(key, agent, HOST, None, None);
        assert_eq!(
            proxy
                .send(&signed_request(HOST, "/public", &claim, &headers))
                .status,
            200
        );
        let answer = proxy.send(&signed_request(HOST, "/private/x", BROWSER, &headers));
        assert_eq!(answer.status, 403, "{crawler}: {}", answer.text());
        assert!(answer.text().contains(crawler), "{}", answer.text());
    }
    // A crawler no agent signs for is not asked for a signature.
    assert_eq!(proxy.get(HOST, "/public", UA).status, 200);
}

/// A TCP listener on loopback counting the connections made to it (each closed at once).
struct CountingServer {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl CountingServer {
    fn start() -> CountingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listener bound");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(1000) {
                counted.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut stream) = stream {
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                    let _ = stream.read(&mut [0u8; 64]);
                }
            }
        });
        CountingServer { port, connections }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

#[test]
fn a_signature_agent_on_loopback_is_never_fetched_unless_the_operator_configured_it() {
    let key = Key::ed25519(13);
    let named_by_card = CountingServer::start();
    let configured = CountingServer::start();
    let card_agent = format!("https://127.0.0.1:{}", named_by_card.port);
    let operator_agent = format!("https://127.0.0.1:{}", configured.port);
    // A card naming a loopback agent, keys in its (loopback) directory.
    let card = format!("{{\"client_id\":\"{card_agent}\",\"rfc9309-product-token\":\"CardBot\"}}");
    let registry = format!(
        "data:application/json;base64,{}\n",
        STANDARD.encode(card.as_bytes())
    );
    let verify = format!(
        "verify:\n  web_bot_auth:\n    registries: [\"file:registry.txt\"]\n    agents:\n      - {{agent: \"{operator_agent}\", crawler: SignedBot}}\n"
    );
    let (_origin, proxy) = start(&verify, "", "", "", &[("registry.txt", &registry)]);
    // Both directories were tried: the operator's reached its server (not TLS, so it failed
    // there), the card's was refused before connecting.
    let tried = wait_for(Duration::from_secs(15), || {
        let metrics = proxy.metrics();
        [&card_agent, &operator_agent].iter().all(|agent| {
            metric(
                &metrics,
                "robotsguard_verify_signature_key_fetches_total",
                &[("agent", agent), ("outcome", "failed")],
            ) >= 1.0
        })
    });
    assert!(tried, "{}\n{}", proxy.metrics(), proxy.stderr());
    assert!(
        configured.connections() >= 1,
        "the operator's agent is fetched as configured"
    );
    assert!(
        proxy.wait_log("not a public address", 1, Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    // A request signed as the loopback agent: its keys are not fetched for it either.
    let headers = signature_headers(&key, &card_agent, HOST, None, None);
    for _ in 0..3 {
        let answer = proxy.send(&signed_request(HOST, "/private/a", BROWSER, &headers));
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    // And one naming an agent nobody configured, on loopback: never fetched.
    let stranger = CountingServer::start();
    let stranger_agent = format!("https://127.0.0.1:{}", stranger.port);
    let headers = signature_headers(&key, &stranger_agent, HOST, None, None);
    assert_eq!(
        proxy
            .send(&signed_request(HOST, "/private/a", BROWSER, &headers))
            .status,
        200
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(named_by_card.connections(), 0);
    assert_eq!(stranger.connections(), 0);
}

#[test]
fn registries_are_read_again_and_a_broken_card_or_registry_keeps_the_last_good() {
    let first = Key::ed25519(21);
    let second = Key::ed25519(22);
    let card = |agent: &str, crawler: &str, key: &Key| {
        format!(
            "{{\"client_id\":\"{agent}\",\"rfc9309-product-token\":\"{crawler}\",\"jwks\":{}}}",
            jwks(&[key])
        )
    };
    let verify =
        "verify:\n  refresh: 1s\n  web_bot_auth:\n    registries: [\"file:registry.txt\"]\n";
    let (_origin, proxy) = start(
        verify,
        "",
        "",
        "",
        &[
            ("registry.txt", "file:card.json\n"),
            (
                "card.json",
                &card("https://cards.example", "CardBot", &first),
            ),
        ],
    );
    let listed = |want: f64| {
        wait_for(Duration::from_secs(10), || {
            metric(
                &proxy.metrics(),
                "robotsguard_web_bot_auth_registry_agents",
                &[],
            ) == want
        })
    };
    assert!(listed(1.0), "{}", proxy.stderr());
    let signed_by = |key: &Key, agent: &str| {
        let headers = signature_headers(key, agent, HOST, None, None);
        proxy
            .send(&signed_request(HOST, "/private/a", BROWSER, &headers))
            .status
    };
    assert_eq!(signed_by(&first, "https://cards.example"), 403);
    // The card breaks: its last good copy stays in force.
    std::fs::write(proxy.dir.path().join("card.json"), "{ not json").expect("written");
    assert!(
        proxy.wait_log("Web Bot Auth card", 1, Duration::from_secs(10)),
        "{}",
        proxy.stderr()
    );
    assert_eq!(signed_by(&first, "https://cards.example"), 403);
    // The registry gains an inline card: a new agent, without a restart.
    let inline = card("https://data.example", "DataBot", &second);
    let registry = format!(
        "file:card.json\ndata:application/json;base64,{}\n",
        STANDARD.encode(inline.as_bytes())
    );
    std::fs::write(proxy.dir.path().join("registry.txt"), registry).expect("written");
    assert!(listed(2.0), "{}", proxy.stderr());
    assert_eq!(signed_by(&second, "https://data.example"), 403);
    assert_eq!(signed_by(&first, "https://cards.example"), 403);
    // The registry goes away: its last good agents stay.
    std::fs::remove_file(proxy.dir.path().join("registry.txt")).expect("removed");
    assert!(
        proxy.wait_log("Web Bot Auth registry", 1, Duration::from_secs(10)),
        "{}",
        proxy.stderr()
    );
    assert_eq!(signed_by(&second, "https://data.example"), 403);
}
