//! Whole-file tests: defaults, merging, every validation error with its exact
//! position, the shipped example configs, and hostile input.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::crawlers::{Category, VerifyData};

const BASE: &str = "/etc/robotsguard";

fn load(yaml: &str) -> Result<Config, ConfigErrors> {
    load_str(yaml, "t.yaml", Path::new(BASE))
}

fn ok(yaml: &str) -> Config {
    match load(yaml) {
        Ok(c) => c,
        Err(e) => panic!("config rejected:\n{e}\n---\n{yaml}"),
    }
}

/// The rendered errors, one string each.
fn errors(yaml: &str) -> Vec<String> {
    match load(yaml) {
        Ok(c) => panic!("config accepted: {c:#?}\n---\n{yaml}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

/// Asserts exactly one error, at `line:column`, whose text contains `part`.
fn one_error(yaml: &str, line: usize, column: usize, part: &str) -> ConfigError {
    let all = match load(yaml) {
        Ok(c) => panic!("config accepted: {c:#?}\n---\n{yaml}"),
        Err(e) => e.0,
    };
    assert_eq!(
        all.len(),
        1,
        "expected one error, got:\n{}",
        ConfigErrors(all.clone())
    );
    let e = all.into_iter().next().unwrap_or_else(|| unreachable!());
    assert_eq!((e.line, e.column), (line, column), "wrong position: {e}");
    assert!(e.to_string().contains(part), "`{part}` not in: {e}");
    e
}

/// A valid single origin to build on; the origin starts at line 2.
const ORIGIN: &str = "origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"127.0.0.1:8081\"
";

// ---------------------------------------------------------------- defaults

#[test]
fn minimal_config_gets_every_default() {
    let c = ok(ORIGIN);
    assert_eq!(
        c.listen,
        [Listener {
            address: "127.0.0.1:8080".parse().unwrap_or_else(|_| unreachable!()),
            tls: None,
            proxy_protocol: false,
            http2: false,
        }]
    );
    assert_eq!(
        c.admin.address,
        "127.0.0.1:9090".parse().unwrap_or_else(|_| unreachable!())
    );
    assert_eq!(c.admin.token_file, None);
    assert_eq!(c.limits, Limits::default());
    assert_eq!(c.threads, None);
    assert_eq!(c.shutdown_grace, Duration::from_secs(10));
    assert_eq!(
        c.crawlers,
        CrawlersConfig {
            builtin: true,
            generic: true,
            extra: vec![],
            feeds: vec![]
        }
    );
    assert_eq!(c.source_path, None);
    assert_eq!(
        c.origins,
        [OriginConfig {
            name: "shop".into(),
            hosts: vec!["shop.example".into()],
            upstreams: vec![Upstream {
                host: "127.0.0.1".into(),
                port: 8081,
                raw: "127.0.0.1:8081".into()
            }],
            upstream_tls: None,
            mode: Mode::Enforce,
            block: BlockConfig {
                status: 403,
                body: None,
                license_url: None,
            },
            robots: RobotsConfig {
                source: RobotsSource::Origin { url: None },
                refresh: Duration::from_secs(300),
                timeout: Duration::from_secs(10),
                on_unreachable: OnUnreachable::Disallow,
                max_size: 512_000,
                serve: false,
            },
            paths: PathsConfig {
                escaped_slashes: EscapedSlashes::Decode,
                forward: Forward::Canonical,
            },
            upstream_timeouts: UpstreamTimeouts {
                connect: Duration::from_secs(5),
                read: Duration::from_secs(60),
                write: Duration::from_secs(60),
                idle: Duration::from_secs(60),
            },
            upstream_health: UpstreamHealth {
                failures: 3,
                cooloff: Duration::from_secs(10),
                check: None,
                dns_refresh: Duration::from_secs(30),
            },
            policy: PolicyConfig::default(),
            impostors: crate::config::Impostors::Block,
            crawl_delay: crate::config::CrawlDelayConfig::default(),
            offenders: crate::config::OffendersConfig::default(),
            web_bot_auth: None,
            traps: crate::config::TrapsConfig::default(),
            disguised: crate::config::DisguisedConfig::default(),
            content_signals: crate::config::ContentSignalsConfig::default(),
            response_signals: crate::config::ResponseSignalsConfig::default(),
        }]
    );
}

#[test]
fn empty_values_mean_default() {
    let c = ok(&format!("admin:\nthreads:\nshutdown:\ndefaults:\n  robots:\ncrawlers:\n{ORIGIN}    robots:\n    block:\n"));
    assert_eq!(c.admin.address.port(), 9090);
    assert_eq!(c.origins[0].robots.refresh, Duration::from_secs(300));
}

#[test]
fn top_level_settings() {
    let c = ok(&format!(
        "listen: [\"0.0.0.0:80\", \"[::1]:8080\", {{address: \"0.0.0.0:443\", tls: {{cert: c.pem, key: /k.pem}}}}]
admin: \"[::1]:9999\"
threads: 4
shutdown: {{grace: 1m30s}}
{ORIGIN}"
    ));
    assert_eq!(c.listen.len(), 3);
    assert_eq!(c.listen[1].address.to_string(), "[::1]:8080");
    assert_eq!(
        c.listen[2].tls,
        Some(ListenerTls {
            certs: vec![CertificatePair {
                cert: PathBuf::from(BASE).join("c.pem"),
                key: PathBuf::from("/k.pem")
            }]
        })
    );
    assert!(c.listen[2].http2, "TLS listeners offer HTTP/2 by default");
    assert!(!c.listen[0].http2, "plain listeners take no h2c by default");
    assert_eq!(c.admin.address.to_string(), "[::1]:9999");
    assert_eq!(c.threads, Some(4));
    assert_eq!(c.shutdown_grace, Duration::from_secs(90));
}

#[test]
fn fair_share_limits_and_the_write_timeout() {
    let c = ok(&format!("limits: {{idle_timeout: 20s}}\n{ORIGIN}"));
    assert_eq!(
        c.limits.write_timeout,
        Duration::from_secs(20),
        "unset, writes are held to the idle timeout"
    );
    assert_eq!(c.limits.max_requests_in_flight_per_client, None);
    let c = ok(&format!(
        "limits: {{idle_timeout: 20s, write_timeout: 5s, max_requests_in_flight: 100, max_requests_in_flight_per_client: 100}}\n{ORIGIN}"
    ));
    assert_eq!(c.limits.write_timeout, Duration::from_secs(5));
    assert_eq!(c.limits.idle_timeout, Duration::from_secs(20));
    assert_eq!(c.limits.max_requests_in_flight_per_client, Some(100));
    one_error(
        &format!("limits: {{max_requests_in_flight: 100, max_requests_in_flight_per_client: 101}}\n{ORIGIN}"),
        1,
        74,
        "`max_requests_in_flight_per_client` is 101, more than `max_requests_in_flight` (100)",
    );
    one_error(
        &format!("limits: {{max_requests_in_flight_per_client: 0}}\n{ORIGIN}"),
        1,
        45,
        "max_requests_in_flight_per_client",
    );
    one_error(
        &format!("limits: {{write_timeout: 0s}}\n{ORIGIN}"),
        1,
        25,
        "`write_timeout` must be longer than 0s",
    );
    let old = ok(ORIGIN);
    let mut new = old.clone();
    new.limits.write_timeout = Duration::from_secs(1);
    assert!(restart_required(&old, &new).is_empty(), "reloadable");
    new.limits.max_requests_in_flight_per_client = Some(9);
    assert_eq!(
        restart_required(&old, &new),
        ["limits.max_requests_in_flight_per_client"]
    );
}

#[test]
fn listen_accepts_a_single_address() {
    let c = ok(&format!("listen: \"0.0.0.0:8080\"\n{ORIGIN}"));
    assert_eq!(c.listen.len(), 1);
    assert_eq!(c.listen[0].address.port(), 8080);
}

// ---------------------------------------------------------------- merging

#[test]
fn origins_override_defaults_key_by_key() {
    let c = ok("defaults:
  mode: report
  block: {status: 429, body: \"no, {crawler}\"}
  robots: {refresh: 1h, timeout: 3s, on_unreachable: allow, max_size: 1MiB}
origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
  - name: b
    hosts: [b.example]
    upstream: \"127.0.0.1:2\"
    mode: enforce
    block: {status: 451}
    robots: {source: file, path: robots/b.txt, timeout: 1s}
");
    let a = &c.origins[0];
    assert_eq!(a.mode, Mode::Report);
    assert_eq!(
        a.block,
        BlockConfig {
            status: 429,
            body: Some("no, {crawler}".into()),
            license_url: None,
        }
    );
    assert_eq!(a.robots.refresh, Duration::from_secs(3600));
    assert_eq!(a.robots.timeout, Duration::from_secs(3));
    assert_eq!(a.robots.on_unreachable, OnUnreachable::Allow);
    assert_eq!(a.robots.max_size, 1_048_576);

    let b = &c.origins[1];
    assert_eq!(b.mode, Mode::Enforce);
    // Status overridden, body inherited.
    assert_eq!(
        b.block,
        BlockConfig {
            status: 451,
            body: Some("no, {crawler}".into()),
            license_url: None,
        }
    );
    assert_eq!(
        b.robots.source,
        RobotsSource::File {
            path: PathBuf::from(BASE).join("robots/b.txt")
        }
    );
    // Only timeout overridden; the rest inherited from defaults.
    assert_eq!(b.robots.timeout, Duration::from_secs(1));
    assert_eq!(b.robots.refresh, Duration::from_secs(3600));
    assert_eq!(b.robots.on_unreachable, OnUnreachable::Allow);
    assert_eq!(b.robots.max_size, 1_048_576);
}

#[test]
fn robots_sources() {
    let c = ok("origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: {url: \"https://cdn.example/a/robots.txt\"}
  - name: b
    hosts: [b.example]
    upstream: \"127.0.0.1:2\"
    robots:
      source: inline
      text: |
        User-agent: *
        Disallow: /x
  - name: c
    hosts: [c.example]
    upstream: \"127.0.0.1:3\"
    robots: {source: file, path: /abs/robots.txt}
");
    assert_eq!(
        c.origins[0].robots.source,
        RobotsSource::Origin {
            url: Some("https://cdn.example/a/robots.txt".into())
        }
    );
    assert_eq!(
        c.origins[1].robots.source,
        RobotsSource::Inline {
            text: "User-agent: *\nDisallow: /x\n".into()
        }
    );
    assert_eq!(
        c.origins[2].robots.source,
        RobotsSource::File {
            path: "/abs/robots.txt".into()
        }
    );
}

#[test]
fn upstream_lists_and_tls() {
    let c = ok("origins:
  - name: a
    hosts: [A.Example., www.a.example]
    upstream: [\"10.0.0.1:80\", \"Backend.Internal:8080\", \"[::1]:81\"]
    tls: true
  - name: b
    hosts: b.example
    upstream: \"127.0.0.1:2\"
    tls: {verify: false}
  - name: c
    hosts: [c.example]
    upstream: \"127.0.0.1:3\"
    tls: {sni: Backend.C.Internal}
");
    let a = &c.origins[0];
    assert_eq!(a.hosts, ["a.example", "www.a.example"]);
    let ups: Vec<(&str, u16)> = a
        .upstreams
        .iter()
        .map(|u| (u.host.as_str(), u.port))
        .collect();
    assert_eq!(
        ups,
        [("10.0.0.1", 80), ("backend.internal", 8080), ("::1", 81)]
    );
    assert_eq!(a.upstreams[2].raw, "[::1]:81");
    assert_eq!(
        a.upstream_tls,
        Some(UpstreamTls {
            sni: "a.example".into(),
            verify: true,
            ca: None,
            client_cert: None,
        })
    );
    assert_eq!(c.origins[1].hosts, ["b.example"]);
    assert_eq!(
        c.origins[1].upstream_tls,
        Some(UpstreamTls {
            sni: "b.example".into(),
            verify: false,
            ca: None,
            client_cert: None,
        })
    );
    assert_eq!(
        c.origins[2].upstream_tls,
        Some(UpstreamTls {
            sni: "backend.c.internal".into(),
            verify: true,
            ca: None,
            client_cert: None,
        })
    );
}

#[test]
fn extra_crawlers_and_their_defaults() {
    let c = ok(&format!(
        "crawlers:
  builtin: false
  generic: false
  extra:
    - {{name: ExampleBot, tokens: [ExampleBot, example-bot], pattern: \"ExampleBot/\", category: ai-training, operator: \"Example Inc\", ignores_global: true}}
    - name: Other_Bot
{ORIGIN}"
    ));
    assert!(!c.crawlers.builtin);
    assert!(!c.crawlers.generic);
    assert_eq!(
        c.crawlers.extra,
        [
            ExtraCrawler {
                name: "ExampleBot".into(),
                tokens: vec!["examplebot".into(), "example-bot".into()],
                pattern: "ExampleBot/".into(),
                category: crate::crawlers::Category::AiTraining,
                operator: Some("Example Inc".into()),
                ignores_global: true,
                verify: None,
                purposes: Vec::new(),
                controls: Default::default(),
                ignores_crawl_delay: false,
            },
            ExtraCrawler {
                name: "Other_Bot".into(),
                tokens: vec!["other_bot".into()],
                pattern: "Other_Bot".into(),
                category: crate::crawlers::Category::Other,
                operator: None,
                ignores_global: false,
                verify: None,
                purposes: Vec::new(),
                controls: Default::default(),
                ignores_crawl_delay: false,
            },
        ]
    );
}

#[test]
fn aliases_can_share_settings_between_origins() {
    let c = ok("origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: &shared {refresh: 1m, on_unreachable: allow}
  - name: b
    hosts: [b.example]
    upstream: \"127.0.0.1:2\"
    robots: *shared
");
    assert_eq!(c.origins[1].robots.refresh, Duration::from_secs(60));
    assert_eq!(c.origins[1].robots.on_unreachable, OnUnreachable::Allow);

    // YAML merge keys work too.
    let c = ok("origins:
  - &base {name: a, hosts: [a.example], upstream: \"127.0.0.1:1\", mode: report}
  - <<: *base
    name: b
    hosts: [b.example]
");
    assert_eq!(c.origins[1].name, "b");
    assert_eq!(c.origins[1].mode, Mode::Report);
    assert_eq!(c.origins[1].upstreams, c.origins[0].upstreams);
}

#[test]
fn restart_required_lists_only_restart_only_fields() {
    let old = ok(ORIGIN);
    let mut new = old.clone();
    assert!(restart_required(&old, &new).is_empty());
    new.origins[0].mode = Mode::Off;
    assert!(restart_required(&old, &new).is_empty());
    assert_ne!(old, new);
    new.threads = Some(3);
    new.admin.address = "127.0.0.1:1".parse().unwrap_or_else(|_| unreachable!());
    new.listen[0].address = "127.0.0.1:2".parse().unwrap_or_else(|_| unreachable!());
    new.shutdown_grace = Duration::from_secs(1);
    assert_eq!(
        restart_required(&old, &new),
        ["listen", "threads", "admin.address", "shutdown.grace"]
    );
}

// ---------------------------------------------------------------- errors

#[test]
fn unknown_key_in_origin_suggests_the_closest() {
    let e = one_error(
        "origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"127.0.0.1:8081\"
    upstreams: \"127.0.0.1:8082\"
",
        5,
        5,
        "",
    );
    assert_eq!(
        e.to_string(),
        "t.yaml:5:5: unknown key `upstreams` in origin; did you mean `upstream`? \
         (expected one of: name, hosts, upstream, tls, mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)"
    );
}

#[test]
fn unknown_keys_everywhere() {
    let errs = errors(
        "listen: [{address: \"0.0.0.0:1\", tsl: {}}]
shutdown: {grase: 1s}
defaults:
  moed: report
  block: {staus: 403}
  robots: {refesh: 1m}
crawlers: {extras: []}
origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"127.0.0.1:8081\"
    tls: {snii: x}
    robots: {max-size: 1MiB}
",
    );
    assert_eq!(
        errs,
        [
            "t.yaml:1:33: unknown key `tsl` in listener; did you mean `tls`? (expected one of: address, tls, proxy_protocol, http2)",
            "t.yaml:2:12: unknown key `grase` in `shutdown`; did you mean `grace`? (expected one of: grace)",
            "t.yaml:4:3: unknown key `moed` in `defaults`; did you mean `mode`? (expected one of: mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)",
            "t.yaml:5:11: unknown key `staus` in `block`; did you mean `status`? (expected one of: status, body, license_url)",
            "t.yaml:6:12: unknown key `refesh` in `defaults.robots`; did you mean `refresh`? (expected one of: refresh, timeout, on_unreachable, max_size)",
            "t.yaml:7:12: unknown key `extras` in `crawlers`; did you mean `extra`? (expected one of: builtin, generic, extra, feeds)",
            "t.yaml:12:11: unknown key `snii` in upstream `tls`; did you mean `sni`? (expected one of: sni, verify, ca, client_cert, client_key)",
            "t.yaml:13:14: unknown key `max-size` in `robots`; did you mean `max_size`? (expected one of: source, path, text, url, refresh, timeout, on_unreachable, max_size, serve)",
        ]
    );
}

#[test]
fn misplaced_keys_get_a_pointed_hint() {
    let errs = errors(&format!(
        "mode: report\ndefaults:\n  robots: {{source: file}}\n{ORIGIN}"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:1:1: key `mode` is not allowed at the top level (`mode` goes under `defaults:` or under an origin)",
            "t.yaml:3:12: key `source` is not allowed in `defaults.robots` (where robots.txt comes from is set per origin, under the origin's `robots:`)",
        ]
    );
}

#[test]
fn missing_origins() {
    one_error(
        "listen: [\"127.0.0.1:8080\"]\n",
        1,
        1,
        "needs at least one entry in `origins`",
    );
    one_error("", 1, 1, "needs at least one entry in `origins`");
    one_error(
        "# only a comment\n",
        2,
        1,
        "needs at least one entry in `origins`",
    );
    one_error(
        "admin: \"127.0.0.1:9\"\norigins:\n",
        2,
        1,
        "needs at least one entry in `origins`",
    );
    one_error(
        "origins: []\n",
        1,
        10,
        "`origins` must list at least one origin",
    );
    one_error(
        "origins: shop\n",
        1,
        10,
        "`origins` must be a list, not a string",
    );
}

#[test]
fn root_must_be_a_mapping() {
    one_error(
        "- a\n- b\n",
        1,
        1,
        "the config must be a mapping, not a list",
    );
}

#[test]
fn origin_required_keys() {
    let errs = errors(
        "origins:\n  - name: a\n  - hosts: [b.example]\n  - upstream: \"127.0.0.1:1\"\n  - x\n",
    );
    assert_eq!(
        errs,
        [
            "t.yaml:2:5: origin is missing `hosts` (list the Host names it serves, e.g. hosts: [shop.example])",
            "t.yaml:2:5: origin is missing `upstream` (e.g. upstream: 127.0.0.1:8081)",
            "t.yaml:3:5: origin is missing `name` (e.g. name: shop)",
            "t.yaml:3:5: origin is missing `upstream` (e.g. upstream: 127.0.0.1:8081)",
            "t.yaml:4:5: origin is missing `name` (e.g. name: shop)",
            "t.yaml:4:5: origin is missing `hosts` (list the Host names it serves, e.g. hosts: [shop.example])",
            "t.yaml:5:5: each origin must be a mapping, not a string (expected one of: name, hosts, upstream, tls, mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)",
        ]
    );
}

#[test]
fn empty_hosts_and_upstream_lists() {
    let errs = errors("origins:\n  - name: a\n    hosts: []\n    upstream: []\n");
    assert_eq!(
        errs,
        [
            "t.yaml:3:12: `hosts` must list at least one host name",
            "t.yaml:4:15: `upstream` must list at least one address",
        ]
    );
}

#[test]
fn bad_upstreams() {
    let errs = errors(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: [\"http://a.internal:80\", \"a.internal\", \"a.internal:0\", 8080, \"::1:80\"]
",
    );
    assert_eq!(
        errs,
        [
            "t.yaml:4:16: upstream `http://a.internal:80` has a scheme; write host:port (e.g. 127.0.0.1:8081; for an HTTPS upstream set the origin's `tls: true`)",
            "t.yaml:4:40: address `a.internal` has no port (write a.internal:8080)",
            "t.yaml:4:54: address `a.internal:0` has port 0 (ports are 1 to 65535)",
            "t.yaml:4:70: `upstream` must be a string, not an integer (put the value in quotes)",
            "t.yaml:4:76: address `::1:80` has no port (write [::1:80]:8080)",
        ]
    );
}

#[test]
fn robots_source_needs_its_key() {
    one_error(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots:
      source: file
      refresh: 1m
",
        6,
        15,
        "`source: file` needs `path` (e.g. path: robots/shop.txt (relative to the config file))",
    );
    one_error(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: {source: inline}
",
        5,
        22,
        "`source: inline` needs `text`",
    );
}

#[test]
fn robots_keys_of_another_source_are_errors() {
    one_error(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots:
      path: robots/a.txt
",
        6,
        7,
        "`path` is only used with `source: file`, but the source is `origin` (add `source: file`, or remove `path`)",
    );
    let errs = errors(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots:
      source: file
      path: a.txt
      text: x
      url: /r.txt
",
    );
    assert_eq!(
        errs,
        [
            "t.yaml:8:7: `text` is only used with `source: inline`, but the source is `file` (remove `text`)",
            "t.yaml:9:7: `url` is only used with `source: origin`, but the source is `file` (remove `url`)",
        ]
    );
    one_error(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: {source: origni}
",
        5,
        22,
        "unknown `source` `origni`; did you mean `origin`? (expected one of: origin, file, inline)",
    );
    one_error(
        "origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: {url: robots.txt}
",
        5,
        19,
        "must be a path starting with `/`",
    );
}

#[test]
fn duplicate_host_across_origins_names_both_places() {
    let e = one_error(
        "origins:
  - name: shop
    hosts: [shop.example, www.shop.example]
    upstream: \"127.0.0.1:8081\"
  - name: shop2
    hosts:
      - other.example
      - WWW.Shop.Example.
    upstream: \"127.0.0.1:8082\"
",
        8,
        9,
        "",
    );
    assert_eq!(
        e.to_string(),
        "t.yaml:8:9: host `www.shop.example` is already served by origin `shop` at line 3, column 27 \
         (each host belongs to exactly one origin)"
    );
}

#[test]
fn duplicate_host_within_an_origin() {
    one_error(
        "origins:\n  - name: a\n    hosts: [a.example, A.example]\n    upstream: \"127.0.0.1:1\"\n",
        3,
        24,
        "host `a.example` is listed twice in this origin (first at line 3, column 13)",
    );
}

#[test]
fn duplicate_origin_names() {
    one_error(
        "origins:
  - name: shop
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
  - name: shop
    hosts: [b.example]
    upstream: \"127.0.0.1:2\"
",
        5,
        11,
        "origin name `shop` is used twice (first at line 2, column 11)",
    );
}

#[test]
fn bad_origin_names() {
    one_error(
        "origins:\n  - name: my shop\n    hosts: [a.example]\n    upstream: \"127.0.0.1:1\"\n",
        2,
        11,
        "origin name `my shop` has characters other than A-Z a-z 0-9 _ . -",
    );
    one_error(
        &format!(
            "origins:\n  - name: {}\n    hosts: [a.example]\n    upstream: \"127.0.0.1:1\"\n",
            "a".repeat(65)
        ),
        2,
        11,
        "longer than 64",
    );
}

#[test]
fn hosts_with_ports_and_other_bad_hosts() {
    let errs = errors(
        "origins:
  - name: a
    hosts: [\"a.example:8080\", \"*.a.example\", \"https://a.example/\", 42]
    upstream: \"127.0.0.1:1\"
",
    );
    assert_eq!(
        errs,
        [
            "t.yaml:3:13: host `a.example:8080` has a port (write a.example; a host matches requests on any port)",
            "t.yaml:3:31: host `*.a.example`: wildcards are not supported (list each host name)",
            "t.yaml:3:46: host `https://a.example/` must be a bare host name, without scheme or path (e.g. shop.example)",
            "t.yaml:3:68: `hosts` must be a string, not an integer (put the value in quotes)",
        ]
    );
}

#[test]
fn integer_duration_gets_a_unit_hint() {
    let e = one_error(
        &format!("defaults:\n  robots:\n    refresh: 30\n{ORIGIN}"),
        3,
        14,
        "",
    );
    assert_eq!(e.message, "duration `30` has no unit");
    assert_eq!(e.hint.as_deref(), Some("write 30s"));
}

#[test]
fn bad_durations_everywhere() {
    let errs = errors(&format!(
        "shutdown: {{grace: 10}}
defaults:
  robots: {{refresh: 500ms, timeout: 0s}}
{ORIGIN}    robots: {{refresh: 5 minutes, timeout: [1s]}}
"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:1:19: duration `10` has no unit (write 10s)",
            "t.yaml:3:21: `refresh` must be at least 1s",
            "t.yaml:3:37: `timeout` must be longer than 0s",
            "t.yaml:8:23: `5 minutes` is not a duration (write e.g. 250ms, 30s, 5m, 24h, 1d or 1m30s)",
            "t.yaml:8:43: `timeout` must be a duration like 30s, not a list",
        ]
    );
}

#[test]
fn max_size_limits() {
    let e = one_error(
        &format!("defaults:\n  robots: {{max_size: 100KiB}}\n{ORIGIN}"),
        2,
        22,
        "",
    );
    assert_eq!(
        e.to_string(),
        "t.yaml:2:22: `max_size` is 102400 bytes; it must be at least 500KiB (512000 bytes) \
         (RFC 9309 requires parsing at least 500 KiB of robots.txt)"
    );
    one_error(
        &format!("defaults:\n  robots: {{max_size: 511999}}\n{ORIGIN}"),
        2,
        22,
        "at least 500KiB",
    );
    one_error(
        &format!("defaults:\n  robots: {{max_size: 1GiB}}\n{ORIGIN}"),
        2,
        22,
        "at most 64MiB",
    );
    one_error(
        &format!("defaults:\n  robots: {{max_size: 500K}}\n{ORIGIN}"),
        2,
        22,
        "ambiguous",
    );
    let c = ok(&format!(
        "defaults:\n  robots: {{max_size: 512000}}\n{ORIGIN}"
    ));
    assert_eq!(c.origins[0].robots.max_size, 512_000);
}

#[test]
fn inline_text_larger_than_max_size() {
    let big = "Disallow: /x\n".repeat(40_000);
    let text = format!(
        "{ORIGIN}    robots:\n      source: inline\n      text: \"{}\"\n",
        big.replace('\n', "\\n")
    );
    one_error(
        &text,
        7,
        13,
        "inline robots.txt is 520000 bytes, more than `max_size` (512000 bytes)",
    );
}

#[test]
fn block_status_and_body() {
    let errs = errors(&format!(
        "defaults:\n  block: {{status: 200, body: \"{{crawlr}} blocked\"}}\n{ORIGIN}    block: {{status: \"403\"}}\n"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:2:19: `status` must be between 400 and 599, not 200",
            "t.yaml:2:30: unknown placeholder `{crawlr}` in `body`; did you mean `crawler`? (expected one of: crawler, path, line, rule, robots_url, origin, client)",
            "t.yaml:7:21: `status` must be an integer, not a string",
        ]
    );
}

#[test]
fn bad_modes_and_booleans() {
    let errs = errors(&format!(
        "defaults: {{mode: enforcing}}\ncrawlers: {{builtin: yes, generic: 1}}\n{ORIGIN}    mode: Off\n    tls: on\n"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:1:18: unknown `mode` `enforcing`; did you mean `enforce`? (expected one of: enforce, report, off)",
            "t.yaml:2:21: `builtin` must be true or false, not `yes` (write true or false)",
            "t.yaml:2:35: `generic` must be true or false, not an integer",
            "t.yaml:7:11: unknown `mode` `Off`; did you mean `off`? (expected one of: enforce, report, off)",
            "t.yaml:8:10: `tls` must be true, false or a mapping, not a string (e.g. tls: true, or tls: {sni: shop.example, verify: true})",
        ]
    );
}

#[test]
fn bad_upstream_tls() {
    let errs = errors(&format!(
        "{ORIGIN}    tls: {{sni: \"192.0.2.1\", verify: \"no\"}}\n"
    ));
    assert_eq!(
        errs,
        ["t.yaml:5:16: sni `192.0.2.1` is an IP address; SNI must be a host name"]
    );
    one_error(
        &format!("{ORIGIN}    tls: {{verify: \"no\"}}\n"),
        5,
        19,
        "`verify` must be true or false",
    );
}

#[test]
fn tls_listener_needs_cert_and_key() {
    let errs = errors(&format!(
        "listen:
  - address: \"0.0.0.0:443\"
    tls: {{cert: cert.pem}}
  - address: \"0.0.0.0:444\"
    tls: {{}}
  - address: \"0.0.0.0:445\"
    tls: true
  - tls: {{cert: a, key: b}}
  - 8080
{ORIGIN}"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:3:10: listener `tls` is missing `key` (TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them)",
            "t.yaml:5:10: listener `tls` is missing `cert` (TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them)",
            "t.yaml:5:10: listener `tls` is missing `key` (TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them)",
            "t.yaml:7:10: listener `tls` must be a mapping, not a boolean (expected one of: cert, key, certs, http2)",
            "t.yaml:8:5: listener is missing `address` (e.g. address: \"0.0.0.0:8443\")",
            "t.yaml:9:5: a `listen` entry must be an address or a mapping, not an integer (e.g. \"127.0.0.1:8080\" or {address: \"0.0.0.0:8443\", tls: {cert: cert.pem, key: key.pem}})",
        ]
    );
}

#[test]
fn tls_listeners_with_several_certificates_and_http2() {
    let c = ok(&format!(
        "listen:
  - address: \"0.0.0.0:8443\"
    tls:
      certs:
        - {{cert: tls/shop.pem, key: tls/shop.key}}
        - {{cert: /etc/tls/blog.pem, key: /etc/tls/blog.key}}
      http2: false
  - {{address: \"0.0.0.0:8444\", tls: {{cert: c.pem, key: k.pem}}, http2: false}}
  - {{address: \"0.0.0.0:8080\", http2: true}}
{ORIGIN}"
    ));
    let tls = c.listen[0].tls.clone().unwrap_or_else(|| panic!("no tls"));
    assert_eq!(
        tls.certs,
        [
            CertificatePair {
                cert: PathBuf::from(BASE).join("tls/shop.pem"),
                key: PathBuf::from(BASE).join("tls/shop.key"),
            },
            CertificatePair {
                cert: PathBuf::from("/etc/tls/blog.pem"),
                key: PathBuf::from("/etc/tls/blog.key"),
            },
        ]
    );
    assert!(!c.listen[0].http2);
    assert!(
        !c.listen[1].http2,
        "listener-level http2 applies to TLS too"
    );
    assert!(c.listen[2].http2 && c.listen[2].tls.is_none(), "h2c");

    let errs = errors(&format!(
        "listen:
  - address: \"0.0.0.0:443\"
    tls: {{cert: a.pem, key: a.key, certs: [{{cert: b.pem, key: b.key}}]}}
  - address: \"0.0.0.0:444\"
    tls: {{certs: []}}
  - address: \"0.0.0.0:445\"
    tls: {{certs: [{{cert: b.pem}}, {{cret: c.pem, key: c.key}}]}}
  - address: \"0.0.0.0:446\"
    tls: {{cert: a.pem, key: a.key, http2: true}}
    http2: false
  - {{address: \"0.0.0.0:447\", http2: maybe}}
{ORIGIN}"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:3:43: listener `tls` has both `certs` and `cert`/`key` (list every certificate under `certs`, the default first)",
            "t.yaml:5:18: listener `tls.certs` is empty (e.g. certs: [{cert: tls/shop.pem, key: tls/shop.key}])",
            "t.yaml:7:19: a `tls.certs` entry is missing `key` (TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them)",
            "t.yaml:7:34: a `tls.certs` entry is missing `cert` (TLS listeners need both `cert` and `key` (PEM files), or a `certs` list of them)",
            "t.yaml:7:35: unknown key `cret` in a `tls.certs` entry; did you mean `cert`? (expected one of: cert, key)",
            "t.yaml:10:12: `http2` and `tls.http2` disagree (set it in one place (`tls.http2` on a TLS listener))",
            "t.yaml:11:37: `http2` must be true or false, not `maybe` (write true or false)",
        ]
    );
}

#[test]
fn bad_listen_and_admin_addresses() {
    let errs = errors(&format!(
        "listen: [\"localhost:8080\", \"0.0.0.0\", \"0.0.0.0:80\", \"127.0.0.1:80\", \"0.0.0.0:80\"]\nadmin: \"127.0.0.1:80\"\nthreads: 0\n{ORIGIN}"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:1:10: address `localhost:8080` must be an IP address and port, not a host name (write 127.0.0.1:8080)",
            "t.yaml:1:28: address `0.0.0.0` has no port (write 0.0.0.0:8080)",
            "t.yaml:1:53: listen address `127.0.0.1:80` overlaps `0.0.0.0:80` at line 1, column 39",
            "t.yaml:1:69: listen address `0.0.0.0:80` is listed twice (first at line 1, column 39)",
            "t.yaml:2:8: admin address `127.0.0.1:80` clashes with `0.0.0.0:80`, the listen address at line 1, column 39 (the admin server needs its own port)",
            "t.yaml:3:10: `threads` must be between 1 and 1024, not 0",
        ]
    );
    one_error(
        &format!("listen: []\n{ORIGIN}"),
        1,
        9,
        "`listen` must list at least one address",
    );
    one_error(
        &format!("admin: \"127.0.0.1:8080\"\n{ORIGIN}"),
        1,
        8,
        "clashes with `127.0.0.1:8080`, the the default listen address",
    );
}

#[test]
fn bad_extra_crawlers() {
    let errs = errors(&format!(
        "crawlers:
  extra:
    - name: Example Bot
    - {{name: ABot, tokens: [\"a bot\"], pattern: ab, category: ai_training}}
    - {{name: examplebot2, tokens: []}}
    - {{name: EXAMPLEBOT2}}
    - {{tokens: [x]}}
{ORIGIN}"
    ));
    assert_eq!(
        errs,
        [
            "t.yaml:3:7: crawler `Example Bot` needs `tokens` (its name is not a product token (letters, digits, `-`, `_`), so list the User-agent tokens it obeys)",
            "t.yaml:4:29: token `a bot` is not a robots.txt product token (tokens have only letters, digits, `-` and `_`)",
            "t.yaml:4:48: `pattern` must be at least 3 characters",
            "t.yaml:4:62: unknown `category` `ai_training`; did you mean `ai-training`? (expected one of: search, ai-training, ai-search, ai-assistant, seo, social, archive, monitoring, library, other)",
            "t.yaml:5:35: `tokens` must list at least one product token",
            "t.yaml:6:14: crawler `EXAMPLEBOT2` is defined twice (first at line 5, column 14)",
            "t.yaml:7:7: crawler is missing `name` (e.g. name: ExampleBot)",
        ]
    );
}

#[test]
fn many_errors_are_reported_in_one_pass() {
    let errs = errors(
        "listen: [\"127.0.0.1\"]
defaults:
  mode: block
origins:
  - name: a
    hosts: [a.example]
    upstream: \"127.0.0.1:1\"
    robots: {refresh: 10}
  - name: b
    hosts: [a.example]
    upstream: \"x\"
  - name: c
    hots: [c.example]
    upstream: \"127.0.0.1:3\"
",
    );
    let positions: Vec<&str> = errs
        .iter()
        .map(|e| &e[..e[7..].find(':').map_or(0, |i| i + 7)])
        .collect();
    assert_eq!(
        positions,
        [
            "t.yaml:1",
            "t.yaml:3",
            "t.yaml:8",
            "t.yaml:10",
            "t.yaml:11",
            "t.yaml:12",
            "t.yaml:13"
        ],
        "{errs:#?}"
    );
}

#[test]
fn error_output_is_capped() {
    let yaml: String = (0..1_000).map(|i| format!("k{i}: 1\n")).collect();
    let errs = errors(&yaml);
    assert_eq!(errs.len(), 201);
    assert_eq!(errs[0], "t.yaml:1:1: unknown key `k0` at the top level (expected one of: listen, admin, threads, shutdown, limits, trusted_proxies, access_log, defaults, crawlers, origins, verify, state, reports, preview, events, decision, evidence)");
    assert_eq!(errs[200], "t.yaml: 801 more errors not shown");
}

#[test]
fn syntax_error_is_one_error_at_the_parser_position() {
    let errs = load("origins:\n  - name: [a\n")
        .err()
        .map(|e| e.0)
        .unwrap_or_default();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].file, "t.yaml");
    assert!(errs[0].line >= 2, "{}", errs[0]);
    one_error(
        "admin: 1\nadmin: 2\n",
        2,
        1,
        "duplicate mapping key `admin`",
    );
    one_error("a: !secret x\n", 1, 12, "unsupported tag `!secret`");
    one_error("a: *nope\n", 1, 4, "");
    one_error("a: 1\n---\nb: 2\n", 3, 1, "single YAML document");
}

#[test]
fn hostile_input_fails_fast_without_panicking() {
    let mut laughs = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in names.windows(2) {
        let refs = vec![format!("*{}", pair[0]); 9].join(",");
        laughs.push_str(&format!("{}: &{} [{}]\n", pair[1], pair[1], refs));
    }
    let cases = [
        (
            "20 MB",
            format!(
                "origins:\n{}",
                "  - {name: a, hosts: [a.example], upstream: \"127.0.0.1:1\"}\n".repeat(360_000)
            ),
            "the limit is 16777216 bytes",
        ),
        (
            "deep flow",
            format!("origins: {}{}\n", "[".repeat(50_000), "]".repeat(50_000)),
            "nested too deeply",
        ),
        (
            "deep block",
            (0..2_000)
                .map(|d| format!("{}- \n", "  ".repeat(d)))
                .collect(),
            "nested too deeply",
        ),
        ("billion laughs", laughs, "too many anchors, aliases"),
        (
            "self alias",
            "origins: &a [*a, *a, *a]\n".to_owned(),
            "Recursive reference",
        ),
        ("long key", format!("{}: 1\n", "k".repeat(3_000_000)), ""),
        (
            "many values",
            format!("a: [{}]\n", "x,".repeat(1_200_000)),
            "too many values",
        ),
    ];
    for (what, text, part) in cases {
        let result = load(&text);
        let errs = match result {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e.0,
        };
        assert_eq!(errs.len(), 1, "{what}: {}", ConfigErrors(errs.clone()));
        assert!(errs[0].message.contains(part), "{what}: {}", errs[0]);
    }
}

// ---------------------------------------------------------------- files

fn manifest_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn documented_example_loads() {
    let path = manifest_path("config/robotsguard.yaml");
    let c = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.source_path.as_deref(), Some(path.as_path()));
    assert_eq!(c.threads, Some(2));
    assert_eq!(c.origins.len(), 2);
    assert_eq!(c.origins[0].mode, Mode::Report);
    assert_eq!(c.origins[0].block.status, 451);
    assert!(c.origins[0]
        .block
        .body
        .as_deref()
        .is_some_and(|b| b.contains("{crawler}")));
    assert_eq!(c.origins[1].upstreams.len(), 2);
    assert_eq!(c.crawlers.extra.len(), 1);
}

#[test]
fn every_example_loads() {
    let dir = manifest_path("config/examples");
    let mut names = Vec::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.extension().is_some_and(|e| e == "yaml") {
            if let Err(e) = load_file(&path) {
                panic!("{}:\n{e}", path.display());
            }
            names.push(
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "ai-purposes.yaml",
            "block-ai-training.yaml",
            "fail-open.yaml",
            "file-robots.yaml",
            "many-origins.yaml",
            "partners-and-monitors.yaml",
            "report-only.yaml",
            "single-origin.yaml",
            "tls-termination.yaml"
        ]
    );
}

#[test]
fn file_robots_example_points_at_its_shipped_file() {
    let c = load_file(&manifest_path("config/examples/file-robots.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let RobotsSource::File { path } = &c.origins[0].robots.source else {
        panic!("not a file source: {:?}", c.origins[0].robots.source)
    };
    assert_eq!(path, &manifest_path("config/examples/robots/shop.txt"));
    assert!(path.is_file());
}

#[test]
fn tls_example_does_not_need_the_certificate_files() {
    let c = load_file(&manifest_path("config/examples/tls-termination.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let tls = c.listen[1].tls.as_ref().unwrap_or_else(|| panic!("no tls"));
    assert!(!tls.certs[0].cert.exists());
}

/// A scratch directory under the target dir, unique per test.
/// A directory of its own for one test, removed when the guard drops (in the system's temp
/// directory: the work tree may be read-only where the tests run).
fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("robotsguard-config-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn load_file_errors() {
    let scratch = scratch_dir("load_file_errors");
    let dir = scratch.path();
    let missing = dir.join("missing.yaml");
    let e = load_file(&missing).err().map(|e| e.0).unwrap_or_default();
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].line, e[0].column), (0, 0));
    assert!(e[0]
        .to_string()
        .starts_with(&format!("{}: cannot open the config", missing.display())));

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, b"origins:\n  - name: caf\xe9\n").unwrap_or_else(|e| panic!("{e}"));
    let e = load_file(&bad).err().map(|e| e.0).unwrap_or_default();
    assert_eq!(
        (e[0].line, e[0].column, e[0].message.as_str()),
        (2, 14, "the config is not valid UTF-8")
    );

    let big = dir.join("big.yaml");
    std::fs::write(&big, "#".repeat(20 * 1024 * 1024)).unwrap_or_else(|e| panic!("{e}"));
    let e = load_file(&big).err().map(|e| e.0).unwrap_or_default();
    assert!(e[0].message.contains("larger than the limit"), "{}", e[0]);
}

#[test]
fn load_file_resolves_relative_paths_against_its_directory() {
    let scratch = scratch_dir("relative_paths");
    let dir = scratch.path();
    let path = dir.join("rg.yaml");
    std::fs::write(
        &path,
        "\u{feff}listen: [{address: \"0.0.0.0:443\", tls: {cert: tls/c.pem, key: ../k.pem}}]\n\
         origins:\n  - name: a\n    hosts: [a.example]\n    upstream: \"127.0.0.1:1\"\n    robots: {source: file, path: r/a.txt}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let c = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let tls = c.listen[0].tls.clone().unwrap_or_else(|| panic!("no tls"));
    assert_eq!(tls.certs[0].cert, dir.join("tls/c.pem"));
    assert_eq!(tls.certs[0].key, dir.join("../k.pem"));
    assert_eq!(
        c.origins[0].robots.source,
        RobotsSource::File {
            path: dir.join("r/a.txt")
        }
    );
}

#[test]
fn display_of_many_errors_is_one_per_line() {
    let e = load("origins: []\nadmin: x\n")
        .err()
        .unwrap_or_else(|| panic!("accepted"));
    let text = e.to_string();
    assert_eq!(text.lines().count(), e.0.len());
    assert!(text.lines().all(|l| l.starts_with("t.yaml:")));
}

// ---------------------------------------------------------------- policy

#[test]
fn policy_defaults_let_libraries_and_monitors_pass() {
    let c = ok(ORIGIN);
    let policy = &c.origins[0].policy;
    assert_eq!(policy.category(Category::Library), Action::Pass);
    assert_eq!(policy.category(Category::Monitoring), Action::Pass);
    assert_eq!(policy.category(Category::AiTraining), Action::Enforce);
    assert_eq!(policy.category(Category::Search), Action::Enforce);
    assert!(policy.crawlers.is_empty() && policy.allow_clients.is_empty());
}

#[test]
fn policy_merges_key_by_key() {
    let yaml = "defaults:
  policy:
    categories: {library: enforce, ai-training: block}
    crawlers: {gptbot: pass}
    exempt_paths: [/.well-known/, \"/%61ds.txt\"]
origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"127.0.0.1:8081\"
    policy:
      categories: {ai-training: enforce}
      crawlers: {CCBot: block}
      allow_clients: [\"203.0.113.0/24\", \"2001:db8::1\"]
";
    let c = ok(yaml);
    let policy = &c.origins[0].policy;
    assert_eq!(
        policy.category(Category::Library),
        Action::Enforce,
        "from defaults"
    );
    assert_eq!(
        policy.category(Category::AiTraining),
        Action::Enforce,
        "overridden"
    );
    assert_eq!(
        policy.category(Category::Monitoring),
        Action::Pass,
        "built in"
    );
    // Names take the catalogue's spelling.
    assert_eq!(policy.crawler("GPTBot"), Some(Action::Pass));
    assert_eq!(policy.crawler("ccbot"), Some(Action::Block));
    assert_eq!(policy.crawlers[0].0, "GPTBot");
    assert_eq!(policy.allow_clients.len(), 2);
    // Exempt paths are kept in canonical form.
    assert_eq!(policy.exempt_paths, ["/.well-known/", "/ads.txt"]);
}

#[test]
fn booleans_from_yaml_1_1_readers_are_the_words_they_were() {
    // What `helm template` renders from values written `mode: off`, `action: off`, ...
    let c = ok(&format!(
        "defaults:\n  mode: false\n  offenders: {{action: false, scope: address}}\n  impostors: false\n{ORIGIN}"
    ));
    let origin = &c.origins[0];
    assert_eq!(origin.mode, Mode::Off);
    assert_eq!(origin.offenders.action, OffendersAction::Off);
    assert_eq!(origin.offenders.scope, BanScope::Address);
    assert_eq!(origin.impostors, Impostors::Ignore);
    // The words themselves, quoted or not, mean the same.
    let c = ok(&format!(
        "{ORIGIN}    mode: off\n    offenders: {{action: \"off\"}}\n    impostors: off\n"
    ));
    assert_eq!(c.origins[0].mode, Mode::Off);
    assert_eq!(c.origins[0].offenders.action, OffendersAction::Off);
    assert_eq!(c.origins[0].impostors, Impostors::Ignore);
    assert_eq!(
        c.origins[0].offenders.scope,
        BanScope::Crawlers,
        "the default"
    );
    // A boolean where no word is one YAML 1.1 spells so is an error that says why.
    let e = one_error(
        &format!("{ORIGIN}    mode: true\n"),
        5,
        11,
        "not the boolean true",
    );
    assert!(
        e.to_string().contains("Helm read on and yes as true"),
        "{e}"
    );
    let e = one_error(
        &format!("{ORIGIN}    crawl_delay: {{action: false}}\n"),
        5,
        27,
        "`action` must be a word, not the boolean false",
    );
    assert!(
        e.to_string()
            .contains("expected one of: enforce, report, ignore"),
        "{e}"
    );
}

#[test]
fn networks_with_host_bits_set_are_refused_in_every_address_list() {
    for (yaml, line, column, text, meant) in [
        (
            format!("trusted_proxies: [\"127.0.0.5/8\"]\n{ORIGIN}"),
            1,
            19,
            "127.0.0.5/8",
            "127.0.0.0/8",
        ),
        (
            format!(
                "{ORIGIN}    policy:\n      allow_clients: [\"10.0.0.0/24\", \"10.1.2.3/16\"]\n"
            ),
            6,
            38,
            "10.1.2.3/16",
            "10.1.0.0/16",
        ),
        (
            format!("defaults:\n  policy: {{allow_clients: \"2001:db8::1/32\"}}\n{ORIGIN}"),
            2,
            27,
            "2001:db8::1/32",
            "2001:db8::/32",
        ),
    ] {
        let e = one_error(&yaml, line, column, "has host bits set");
        assert_eq!(
            e.to_string(),
            format!("t.yaml:{line}:{column}: {text} has host bits set; did you mean {meant}?")
        );
    }
    // A network as written, and a bare address (one host), are what they say.
    let c = ok(&format!(
        "trusted_proxies: [\"127.0.0.0/8\", \"10.0.0.7\", \"10.0.0.8/32\", \"::1\"]\n{ORIGIN}"
    ));
    assert_eq!(c.trusted_proxies.len(), 4);
}

#[test]
fn policy_names_must_exist() {
    let yaml = format!("{ORIGIN}    policy:\n      crawlers: {{GPTBott: block}}\n");
    let e = one_error(&yaml, 6, 18, "no crawler is named `GPTBott`");
    assert!(e.to_string().contains("did you mean `GPTBot`"), "{e}");
    let yaml = format!("{ORIGIN}    policy:\n      categories: {{ai_training: block}}\n");
    let e = one_error(&yaml, 6, 20, "unknown category `ai_training`");
    assert!(e.to_string().contains("did you mean `ai-training`"), "{e}");
    let yaml = format!("{ORIGIN}    policy:\n      categories: {{library: allow}}\n");
    one_error(&yaml, 6, 29, "unknown `library` `allow`");
    let yaml = format!("{ORIGIN}    policy:\n      exempt_paths: [ads.txt]\n");
    one_error(&yaml, 6, 22, "must start with `/`");
    let yaml = format!("{ORIGIN}    policy:\n      allow_clients: [\"10.0.0.0/33\"]\n");
    one_error(&yaml, 6, 23, "is not an IP network");
    // A crawler added under `crawlers.extra` may be named.
    let yaml = format!(
        "crawlers:\n  extra: [{{name: ExampleBot}}]\n{ORIGIN}    policy:\n      crawlers: {{ExampleBot: block}}\n"
    );
    assert_eq!(
        ok(&yaml).origins[0].policy.crawler("ExampleBot"),
        Some(Action::Block)
    );
    // Without the built-in catalogue, its names are unknown.
    let yaml = format!(
        "crawlers: {{builtin: false}}\n{ORIGIN}    policy:\n      crawlers: {{GPTBot: block}}\n"
    );
    one_error(&yaml, 7, 18, "no crawler is named `GPTBot`");
}

#[test]
fn the_catalogue_is_checked_with_positions() {
    let yaml = format!("crawlers:\n  extra:\n    - {{name: other, tokens: [otherbot]}}\n{ORIGIN}");
    one_error(&yaml, 3, 14, "reserved for crawlers outside the catalogue");
    let yaml = format!(
        "crawlers:\n  extra:\n    - {{name: MyGoogle, tokens: [mygoogle], pattern: Googlebot}}\n{ORIGIN}"
    );
    let e = one_error(&yaml, 3, 53, "is already the pattern of `Googlebot`");
    assert!(e.to_string().contains("MyGoogle"), "{e}");
    // The same name replaces the built-in entry, pattern included.
    let yaml = format!(
        "crawlers:\n  extra:\n    - {{name: Googlebot, tokens: [googlebot], pattern: Googlebot}}\n{ORIGIN}"
    );
    ok(&yaml);
}

#[test]
fn robots_serve_defaults_by_source() {
    let yaml = "origins:
  - {name: a, hosts: [a.example], upstream: \"127.0.0.1:1\"}
  - {name: b, hosts: [b.example], upstream: \"127.0.0.1:1\", robots: {source: inline, text: \"\"}}
  - {name: c, hosts: [c.example], upstream: \"127.0.0.1:1\", robots: {source: file, path: r.txt}}
  - {name: d, hosts: [d.example], upstream: \"127.0.0.1:1\", robots: {source: origin, serve: true}}
  - {name: e, hosts: [e.example], upstream: \"127.0.0.1:1\", robots: {source: file, path: r.txt, serve: false}}
";
    let serve: Vec<bool> = ok(yaml).origins.iter().map(|o| o.robots.serve).collect();
    assert_eq!(serve, [false, true, true, true, false]);
}

// ---------------------------------------------------------------- verification

#[test]
fn range_list_settings() {
    let c = ok(&format!(
        "verify:
  ranges:
    enabled: false
    mirrors:
      \"https://openai.com/gptbot.json\": \"file:lists/gptbot.json\"
      \"https://developers.google.com/static/crawling/ipranges/common-crawlers.json\": \"http://mirror.internal/googlebot.json\"
    proxy: \"http://user:p%40ss@proxy.internal:3128\"
  dns: {{enabled: false}}
{ORIGIN}"
    ));
    let ranges = &c.verify.ranges;
    assert!(!ranges.enabled);
    assert!(!c.verify.dns.enabled);
    assert_eq!(
        ranges.mirrors,
        [
            (
                "https://openai.com/gptbot.json".to_string(),
                format!("file:{BASE}/lists/gptbot.json")
            ),
            (
                "https://developers.google.com/static/crawling/ipranges/common-crawlers.json"
                    .to_string(),
                "http://mirror.internal/googlebot.json".to_string()
            ),
        ]
    );
    let proxy = ranges.proxy.as_ref().expect("a proxy");
    assert_eq!(
        (
            proxy.host.as_str(),
            proxy.port,
            proxy.credentials.as_deref()
        ),
        ("proxy.internal", 3128, Some("user:p@ss"))
    );
    assert!(
        !format!("{proxy:?}").contains("p@ss"),
        "the password stays out of Debug"
    );
    // Defaults: lists and DNS on, no mirror, no proxy of the config's own.
    let c = ok(ORIGIN);
    assert!(c.verify.ranges.enabled && c.verify.dns.enabled);
    assert!(c.verify.ranges.mirrors.is_empty() && c.verify.ranges.proxy.is_none());

    one_error(
        &format!("verify:\n  ranges:\n    mirrors: {{\"https://example.com/nobody.json\": \"file:x.json\"}}\n{ORIGIN}"),
        3,
        15,
        "no crawler's `verify.ips` names `https://example.com/nobody.json`",
    );
    one_error(
        &format!("verify:\n  ranges:\n    mirrors: {{\"https://openai.com/gptbot.json\": \"gptbot.json\"}}\n{ORIGIN}"),
        3,
        49,
        "mirror `gptbot.json` is neither a URL nor a file: path",
    );
    one_error(
        &format!("verify:\n  ranges: {{proxy: \"socks5://proxy:1080\"}}\n{ORIGIN}"),
        2,
        19,
        "`socks5:` proxies are not supported",
    );
}

#[test]
fn verification_settings() {
    let c = ok(&format!(
        "verify:
  refresh: 12h
  dns: {{servers: [\"127.0.0.1:5353\", \"10.0.0.2\"], timeout: 1s, positive_ttl: 1h, negative_ttl: 5m, max_entries: 1000}}
  web_bot_auth:
    enabled: true
    max_skew: 30s
    agents:
      - {{agent: \"https://ChatGPT.com/\", crawler: chatgpt-user}}
      - {{agent: \"https://bot.example\", crawler: ExampleBot, keys: \"file:keys/example.json\"}}
crawlers:
  extra:
    - name: ExampleBot
      verify:
        ips: [\"https://bot.example/ips.json\", \"file:ranges/extra.json\"]
        rdns: [Crawl.Bot.Example.]
defaults:
  impostors: report
{ORIGIN}    impostors: ignore
  - name: blog
    hosts: [blog.example]
    upstream: \"127.0.0.1:8082\"
"
    ));
    assert_eq!(c.verify.refresh, Duration::from_secs(12 * 3600));
    assert_eq!(
        c.verify.dns,
        DnsConfig {
            enabled: true,
            servers: vec![
                "127.0.0.1:5353".parse().unwrap_or_else(|_| unreachable!()),
                "10.0.0.2:53".parse().unwrap_or_else(|_| unreachable!()),
            ],
            timeout: Duration::from_secs(1),
            positive_ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(300),
            max_entries: 1000,
        }
    );
    assert_eq!(c.verify.web_bot_auth.max_skew, Duration::from_secs(30));
    assert_eq!(
        c.verify.web_bot_auth.agents,
        [
            SignatureAgent {
                agent: "https://chatgpt.com".into(),
                crawler: "ChatGPT-User".into(),
                keys: None,
            },
            SignatureAgent {
                agent: "https://bot.example".into(),
                crawler: "ExampleBot".into(),
                keys: Some(PathBuf::from("/etc/robotsguard/keys/example.json")),
            },
        ]
    );
    assert_eq!(
        c.crawlers.extra[0].verify,
        Some(VerifyData {
            ips: vec![
                "https://bot.example/ips.json".into(),
                "file:/etc/robotsguard/ranges/extra.json".into()
            ],
            rdns: vec!["crawl.bot.example".into()],
            ..Default::default()
        })
    );
    assert_eq!(c.origins[0].impostors, Impostors::Ignore);
    assert_eq!(c.origins[1].impostors, Impostors::Report);
    // Built-in values.
    let plain = ok(ORIGIN);
    assert_eq!(plain.verify, VerifyConfig::default());
    assert_eq!(plain.origins[0].impostors, Impostors::Block);
}

#[test]
fn bad_verification_settings() {
    let all = errors(&format!(
        "verify:
  refresh: 500ms
  dns: {{servers: [dns.example], timeout: 0s, max_entries: 0}}
  web_bot_auth:
    max_skew: 2h
    agents:
      - {{agent: \"http://chatgpt.com\", crawler: ChatGPT-User}}
      - {{agent: \"https://a.example\", crawler: NoSuchBot}}
      - {{agent: \"https://b.example\", crawler: GPTBot, keys: keys.json}}
      - {{crawler: GPTBot}}
crawlers:
  extra:
    - name: ExampleBot
      verify: {{ips: [\"ftp://x.example/l\", ranges.json], rdns: [\"*.example.com\", com]}}
    - name: EmptyBot
      verify: {{}}
defaults:
  impostors: deny
{ORIGIN}"
    ));
    let expected = [
        "t.yaml:2:12: `verify.refresh` must be at least 1s",
        "t.yaml:3:19: `dns.example` is not a name server address",
        "t.yaml:3:42: `timeout` must be longer than 0s",
        "t.yaml:3:59: `max_entries` must be between 1 and 10000000",
        "t.yaml:5:15: `max_skew` must be at most 1h",
        "t.yaml:7:17: agent `http://chatgpt.com` is not an https origin",
        "t.yaml:8:47: no crawler is named `NoSuchBot`",
        "t.yaml:9:61: keys `keys.json` is not a `file:` path",
        "t.yaml:10:9: agent is missing `agent`",
        "t.yaml:14:22: `ftp://x.example/l` is not an http(s) URL",
        "t.yaml:14:43: `ranges.json` is neither a URL nor a file: path",
        "t.yaml:14:64: `*.example.com` is not a DNS name suffix",
        "t.yaml:14:81: `com` is not a DNS name suffix",
        "t.yaml:16:15: `verify` names no `ips` and no `rdns`",
        "t.yaml:18:14: unknown `impostors` `deny`",
    ];
    assert_eq!(all.len(), expected.len(), "{all:#?}");
    for (got, want) in all.iter().zip(expected) {
        assert!(got.starts_with(want), "`{want}` not at the start of: {got}");
    }
}

#[test]
fn web_bot_auth_modes_and_registries() {
    let c = ok(&format!(
        "verify:
  web_bot_auth:
    mode: required
    registries: [\"https://registry.example/agents.txt\", \"file:registry/agents.txt\"]
defaults:
  web_bot_auth: {{mode: observe}}
{ORIGIN}    web_bot_auth: {{mode: optional}}
  - name: blog
    hosts: [blog.example]
    upstream: \"127.0.0.1:8082\"
"
    ));
    let settings = &c.verify.web_bot_auth;
    assert_eq!(settings.mode, WebBotAuthMode::Required);
    assert_eq!(
        settings.registries,
        [
            RegistrySource::Url("https://registry.example/agents.txt".into()),
            RegistrySource::File(PathBuf::from("/etc/robotsguard/registry/agents.txt")),
        ]
    );
    assert_eq!(c.origins[0].web_bot_auth, Some(WebBotAuthMode::Optional));
    assert_eq!(c.origins[1].web_bot_auth, Some(WebBotAuthMode::Observe));
    let plain = ok(ORIGIN);
    assert_eq!(plain.verify.web_bot_auth.mode, WebBotAuthMode::Optional);
    assert_eq!(plain.origins[0].web_bot_auth, None);

    let all = errors(&format!(
        "verify:
  web_bot_auth:
    mode: strict
    registries: [\"ftp://r.example/a\", \"file:\", agents.txt, \"file:a\", \"file:a\"]
{ORIGIN}    web_bot_auth: {{mode: always, tag: x}}
"
    ));
    let expected = [
        "t.yaml:3:11: unknown `mode` `strict`",
        "t.yaml:4:18: registry `ftp://r.example/a` is neither an https URL nor a `file:` path",
        "t.yaml:4:39: registry `file:` is neither",
        "t.yaml:4:48: registry `agents.txt` is neither",
        "t.yaml:4:70: registry `file:a` is listed twice",
    ];
    assert!(all.len() >= expected.len() + 2, "{all:#?}");
    for (got, want) in all.iter().zip(expected) {
        assert!(got.starts_with(want), "`{want}` not at the start of: {got}");
    }
    assert!(
        all.iter().any(|e| e.contains("unknown `mode` `always`")),
        "{all:#?}"
    );
    assert!(
        all.iter().any(|e| e.contains("unknown key `tag`")),
        "{all:#?}"
    );
}

#[test]
fn upstream_tls_with_a_private_ca_and_a_client_certificate() {
    let c = ok("origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"10.0.0.1:443\"
    tls: {ca: tls/ca.pem, client_cert: tls/client.pem, client_key: /secrets/client.key}
");
    assert_eq!(
        c.origins[0].upstream_tls,
        Some(UpstreamTls {
            sni: "shop.example".into(),
            verify: true,
            ca: Some(PathBuf::from("/etc/robotsguard/tls/ca.pem")),
            client_cert: Some((
                PathBuf::from("/etc/robotsguard/tls/client.pem"),
                PathBuf::from("/secrets/client.key")
            )),
        })
    );
    one_error(
        "origins:
  - name: shop
    hosts: [shop.example]
    upstream: \"10.0.0.1:443\"
    tls: {client_cert: tls/client.pem}
",
        5,
        10,
        "`client_cert` and `client_key` go together",
    );
}

#[test]
fn state_defaults_to_memory_and_reads_the_shared_store() {
    assert_eq!(ok(ORIGIN).state, StateConfig::Memory);
    assert_eq!(
        ok(&format!("state: {{backend: memory}}\n{ORIGIN}")).state,
        StateConfig::Memory
    );
    let c = ok(&format!(
        "state:\n  backend: redis\n  redis: {{url: \"redis://:s3cret@10.0.0.5:6380/2\"}}\n{ORIGIN}"
    ));
    let StateConfig::Redis(redis) = &c.state else {
        panic!("redis backend expected: {:?}", c.state);
    };
    assert_eq!(redis.url, "redis://:s3cret@10.0.0.5:6380/2");
    assert_eq!(redis.prefix, "robotsguard:");
    assert_eq!(redis.timeout, Duration::from_millis(50));
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "the password never reaches a debug print"
    );
    let c = ok(&format!(
        "state:\n  backend: redis\n  redis: {{url: \"unix:///run/valkey.sock\", prefix: \"shop-rg:\", timeout: 200ms}}\n{ORIGIN}"
    ));
    let StateConfig::Redis(redis) = &c.state else {
        panic!("redis backend expected");
    };
    assert_eq!(redis.prefix, "shop-rg:");
    assert_eq!(redis.timeout, Duration::from_millis(200));
}

#[test]
fn state_url_file_is_read_relative_to_the_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("redis-url"), "redis://10.1.2.3:6379/0\n").expect("written");
    let yaml = format!("state:\n  backend: redis\n  redis: {{url_file: redis-url}}\n{ORIGIN}");
    let c = load_str(&yaml, "t.yaml", dir.path()).expect("accepted");
    let StateConfig::Redis(redis) = &c.state else {
        panic!("redis backend expected");
    };
    assert_eq!(redis.url, "redis://10.1.2.3:6379/0");
    assert_eq!(redis.url_file, Some(dir.path().join("redis-url")));
    std::fs::write(dir.path().join("redis-url"), "  \n").expect("written");
    let Err(errors) = load_str(&yaml, "t.yaml", dir.path()) else {
        panic!("an empty URL file is refused");
    };
    assert!(errors.to_string().contains("is empty"), "{errors}");
}

#[test]
fn state_errors_point_at_the_key() {
    one_error(
        &format!("state: {{backend: redsi}}\n{ORIGIN}"),
        1,
        18,
        "did you mean `redis`",
    );
    one_error(
        &format!("state:\n  backend: redis\n{ORIGIN}"),
        2,
        3,
        "`state.backend: redis` needs `state.redis`",
    );
    one_error(
        &format!("state:\n  redis: {{url: \"redis://127.0.0.1/0\"}}\n{ORIGIN}"),
        2,
        10,
        "`state.backend` is `memory`",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{prefix: x}}\n{ORIGIN}"),
        3,
        10,
        "missing `url`",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"http://127.0.0.1/\"}}\n{ORIGIN}"),
        3,
        16,
        "not a Redis URL",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"redis://127.0.0.1/\", url_file: f}}\n{ORIGIN}"),
        3,
        48,
        "not both",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"redis://127.0.0.1/\", timeout: 0s}}\n{ORIGIN}"),
        3,
        47,
        "must be longer than 0s",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"redis://127.0.0.1/\", prefix: \"a b\"}}\n{ORIGIN}"),
        3,
        46,
        "without spaces",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url_file: /nonexistent/robotsguard-redis-url}}\n{ORIGIN}"),
        3,
        21,
        "cannot read",
    );
}

#[test]
fn state_over_tls() {
    let c = ok(&format!(
        "state:\n  backend: redis\n  redis:\n    url: \"rediss://:pw@redis.internal:6380/0\"\n    \
         tls: {{ca: tls/redis-ca.pem, client_cert: /etc/rg/client.pem, client_key: /etc/rg/client.key}}\n{ORIGIN}"
    ));
    let StateConfig::Redis(redis) = &c.state else {
        panic!("redis backend expected");
    };
    let tls = redis.tls.as_ref().expect("tls");
    assert_eq!(tls.ca, Some(PathBuf::from(BASE).join("tls/redis-ca.pem")));
    assert_eq!(
        tls.client_cert,
        Some((
            PathBuf::from("/etc/rg/client.pem"),
            PathBuf::from("/etc/rg/client.key")
        ))
    );
    // The system's roots need no `tls`.
    let c = ok(&format!(
        "state:\n  backend: redis\n  redis: {{url: \"rediss://redis.internal:6380/0\"}}\n{ORIGIN}"
    ));
    let StateConfig::Redis(redis) = &c.state else {
        panic!("redis backend expected");
    };
    assert_eq!(redis.tls, None);

    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"redis://127.0.0.1/\", tls: {{ca: ca.pem}}}}\n{ORIGIN}"),
        3,
        43,
        "`state.redis.tls` needs a `rediss://` URL",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"rediss://127.0.0.1/#insecure\"}}\n{ORIGIN}"),
        3,
        16,
        "turns off checking the store's certificate",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"rediss://127.0.0.1/\", tls: {{client_cert: c.pem}}}}\n{ORIGIN}"),
        3,
        44,
        "`client_cert` and `client_key` go together",
    );
    one_error(
        &format!("state:\n  backend: redis\n  redis: {{url: \"rediss://127.0.0.1/\", tls: {{cafile: ca.pem}}}}\n{ORIGIN}"),
        3,
        45,
        "unknown key `cafile` in `state.redis.tls`",
    );
}

#[test]
fn the_store_tls_files_are_checked_when_the_client_is_made() {
    let dir = tempfile::tempdir().expect("temp dir");
    let yaml = |tls: &str| {
        format!("state:\n  backend: redis\n  redis: {{url: \"rediss://127.0.0.1:6380/0\", tls: {tls}}}\n{ORIGIN}")
    };
    let client = |tls: &str| {
        let c = load_str(&yaml(tls), "t.yaml", dir.path()).expect("the config itself is fine");
        let StateConfig::Redis(redis) = &c.state else {
            panic!("redis backend expected");
        };
        redis.client().map(|_| ())
    };
    let missing = client("{ca: nowhere.pem}").expect_err("a missing CA file");
    assert!(
        matches!(&missing, RedisSetupError::Tls(why) if why.contains("nowhere.pem")),
        "{missing:?}"
    );
    std::fs::write(dir.path().join("empty.pem"), "not a certificate\n").expect("written");
    let empty = client("{ca: empty.pem}").expect_err("no certificate");
    assert!(
        matches!(&empty, RedisSetupError::Tls(why) if why.contains("holds no PEM certificate")),
        "{empty:?}"
    );
}

#[test]
fn state_is_restart_only() {
    let old = ok(ORIGIN);
    let new = ok(&format!(
        "state:\n  backend: redis\n  redis: {{url: \"redis://127.0.0.1:6379/0\"}}\n{ORIGIN}"
    ));
    assert_eq!(restart_required(&old, &new), vec!["state"]);
    let mut kept = new.clone();
    keep_restart_only(&mut kept, &old);
    assert_eq!(kept.state, StateConfig::Memory);
}

// ------------------------------------------------------------------ catalogue feeds

#[test]
fn catalogue_feeds_and_their_checks() {
    use crate::crawlers::feed::FeedFormat;
    let c = ok(&format!(
        "crawlers:
  feeds:
    - {{url: \"https://feeds.example/robots.json\", format: ai-robots-txt, refresh: 6h}}
    - {{url: \"file:feeds/ours.yaml\"}}
{ORIGIN}"
    ));
    assert_eq!(c.crawlers.feeds.len(), 2);
    assert_eq!(c.crawlers.feeds[0].format, FeedFormat::AiRobotsTxt);
    assert_eq!(c.crawlers.feeds[0].refresh, Duration::from_secs(6 * 3600));
    assert_eq!(c.crawlers.feeds[1].format, FeedFormat::Robotsguard);
    assert_eq!(c.crawlers.feeds[1].refresh, Duration::from_secs(24 * 3600));
    assert!(c.crawlers.feeds[1].url.starts_with("file:/"));
    assert!(c.crawlers.feeds[1].file().is_some());
    one_error(
        &format!("crawlers:\n  feeds:\n    - {{url: \"ftp://x.example/f\"}}\n{ORIGIN}"),
        3,
        13,
        "neither an http(s) URL nor a file: path",
    );
    one_error(
        &format!(
            "crawlers:\n  feeds:\n    - {{url: \"https://x.example/f\", format: json}}\n{ORIGIN}"
        ),
        3,
        44,
        "format",
    );
    one_error(
        &format!(
            "crawlers:\n  feeds:\n    - {{url: \"https://x.example/f\", refresh: 10ms}}\n{ORIGIN}"
        ),
        3,
        45,
        "at least 1s",
    );
    one_error(
        &format!("crawlers:\n  feeds:\n    - {{url: \"https://x.example/f\"}}\n    - {{url: \"https://x.example/f\"}}\n{ORIGIN}"),
        4,
        13,
        "listed twice",
    );
    one_error(
        &format!("crawlers:\n  feeds:\n    - {{format: robotsguard}}\n{ORIGIN}"),
        3,
        7,
        "missing `url`",
    );
    // With feeds, a policy may name a crawler a feed will bring.
    let c = ok(&format!(
        "crawlers:\n  feeds: [{{url: \"https://x.example/f\"}}]\n{ORIGIN}    policy:\n      crawlers: {{NovaFetch: block}}\n"
    ));
    assert_eq!(c.origins[0].policy.crawlers[0].0, "NovaFetch");
}

#[test]
fn range_list_formats_in_extra_crawlers() {
    use crate::crawlers::ListFormat;
    let c = ok(&format!(
        "crawlers:
  extra:
    - name: PageBot
      verify:
        ips:
          - \"https://a.example/plain.json\"
          - {{url: \"https://a.example/j.json\", format: jafar}}
          - {{url: \"https://a.example/p.json\", format: {{json_pointer: \"/prefixes/*/ip_prefix\"}}}}
          - {{url: \"https://a.example/page.html\", format: {{regex: \"IP: ([0-9./]+)\"}}}}
{ORIGIN}"
    ));
    let verify = c.crawlers.extra[0].verify.clone().unwrap_or_default();
    assert_eq!(verify.ips.len(), 4);
    assert_eq!(
        verify.format_of("https://a.example/plain.json"),
        ListFormat::Auto
    );
    assert_eq!(
        verify.format_of("https://a.example/j.json"),
        ListFormat::Jafar
    );
    assert_eq!(
        verify.format_of("https://a.example/p.json"),
        ListFormat::JsonPointer("/prefixes/*/ip_prefix".into())
    );
    assert_eq!(
        verify.format_of("https://a.example/page.html"),
        ListFormat::Regex("IP: ([0-9./]+)".into())
    );
    for (format, says) in [
        ("{regex: \"no group\"}", "exactly one"),
        ("{regex: \"(\"}", "does not compile"),
        ("{json_pointer: \"prefixes\"}", "start with"),
        ("{json_pointer: \"/a\", regex: \"(a)\"}", "one of"),
        ("xml", "a list `format` is"),
    ] {
        let all = errors(&format!(
            "crawlers:\n  extra:\n    - name: PageBot\n      verify:\n        ips: [{{url: \"https://a.example/l\", format: {format}}}]\n{ORIGIN}"
        ));
        assert!(all.iter().any(|e| e.contains(says)), "{format}: {all:?}");
    }
}

#[test]
fn purpose_policies_take_a_word_or_an_action_with_multi_purpose() {
    use crate::crawlers::{Purpose, Purposes};
    let c = ok(&format!(
        "defaults:
  policy:
    purposes: {{training: {{action: block, multi_purpose: block}}, agent: license}}
  content_signals: {{multi_purpose: block}}
{ORIGIN}"
    ));
    let policy = &c.origins[0].policy;
    assert_eq!(
        policy.purposes[Purpose::Training.index()],
        Some(PurposeRule {
            action: Action::Block,
            multi_purpose: MultiPurpose::Block,
        })
    );
    assert_eq!(
        policy.purposes[Purpose::Agent.index()],
        Some(PurposeRule {
            action: Action::License,
            multi_purpose: MultiPurpose::Allow,
        })
    );
    assert_eq!(
        c.origins[0].content_signals.multi_purpose,
        MultiPurpose::Block
    );
    assert_eq!(
        policy.purposes_refused(),
        Purposes::of(&[Purpose::Training, Purpose::Agent])
    );
    one_error(
        &format!(
            "defaults:\n  policy:\n    purposes: {{training: {{multi_purpose: block}}}}\n{ORIGIN}"
        ),
        3,
        26,
        "`policy.purposes.training` needs `action`",
    );
    one_error(
        &format!("defaults:\n  policy:\n    purposes: {{training: {{action: block, multi: block}}}}\n{ORIGIN}"),
        3,
        42,
        "unknown key `multi`",
    );
    one_error(
        &format!("defaults:\n  content_signals: {{multi_purpose: never}}\n{ORIGIN}"),
        2,
        36,
        "`never`",
    );
}

#[test]
fn a_refused_purpose_spares_token_crawlers_and_search_crawlers_unless_asked() {
    use crate::crawlers::{Purpose, Purposes};
    let c = ok(&format!(
        "defaults:\n  policy:\n    purposes: {{training: block, other: pass}}\n{ORIGIN}"
    ));
    let policy = &c.origins[0].policy;
    let both = Purposes::of(&[Purpose::Search, Purpose::Training]);
    let token = Purposes::of(&[Purpose::Training]);
    // Googlebot: its training has a token; no other purpose is written: nothing applies.
    let googlebot = policy.purpose_action(both, token);
    assert_eq!(googlebot.action, None);
    assert_eq!(googlebot.spared.by_token, token);
    // bingbot: no token, but it searches too.
    let bingbot = policy.purpose_action(both, Purposes::default());
    assert_eq!(bingbot.action, None);
    assert_eq!(bingbot.spared.for_search, token);
    // CCBot: training and other, no search: the refusal stands over the pass.
    let ccbot = policy.purpose_action(
        Purposes::of(&[Purpose::Training, Purpose::Other]),
        Purposes::default(),
    );
    assert_eq!(ccbot.action, Some((Action::Block, Purpose::Training)));
    assert!(ccbot.spared.is_empty());
    // `multi_purpose: block` refuses bingbot, never Googlebot.
    let strict = ok(&format!(
        "defaults:\n  policy:\n    purposes: {{training: {{action: block, multi_purpose: block}}}}\n{ORIGIN}"
    ));
    let policy = &strict.origins[0].policy;
    assert_eq!(
        policy.purpose_action(both, Purposes::default()).action,
        Some((Action::Block, Purpose::Training))
    );
    assert_eq!(policy.purpose_action(both, token).action, None);
    // Refusing search itself refuses a search crawler.
    let search = ok(&format!(
        "defaults:\n  policy:\n    purposes: {{search: block}}\n{ORIGIN}"
    ));
    assert_eq!(
        search.origins[0].policy.purpose_action(both, token).action,
        Some((Action::Block, Purpose::Search))
    );
}

#[test]
fn extra_crawlers_name_their_control_tokens() {
    use crate::crawlers::Purpose;
    let c = ok(&format!(
        "crawlers:
  extra:
    - {{name: DualBot, category: search, purposes: [search, training], controls: {{training: DualBot-Extended}}}}
{ORIGIN}"
    ));
    assert_eq!(
        c.crawlers.extra[0].controls.token(Purpose::Training),
        Some("DualBot-Extended")
    );
    let all = errors(&format!(
        "crawlers:
  extra:
    - {{name: DualBot, category: search, controls: {{training: X-Extended, agent: Bot2, serch: Y}}}}
    - {{name: OwnBot, category: search, controls: {{search: ownbot}}}}
{ORIGIN}"
    ));
    let joined = all.join("\n");
    for needle in [
        "`controls` names training, which is not one of this crawler's purposes",
        "`controls` names agent",
        "unknown purpose `serch`",
        "control token `ownbot` is one of this crawler's own tokens",
    ] {
        assert!(joined.contains(needle), "{needle}: {joined}");
    }
}

// ---------------------------------------------------------------- client prefixes

#[test]
fn client_prefixes_are_read_merged_and_refused_out_of_range_at_their_position() {
    let c = ok(&format!(
        "defaults:\n  offenders: {{prefix: {{ipv6: 56}}}}\n  crawl_delay: {{prefix: {{ipv4: 24}}}}\n{ORIGIN}    offenders: {{prefix: {{ipv4: 30}}}}\n"
    ));
    let origin = &c.origins[0];
    assert_eq!(
        origin.offenders.prefix,
        crate::config::ClientPrefix { ipv4: 30, ipv6: 56 },
        "the origin's key over the defaults', key by key"
    );
    assert_eq!(
        origin.crawl_delay.prefix,
        crate::config::ClientPrefix { ipv4: 24, ipv6: 64 }
    );
    assert_eq!(
        ok(ORIGIN).origins[0].offenders.prefix,
        crate::config::ClientPrefix { ipv4: 32, ipv6: 64 }
    );
    for (yaml, line, column, part) in [
        (
            format!("{ORIGIN}    offenders: {{prefix: {{ipv4: 8}}}}\n"),
            5,
            32,
            "`ipv4` must be between 16 and 32, not 8",
        ),
        (
            format!("{ORIGIN}    offenders:\n      prefix:\n        ipv6: 129\n"),
            7,
            15,
            "`ipv6` must be between 32 and 128, not 129",
        ),
        (
            format!("{ORIGIN}    crawl_delay: {{prefix: {{ipv6: 16}}}}\n"),
            5,
            34,
            "`ipv6` must be between 32 and 128, not 16",
        ),
        (
            format!("{ORIGIN}    crawl_delay: {{prefix: {{ipv5: 16}}}}\n"),
            5,
            28,
            "unknown key `ipv5` in `prefix`",
        ),
        (
            format!("{ORIGIN}    offenders: {{prefix: 64}}\n"),
            5,
            25,
            "`prefix` must be a mapping",
        ),
    ] {
        one_error(&yaml, line, column, part);
    }
}

// ---------------------------------------------------------------- rate budgets

#[test]
fn rate_budgets_are_read_by_crawler_category_and_purpose_and_bad_rates_refused_in_place() {
    use crate::config::{RatePer, RateScope};
    use crate::crawlers::{Category, Purpose, Purposes};
    let c = ok(&format!(
        "defaults:\n  policy:\n    rates: {{search: 60/m, training: \"10/h\"}}\n{ORIGIN}    policy:\n      rates:\n        googlebot: {{rate: 600/m, per: crawler}}\n        ai-training: 2/s\n"
    ));
    let rates = &c.origins[0].policy.rates;
    let (rule, scope) = rates
        .rule_for(
            "Googlebot",
            Category::Search,
            Purposes::of(&[Purpose::Search]),
        )
        .expect("a rule");
    assert_eq!(
        (rule.rate_text(), rule.per, scope),
        ("600/m".to_owned(), RatePer::Crawler, RateScope::Crawler)
    );
    let (rule, scope) = rates
        .rule_for(
            "bingbot",
            Category::Search,
            Purposes::of(&[Purpose::Search]),
        )
        .expect("the category's");
    assert_eq!(
        (rule.rate_text(), rule.per, scope),
        ("60/m".to_owned(), RatePer::Client, RateScope::Category)
    );
    let (rule, scope) = rates
        .rule_for(
            "GPTBot",
            Category::AiTraining,
            Purposes::of(&[Purpose::Training]),
        )
        .expect("the category's");
    assert_eq!(
        (rule.rate_text(), scope),
        ("2/s".to_owned(), RateScope::Category)
    );
    // `search` is a purpose too: a crawler of another category that searches gets it, and of
    // several purposes the strictest.
    let (rule, scope) = rates
        .rule_for(
            "OAI-SearchBot",
            Category::AiSearch,
            Purposes::of(&[Purpose::Search, Purpose::Training]),
        )
        .expect("a purpose's");
    assert_eq!(
        (rule.rate_text(), scope),
        ("10/h".to_owned(), RateScope::Purpose)
    );
    assert!(rates
        .rule_for(
            "Archiver",
            Category::Archive,
            Purposes::of(&[Purpose::Other])
        )
        .is_none());
    assert!(ok(ORIGIN).origins[0].policy.rates.is_empty());

    for (value, column, part) in [
        ("\"60/min\"", 30, "`60/min` is not a rate"),
        ("\"0/s\"", 30, "must allow from 1 to 1000000 requests"),
        ("\"1000001/h\"", 30, "must allow from 1 to 1000000 requests"),
        ("\"-5/s\"", 30, "is not a rate"),
        ("\"5\"", 30, "is not a rate"),
        ("60", 30, "must be a rate such as `60/m`, not"),
        ("{per: crawler}", 30, "`policy.rates.GPTBot` needs `rate`"),
        ("{rate: 5/s, per: everyone}", 47, "everyone"),
    ] {
        one_error(
            &format!("{ORIGIN}    policy: {{rates: {{GPTBot: {value}}}}}\n"),
            5,
            column,
            part,
        );
    }
    one_error(
        &format!("{ORIGIN}    policy: {{rates: {{GTPBot: 5/s}}}}\n"),
        5,
        22,
        "no crawler, category or purpose is named `GTPBot`; did you mean `GPTBot`?",
    );
}

// ---------------------------------------------------------------- events

#[test]
fn events_are_read_with_their_defaults() {
    let scratch = scratch_dir("events");
    let secret = scratch.path().join("hook.secret");
    std::fs::write(&secret, "key\n").unwrap_or_else(|e| panic!("{e}"));
    let c = ok(&format!(
        "events:\n  private_targets: [\"10.0.0.0/8\"]\n  webhooks:\n    - {{url: \"http://10.1.2.3/hook\", secret_file: {}}}\n{ORIGIN}",
        secret.display()
    ));
    let hook = &c.events.webhooks[0];
    assert_eq!(hook.events.len(), 6, "every kind by default");
    assert_eq!((hook.retries, hook.timeout), (5, Duration::from_secs(5)));
    assert_eq!(c.events.impostor_surge_per_minute, 60);
    assert_eq!(
        c.events.firewall,
        crate::config::FirewallExport::AddressBans
    );
    assert_eq!(
        crate::config::read_webhook_secret(&secret).unwrap_or_default(),
        b"key"
    );
    assert!(ok(ORIGIN).events.webhooks.is_empty());
}

#[test]
fn bad_events_are_errors_at_their_position() {
    let scratch = scratch_dir("bad-events");
    let secret = scratch.path().join("hook.secret");
    std::fs::write(&secret, "key\n").unwrap_or_else(|e| panic!("{e}"));
    let hook = |url: &str| {
        format!(
            "events:\n  webhooks:\n    - {{url: \"{url}\", secret_file: {}}}\n{ORIGIN}",
            secret.display()
        )
    };
    one_error(
        &hook("http://127.0.0.1:9/h"),
        3,
        13,
        "private address (127.0.0.1)",
    );
    one_error(&hook("https://[fd00::1]/h"), 3, 13, "private address");
    one_error(&hook("http://hooks.example.com/h"), 3, 13, "plain http");
    one_error(&hook("ftp://hooks.example.com/h"), 3, 13, "not http(s)");
    one_error(
        &format!("events:\n  firewall: {{export: everything}}\n{ORIGIN}"),
        2,
        22,
        "unknown `events.firewall.export`",
    );
    let kinds = errors(&format!(
        "events:\n  webhooks:\n    - {{url: \"https://h.example/\", secret_file: {}, events: [bans]}}\n{ORIGIN}",
        secret.display()
    ));
    assert!(
        kinds[0].contains("t.yaml:3:") && kinds[0].contains("did you mean"),
        "{kinds:?}"
    );
    let missing = errors(&format!(
        "events:\n  webhooks:\n    - {{url: \"https://h.example/\", secret_file: {}}}\n{ORIGIN}",
        scratch.path().join("missing").display()
    ));
    assert!(missing[0].contains("secret_file"), "{missing:?}");
}

#[test]
fn bouncer_keys_must_be_long_enough() {
    let scratch = scratch_dir("bouncer-keys");
    let keys = scratch.path().join("keys");
    std::fs::write(&keys, "# comment\nshort\n").unwrap_or_else(|e| panic!("{e}"));
    let yaml = format!(
        "admin: {{address: \"127.0.0.1:9090\", bouncer_keys_file: {}}}\n{ORIGIN}",
        keys.display()
    );
    let errs = errors(&yaml);
    assert!(
        errs[0].contains("bouncer_keys_file") && errs[0].contains("5 bytes"),
        "{errs:?}"
    );
    std::fs::write(&keys, "# comment\n0123456789abcdef\n\nfedcba9876543210\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        crate::config::read_bouncer_keys(&keys).unwrap_or_default(),
        ["0123456789abcdef", "fedcba9876543210"]
    );
    assert!(ok(&yaml).admin.bouncer_keys_file.is_some());
}

#[test]
fn evidence_errors_point_at_the_key() {
    one_error(
        &format!("evidence:\n  enabled: true\n{ORIGIN}"),
        2,
        3,
        "`evidence.enabled` needs `evidence.key_file`",
    );
    one_error(
        &format!("evidence: {{events: [violation, bans]}}\n{ORIGIN}"),
        1,
        32,
        "did you mean `ban`",
    );
    one_error(
        &format!("evidence: {{max_file_size: 1KiB}}\n{ORIGIN}"),
        1,
        27,
        "at least 64KiB",
    );
    one_error(
        &format!("evidence: {{replica: \"a/b\"}}\n{ORIGIN}"),
        1,
        21,
        "not a replica name",
    );
    let config = load(&format!(
        "evidence: {{enabled: true, key_file: k.pem, events: [ban, ban], retention: 7d}}\n{ORIGIN}"
    ))
    .expect("valid");
    assert!(config.evidence.records(crate::config::EvidenceEvent::Ban));
    assert!(!config
        .evidence
        .records(crate::config::EvidenceEvent::Violation));
    assert_eq!(config.evidence.events.len(), 1);
    assert_eq!(
        config.evidence.retention,
        Duration::from_secs(7 * 24 * 60 * 60)
    );
    // Off by default, every event selected once enabled.
    let default = load(ORIGIN).expect("valid");
    assert!(!default.evidence.enabled);
    assert_eq!(default.evidence.events.len(), 4);
}

#[test]
fn response_signals_merge_over_defaults_and_refuse_other_statuses_where_written() {
    use crate::config::{ResponseSignalsConfig, SignalAction};
    let c = ok(&format!(
        "defaults:\n  response_signals: {{action: enforce, status: 402}}\n{ORIGIN}  - name: blog\n    hosts: [blog.example]\n    upstream: \"127.0.0.1:8082\"\n    response_signals: {{status: 403}}\n"
    ));
    assert_eq!(
        c.origins[0].response_signals,
        ResponseSignalsConfig {
            action: SignalAction::Enforce,
            status: 402,
        }
    );
    // Key by key: the origin's status, the defaults' action.
    assert_eq!(
        c.origins[1].response_signals,
        ResponseSignalsConfig {
            action: SignalAction::Enforce,
            status: 403,
        }
    );
    assert_eq!(
        ok(ORIGIN).origins[0].response_signals,
        ResponseSignalsConfig::default()
    );
    one_error(
        &format!("defaults:\n  response_signals: {{status: 404}}\n{ORIGIN}"),
        2,
        30,
        "`status` must be 403 or 402, not 404",
    );
    one_error(
        &format!("defaults:\n  response_signals: {{status: forbidden}}\n{ORIGIN}"),
        2,
        30,
        "`status` must be 403 or 402",
    );
    one_error(
        &format!("defaults:\n  response_signals: {{action: block}}\n{ORIGIN}"),
        2,
        30,
        "`block`",
    );
    one_error(
        &format!("defaults:\n  response_signals: {{stauts: 402}}\n{ORIGIN}"),
        2,
        22,
        "did you mean `status`",
    );
}
