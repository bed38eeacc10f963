//! "See before you switch": the origin's recent crawler traffic ([`crate::reports::sample`])
//! judged again with a candidate robots.txt or policy in force, and what would change.
//!
//! Every sampled (crawler, path) is judged twice in preview (nothing spent, nothing counted,
//! no DNS query): with the snapshot in force and with the candidate snapshot
//! ([`Snapshot::with_candidate`]), by the same [`Judge`] the proxy uses, so identification,
//! purposes, policy, content signals and served-file additions are the proxy's. Where the two
//! agree the request keeps the outcome it got (a Crawl-delay refusal, a ban, are not a
//! robots.txt change); where they differ, it gets the candidate's. Nothing live changes.

pub mod body;

use std::collections::HashMap;

use serde::Serialize;

use crate::crawlers::{Category, Purpose};
use crate::enforce::Outcome;
use crate::judge::{Facts, Judge, Judgment, Mode};
use crate::reports::sample::SampledTraffic;
use crate::robots::{Directive, RobotsTxt};
use crate::snapshot::Snapshot;

/// Paths a change row lists at most.
pub const SAMPLE_PATHS: usize = 10;

/// Share of a search crawler's replayed requests refused from which the site is taken to
/// drop out of its results.
pub const LOSES_SITE_SHARE: f64 = 0.5;

// Paths a search crawler with no sampled traffic is judged on: refused on all, it is taken to
// be refused everywhere.
use crate::enforce::warnings::PROBE_PATHS;

/// Warning kinds (the contract of the answer's `warnings[].kind`).
pub const SEARCH_ENGINE_LOSES_SITE: &str = "search_engine_loses_site";
/// A line of the candidate robots.txt the engine ignores.
pub const ROBOTS_TXT_INVALID: &str = "robots_txt_invalid";
/// `Disallow: /` applies to `*`.
pub const REFUSES_EVERYTHING: &str = "refuses_everything";

/// The answer of `POST /robots/preview`.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewAnswer {
    /// The origin previewed.
    pub origin: String,
    /// The traffic replayed.
    pub window: Window,
    /// One row per (crawler, before, after) whose outcome would change.
    pub changes: Vec<Change>,
    /// What the candidate probably does not mean.
    pub warnings: Vec<Warning>,
}

/// The traffic a preview replayed.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// RFC 3339.
    pub since: String,
    /// RFC 3339.
    pub until: String,
    /// Requests judged again.
    pub requests_replayed: u64,
    /// Requests of the window the sample could not keep (evicted, too long a path).
    pub requests_not_replayable: u64,
    /// Whose traffic was replayed: `fleet` (every replica's, through the shared store),
    /// `this_replica` (the memory backend) or `store_down` (this replica's alone: the shared
    /// store could not be read).
    pub coverage: &'static str,
    /// Replicas whose traffic was replayed.
    pub replicas: usize,
}

/// Requests of one crawler whose outcome would change from `before` to `after`.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The crawler's name.
    pub crawler: String,
    /// The access log's decision word it got (`allowed`, `blocked`, ...).
    pub before: &'static str,
    /// The word it would get with the candidate in force.
    pub after: &'static str,
    /// Requests.
    pub requests: u64,
    /// Distinct paths.
    pub paths: u64,
    /// Up to [`SAMPLE_PATHS`] of them.
    pub sample_paths: Vec<String>,
    /// The crawler's purposes (`search`, `training`, ...).
    pub purposes: Vec<&'static str>,
    /// Share of the requests whose crawler was verified (0 to 1).
    pub verified: f64,
}

/// A machine-readable warning.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Warning {
    /// [`SEARCH_ENGINE_LOSES_SITE`], [`ROBOTS_TXT_INVALID`] or [`REFUSES_EVERYTHING`].
    pub kind: &'static str,
    /// The crawler it is about, when it is about one.
    pub crawler: Option<String>,
    /// One sentence.
    pub message: String,
    /// The candidate's line, for [`ROBOTS_TXT_INVALID`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl PreviewAnswer {
    /// Whether a warning says the candidate takes the site out of a search engine or refuses
    /// everything (`robotsguard preview` exits 3).
    pub fn blocks_deploy(&self) -> bool {
        self.warnings
            .iter()
            .any(|w| w.kind == SEARCH_ENGINE_LOSES_SITE || w.kind == REFUSES_EVERYTHING)
    }
}

/// What a preview judges with.
pub struct Replay<'a> {
    /// The snapshot in force.
    pub live: &'a Snapshot,
    /// The candidate ([`Snapshot::with_candidate`]).
    pub candidate: &'a Snapshot,
    /// Checks crawlers' claims (no query is sent in preview).
    pub verifier: &'a crate::verify::Verifier,
    /// Read, never written.
    pub store: &'a crate::store::Store,
}

#[derive(Default)]
struct Row {
    requests: u64,
    paths: u64,
    verified: u64,
    sample_paths: Vec<String>,
    purposes: Vec<&'static str>,
}

/// A search crawler's replayed requests, and of them those the candidate refuses.
#[derive(Default)]
struct SearchTally {
    replayed: u64,
    refused: u64,
}

/// Refused for the site: the page is not served to the crawler.
fn refuses(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Blocked | Outcome::PaymentRequired)
}

fn outcome_of(judgment: &Judgment) -> Outcome {
    judgment
        .decision
        .as_ref()
        .map_or(Outcome::Blocked, |decision| decision.outcome)
}

fn is_search(crawler: &crate::enforce::Crawler) -> bool {
    crawler.category() == Category::Search || crawler.purposes().contains(Purpose::Search)
}

impl Replay<'_> {
    async fn judge(
        &self,
        snapshot: &Snapshot,
        host: &str,
        user_agent: &[u8],
        path: &[u8],
    ) -> Judgment {
        let judge = Judge {
            snapshot,
            verifier: self.verifier,
            store: self.store,
        };
        judge
            .judge(
                &Facts::get(host.as_bytes(), user_agent, path),
                Mode::PreviewWithoutLookups,
            )
            .await
    }

    /// Judges `traffic` of `origin` (sampled between `since` and `until`, Unix seconds) with
    /// the candidate in force; `robots` is the candidate robots.txt, when one is given, for its
    /// own warnings.
    pub async fn run(
        &self,
        origin: &str,
        traffic: &SampledTraffic,
        since: u64,
        until: u64,
        robots: Option<&[u8]>,
    ) -> PreviewAnswer {
        let host = self
            .live
            .origin_named(origin)
            .map_or("", |o| o.primary_host())
            .to_string();
        let mut rows: HashMap<(String, &'static str, &'static str), Row> = HashMap::new();
        let mut search: HashMap<String, SearchTally> = HashMap::new();
        let mut replayed = 0u64;
        for sampled in &traffic.paths {
            replayed += sampled.requests;
            let before = sampled.outcome;
            let candidate = self
                .judge(self.candidate, &host, &sampled.user_agent, &sampled.path)
                .await;
            // A ban comes before robots.txt: a banned crawler stays banned whatever the file.
            let after = if before == Outcome::Banned {
                before
            } else {
                let live = self
                    .judge(self.live, &host, &sampled.user_agent, &sampled.path)
                    .await;
                let (live, candidate) = (outcome_of(&live), outcome_of(&candidate));
                if live == candidate {
                    before
                } else {
                    candidate
                }
            };
            let crawler = candidate.decision.as_ref().and_then(|d| d.crawler.as_ref());
            if crawler.is_some_and(is_search) {
                let tally = search.entry(sampled.crawler.to_string()).or_default();
                tally.replayed += sampled.requests;
                if refuses(after) {
                    tally.refused += sampled.requests;
                }
            }
            if before == after {
                continue;
            }
            let row = rows
                .entry((sampled.crawler.to_string(), before.as_str(), after.as_str()))
                .or_default();
            row.requests += sampled.requests;
            row.paths += 1;
            row.verified += sampled.verified;
            if row.sample_paths.len() < SAMPLE_PATHS {
                row.sample_paths
                    .push(String::from_utf8_lossy(&sampled.path).into_owned());
            }
            if row.purposes.is_empty() {
                if let Some(crawler) = crawler {
                    row.purposes = crawler.purposes().iter().map(Purpose::as_str).collect();
                }
            }
        }
        let mut changes: Vec<Change> = rows
            .into_iter()
            .map(|((crawler, before, after), mut row)| {
                row.sample_paths.sort();
                Change {
                    crawler,
                    before,
                    after,
                    requests: row.requests,
                    paths: row.paths,
                    sample_paths: row.sample_paths,
                    purposes: row.purposes,
                    verified: if row.requests == 0 {
                        0.0
                    } else {
                        row.verified as f64 / row.requests as f64
                    },
                }
            })
            .collect();
        changes.sort_by(|a, b| {
            b.requests
                .cmp(&a.requests)
                .then_with(|| a.crawler.cmp(&b.crawler))
                .then_with(|| a.before.cmp(b.before))
                .then_with(|| a.after.cmp(b.after))
        });
        let mut warnings = Vec::new();
        let mut tallies: Vec<(String, SearchTally)> = search.into_iter().collect();
        tallies.sort_by(|a, b| a.0.cmp(&b.0));
        for (crawler, tally) in &tallies {
            if tally.replayed > 0
                && tally.refused as f64 >= LOSES_SITE_SHARE * tally.replayed as f64
            {
                warnings.push(Warning {
                    kind: SEARCH_ENGINE_LOSES_SITE,
                    crawler: Some(crawler.clone()),
                    message: format!(
                        "{crawler} would be refused on {} of its {} recent requests to `{origin}` \
                         ({}%): the site would drop out of its search results",
                        tally.refused,
                        tally.replayed,
                        tally.refused * 100 / tally.replayed
                    ),
                    line: None,
                });
            }
        }
        self.probe_unsampled_search_crawlers(origin, &host, &tallies, &mut warnings)
            .await;
        if let Some(robots) = robots {
            warnings.extend(robots_warnings(robots));
        }
        PreviewAnswer {
            origin: origin.to_string(),
            window: Window {
                since: crate::reports::rfc3339(since),
                until: crate::reports::rfc3339(until),
                requests_replayed: replayed,
                requests_not_replayable: traffic.not_replayable,
                coverage: "this_replica",
                replicas: 1,
            },
            changes,
            warnings,
        }
    }

    /// [`SEARCH_ENGINE_LOSES_SITE`] for each catalogue search crawler the sample has no request
    /// of that the candidate refuses on every probed path.
    async fn probe_unsampled_search_crawlers(
        &self,
        origin: &str,
        host: &str,
        sampled: &[(String, SearchTally)],
        warnings: &mut Vec<Warning>,
    ) {
        let defs: Vec<(String, String)> = self
            .candidate
            .identifier
            .catalogue()
            .defs()
            .iter()
            .filter(|def| {
                def.category == Category::Search || def.purposes.contains(&Purpose::Search)
            })
            .filter(|def| !sampled.iter().any(|(name, _)| *name == def.name))
            .map(|def| (def.name.clone(), probe_user_agent(def)))
            .collect();
        for (name, user_agent) in defs {
            let mut refused_everywhere = true;
            for path in PROBE_PATHS {
                let judgment = self
                    .judge(self.candidate, host, user_agent.as_bytes(), path.as_bytes())
                    .await;
                let named = judgment
                    .decision
                    .as_ref()
                    .and_then(|d| d.crawler.as_ref())
                    .is_some_and(|c| c.name() == name);
                if !named || !refuses(outcome_of(&judgment)) {
                    refused_everywhere = false;
                    break;
                }
            }
            if refused_everywhere {
                warnings.push(Warning {
                    kind: SEARCH_ENGINE_LOSES_SITE,
                    crawler: Some(name.clone()),
                    message: format!(
                        "{name} (no recent request to `{origin}`) would be refused on every path: \
                         the site would drop out of its search results"
                    ),
                    line: None,
                });
            }
        }
    }
}

/// A User-Agent the catalogue entry `def` is identified by: its first token in the usual
/// `compatible;` form.
fn probe_user_agent(def: &crate::crawlers::CrawlerDef) -> String {
    let token = def.tokens.first().map_or(def.name.as_str(), String::as_str);
    format!("Mozilla/5.0 (compatible; {token}/1.0)")
}

/// The warnings of a candidate robots.txt by itself: lines the engine ignores
/// ([`ROBOTS_TXT_INVALID`], one per line) and `Disallow: /` for `*` ([`REFUSES_EVERYTHING`]).
pub fn robots_warnings(robots: &[u8]) -> Vec<Warning> {
    let parsed = RobotsTxt::parse(robots);
    let mut warnings: Vec<Warning> = parsed
        .diagnostics
        .iter()
        .map(|diagnostic| Warning {
            kind: ROBOTS_TXT_INVALID,
            crawler: None,
            message: diagnostic.to_string(),
            line: Some(diagnostic.line),
        })
        .collect();
    let everything = parsed
        .groups
        .iter()
        .filter(|group| group.is_global())
        .find_map(|group| {
            group.rules.iter().find(|rule| {
                rule.directive == Directive::Disallow
                    && matches!(rule.pattern.as_str(), "/" | "/*" | "*")
            })
        });
    if let Some(rule) = everything {
        warnings.push(Warning {
            kind: REFUSES_EVERYTHING,
            crawler: Some("*".to_string()),
            message: format!(
                "line {}: `Disallow: {}` in the `User-agent: *` group refuses every path to every \
                 crawler without a group of its own",
                rule.line, rule.pattern
            ),
            line: Some(rule.line),
        });
    }
    warnings
}

/// The warnings of a candidate robots.txt from the crawler catalogue alone, without traffic
/// (`robotsguard check --robots FILE`): [`robots_warnings`], and [`SEARCH_ENGINE_LOSES_SITE`]
/// for each catalogue search crawler (category or purpose `search`) the file disallows on
/// every probed path, through the group it obeys.
pub fn offline_warnings(robots: &[u8], catalogue: &crate::crawlers::Catalogue) -> Vec<Warning> {
    let rules = crate::robots::Robots::compile(
        &RobotsTxt::parse(robots),
        crate::robots::MatchMode::Canonical,
    );
    let mut warnings = Vec::new();
    for def in catalogue.defs() {
        if def.category != Category::Search && !def.purposes.contains(&Purpose::Search) {
            continue;
        }
        if crate::enforce::warnings::refused_by_robots(&rules, def).is_some() {
            warnings.push(Warning {
                kind: SEARCH_ENGINE_LOSES_SITE,
                crawler: Some(def.name.clone()),
                message: format!(
                    "{} would be refused on every path: the site would drop out of its search results",
                    def.name
                ),
                line: None,
            });
        }
    }
    warnings.extend(robots_warnings(robots));
    warnings
}

/// Why a preview was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewError {
    /// The candidate's config fragment cannot be put in force (why, in words).
    Fragment(String),
    /// The config in force has no origin of that name.
    NoOrigin(String),
}

impl std::fmt::Display for PreviewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fragment(why) => f.write_str(why),
            Self::NoOrigin(origin) => write!(f, "no origin `{origin}`"),
        }
    }
}

impl std::error::Error for PreviewError {}

/// Builds the candidate snapshot of `origin` and replays its sample: what `POST
/// /robots/preview` and the console's preview page answer.
#[allow(clippy::too_many_arguments)]
pub async fn preview(
    live: &Snapshot,
    verifier: &crate::verify::Verifier,
    store: &crate::store::Store,
    reports: &crate::reports::Reports,
    origin: &str,
    candidate: &body::Candidate,
) -> Result<PreviewAnswer, PreviewError> {
    let config = match &candidate.config {
        Some(fragment) => {
            Some(origin_config(live, origin, fragment).map_err(PreviewError::Fragment)?)
        }
        None => None,
    };
    let robots = candidate.robots.clone().map(bytes::Bytes::from);
    let Some(candidate_snapshot) = live.with_candidate(origin, config, robots) else {
        return Err(PreviewError::NoOrigin(origin.to_owned()));
    };
    let until = reports.now();
    let since = until.saturating_sub(reports.sample().window_seconds());
    let (traffic, coverage) = store
        .sample_of(
            reports,
            origin,
            until,
            live.config.preview.max_paths_per_origin,
        )
        .await;
    let replay = Replay {
        live,
        candidate: &candidate_snapshot,
        verifier,
        store,
    };
    let mut answer = replay
        .run(
            origin,
            &traffic,
            since,
            until,
            candidate.robots.as_deref().map(str::as_bytes),
        )
        .await;
    (answer.window.coverage, answer.window.replicas) = match coverage {
        crate::store::Coverage::Fleet(replicas) => ("fleet", replicas),
        crate::store::Coverage::StoreDown => ("store_down", 1),
        _ => ("this_replica", 1),
    };
    Ok(answer)
}

/// The origin `origin` with the config fragment applied to the config in force's file.
fn origin_config(
    live: &Snapshot,
    origin: &str,
    fragment: &str,
) -> Result<crate::config::OriginConfig, String> {
    let Some(path) = live.config.source_path.as_deref() else {
        return Err("a config fragment needs the config file robotsguard was started with; this one was built in code".into());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let base_dir = path.parent().unwrap_or(std::path::Path::new("/"));
    let config = crate::config::with_origin_fragment(
        &text,
        &path.display().to_string(),
        base_dir,
        origin,
        fragment,
    )
    .map_err(|e| e.to_string())?;
    config
        .origins
        .into_iter()
        .find(|o| o.name == origin)
        .ok_or_else(|| format!("no origin `{origin}` in the config"))
}
