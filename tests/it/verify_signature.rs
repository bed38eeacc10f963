//! Web Bot Auth verification as a library: `WebBotAuth::verify` on requests signed here, with
//! an RFC 9421 signer written in this file (it builds the signature base itself, apart from the
//! verifier and from the crate the verifier uses), over Ed25519 keys made here. Keys come from
//! JWKS files, and from agents' key directories served over HTTPS by `openssl s_server` with a
//! certificate of a CA `openssl` makes for this test (trusted through `SSL_CERT_FILE`).
//!
//! `cargo test --test verify_signature`

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use pingora::http::RequestHeader;
use pingora::services::background::BackgroundService;
use proptest::prelude::*;
use robotsguard::config::{SignatureAgent, WebBotAuthConfig};
use robotsguard::verify::signature::{AgentKeys, SignatureOutcome, WebBotAuth};
use sha2::{Digest, Sha256};
use support::tls::{self, HttpsServer};

const HOST: &str = "shop.example";
const AGENT: &str = "https://bot.example";
const OTHER_AGENT: &str = "https://other.example";

/// The verifier's clock in these tests.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn at(offset: i64) -> i64 {
    1_800_000_000 + offset
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// The RFC 7638 thumbprint of an Ed25519 public key, base64url.
fn thumbprint(key: &SigningKey) -> String {
    let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    let canonical = format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}");
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

fn jwk(key: &SigningKey) -> String {
    let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    format!("{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{x}\",\"kid\":\"not-the-thumbprint\",\"use\":\"sig\"}}")
}

fn jwks(keys: &[&SigningKey]) -> String {
    let keys: Vec<String> = keys.iter().map(|key| jwk(key)).collect();
    format!("{{\"keys\":[{}]}}", keys.join(","))
}

/// How a test request is signed: the components covered, as `(identifier, value)` pairs in the
/// signature base, and the parameters.
#[derive(Clone)]
struct Signing<'a> {
    key: &'a SigningKey,
    label: &'a str,
    keyid: String,
    /// `Signature-Agent` as sent (None: not sent).
    agent_header: Option<String>,
    /// Covered components before `@signature-params`.
    components: Vec<(String, String)>,
    created: Option<i64>,
    expires: Option<i64>,
    tag: Option<&'a str>,
}

impl<'a> Signing<'a> {
    /// The draft's usual signature: `@authority` and the `sig1` member of `Signature-Agent`.
    fn new(key: &'a SigningKey) -> Signing<'a> {
        Signing::for_agent(key, AGENT)
    }

    fn for_agent(key: &'a SigningKey, agent: &str) -> Signing<'a> {
        Signing {
            key,
            label: "sig1",
            keyid: thumbprint(key),
            agent_header: Some(format!("sig1=\"{agent}\"")),
            components: vec![
                ("\"@authority\"".into(), HOST.into()),
                (
                    "\"signature-agent\";key=\"sig1\"".into(),
                    format!("\"{agent}\""),
                ),
            ],
            created: Some(at(-10)),
            expires: Some(at(300)),
            tag: Some("web-bot-auth"),
        }
    }

    /// The older form: `Signature-Agent: "https://…"`, covered as a whole field.
    fn bare(key: &'a SigningKey) -> Signing<'a> {
        Signing {
            agent_header: Some(format!("\"{AGENT}\"")),
            components: vec![
                ("\"@authority\"".into(), HOST.into()),
                ("\"signature-agent\"".into(), format!("\"{AGENT}\"")),
            ],
            ..Signing::new(key)
        }
    }

    fn params(&self) -> String {
        let ids: Vec<&str> = self.components.iter().map(|(id, _)| id.as_str()).collect();
        let mut params = format!("({})", ids.join(" "));
        if let Some(created) = self.created {
            params.push_str(&format!(";created={created}"));
        }
        if let Some(expires) = self.expires {
            params.push_str(&format!(";expires={expires}"));
        }
        params.push_str(&format!(";keyid=\"{}\";alg=\"ed25519\"", self.keyid));
        if let Some(tag) = self.tag {
            params.push_str(&format!(";tag=\"{tag}\""));
        }
        params
    }

    /// `(Signature-Input, Signature)` members: the RFC 9421 §2.5 base, signed.
    fn signature(&self) -> (String, String) {
        let params = self.params();
        let mut base = String::new();
        for (id, value) in &self.components {
            base.push_str(&format!("{id}: {value}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = STANDARD.encode(self.key.sign(base.as_bytes()).to_bytes());
        (
            format!("{}={params}", self.label),
            format!("{}=:{signature}:", self.label),
        )
    }

    /// A GET of `target` carrying this signature.
    fn request(&self, target: &str) -> RequestHeader {
        let mut request = RequestHeader::build("GET", target.as_bytes(), None).expect("request");
        request.insert_header("Host", HOST).expect("host");
        if let Some(agent) = &self.agent_header {
            request
                .insert_header("Signature-Agent", agent.as_str())
                .expect("agent");
        }
        let (input, signature) = self.signature();
        request
            .insert_header("Signature-Input", input)
            .expect("input");
        request
            .insert_header("Signature", signature)
            .expect("signature");
        request
    }
}

fn agent(agent: &str, crawler: &str, keys: Option<PathBuf>) -> SignatureAgent {
    SignatureAgent {
        agent: agent.into(),
        crawler: crawler.into(),
        keys,
    }
}

fn verifier(agents: Vec<SignatureAgent>) -> Arc<WebBotAuth> {
    Arc::new(WebBotAuth::new(
        &WebBotAuthConfig {
            enabled: true,
            max_skew: Duration::from_secs(60),
            agents,
            ..WebBotAuthConfig::default()
        },
        None,
        Duration::from_secs(24 * 3600),
    ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Two agents with keys from files: `AGENT` (SignedBot) publishes `good` and `next`,
/// `OTHER_AGENT` (OtherBot) publishes `others`.
fn two_agents(
    dir: &Path,
    good: &SigningKey,
    next: &SigningKey,
    others: &SigningKey,
) -> Arc<WebBotAuth> {
    let ours = dir.join("ours.json");
    let theirs = dir.join("theirs.json");
    // A key of a kind the verifier cannot use sits in the set and costs nothing.
    std::fs::write(
        &ours,
        format!(
            "{{\"keys\":[{{\"kty\":\"AKP\",\"alg\":\"ML-DSA-44\",\"pub\":\"AAAA\"}},{},{{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}},{}]}}",
            jwk(good),
            jwk(next)
        ),
    )
    .expect("keys written");
    std::fs::write(&theirs, jwks(&[others])).expect("keys written");
    let auth = verifier(vec![
        agent(AGENT, "SignedBot", Some(ours)),
        agent(OTHER_AGENT, "OtherBot", Some(theirs)),
    ]);
    runtime().block_on(auth.load_once());
    auth
}

fn verify(auth: &WebBotAuth, request: &RequestHeader) -> SignatureOutcome {
    auth.verify(request, HOST, "https", now())
}

fn verified() -> SignatureOutcome {
    SignatureOutcome::Verified {
        agent: AGENT.into(),
        crawler: "SignedBot".into(),
    }
}

fn assert_invalid(outcome: &SignatureOutcome, what: &str) {
    assert!(
        matches!(outcome, SignatureOutcome::Invalid(_)),
        "{what}: {outcome:?}"
    );
}

#[test]
fn valid_signatures_name_the_agents_crawler() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (good, next, others) = (key(1), key(2), key(3));
    let auth = two_agents(dir.path(), &good, &next, &others);
    let loaded: Vec<usize> = auth.agent_keys().iter().map(|a| a.keys).collect();
    assert_eq!(loaded, vec![2, 1], "{:?}", auth.agent_keys());

    assert_eq!(
        verify(&auth, &Signing::new(&good).request("/a")),
        verified()
    );
    // Either published key.
    assert_eq!(
        verify(&auth, &Signing::new(&next).request("/a")),
        verified()
    );
    // The older bare-string Signature-Agent.
    assert_eq!(
        verify(&auth, &Signing::bare(&good).request("/a")),
        verified()
    );
    // The other agent, with its own key.
    assert_eq!(
        verify(
            &auth,
            &Signing::for_agent(&others, OTHER_AGENT).request("/a")
        ),
        SignatureOutcome::Verified {
            agent: OTHER_AGENT.into(),
            crawler: "OtherBot".into()
        }
    );
    // Clocks a little apart, within max_skew (60 s).
    let skewed = Signing {
        created: Some(at(50)),
        expires: Some(at(350)),
        ..Signing::new(&good)
    };
    assert_eq!(verify(&auth, &skewed.request("/a")), verified());
    let just_expired = Signing {
        created: Some(at(-400)),
        expires: Some(at(-50)),
        ..Signing::new(&good)
    };
    assert_eq!(verify(&auth, &just_expired.request("/a")), verified());
    // Exactly 24 hours.
    let day = Signing {
        created: Some(at(-10)),
        expires: Some(at(86_390)),
        ..Signing::new(&good)
    };
    assert_eq!(verify(&auth, &day.request("/a")), verified());
    // The agent named with a trailing slash and capitals is the same origin.
    let mut loud = Signing::new(&good);
    loud.agent_header = Some("sig1=\"https://BOT.example/\"".into());
    loud.components[1].1 = "\"https://BOT.example/\"".into();
    assert_eq!(verify(&auth, &loud.request("/a")), verified());
    // A Signature-Agent dictionary with another member; the covered one counts.
    let mut two = Signing::new(&good);
    two.agent_header = Some(format!("sig0=\"{OTHER_AGENT}\", sig1=\"{AGENT}\""));
    assert_eq!(verify(&auth, &two.request("/a")), verified());
}

#[test]
fn every_derived_component_and_header_fields_are_rebuilt_as_signed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (good, next, others) = (key(1), key(2), key(3));
    let auth = two_agents(dir.path(), &good, &next, &others);
    let target = "/shop/items?id=7&q=a%20b";
    let mut signing = Signing::new(&good);
    signing.components = vec![
        ("\"@method\"".into(), "GET".into()),
        ("\"@target-uri\"".into(), format!("https://{HOST}{target}")),
        ("\"@authority\"".into(), HOST.into()),
        ("\"@scheme\"".into(), "https".into()),
        ("\"@request-target\"".into(), target.into()),
        ("\"@path\"".into(), "/shop/items".into()),
        ("\"@query\"".into(), "?id=7&q=a%20b".into()),
        ("\"user-agent\"".into(), "Mozilla/5.0 (X11) Agent".into()),
        // Two lines of one field are one value, joined with ", ".
        ("\"x-trace\"".into(), "one, two".into()),
        (
            "\"signature-agent\";key=\"sig1\"".into(),
            format!("\"{AGENT}\""),
        ),
    ];
    let mut request = signing.request(target);
    request
        .insert_header("User-Agent", "  Mozilla/5.0 (X11) Agent ")
        .expect("ua");
    request.append_header("X-Trace", "one").expect("trace");
    request.append_header("X-Trace", "two").expect("trace");
    assert_eq!(verify(&auth, &request), verified());

    // `@target-uri` alone binds the host too.
    let mut by_uri = Signing::new(&good);
    by_uri.components[0] = ("\"@target-uri\"".into(), format!("https://{HOST}/a"));
    assert_eq!(verify(&auth, &by_uri.request("/a")), verified());
    // … but not for another scheme than the request's.
    assert_invalid(
        &auth.verify(&by_uri.request("/a"), HOST, "http", now()),
        "scheme",
    );
    // No query: `@query` is `?`.
    let mut empty_query = Signing::new(&good);
    empty_query
        .components
        .insert(0, ("\"@query\"".into(), "?".into()));
    assert_eq!(verify(&auth, &empty_query.request("/a")), verified());
    // A covered header the request lacks.
    let mut absent = Signing::new(&good);
    absent
        .components
        .insert(0, ("\"x-missing\"".into(), "v".into()));
    assert_invalid(
        &verify(&auth, &absent.request("/a")),
        "covered header absent",
    );
    // Tampered: the path signed is not the path sent.
    let mut path = Signing::new(&good);
    path.components.insert(0, ("\"@path\"".into(), "/a".into()));
    assert_invalid(&verify(&auth, &path.request("/b")), "tampered path");
}

#[test]
fn signatures_that_do_not_hold_are_invalid() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (good, next, others) = (key(1), key(2), key(3));
    let stranger = key(9);
    let auth = two_agents(dir.path(), &good, &next, &others);
    let mut not_covered = Signing::new(&good);
    not_covered.components.truncate(1);
    let mut no_authority = Signing::new(&good);
    no_authority.components[0] = ("\"@method\"".into(), "GET".into());
    let mut tampered = Signing::new(&good);
    tampered.components[0].1 = "other.example".into();
    let mut wrong_member = Signing::new(&good);
    wrong_member.components[1].0 = "\"signature-agent\";key=\"sig2\"".into();
    let mut unsent_agent = Signing::new(&good);
    unsent_agent.agent_header = None;
    let mut no_agent = Signing::new(&good);
    no_agent.agent_header = None;
    no_agent.components.truncate(1);
    let cases: Vec<(&str, Signing<'_>)> = vec![
        (
            "expired",
            Signing {
                created: Some(at(-3600)),
                expires: Some(at(-600)),
                ..Signing::new(&good)
            },
        ),
        (
            "created in the future beyond max_skew",
            Signing {
                created: Some(at(600)),
                expires: Some(at(900)),
                ..Signing::new(&good)
            },
        ),
        (
            "a lifetime over 24 hours",
            Signing {
                created: Some(at(-10)),
                expires: Some(at(86_400)),
                ..Signing::new(&good)
            },
        ),
        (
            "expires before created",
            Signing {
                created: Some(at(10)),
                expires: Some(at(0)),
                ..Signing::new(&good)
            },
        ),
        (
            "no created",
            Signing {
                created: None,
                ..Signing::new(&good)
            },
        ),
        (
            "no expires",
            Signing {
                expires: None,
                ..Signing::new(&good)
            },
        ),
        (
            "signed by a key the agent did not publish",
            Signing::new(&stranger),
        ),
        (
            "another agent's key, named by its keyid",
            Signing::new(&others),
        ),
        (
            "a published keyid over another key's signature",
            Signing {
                keyid: thumbprint(&good),
                ..Signing::new(&stranger)
            },
        ),
        ("signed for another host", tampered),
        ("Signature-Agent not covered", not_covered),
        ("neither @authority nor @target-uri covered", no_authority),
        ("another Signature-Agent member covered", wrong_member),
        ("Signature-Agent covered but not sent", unsent_agent),
        ("no Signature-Agent at all", no_agent),
        (
            "no tag",
            Signing {
                tag: None,
                ..Signing::new(&good)
            },
        ),
        (
            "another tag",
            Signing {
                tag: Some("something-else"),
                ..Signing::new(&good)
            },
        ),
    ];
    for (what, signing) in &cases {
        assert_invalid(&verify(&auth, &signing.request("/a")), what);
    }
    // A valid signature, then a tampered header after signing.
    let mut request = Signing::new(&good).request("/a");
    request
        .insert_header("Signature-Agent", format!("sig1=\"{OTHER_AGENT}\""))
        .expect("agent");
    assert_invalid(&verify(&auth, &request), "Signature-Agent swapped");
}

#[test]
fn unsigned_unknown_and_unloaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (good, next, others) = (key(1), key(2), key(3));
    let auth = two_agents(dir.path(), &good, &next, &others);
    let plain = RequestHeader::build("GET", b"/a", None).expect("request");
    assert_eq!(verify(&auth, &plain), SignatureOutcome::Absent);
    // A Signature without its Signature-Input is not a signature either.
    let mut lone = RequestHeader::build("GET", b"/a", None).expect("request");
    lone.insert_header("Signature", "sig1=:AAAA:").expect("sig");
    assert_eq!(verify(&auth, &lone), SignatureOutcome::Absent);

    let unknown = Signing::for_agent(&good, "https://unknown.example");
    assert_eq!(
        verify(&auth, &unknown.request("/a")),
        SignatureOutcome::UnknownAgent("https://unknown.example".into())
    );
    // Keys not loaded (yet): nothing can be said.
    let cold = verifier(vec![agent(
        AGENT,
        "SignedBot",
        Some(dir.path().join("ours.json")),
    )]);
    assert!(matches!(
        verify(&cold, &Signing::new(&good).request("/a")),
        SignatureOutcome::Unavailable(_)
    ));
    // A key file that never loads leaves it so, with the reason.
    let broken = dir.path().join("broken.json");
    std::fs::write(
        &broken,
        "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}",
    )
    .expect("written");
    let never = verifier(vec![agent(AGENT, "SignedBot", Some(broken))]);
    runtime().block_on(never.load_once());
    assert!(matches!(
        verify(&never, &Signing::new(&good).request("/a")),
        SignatureOutcome::Unavailable(_)
    ));
    let status = never.agent_keys();
    assert_eq!(status[0].keys, 0);
    assert!(
        status[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("no usable key")),
        "{status:?}"
    );
}

#[test]
fn malformed_and_oversized_headers_are_invalid() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (good, next, others) = (key(1), key(2), key(3));
    let auth = two_agents(dir.path(), &good, &next, &others);
    let (input, signature) = Signing::new(&good).signature();
    let agent = format!("sig1=\"{AGENT}\"");
    let long = "x".repeat(9000);
    let cases: Vec<(&str, &str, &str)> = vec![
        ("sig1=(", "sig1=:AAAA:", &agent),
        ("sig1=(\"@authority\");created=x", "nonsense", &agent),
        ("", "", &agent),
        (&input, "sig1=:not base64:", &agent),
        (&input, "sig1=:AAAA:", &agent),
        (&input, "sig1=\"a string\"", &agent),
        (&input, "sig2=:AAAA:", &agent),
        (&input, &signature, "sig1=(\"a\" \"b\")"),
        (&input, &signature, "sig1=https://bot.example"),
        (&input, &signature, "sig1=\"data:,x\""),
        (&input, &signature, "sig1=\"ftp://bot.example\""),
        (&long, "sig1=:AAAA:", &agent),
        (&input, &signature, &long),
    ];
    for (input, signature, agent) in cases {
        let mut request = RequestHeader::build("GET", b"/a", None).expect("request");
        request
            .insert_header("Signature-Agent", agent)
            .expect("agent");
        request
            .insert_header("Signature-Input", input)
            .expect("input");
        request.insert_header("Signature", signature).expect("sig");
        let outcome = verify(&auth, &request);
        assert!(
            !matches!(
                outcome,
                SignatureOutcome::Verified { .. } | SignatureOutcome::Absent
            ),
            "{input:.60} / {signature:.60} / {agent:.60}: {outcome:?}"
        );
    }
    // Many signatures in one request: bounded by the header cap, the valid one still found.
    let (input, signature) = Signing::new(&good).signature();
    let mut request = RequestHeader::build("GET", b"/a", None).expect("request");
    request
        .insert_header("Signature-Agent", agent.as_str())
        .expect("agent");
    let others_in: Vec<String> = (0..20)
        .map(|i| format!("cdn{i}=(\"@method\");created=1;keyid=\"k\""))
        .collect();
    let others_sig: Vec<String> = (0..20).map(|i| format!("cdn{i}=:AAAA:")).collect();
    request
        .insert_header(
            "Signature-Input",
            format!("{}, {input}", others_in.join(", ")),
        )
        .expect("input");
    request
        .insert_header(
            "Signature",
            format!("{}, {signature}", others_sig.join(", ")),
        )
        .expect("sig");
    assert_eq!(verify(&auth, &request), verified());
}

/// Pieces of the three headers, to reach past the first parse error more often than random
/// bytes do.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("sig1=".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just(" ".to_string()),
        Just(", ".to_string()),
        Just("\"@authority\"".to_string()),
        Just("\"@target-uri\"".to_string()),
        Just("\"signature-agent\"".to_string()),
        Just(";key=\"sig1\"".to_string()),
        Just(";created=1800000000".to_string()),
        Just(";expires=1800000100".to_string()),
        Just(";tag=\"web-bot-auth\"".to_string()),
        Just(";keyid=\"".to_string()),
        Just(":AAAA:".to_string()),
        Just("\"https://bot.example\"".to_string()),
        Just("\"".to_string()),
        Just(";".to_string()),
        Just("=".to_string()),
        "[ -~]{0,12}",
    ]
}

fn header_text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..24).prop_map(|parts| parts.concat())
}

fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..200)
}

fn fuzz_verifier() -> &'static (tempfile::TempDir, Arc<WebBotAuth>) {
    static MADE: OnceLock<(tempfile::TempDir, Arc<WebBotAuth>)> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let auth = two_agents(dir.path(), &key(1), &key(2), &key(3));
        (dir, auth)
    })
}

fn check_hostile(values: [&[u8]; 3]) {
    let (_, auth) = fuzz_verifier();
    let mut request = RequestHeader::build("GET", b"/a", None).expect("request");
    for (name, value) in ["signature-agent", "signature-input", "signature"]
        .iter()
        .zip(values)
    {
        // Bytes no header value may hold are refused before any verifier sees them.
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            request.insert_header(*name, value).expect("header");
        }
    }
    let outcome = verify(auth, &request);
    assert!(
        !matches!(outcome, SignatureOutcome::Verified { .. }),
        "{outcome:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn hostile_structured_headers_never_verify_nor_panic(
        agent in header_text(), input in header_text(), signature in header_text()
    ) {
        check_hostile([agent.as_bytes(), input.as_bytes(), signature.as_bytes()]);
    }

    #[test]
    fn hostile_header_bytes_never_verify_nor_panic(
        agent in header_bytes(), input in header_bytes(), signature in header_bytes()
    ) {
        check_hostile([&agent, &input, &signature]);
    }
}

#[test]
fn key_files_are_reread_when_they_change_and_the_last_good_keys_stay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (first, second) = (key(11), key(12));
    let path = dir.path().join("keys.json");
    std::fs::write(&path, jwks(&[&first])).expect("written");
    let auth = verifier(vec![agent(AGENT, "SignedBot", Some(path.clone()))]);
    let runtime = runtime();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let service = auth.service(None);
    runtime.spawn(async move { service.start(shutdown).await });
    wait_for(&auth, "the first keys", |keys| keys.keys == 1);
    assert_eq!(
        verify(&auth, &Signing::new(&first).request("/a")),
        verified()
    );

    // A broken file: the last good keys stay in force.
    std::fs::write(&path, "{\"keys\": [").expect("written");
    wait_for(&auth, "the failure", |keys| keys.last_error.is_some());
    assert_eq!(
        verify(&auth, &Signing::new(&first).request("/a")),
        verified()
    );

    // A new key replaces the old one.
    std::fs::write(&path, jwks(&[&second])).expect("written");
    wait_for(&auth, "the new keys", |keys| keys.last_error.is_none());
    assert_eq!(
        verify(&auth, &Signing::new(&second).request("/a")),
        verified()
    );
    assert_invalid(
        &verify(&auth, &Signing::new(&first).request("/a")),
        "rotated out",
    );
    let _ = stop.send(true);
}

/// Waits (up to 10 s) until the single agent's keys satisfy `ready`.
fn wait_for(auth: &WebBotAuth, what: &str, ready: impl Fn(&AgentKeys) -> bool) -> AgentKeys {
    for _ in 0..400 {
        let keys = auth.agent_keys().remove(0);
        if ready(&keys) {
            return keys;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what}: {:?}", auth.agent_keys());
}

/// An HTTPS server whose key directory path answers `response`, a whole raw HTTP response.
fn directory_server(response: &str) -> (tempfile::TempDir, HttpsServer) {
    let (_, cert, key) = tls::trusted_server_certificate();
    let root = tempfile::tempdir().expect("temp dir");
    let well_known = root.path().join(".well-known");
    std::fs::create_dir_all(&well_known).expect("directory made");
    std::fs::write(
        well_known.join("http-message-signatures-directory"),
        response,
    )
    .expect("written");
    let server = HttpsServer::start_raw(root.path(), cert, key);
    (root, server)
}

fn ok_response(body: &str, extra: &str) -> String {
    format!(
        "HTTP/1.0 200 OK\r\nContent-Type: application/http-message-signatures-directory+json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Runs the key service for `auth` until the returned sender says stop.
fn run_service(
    runtime: &tokio::runtime::Runtime,
    auth: &Arc<WebBotAuth>,
) -> tokio::sync::watch::Sender<bool> {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let service = auth.service(None);
    runtime.spawn(async move { service.start(shutdown).await });
    stop
}

/// Whether `when` is `after` from now, give or take a minute.
fn about(when: Option<SystemTime>, after: Duration) -> bool {
    let Some(when) = when else { return false };
    let expected = SystemTime::now() + after;
    let gap = match when.duration_since(expected) {
        Ok(gap) => gap,
        Err(e) => e.duration(),
    };
    gap < Duration::from_secs(60)
}

#[test]
fn keys_come_from_the_agents_directory_over_https_with_its_cache_lifetime() {
    let good = key(21);
    let (_root, server) = directory_server(&ok_response(
        &jwks(&[&good]),
        "Cache-Control: public, max-age=7200\r\n",
    ));
    let (_short_root, short) = directory_server(&ok_response(
        &jwks(&[&good]),
        "Cache-Control: max-age=10\r\n",
    ));
    let (_none_root, none) = directory_server(&ok_response(&jwks(&[&good]), ""));
    let agent_url = format!("https://127.0.0.1:{}", server.port);
    let short_url = format!("https://127.0.0.1:{}", short.port);
    let none_url = format!("https://localhost:{}", none.port);
    let auth = verifier(vec![
        agent(&agent_url, "SignedBot", None),
        agent(&short_url, "ShortBot", None),
        agent(&none_url, "PlainBot", None),
    ]);
    let runtime = runtime();
    let stop = run_service(&runtime, &auth);
    for _ in 0..400 {
        if auth.agent_keys().iter().all(|keys| keys.keys == 1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let status = auth.agent_keys();
    assert!(status.iter().all(|keys| keys.keys == 1), "{status:?}");
    // Fetched again a tenth before max-age runs out; max-age clamped to [5 min, 24 h]; an
    // hour without one.
    assert!(
        about(status[0].next_load, Duration::from_secs(6480)),
        "{status:?}"
    );
    assert!(
        about(status[1].next_load, Duration::from_secs(270)),
        "{status:?}"
    );
    assert!(
        about(status[2].next_load, Duration::from_secs(3240)),
        "{status:?}"
    );

    let signing = Signing::for_agent(&good, &agent_url);
    assert_eq!(
        verify(&auth, &signing.request("/a")),
        SignatureOutcome::Verified {
            agent: agent_url.clone(),
            crawler: "SignedBot".into()
        }
    );
    // The same key, named for another agent, is that agent's: keys are per agent.
    assert_eq!(
        verify(&auth, &Signing::for_agent(&good, &none_url).request("/a")),
        SignatureOutcome::Verified {
            agent: none_url.clone(),
            crawler: "PlainBot".into()
        }
    );
    let _ = stop.send(true);
}

#[test]
fn a_redirecting_or_missing_directory_is_a_failure() {
    let good = key(22);
    // The redirect's target would be a good directory; it is never followed.
    let (_good_root, target) = directory_server(&ok_response(&jwks(&[&good]), ""));
    let (_moved_root, moved) = directory_server(&format!(
        "HTTP/1.0 302 Found\r\nLocation: https://127.0.0.1:{}/.well-known/http-message-signatures-directory\r\nContent-Length: 0\r\n\r\n",
        target.port
    ));
    let (_missing_root, missing) =
        directory_server("HTTP/1.0 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found");
    let (_html_root, html) = directory_server(&ok_response("<html>keys</html>", ""));
    let urls =
        [moved.port, missing.port, html.port].map(|port| format!("https://127.0.0.1:{port}"));
    let auth = verifier(
        urls.iter()
            .map(|url| agent(url, "SignedBot", None))
            .collect(),
    );
    let runtime = runtime();
    let stop = run_service(&runtime, &auth);
    for _ in 0..400 {
        if auth
            .agent_keys()
            .iter()
            .all(|keys| keys.last_error.is_some())
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let status = auth.agent_keys();
    let errors: Vec<&str> = status
        .iter()
        .map(|keys| keys.last_error.as_deref().unwrap_or(""))
        .collect();
    assert!(errors[0].contains("302"), "{status:?}");
    assert!(errors[1].contains("404"), "{status:?}");
    assert!(errors[2].contains("not a JSON Web Key Set"), "{status:?}");
    for (keys, url) in status.iter().zip(&urls) {
        assert_eq!(keys.keys, 0, "{keys:?}");
        // Retried after 10 s, then backing off.
        assert!(about(keys.next_load, Duration::from_secs(10)), "{keys:?}");
        assert!(
            matches!(
                verify(&auth, &Signing::for_agent(&good, url).request("/a")),
                SignatureOutcome::Unavailable(_)
            ),
            "{url}"
        );
    }
    let _ = stop.send(true);
}

#[test]
fn a_key_rotated_into_the_directory_is_fetched_when_first_seen_at_most_every_five_minutes() {
    let (old, new) = (key(31), key(32));
    let long = "Cache-Control: max-age=86400\r\n";
    let (root, server) = directory_server(&ok_response(&jwks(&[&old]), long));
    let url = format!("https://127.0.0.1:{}", server.port);
    let auth = verifier(vec![agent(&url, "SignedBot", None)]);
    let runtime = runtime();
    let stop = run_service(&runtime, &auth);
    wait_for(&auth, "the first keys", |keys| keys.keys == 1);
    let fetches = || {
        robotsguard::metrics::METRICS
            .verify_signature_key_fetches
            .with_label_values(&[url.as_str(), "ok"])
            .get()
    };
    assert_eq!(fetches(), 1);
    let ours = |key: &SigningKey| verify(&auth, &Signing::for_agent(key, &url).request("/a"));
    assert!(matches!(ours(&old), SignatureOutcome::Verified { .. }));

    // The agent rotates its key; the cached set (a day) does not have the new one.
    std::fs::write(
        root.path()
            .join(".well-known")
            .join("http-message-signatures-directory"),
        ok_response(&jwks(&[&new]), long),
    )
    .expect("written");
    assert_invalid(&ours(&new), "before the refetch");
    let refetched = (0..400).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        matches!(ours(&new), SignatureOutcome::Verified { .. })
    });
    assert!(refetched, "{:?}", auth.agent_keys());
    assert_eq!(fetches(), 2);
    // Unknown keys again (the old one, strangers): no more fetches for five minutes.
    for seed in 40..50 {
        assert_invalid(&ours(&key(seed)), "a stranger");
    }
    assert_invalid(&ours(&old), "rotated out");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fetches(), 2);
    let _ = stop.send(true);
}
