//! Crawler verification on the request path: a verdict already cached per (crawler, address),
//! which is what every request after a crawler's first from an address costs, next to the
//! decision it is added to; one Web Bot Auth signature check (Ed25519), which a signed
//! request costs each time; and a read of the reverse DNS cache. Run with `cargo bench --bench verify`.

use std::hint::black_box;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use criterion::{criterion_group, criterion_main, Criterion};
use ed25519_dalek::{Signer, SigningKey};
use pingora::http::RequestHeader;
use robotsguard::config::{SignatureAgent, VerifyConfig};
use robotsguard::enforce::decide_for_client;
use robotsguard::snapshot::Snapshot;
use robotsguard::verify::Verifier;
use sha2::{Digest, Sha256};

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn snapshot() -> Snapshot {
    let yaml = "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}\n";
    let config = robotsguard::config::load_str(yaml, "bench.yaml", Path::new("."))
        .unwrap_or_else(|e| panic!("bench config: {e}"));
    Snapshot::build(Arc::new(config), None).unwrap_or_else(|e| panic!("bench snapshot: {e}"))
}

fn cached_verdict(c: &mut Criterion) {
    let snapshot = snapshot();
    let verifier = Verifier::new(&VerifyConfig::default());
    let client: IpAddr = "203.0.113.7".parse().unwrap_or_else(|_| unreachable!());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let decision = decide_for_client(
        &snapshot,
        b"shop.example",
        GOOGLEBOT.as_bytes(),
        b"/products/1",
        Some(client),
    )
    .unwrap_or_else(|e| panic!("decision: {e}"));
    // Googlebot's lists are not loaded here and its reverse DNS is not asked for a verdict the
    // cache holds: fill the cache the way the first request would, with an impostor verdict.
    let data = decision
        .crawler
        .as_ref()
        .and_then(|crawler| crawler.verify_data().cloned())
        .unwrap_or_else(|| panic!("Googlebot has verification data"));
    let mut config = VerifyConfig::default();
    config.dns.servers = vec!["127.0.0.1:9".parse().unwrap_or_else(|_| unreachable!())];
    config.dns.timeout = std::time::Duration::from_millis(50);
    let filled = Verifier::new(&config);
    runtime.block_on(async {
        filled.verify_one("Googlebot", &data, client).await;
    });
    drop(verifier);
    let mut group = c.benchmark_group("verify");
    group.bench_function("decide (Googlebot)", |b| {
        b.iter(|| {
            black_box(decide_for_client(
                &snapshot,
                b"shop.example",
                black_box(GOOGLEBOT.as_bytes()),
                b"/products/1",
                Some(client),
            ))
        })
    });
    group.bench_function("decide + cached verdict (Googlebot)", |b| {
        b.iter(|| {
            let decision = decide_for_client(
                &snapshot,
                b"shop.example",
                black_box(GOOGLEBOT.as_bytes()),
                b"/products/1",
                Some(client),
            );
            let verdict = decision
                .as_ref()
                .ok()
                .and_then(|d| d.crawler.as_ref())
                .and_then(|crawler| filled.cached(crawler.name(), client));
            black_box((decision, verdict))
        })
    });
    group.finish();
}

fn signature_check(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[1; 32]);
    let x = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    let keyid = URL_SAFE_NO_PAD.encode(Sha256::digest(
        format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}").as_bytes(),
    ));
    let dir = std::env::temp_dir().join(format!("robotsguard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("temp dir: {e}"));
    let keys = dir.join("keys.json");
    std::fs::write(
        &keys,
        format!("{{\"keys\":[{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{x}\"}}]}}"),
    )
    .unwrap_or_else(|e| panic!("keys: {e}"));
    let mut config = VerifyConfig::default();
    config.web_bot_auth.agents = vec![SignatureAgent {
        agent: "https://bot.example".into(),
        crawler: "ChatGPT-Agent".into(),
        keys: Some(keys),
    }];
    let verifier = Verifier::new(&config);
    // Load the key file the way the key refresher does.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(verifier.load_keys_once());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let params = format!(
        "(\"@authority\" \"signature-agent\";key=\"sig1\");created={};expires={};keyid=\"{keyid}\";alg=\"ed25519\";tag=\"web-bot-auth\"",
        now - 10,
        now + 3600
    );
    let base = format!(
        "\"@authority\": shop.example\n\"signature-agent\";key=\"sig1\": \"https://bot.example\"\n\"@signature-params\": {params}"
    );
    let signature = STANDARD.encode(key.sign(base.as_bytes()).to_bytes());
    let mut request = RequestHeader::build("GET", b"/products/1", None)
        .unwrap_or_else(|e| panic!("request: {e}"));
    for (name, value) in [
        ("host", "shop.example".to_string()),
        (
            "signature-agent",
            "sig1=\"https://bot.example\"".to_string(),
        ),
        ("signature-input", format!("sig1={params}")),
        ("signature", format!("sig1=:{signature}:")),
    ] {
        request
            .insert_header(name, value)
            .unwrap_or_else(|e| panic!("header: {e}"));
    }
    let outcome = verifier.signature(&request, "shop.example", "https");
    assert!(
        matches!(
            outcome,
            robotsguard::verify::signature::SignatureOutcome::Verified { .. }
        ),
        "{outcome:?}"
    );
    c.bench_function("verify/Web Bot Auth signature (Ed25519)", |b| {
        b.iter(|| black_box(verifier.signature(black_box(&request), "shop.example", "https")))
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reverse DNS answer already cached, read without waiting (and a miss): what the request
/// path pays to ask the DNS cache.
fn dns_peek(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let mut settings = robotsguard::config::DnsConfig {
        servers: vec!["127.0.0.1:9".parse().unwrap_or_else(|_| unreachable!())],
        timeout: std::time::Duration::from_millis(50),
        ..Default::default()
    };
    // Nothing answers on port 9: the failure is cached (30 s, longer than the run).
    settings.negative_ttl = std::time::Duration::from_secs(3600);
    let dns = robotsguard::verify::dns::ReverseDns::new(settings);
    let cached: IpAddr = "203.0.113.7".parse().unwrap_or_else(|_| unreachable!());
    let missing: IpAddr = "203.0.113.8".parse().unwrap_or_else(|_| unreachable!());
    runtime.block_on(dns.resolve(cached));
    let mut group = c.benchmark_group("verify");
    group.bench_function("reverse DNS peek (cached)", |b| {
        b.iter(|| black_box(dns.peek(black_box(cached))))
    });
    group.bench_function("reverse DNS peek (miss)", |b| {
        b.iter(|| black_box(dns.peek(black_box(missing))))
    });
    group.finish();
}

criterion_group!(benches, cached_verdict, signature_check, dns_peek);
criterion_main!(benches);
