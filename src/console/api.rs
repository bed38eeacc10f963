//! `/reports/crawlers`, `/reports/violations` and `/reports/robots`: JSON by default, CSV with
//! `format=csv` (a header row, then one row per line of the report); `origin=` required but for
//! the crawler report, which without it (or with `all=1`) covers every origin;
//! `since=`/`until=` in RFC 3339 (default: the whole window) narrow every table.

use std::sync::Arc;

use http::Response;
use serde_json::{json, Value};

use super::{html, Asked, Console};
use crate::reports::{rfc3339, CrawlerReport, Merged, ViolationReport};
use crate::snapshot::{Origin, RobotsCopy};
use crate::store::Coverage;

/// A report's origin, range and the merged reports of every replica it covers.
pub(crate) struct Scope {
    pub origin: Arc<Origin>,
    pub since: u64,
    pub until: u64,
    pub merged: Merged,
    pub coverage: Coverage,
}

impl Scope {
    /// The coverage in words, for the JSON and the pages.
    pub fn coverage_text(&self) -> String {
        coverage_words(&self.coverage)
    }
}

/// The range a request asks for (`since`, `until` in RFC 3339, clamped to the window), or the
/// 400 that refuses it (a time that does not parse, `since` after `until`).
pub(crate) fn range(
    console: &Console,
    asked: &Asked,
) -> Result<(u64, u64), Box<Response<Vec<u8>>>> {
    let mut bounds = [None, None];
    for (slot, key) in bounds.iter_mut().zip(["since", "until"]) {
        if let Some(text) = asked.param(key).filter(|t| !t.is_empty()) {
            match crate::reports::text::parse_rfc3339(text) {
                Some(at) => *slot = Some(at),
                None => {
                    return Err(Box::new(html::json(
                        400,
                        &json!({"error": format!("`{key}` must be an RFC 3339 time, e.g. 2026-11-26T20:00:00Z")}),
                    )))
                }
            }
        }
    }
    if let [Some(since), Some(until)] = bounds {
        if since > until {
            return Err(Box::new(html::json(
                400,
                &json!({"error": "`since` is after `until`"}),
            )));
        }
    }
    Ok(console.reports.range(bounds[0], bounds[1]))
}

/// The scope a request asks for, or the answer that refuses it (400, 404).
pub(crate) async fn scope(console: &Console, asked: &Asked) -> Result<Scope, Response<Vec<u8>>> {
    let Some(name) = asked.param("origin").filter(|n| !n.is_empty()) else {
        return Err(html::json(400, &json!({"error": "give ?origin=NAME"})));
    };
    let snapshot = console.live.load();
    let Some(origin) = snapshot.origin_named(name).cloned() else {
        return Err(html::json(
            404,
            &json!({"error": format!("no origin `{name}`")}),
        ));
    };
    let (since, until) = range(console, asked).map_err(|refused| *refused)?;
    let (published, coverage) = console
        .store
        .reports_of(&console.reports, origin.name())
        .await;
    let merged = console.reports.merge(&published);
    Ok(Scope {
        origin,
        since,
        until,
        merged,
        coverage,
    })
}

/// Every origin's reports merged into one (each crawler's row sums its rows on every origin;
/// distinct clients are counted once however many origins they asked), with the coverage in
/// words and the origins' names.
pub(crate) async fn every_origin(console: &Console) -> (Merged, String, Vec<String>) {
    let snapshot = console.live.load();
    let mut published = Vec::new();
    let mut coverage: Option<Coverage> = None;
    let mut names = Vec::with_capacity(snapshot.origins.len());
    for origin in &snapshot.origins {
        let (reports, cover) = console
            .store
            .reports_of(&console.reports, origin.name())
            .await;
        published.extend(reports);
        // The least of the origins' coverages: a store that could not be read for one says so.
        coverage = match (coverage, cover) {
            (Some(Coverage::StoreDown), _) | (_, Coverage::StoreDown) => Some(Coverage::StoreDown),
            (Some(Coverage::Fleet(a)), Coverage::Fleet(b)) => Some(Coverage::Fleet(a.max(b))),
            (_, cover) => Some(cover),
        };
        names.push(origin.name().to_string());
    }
    let text = coverage.map_or_else(
        || "this replica only".to_string(),
        |coverage| coverage_words(&coverage),
    );
    (console.reports.merge(&published), text, names)
}

/// A coverage in words, for the JSON and the pages.
fn coverage_words(coverage: &Coverage) -> String {
    match coverage {
        Coverage::Fleet(replicas) => format!("every replica ({replicas} within the window)"),
        Coverage::StoreDown => {
            "this replica only: the shared state store cannot be read now".to_string()
        }
        _ => "this replica only (state.backend: memory)".to_string(),
    }
}

/// The violation filters of a request (`crawler`, `verification`, `read_robots=yes|no`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Filters {
    pub crawler: Option<String>,
    pub verification: Option<String>,
    pub read_robots: Option<bool>,
}

impl Filters {
    pub fn of(asked: &Asked) -> Filters {
        let non_empty = |key: &str| {
            asked
                .param(key)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        Filters {
            crawler: non_empty("crawler"),
            verification: non_empty("verification"),
            read_robots: match asked.param("read_robots") {
                Some("yes" | "true") => Some(true),
                Some("no" | "false") => Some(false),
                _ => None,
            },
        }
    }

    pub fn keeps(&self, row: &ViolationReport) -> bool {
        self.crawler.as_ref().is_none_or(|c| *c == row.key.crawler)
            && self
                .verification
                .as_ref()
                .is_none_or(|v| *v == row.key.verification)
            && self.read_robots.is_none_or(|r| r == row.key.read_robots)
    }
}

/// The crawler report's rows, with the operator from the catalogue.
pub(crate) fn crawler_rows(console: &Console, scope: &Scope) -> Vec<CrawlerReport> {
    crawler_rows_of(console, &scope.merged, scope.since, scope.until)
}

/// The crawler rows of `merged` over `since..until`, with the operator from the catalogue.
pub(crate) fn crawler_rows_of(
    console: &Console,
    merged: &Merged,
    since: u64,
    until: u64,
) -> Vec<CrawlerReport> {
    let snapshot = console.live.load();
    let catalogue = snapshot.identifier.catalogue();
    merged.crawlers(since, until, |name| {
        catalogue
            .get(name)
            .map(|def| def.operator.clone())
            .unwrap_or_default()
    })
}

const CRAWLER_COLUMNS: [&str; 28] = [
    "name",
    "category",
    "operator",
    "requests",
    "allowed",
    "blocked",
    "limited",
    "banned",
    "would_block",
    "would_limit",
    "passed",
    "errors",
    "verified",
    "unverified",
    "impostor",
    "distinct_clients",
    "clients_read_robots",
    "bytes",
    "first_seen",
    "last_seen",
    "trap",
    "would_trap",
    "disguised",
    "would_disguised",
    "would_ban",
    "ban_suspended",
    "rate_limited",
    "would_rate_limit",
];

fn crawler_cells(row: &CrawlerReport) -> Vec<String> {
    let t = &row.tally;
    let mut cells = vec![row.name.clone(), row.category.clone(), row.operator.clone()];
    cells.extend(
        [
            t.requests,
            t.allowed,
            t.blocked,
            t.limited,
            t.banned,
            t.would_block,
            t.would_limit,
            t.passed,
            t.errors,
            t.verified,
            t.unverified,
            t.impostor,
            row.distinct_clients,
            row.clients_read_robots,
            t.bytes,
        ]
        .map(|n| n.to_string()),
    );
    cells.push(rfc3339(row.first_seen));
    cells.push(rfc3339(row.last_seen));
    // The signals' columns come last: spreadsheets reading the earlier ones by position go on.
    cells.extend(
        [
            t.trap,
            t.would_trap,
            t.disguised,
            t.would_disguised,
            t.would_ban,
            t.ban_suspended,
            t.rate_limited,
            t.would_rate_limit,
        ]
        .map(|n| n.to_string()),
    );
    cells
}

fn crawler_json(row: &CrawlerReport) -> Value {
    let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert("first_seen".into(), Value::String(rfc3339(row.first_seen)));
        object.insert("last_seen".into(), Value::String(rfc3339(row.last_seen)));
    }
    value
}

const VIOLATION_COLUMNS: [&str; 14] = [
    "crawler",
    "verification",
    "path",
    "line",
    "directive",
    "pattern",
    "read_robots",
    "enforced",
    "count",
    "count_error",
    "distinct_clients",
    "first_seen",
    "last_seen",
    "origin",
];

fn violation_cells(row: &ViolationReport, origin: &str) -> Vec<String> {
    vec![
        row.key.crawler.clone(),
        row.key.verification.clone(),
        row.key.path.clone(),
        row.key.line.to_string(),
        row.key.directive.clone(),
        row.key.pattern.clone(),
        row.key.read_robots.to_string(),
        row.key.enforced.to_string(),
        row.count.to_string(),
        row.count_error.to_string(),
        row.distinct_clients.to_string(),
        rfc3339(row.first_seen),
        rfc3339(row.last_seen),
        origin.to_string(),
    ]
}

fn violation_json(row: &ViolationReport) -> Value {
    let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert("first_seen".into(), Value::String(rfc3339(row.first_seen)));
        object.insert("last_seen".into(), Value::String(rfc3339(row.last_seen)));
    }
    value
}

/// One robots.txt copy of the report, with the diff from the one before it.
pub(crate) struct CopyRow {
    pub took_effect: u64,
    pub copy: Arc<RobotsCopy>,
    pub diff: String,
}

/// The copies in force over the range, oldest first.
pub(crate) fn robots_rows(scope: &Scope) -> Vec<CopyRow> {
    let timeline = scope.origin.robots.timeline();
    let mut rows: Vec<CopyRow> = Vec::with_capacity(timeline.len());
    let mut previous: Option<&Arc<RobotsCopy>> = None;
    for (i, (copy, since)) in timeline.iter().enumerate() {
        let took_effect = crate::reports::text::unix_seconds(*since);
        let ended = timeline
            .get(i + 1)
            .map(|(_, next)| crate::reports::text::unix_seconds(*next));
        let diff = match previous {
            Some(before) => crate::reports::robots_diff(
                &before.served().body,
                &copy.served().body,
                "previous copy",
                "this copy",
            ),
            None => String::new(),
        };
        previous = Some(copy);
        let empty = scope.since >= scope.until;
        if empty || took_effect >= scope.until || ended.is_some_and(|end| end <= scope.since) {
            continue;
        }
        rows.push(CopyRow {
            took_effect,
            copy: copy.clone(),
            diff,
        });
    }
    rows
}

const ROBOTS_COLUMNS: [&str; 10] = [
    "took_effect",
    "outcome",
    "state",
    "source",
    "fetched_at",
    "http_status",
    "rules",
    "bytes",
    "description",
    "diff_from_previous",
];

fn robots_cells(row: &CopyRow) -> Vec<String> {
    let copy = &row.copy;
    vec![
        rfc3339(row.took_effect),
        copy.outcome.as_str().to_string(),
        copy.policy.state_label().to_string(),
        copy.source.clone(),
        copy.fetched_at
            .map(|at| rfc3339(crate::reports::text::unix_seconds(at)))
            .unwrap_or_default(),
        copy.http_status.map(|s| s.to_string()).unwrap_or_default(),
        copy.rule_count().to_string(),
        copy.body.len().to_string(),
        copy.reason.clone(),
        row.diff.clone(),
    ]
}

/// Answers `/reports/…`.
pub(crate) async fn respond(console: &Console, asked: &Asked) -> Response<Vec<u8>> {
    let which = asked.path.trim_start_matches("/reports/");
    if !matches!(which, "crawlers" | "violations" | "robots") {
        return html::json(
            404,
            &json!({"error": "try /reports/crawlers, /reports/violations or /reports/robots with ?origin=NAME"}),
        );
    }
    let csv = match asked.param("format") {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return html::json(400, &json!({"error": "`format` is json or csv"})),
    };
    let every_origin = which == "crawlers"
        && (asked.param("all") == Some("1") || asked.param("origin").is_none_or(str::is_empty));
    if every_origin {
        return every_origins_crawlers(console, asked, csv).await;
    }
    let scope = match scope(console, asked).await {
        Ok(scope) => scope,
        Err(answer) => return answer,
    };
    let origin = scope.origin.name().to_string();
    let filename = format!("robotsguard-{which}-{origin}.csv");
    let head = json!({
        "origin": origin,
        "since": rfc3339(scope.since),
        "until": rfc3339(scope.until),
        "coverage": scope.coverage_text(),
        "replicas": match scope.coverage { Coverage::Fleet(n) => n, _ => 1 },
    });
    let mut body = match head {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    match which {
        "crawlers" => {
            let rows = crawler_rows(console, &scope);
            if csv {
                return html::csv(
                    crate::reports::csv(&CRAWLER_COLUMNS, rows.iter().map(crawler_cells)),
                    &filename,
                );
            }
            body.insert(
                "note".into(),
                Value::String("distinct_clients and clients_read_robots are approximate (about 6.5 % standard error)".into()),
            );
            body.insert("crawlers".into(), rows.iter().map(crawler_json).collect());
        }
        "violations" => {
            let report = scope.merged.violations(scope.since, scope.until);
            let filters = Filters::of(asked);
            let rows: Vec<&ViolationReport> = report
                .rows
                .iter()
                .filter(|row| filters.keeps(row))
                .collect();
            if csv {
                return html::csv(
                    crate::reports::csv(
                        &VIOLATION_COLUMNS,
                        rows.iter().map(|row| violation_cells(row, &origin)),
                    ),
                    &filename,
                );
            }
            body.insert("top".into(), json!(console.reports.settings().top));
            if report.error_bound > 0 {
                body.insert("error_bound".into(), json!(report.error_bound));
                body.insert(
                    "note".into(),
                    Value::String(format!(
                        "more distinct rows than reports.top were seen: a row not listed was requested at most {} times, and each count may be over by its count_error",
                        report.error_bound
                    )),
                );
            }
            body.insert(
                "violations".into(),
                rows.iter().map(|row| violation_json(row)).collect(),
            );
        }
        _ => {
            let rows = robots_rows(&scope);
            if csv {
                return html::csv(
                    crate::reports::csv(&ROBOTS_COLUMNS, rows.iter().map(robots_cells)),
                    &filename,
                );
            }
            let copies: Vec<Value> = rows
                .iter()
                .map(|row| {
                    let cells = robots_cells(row);
                    let mut object = serde_json::Map::new();
                    for (key, cell) in ROBOTS_COLUMNS.iter().zip(cells) {
                        let value = match *key {
                            "http_status" => row.copy.http_status.map_or(Value::Null, |s| json!(s)),
                            "rules" => json!(row.copy.rule_count()),
                            "bytes" => json!(row.copy.body.len()),
                            "fetched_at" if cell.is_empty() => Value::Null,
                            _ => Value::String(cell),
                        };
                        object.insert((*key).to_string(), value);
                    }
                    Value::Object(object)
                })
                .collect();
            body.insert("copies".into(), Value::Array(copies));
        }
    }
    html::json(200, &Value::Object(body))
}

/// `/reports/crawlers` over every origin (no `origin=`, or `all=1`).
async fn every_origins_crawlers(console: &Console, asked: &Asked, csv: bool) -> Response<Vec<u8>> {
    let (since, until) = match range(console, asked) {
        Ok(range) => range,
        Err(answer) => return *answer,
    };
    let (merged, coverage, origins) = every_origin(console).await;
    let rows = crawler_rows_of(console, &merged, since, until);
    if csv {
        return html::csv(
            crate::reports::csv(&CRAWLER_COLUMNS, rows.iter().map(crawler_cells)),
            "robotsguard-crawlers-all-origins.csv",
        );
    }
    html::json(
        200,
        &json!({
            "origins": origins,
            "since": rfc3339(since),
            "until": rfc3339(until),
            "coverage": coverage,
            "note": "every origin's requests per crawler; distinct_clients and clients_read_robots are approximate (about 6.5 % standard error) and count a client once however many origins it asked",
            "crawlers": rows.iter().map(crawler_json).collect::<Vec<Value>>(),
        }),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_crawler_table_has_a_column_for_every_column_of_the_outcome_table() {
        for row in &crate::outcome::OUTCOMES {
            assert!(
                super::CRAWLER_COLUMNS.contains(&row.column.as_str()),
                "{row:?}"
            );
        }
    }
}
