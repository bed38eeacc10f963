//! Walks the parsed YAML tree into a `Config`: each top-level section is read by its own
//! reader in `sections/`; this runs them in order and the checks that span sections
//! (listeners against the admin address, the catalogue the origins refer to).

use std::net::SocketAddr;
use std::path::Path;

use super::error::Sink;
use super::reader::{self, Table};
use super::sections::{
    access_log, admin, check_admin_clash, check_catalogue, check_decision_clashes, crawlers,
    decision, defaults, events, evidence, limits, listeners, origins, preview, reports,
    shutdown_grace, state, verify, AdminConfig, CrawlersConfig, EvidenceConfig, Limits, Listener,
    PreviewConfig, ReportsConfig, StateConfig, VerifyConfig, DEFAULT_ADMIN, DEFAULT_GRACE,
    DEFAULT_LISTEN, MAX_THREADS, TOP,
};
use super::tree::Node;
use super::Config;

/// Builds the config, reporting problems to `sink`. The returned value is
/// only meaningful when `sink` stayed empty; on errors, parts are filled
/// with defaults so checking can go on.
pub(crate) fn build(root: &Node, sink: &mut Sink, base_dir: &Path) -> Config {
    let mut config = Config {
        listen: vec![Listener {
            address: DEFAULT_LISTEN,
            tls: None,
            proxy_protocol: false,
            http2: false,
        }],
        admin: AdminConfig {
            address: DEFAULT_ADMIN,
            token_file: None,
            read_token_file: None,
            hosts: Vec::new(),
            bouncer_keys_file: None,
        },
        limits: Limits::default(),
        trusted_proxies: Vec::new(),
        access_log: None,
        threads: None,
        shutdown_grace: DEFAULT_GRACE,
        crawlers: CrawlersConfig {
            builtin: true,
            generic: true,
            extra: Vec::new(),
            feeds: Vec::new(),
        },
        origins: Vec::new(),
        verify: VerifyConfig::default(),
        state: StateConfig::default(),
        state_dir: None,
        reports: ReportsConfig::default(),
        preview: PreviewConfig::default(),
        decision: None,
        events: super::EventsConfig::default(),
        evidence: EvidenceConfig::default(),
        source_path: None,
    };
    let Some(top) = Table::read(sink, root, &TOP, "the config") else {
        return config;
    };

    let decision = decision(sink, top.get("decision"));
    let listen = listeners(
        sink,
        top.get("listen"),
        base_dir,
        top.get("decision").is_some(),
    );
    if let Some(n) = top.get("admin") {
        if let Some((admin, pos)) = admin(sink, n, base_dir) {
            check_admin_clash(sink, admin.address, pos, &listen);
            config.admin = admin;
        }
    } else {
        check_admin_clash(sink, DEFAULT_ADMIN, top.pos, &listen);
    }
    if let Some((decision, positions)) = decision {
        let taken: Vec<(&str, SocketAddr)> = listen
            .iter()
            .map(|(l, _)| ("listen", l.address))
            .chain([("admin", config.admin.address)])
            .collect();
        check_decision_clashes(sink, &decision, &positions, &taken);
        config.decision = Some(decision);
    }
    // `listen: []` beside `decision` runs the decision listener alone.
    let decision_only = config.decision.is_some()
        && top
            .get("listen")
            .is_some_and(|n| reader::one_or_many(n).is_empty());
    if !listen.is_empty() || decision_only {
        config.listen = listen.into_iter().map(|(l, _)| l).collect();
    }

    config.threads = top
        .get("threads")
        .and_then(|n| reader::integer(sink, n, "threads", 1, MAX_THREADS.into()))
        .and_then(|n| usize::try_from(n).ok());

    if let Some(n) = top.get("shutdown") {
        config.shutdown_grace = shutdown_grace(sink, n);
    }

    if let Some(n) = top.get("limits") {
        config.limits = limits(sink, n);
    }
    if let Some(n) = top.get("trusted_proxies") {
        config.trusted_proxies = reader::networks(sink, n, "trusted_proxies");
    }
    if let Some(n) = top.get("access_log") {
        config.access_log = access_log(sink, n, base_dir);
    }

    let errors_before = sink.count();
    let (crawlers_config, extra_positions) =
        crawlers(sink, top.get("crawlers"), config.crawlers, base_dir);
    config.crawlers = crawlers_config;
    // Entries already reported would only be reported again by the catalogue.
    let check = sink.count() == errors_before;
    let known = check_catalogue(sink, &config.crawlers, &extra_positions, check);
    config.verify = verify(sink, top.get("verify"), base_dir, &known, &config.crawlers);
    (config.state, config.state_dir) = state(sink, top.get("state"), base_dir);
    if let Some(n) = top.get("reports") {
        config.reports = reports(sink, n);
    }
    config.preview = preview(sink, top.get("preview"));
    config.events = events(sink, top.get("events"), base_dir);
    if let Some(n) = top.get("evidence") {
        config.evidence = evidence(sink, n, base_dir);
    }
    let defaults = defaults(sink, top.get("defaults"), &known, base_dir);
    config.origins = origins(sink, &top, &defaults, base_dir, &known);
    config
}
