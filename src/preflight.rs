//! What a config needs from the machine it runs on: the files it names exist and are usable.
//! One function, so that `robotsguard validate`, `serve` before it starts and a config reload
//! before it applies refuse exactly the same configs (`serve` also binds its addresses, which
//! `validate` cannot check beside a running instance).
//!
//! Loading a config ([`crate::config::load_file`]) reads no file but the config (and the
//! Redis `url_file`, unless only the config is checked); this reads every other one.

use crate::config::{AccessLogPath, Config, RobotsSource, StateConfig};

/// Every problem that keeps `config` from running here, one line each (empty: none): the crawler
/// catalogue and its `file:` feeds, the `file:` Web Bot Auth registries, each origin's upstream TLS files, each TLS listener's certificates, each
/// `file` robots.txt, the shared store's URL and certificates, the admin token file, and the
/// access log file's directory.
pub fn problems(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(e) = crate::snapshot::build_identifier(config) {
        problems.push(e.to_string());
    }
    // A feed in a file is read like any other file the config names: a broken one is refused
    // now rather than silently leaving its crawlers out.
    problems.extend(crate::feeds::file_problems(&config.crawlers.feeds));
    // So is a registry of signing agents in a file, with the cards it keeps beside it.
    if config.verify.web_bot_auth.enabled {
        problems.extend(crate::verify::registry_file_problems(
            &config.verify.web_bot_auth.registries,
        ));
    }
    for origin in &config.origins {
        if let Some(tls) = &origin.upstream_tls {
            if let Err(e) = crate::upstream::tls::load(tls) {
                problems.push(format!("upstream TLS: origin `{}`: {e}", origin.name));
            }
        }
    }
    for listener in &config.listen {
        if let Some(tls) = &listener.tls {
            if let Err(e) = crate::listener_tls::ListenerCertificates::check(tls) {
                problems.push(format!("listener {}: {e}", listener.address));
            }
        }
    }
    for origin in &config.origins {
        // A missing file would make every crawler of the origin refused (RFC 9309's
        // unreachable robots.txt), Googlebot included: almost always a wrong path.
        if let RobotsSource::File { path } = &origin.robots.source {
            let opened = std::fs::File::open(path).and_then(|file| file.metadata());
            let problem = match opened {
                Err(e) => Some(e.to_string()),
                Ok(metadata) if metadata.is_dir() => Some("a directory, not a file".to_string()),
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                problems.push(format!(
                    "origin `{}`: robots.txt file `{}`: {problem}",
                    origin.name,
                    path.display()
                ));
            }
        }
    }
    if let StateConfig::Redis(redis) = &config.state {
        if let Err(e) = redis.client() {
            problems.push(format!("state.redis: {e}"));
        }
    }
    for (key, file) in [
        ("token_file", &config.admin.token_file),
        ("read_token_file", &config.admin.read_token_file),
    ] {
        if let Some(path) = file {
            if let Err(e) = crate::admin::read_token(path) {
                problems.push(format!("admin {key}: {e}"));
            }
        }
    }
    // A signing key that cannot be read would leave violations without their evidence.
    problems.extend(crate::evidence::problems(config));
    // The file itself is made by the first access line; its directory must be there.
    let access_file = config.access_log.as_ref().and_then(|log| match &log.path {
        Some(AccessLogPath::File(file)) => Some(file),
        _ => None,
    });
    if let Some(file) = access_file {
        let directory = file.parent().unwrap_or(std::path::Path::new("/"));
        if !directory.is_dir() {
            problems.push(format!(
                "access_log.path `{}`: the directory `{}` does not exist",
                file.display(),
                directory.display()
            ));
        }
    }
    problems
}
