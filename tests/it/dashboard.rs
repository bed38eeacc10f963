//! The Grafana dashboard shipped with the Helm chart queries only metrics that robotsguard
//! exports, with label values it really emits, and keeps a panel for each thing operators watch.
//! A renamed metric would otherwise leave an empty panel that nobody notices until an incident.

use std::collections::BTreeSet;
use std::path::Path;

use robotsguard::enforce::Outcome;
use robotsguard::metrics::{METRICS, METRIC_NAMES};
use robotsguard::robots::Robots;
use robotsguard::snapshot::Policy;
use serde_json::Value;

const DASHBOARD: &str = "helm/robotsguard/dashboards/robotsguard.json";

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DASHBOARD);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Every PromQL string in the dashboard: panel targets and template variable queries.
fn queries(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("expr" | "definition", Value::String(q)) => out.push(q.clone()),
                    ("query", Value::String(q)) => out.push(q.clone()),
                    _ => queries(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| queries(item, out)),
        _ => {}
    }
}

fn all_queries() -> Vec<String> {
    let mut out = Vec::new();
    queries(&dashboard(), &mut out);
    // The datasource variable's query is the plugin type, not PromQL.
    out.retain(|q| q != "prometheus");
    out
}

/// The process collector's metrics the dashboard may query. They carry no `robotsguard_` prefix,
/// so they are named one by one: any other `process_*` name is as wrong as an unknown
/// `robotsguard_*` one.
const PROCESS_METRICS: [&str; 3] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
];

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// `robotsguard_...` and `process_...` identifiers in a query (whole identifiers only, so a
/// name merely containing `process_` is not taken for one).
fn metric_names(query: &str) -> Vec<&str> {
    metric_occurrences(query)
        .into_iter()
        .map(|(_, name)| name)
        .collect()
}

/// [`metric_names`] with the byte offset just past each name.
fn metric_occurrences(query: &str) -> Vec<(usize, &str)> {
    let mut names = Vec::new();
    for (start, c) in query.char_indices() {
        if start > 0 && query[..start].ends_with(is_identifier_char) {
            continue;
        }
        if !(c == 'r' || c == 'p') {
            continue;
        }
        let tail = &query[start..];
        if !(tail.starts_with("robotsguard_") || tail.starts_with("process_")) {
            continue;
        }
        let end = tail
            .find(|c: char| !is_identifier_char(c))
            .unwrap_or(tail.len());
        names.push((start + end, &tail[..end]));
    }
    names
}

/// Metric types as the registry declares them (`# TYPE name kind`). Labelled families only show
/// once they have a child, so this is a partial map; absent names are not contradicted.
fn declared_types() -> Vec<(String, String)> {
    let text = String::from_utf8(METRICS.render()).expect("metrics are UTF-8");
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| {
            let (name, kind) = rest.split_once(' ')?;
            Some((name.to_string(), kind.to_string()))
        })
        .collect()
}

/// The metric a queried series belongs to: histogram series carry `_bucket`, `_sum` and
/// `_count` after the metric's name.
fn exported_metric(series: &str) -> Option<&'static str> {
    if let Some(name) = METRIC_NAMES.iter().find(|name| **name == series) {
        return Some(name);
    }
    let base = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| series.strip_suffix(suffix))?;
    METRIC_NAMES
        .iter()
        .find(|name| **name == base && !name.ends_with("_total"))
        .copied()
}

#[test]
fn every_queried_metric_is_exported() {
    let queries = all_queries();
    assert!(queries.len() > 20, "only {} queries found", queries.len());
    let types = declared_types();
    let mut missing = BTreeSet::new();
    for query in &queries {
        for series in metric_names(query) {
            if series.starts_with("process_") {
                if !PROCESS_METRICS.contains(&series) {
                    missing.insert(series.to_string());
                }
                continue;
            }
            let Some(metric) = exported_metric(series) else {
                missing.insert(series.to_string());
                continue;
            };
            if series != metric {
                // A histogram series: the registry must not declare the family as anything else.
                if let Some((_, kind)) = types.iter().find(|(name, _)| name == metric) {
                    assert_eq!(kind, "histogram", "{series} in `{query}`");
                }
                if series.ends_with("_bucket") {
                    assert!(
                        query.contains("histogram_quantile("),
                        "raw buckets are only meaningful in histogram_quantile: `{query}`"
                    );
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics that src/metrics.rs does not export: {missing:?}"
    );
}

/// The chart's default alert rules and the metrics its values mention query only exported
/// metrics: an alert over a renamed metric never fires.
#[test]
fn every_metric_the_charts_values_name_is_exported() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("helm/robotsguard/values.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let named = metric_names(&text);
    assert!(named.len() > 10, "only {} metrics named", named.len());
    let missing: BTreeSet<&str> = named
        .into_iter()
        .filter(|name| !name.starts_with("process_") && exported_metric(name).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "values.yaml names metrics that src/metrics.rs does not export: {missing:?}"
    );
}

#[test]
fn metric_names_are_whole_identifiers() {
    assert_eq!(
        metric_names(r#"rate(process_cpu_seconds_total{job=~"$job"}[5m]) / robotsguard_x"#),
        ["process_cpu_seconds_total", "robotsguard_x"]
    );
    assert!(metric_names("my_process_open_fds + xrobotsguard_y").is_empty());
}

/// Panel queries select series by the `$job`, `$namespace` and `$pod` variables. Without them a
/// shared Prometheus mixes releases, and the unprefixed `process_*` metrics would show every
/// program it scrapes.
#[test]
fn every_panel_query_is_scoped_to_the_selected_targets() {
    let dashboard = dashboard();
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let query = target["expr"].as_str().expect("expr");
            for (end, series) in metric_occurrences(query) {
                let matchers = query[end..]
                    .strip_prefix('{')
                    .and_then(|rest| rest.split_once('}'))
                    .map(|(inside, _)| inside)
                    .unwrap_or_else(|| panic!("{title}: {series} has no label matchers"));
                for scope in [
                    r#"job=~"$job""#,
                    r#"namespace=~"$namespace""#,
                    r#"pod=~"$pod""#,
                ] {
                    assert!(matchers.contains(scope), "{title}: `{query}` lacks {scope}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} series checked");
    // The job variable's "All" must stay the list of robotsguard jobs, not `.*`.
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let job = variables
        .iter()
        .find(|v| v["name"] == "job")
        .expect("a job variable");
    assert!(
        job["allValue"].is_null(),
        "job allValue {}",
        job["allValue"]
    );
    for name in ["namespace", "pod", "origin"] {
        assert!(
            variables.iter().any(|v| v["name"] == name),
            "no {name} variable"
        );
    }
}

/// `label="value"` and `label=~"a|b"` selectors for one label, split into values.
fn selector_values<'a>(query: &'a str, label: &str) -> Vec<&'a str> {
    let mut values = Vec::new();
    for operator in ["=\"", "=~\"", "!=\""] {
        let needle = format!("{label}{operator}");
        let mut rest = query;
        while let Some(start) = rest.find(&needle) {
            let after = &rest[start + needle.len()..];
            let end = after.find('"').unwrap_or(after.len());
            values.extend(after[..end].split('|'));
            rest = &after[end..];
        }
    }
    values
}

#[test]
fn label_values_in_selectors_are_ones_robotsguard_emits() {
    let decisions: Vec<&str> = [
        Outcome::Pass,
        Outcome::Allowed,
        Outcome::Blocked,
        Outcome::WouldBlock,
    ]
    .map(Outcome::as_str)
    .to_vec();
    let states = [
        Policy::Rules(std::sync::Arc::new(Robots::parse(b""))).state_label(),
        Policy::AllowAll.state_label(),
        Policy::DisallowAll.state_label(),
    ];
    let mut checked = 0;
    for query in all_queries() {
        for value in selector_values(&query, "decision") {
            assert!(
                decisions.contains(&value),
                "decision `{value}` in `{query}`"
            );
            checked += 1;
        }
        for value in selector_values(&query, "state") {
            assert!(states.contains(&value), "state `{value}` in `{query}`");
            checked += 1;
        }
        // Non-crawlers are labelled `none`; the category filter depends on that spelling.
        for value in selector_values(&query, "category") {
            assert_eq!(value, "none", "category `{value}` in `{query}`");
            checked += 1;
        }
        for value in selector_values(&query, "code_class") {
            assert!(
                ["1xx", "2xx", "3xx", "4xx", "5xx"].contains(&value),
                "code_class `{value}` in `{query}`"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} label values checked");
}

#[test]
fn the_dashboard_covers_what_operators_watch() {
    let queries = all_queries().join("\n");
    let required = [
        // Requests by decision, blocks by crawler and by origin.
        "sum by (decision) (rate(robotsguard_requests_total",
        "sum by (crawler) (rate(robotsguard_requests_total",
        "sum by (origin) (rate(robotsguard_requests_total",
        // robots.txt: state, age and fetch outcomes per origin.
        "robotsguard_robots_state",
        "robotsguard_robots_age_seconds",
        "sum by (origin, outcome) (increase(robotsguard_robots_fetches_total",
        // Config reloads.
        "sum by (result) (increase(robotsguard_config_reloads_total",
        "robotsguard_config_last_reload_successful",
        // Latency percentiles.
        "histogram_quantile(0.99, sum by (le) (rate(robotsguard_request_duration_seconds_bucket",
        // Answers by status class and the 5xx share per origin.
        "sum by (code_class) (rate(robotsguard_responses_total",
        "code_class=\"5xx\"",
        // Upstreams, client connections against the cap, process resources.
        "robotsguard_upstream_up",
        "robotsguard_downstream_connections{",
        "robotsguard_downstream_connections_max",
        "process_resident_memory_bytes",
    ];
    for fragment in required {
        assert!(queries.contains(fragment), "no panel queries `{fragment}`");
    }
}

#[test]
fn panels_are_well_formed_for_grafana() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "robotsguard");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or_default();
        let id = panel["id"].as_u64().expect("numeric panel id");
        assert!(ids.insert(id), "duplicate panel id {id} ({title})");
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64(), grid["w"].as_u64());
        assert!(
            matches!((x, w), (Some(x), Some(w)) if w > 0 && x + w <= 24),
            "{title}: gridPos {grid}"
        );
        if panel["type"] == "row" {
            continue;
        }
        // The sidecar imports dashboards verbatim, so every query must use the datasource
        // variable rather than a datasource uid from the machine the dashboard was drawn on.
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} has no query");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
        }
        assert!(
            panel["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{title} has no description"
        );
    }
}

/// The chart's alert rules select only decision and category words robotsguard counts with: an
/// alert over a misspelt decision never fires.
#[test]
fn label_values_in_the_charts_alerts_are_ones_robotsguard_emits() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("helm/robotsguard/values.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    // YAML folds the expressions' lines: read the file as one line.
    let text = text.replace('\n', " ");
    let decisions: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
    let categories: Vec<&str> = robotsguard::crawlers::Category::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    let mut checked = 0;
    for value in selector_values(&text, "decision") {
        assert!(
            decisions.contains(&value),
            "decision `{value}` in values.yaml"
        );
        checked += 1;
    }
    for value in selector_values(&text, "category") {
        assert!(
            categories.contains(&value),
            "category `{value}` in values.yaml"
        );
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} label values checked");
    assert!(text.contains("alert: RobotsguardAppTrafficRefused"));
}
