//! Warnings about a config that `serve` accepts but that is probably not meant, from what the
//! policy decides: an origin that refuses a search engine's crawler on every path drops out of
//! its search results. `validate` prints them (and `--strict` fails on them), `serve` and every
//! reload log them and count them in `robotsguard_config_warnings_total{kind}`.

use crate::config::{Action, Config, ConfigWarning, Mode, PolicyConfig, WARNING_SEARCH_REFUSED};
use crate::crawlers::{Catalogue, Category, CrawlerDef};

use super::{policy_action, PolicyBy};

/// Origins a warning names; more are counted.
const ORIGINS_NAMED: usize = 10;

/// Every warning about `config` under the crawler catalogue `catalogue`: those of the config
/// alone ([`crate::config::warnings`]), then the search crawlers refused on every path.
pub fn config_warnings(config: &Config, catalogue: &Catalogue) -> Vec<ConfigWarning> {
    let mut warnings = crate::config::warnings(config);
    warnings.extend(search_refusals(config, catalogue));
    warnings
}

/// Counts `warnings` in `robotsguard_config_warnings_total{kind}` (every kind's series exists
/// once this ran, so an alert sees the first warning of a kind) and logs each as a `warning:`
/// line: what `serve` does with them at start-up and every reload.
pub fn count_config_warnings(warnings: &[ConfigWarning]) {
    let metric = &crate::metrics::METRICS.config_warnings;
    for kind in crate::config::WARNING_KINDS {
        metric.with_label_values(&[kind]);
    }
    for warning in warnings {
        metric.with_label_values(&[warning.kind]).inc();
        tracing::warn!(kind = warning.kind, "warning: {}", warning.text);
        if warning.kind == WARNING_SEARCH_REFUSED {
            crate::events::search_engine_refused(&warning.text);
        }
    }
}

/// One warning per setting (and the origins it refuses the same crawlers on) that refuses a
/// catalogue crawler of the `search` category on every path: `policy.crawlers.Googlebot:
/// block`, `policy.purposes.search: block`, `policy.categories.search: license`, a purpose
/// refusal with `multi_purpose: block`. Origins with `mode: off` refuse nothing.
pub fn search_refusals(config: &Config, catalogue: &Catalogue) -> Vec<ConfigWarning> {
    let search_crawlers: Vec<&CrawlerDef> = catalogue
        .defs()
        .iter()
        .filter(|def| def.category == Category::Search)
        .collect();
    // (setting, crawlers, report mode) -> origins, in config order.
    let mut found: Vec<(String, Vec<&str>, bool, Vec<&str>)> = Vec::new();
    for origin in &config.origins {
        if origin.mode == Mode::Off {
            continue;
        }
        let mut settings: Vec<(String, Vec<&str>)> = Vec::new();
        for def in &search_crawlers {
            let Some(setting) = refusing_setting(&origin.policy, def) else {
                continue;
            };
            match settings.iter_mut().find(|(known, _)| *known == setting) {
                Some((_, crawlers)) => crawlers.push(&def.name),
                None => settings.push((setting, vec![&def.name])),
            }
        }
        // Left to robots.txt by the policy, a search crawler may still be refused everywhere
        // by a file the config holds or names (`source: inline`, `source: file`).
        if let Some((source, rules)) = configured_robots(&origin.robots) {
            for def in &search_crawlers {
                let (action, _, _) = policy_action(
                    &origin.policy,
                    &def.name,
                    def.purposes(),
                    def.controls.purposes(),
                    def.category,
                );
                if action != Action::Enforce {
                    continue;
                }
                let Some(rule) = refused_by_robots(&rules, def) else {
                    continue;
                };
                let setting = format!(
                    "robots.source: {source}` line {}: `{}: {}",
                    rule.0, rule.1, rule.2
                );
                match settings.iter_mut().find(|(known, _)| *known == setting) {
                    Some((_, crawlers)) => crawlers.push(&def.name),
                    None => settings.push((setting, vec![&def.name])),
                }
            }
        }
        let report = origin.mode == Mode::Report;
        for (setting, crawlers) in settings {
            match found
                .iter_mut()
                .find(|(known, known_crawlers, known_report, _)| {
                    *known == setting && *known_crawlers == crawlers && *known_report == report
                }) {
                Some((_, _, _, origins)) => origins.push(&origin.name),
                None => found.push((setting, crawlers, report, vec![&origin.name])),
            }
        }
    }
    found
        .into_iter()
        .map(|(setting, crawlers, report, origins)| ConfigWarning {
            kind: WARNING_SEARCH_REFUSED,
            text: warning_text(&setting, &crawlers, report, &origins),
        })
        .collect()
}

/// Paths a search crawler is judged on to tell "refused on every path": the root, a page and
/// a deep path no site has.
pub const PROBE_PATHS: [&str; 3] = ["/", "/index.html", "/robotsguard-preview/any/page"];

/// The deciding rule (line, directive, pattern) when `rules` refuse `def` on every
/// [`PROBE_PATHS`] through the group it obeys (a crawler that ignores `*` is not held to it).
pub fn refused_by_robots(
    rules: &crate::robots::Robots,
    def: &CrawlerDef,
) -> Option<(u32, &'static str, String)> {
    let tokens: Vec<&str> = def.tokens.iter().map(String::as_str).collect();
    let mut deciding = None;
    for path in PROBE_PATHS {
        let verdict = rules.verdict(&tokens, path.as_bytes());
        if verdict.allowed
            || (def.ignores_global && verdict.group == crate::robots::GroupMatch::Global)
        {
            return None;
        }
        if deciding.is_none() {
            deciding = verdict
                .rule
                .map(|rule| (rule.line, rule.directive.as_str(), rule.pattern.to_string()));
        }
    }
    deciding
}

/// The robots.txt an origin's config holds (`source: inline`) or names (`source: file`, read
/// now, within `max_size`), compiled as the proxy matches; `None` for one fetched from the
/// origin or a file that cannot be read (the file's own check reports that).
fn configured_robots(
    robots: &crate::config::RobotsConfig,
) -> Option<(&'static str, crate::robots::Robots)> {
    use std::io::Read;
    let (source, body) = match &robots.source {
        crate::config::RobotsSource::Inline { text } => ("inline", text.clone().into_bytes()),
        crate::config::RobotsSource::File { path } => {
            let mut body = Vec::new();
            std::fs::File::open(path)
                .ok()?
                .take(robots.max_size as u64)
                .read_to_end(&mut body)
                .ok()?;
            ("file", body)
        }
        crate::config::RobotsSource::Origin { .. } => return None,
    };
    let parsed = crate::robots::RobotsTxt::parse_with_limit(&body, robots.max_size);
    Some((
        source,
        crate::robots::Robots::compile(&parsed, crate::robots::MatchMode::Canonical),
    ))
}

/// The setting that refuses `def` on every path under `policy`, as written
/// (`policy.purposes.search: block`), or `None` when the policy leaves it to robots.txt or
/// passes it.
fn refusing_setting(policy: &PolicyConfig, def: &CrawlerDef) -> Option<String> {
    let purposes = def.purposes();
    let controlled = def.controls.purposes();
    let (action, by, _) = policy_action(policy, &def.name, purposes, controlled, def.category);
    if !action.refuses() {
        return None;
    }
    Some(match by {
        PolicyBy::Crawler => format!("policy.crawlers.{}: {}", def.name, action.as_str()),
        PolicyBy::Category => format!(
            "policy.categories.{}: {}",
            def.category.as_str(),
            action.as_str()
        ),
        PolicyBy::Purpose => {
            let (_, purpose) = policy.purpose_action(purposes, controlled).action?;
            let rule = policy.purposes[purpose.index()]?;
            if rule.multi_purpose == crate::config::MultiPurpose::Block && purposes.len() > 1 {
                format!(
                    "policy.purposes.{purpose}: {{action: {}, multi_purpose: block}}",
                    rule.action.as_str()
                )
            } else {
                format!("policy.purposes.{purpose}: {}", rule.action.as_str())
            }
        }
    })
}

fn warning_text(setting: &str, crawlers: &[&str], report: bool, origins: &[&str]) -> String {
    let mut names = origins
        .iter()
        .take(ORIGINS_NAMED)
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if origins.len() > ORIGINS_NAMED {
        names.push_str(&format!(" and {} more", origins.len() - ORIGINS_NAMED));
    }
    let (origin_word, these) = if origins.len() == 1 {
        ("origin", "it")
    } else {
        ("origins", "them")
    };
    let (crawler_word, crawler_list) = match crawlers {
        [one] => ("the search crawler", (*one).to_string()),
        many => ("the search crawlers", many.join(", ")),
    };
    let refuses = if setting.ends_with(Action::License.as_str()) {
        "answers 402 to"
    } else {
        "refuses"
    };
    let mode = if report {
        " (mode report: counted as would_block until it enforces)"
    } else {
        ""
    };
    format!(
        "{origin_word} {names}: `{setting}` {refuses} {crawler_word} {crawler_list} on every path \
         but /robots.txt and exempt paths{mode}, which takes {these} out of their search \
         results; if that is meant, `validate --strict` still fails on it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warnings(policy: &str) -> Vec<String> {
        let text = format!(
            "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n    policy: {policy}\n  - name: blog\n    hosts: [blog.example]\n    upstream: \"127.0.0.1:1\"\n    policy: {policy}\n"
        );
        let config = crate::config::load_str(&text, "t.yaml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let catalogue = crate::snapshot::build_identifier(&config)
            .unwrap_or_else(|e| panic!("{e}"))
            .catalogue()
            .clone();
        config_warnings(&config, &catalogue)
            .into_iter()
            .map(|w| {
                assert_eq!(w.kind, WARNING_SEARCH_REFUSED);
                w.text
            })
            .collect()
    }

    #[test]
    fn refusing_a_search_engine_everywhere_is_named_with_its_setting_and_origins() {
        let found = warnings("{crawlers: {Googlebot: block}}");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "origins `shop`, `blog`: `policy.crawlers.Googlebot: block` refuses the search \
                 crawler Googlebot on every path"
            ),
            "{found:?}"
        );
        let found = warnings("{purposes: {search: block}}");
        assert_eq!(found.len(), 1, "{found:?}");
        for name in [
            "Googlebot",
            "bingbot",
            "Applebot",
            "YandexBot",
            "DuckDuckBot",
        ] {
            assert!(found[0].contains(name), "{name}: {found:?}");
        }
        assert!(
            found[0].contains("`policy.purposes.search: block`"),
            "{found:?}"
        );
        let found = warnings("{categories: {search: license}}");
        assert!(found[0].contains("answers 402 to"), "{found:?}");
        let found = warnings("{purposes: {training: {action: block, multi_purpose: block}}}");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains(
                "`policy.purposes.training: {action: block, multi_purpose: block}` refuses the \
                 search crawler bingbot on"
            ),
            "Googlebot and Applebot are refused through their tokens: {found:?}"
        );
    }

    #[test]
    fn an_inline_robots_txt_refusing_everything_names_its_line() {
        let text = "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:1\"\n    robots: {source: inline, text: \"User-agent: *\\nDisallow: /\\n\"}\n  - name: blog\n    hosts: [blog.example]\n    upstream: \"127.0.0.1:1\"\n    robots: {source: inline, text: \"User-agent: *\\nDisallow: /admin\\n\"}\n";
        let config = crate::config::load_str(text, "t.yaml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let catalogue = crate::snapshot::build_identifier(&config)
            .unwrap_or_else(|e| panic!("{e}"))
            .catalogue()
            .clone();
        let found = config_warnings(&config, &catalogue);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, WARNING_SEARCH_REFUSED);
        assert!(
            found[0].text.starts_with(
                "origin `shop`: `robots.source: inline` line 2: `Disallow: /` refuses the search crawlers Googlebot"
            ),
            "{found:?}"
        );
        assert!(found[0].text.contains("bingbot"), "{found:?}");
    }

    #[test]
    fn refusing_training_alone_warns_of_nothing() {
        assert_eq!(
            warnings("{purposes: {training: block}}"),
            Vec::<String>::new()
        );
        assert_eq!(
            warnings("{purposes: {training: license}}"),
            Vec::<String>::new()
        );
        assert_eq!(
            warnings("{purposes: {training: block}, crawlers: {GPTBot: block}}"),
            Vec::<String>::new()
        );
    }
}
