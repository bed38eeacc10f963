//! The outcome table: every decision word a request can end with, defined once with what it
//! means, the status robotsguard answers it with, its log text and its report column. The
//! metric's and the access log's list of words ([`crate::metrics::DECISIONS`]), the log lines of
//! refused requests, the reports' counts and the console derive from [`OUTCOMES`]. Pure data:
//! it sits below every module that counts, logs or reports.

use serde::Serialize;

/// What happens to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Proxied without consulting robots.txt: not a crawler, mode `off`, or `/robots.txt` itself.
    Pass,
    /// A crawler, and robots.txt allows the path.
    Allowed,
    /// A crawler, robots.txt disallows the path, and the origin enforces: answered with the block
    /// response.
    Blocked,
    /// As `Blocked`, but the origin is in `report` mode: proxied, counted and logged.
    WouldBlock,
    /// Allowed by robots.txt, but sooner than its `Crawl-delay` after the crawler's previous
    /// request: answered 429 with `Retry-After`.
    Limited,
    /// As `Limited`, but `crawl_delay.action` is `report` or the origin is in `report` mode:
    /// proxied and counted.
    WouldLimit,
    /// The client address is banned from the origin for repeated violations: answered 403.
    Banned,
    /// A trap path (`traps`) was requested and `traps.action` is `block` or `ban`: answered 404
    /// without contacting the origin.
    Trap,
    /// A trap path was requested and `traps.action` is `report`: proxied, counted and logged.
    WouldTrap,
    /// A disguised crawler (`disguised`: read robots.txt, then took what it disallows to every
    /// group, without a crawler's User-Agent) asked for a path robots.txt disallows, and
    /// `disguised.action` is `block` or `ban`: answered 403.
    Disguised,
    /// As `Disguised`, but `disguised.action` is `report` or the origin only reports: proxied,
    /// counted and logged (as would_block).
    WouldDisguised,
    /// Refused with the origin's licence answer: `402` with a `Link` to the licence terms
    /// (`block.status: 402`, or a `license` policy action).
    PaymentRequired,
    /// The client address is banned, but the origin only reports (`mode: report`, or
    /// `offenders.action: report` for a ban of repeated violations): proxied as without the
    /// ban, counted.
    WouldBan,
    /// The client address is banned, but bans are off (`mode: off` or `offenders.action:
    /// off`): proxied as without the ban, counted.
    BanSuspended,
    /// Over the operator's rate budget for the crawler (`policy.rates`): answered 429 with
    /// `Retry-After`, whatever robots.txt's `Crawl-delay` says.
    RateLimited,
    /// As `RateLimited`, but the origin only reports (`mode: report`): proxied and counted.
    WouldRateLimit,
}

/// A column of the reports (and the console's crawler table) that requests are counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReportColumn {
    /// `passed`.
    Passed,
    /// `allowed`.
    Allowed,
    /// `blocked` (licence answers too: they refuse the page as a block does).
    Blocked,
    /// `would_block`.
    WouldBlock,
    /// `limited`.
    Limited,
    /// `would_limit`.
    WouldLimit,
    /// `banned`.
    Banned,
    /// `trap`.
    Trap,
    /// `would_trap`.
    WouldTrap,
    /// `disguised`.
    Disguised,
    /// `would_disguised`.
    WouldDisguised,
    /// `would_ban`.
    WouldBan,
    /// `ban_suspended`.
    BanSuspended,
    /// `rate_limited`.
    RateLimited,
    /// `would_rate_limit`.
    WouldRateLimit,
}

/// One row of the outcome table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeInfo {
    /// The outcome.
    pub outcome: Outcome,
    /// Its word: the `decision` label of `robotsguard_requests_total`, the access log's
    /// `decision`, `/explain`'s and the reports'.
    pub word: &'static str,
    /// What it means, as the metric's help and the access log's documentation say it.
    pub meaning: &'static str,
    /// The status robotsguard answers with itself; `None` when the request is proxied (or
    /// robots.txt is served). A block's is the origin's `block.status`, 403 unless it says
    /// otherwise; a Web Bot Auth refusal counted `limited` may be 503 (keys not loaded).
    pub status: Option<u16>,
    /// The text of the rate-limited log line of a request refused, or that would be; `None`:
    /// not logged per request.
    pub log: Option<&'static str>,
    /// The report column it is counted in.
    pub column: ReportColumn,
}

const fn row(
    outcome: Outcome,
    word: &'static str,
    meaning: &'static str,
    status: Option<u16>,
    log: Option<&'static str>,
    column: ReportColumn,
) -> OutcomeInfo {
    OutcomeInfo {
        outcome,
        word,
        meaning,
        status,
        log,
        column,
    }
}

/// The outcome table, in [`Outcome`]'s order (a test holds each row at its outcome's place).
pub const OUTCOMES: [OutcomeInfo; 16] = [
    row(
        Outcome::Pass,
        "pass",
        "proxied without robots.txt: not a crawler, mode off, robots.txt itself, a passed policy",
        None,
        None,
        ReportColumn::Passed,
    ),
    row(
        Outcome::Allowed,
        "allowed",
        "a crawler robots.txt allows",
        None,
        None,
        ReportColumn::Allowed,
    ),
    row(
        Outcome::Blocked,
        "blocked",
        "refused for robots.txt or the policy",
        Some(403),
        Some("blocked"),
        ReportColumn::Blocked,
    ),
    row(
        Outcome::WouldBlock,
        "would_block",
        "as blocked, but only reported",
        None,
        Some("would block (report mode)"),
        ReportColumn::WouldBlock,
    ),
    row(
        Outcome::Limited,
        "limited",
        "429 for Crawl-delay",
        Some(429),
        None,
        ReportColumn::Limited,
    ),
    row(
        Outcome::WouldLimit,
        "would_limit",
        "as limited, but only reported",
        None,
        None,
        ReportColumn::WouldLimit,
    ),
    row(
        Outcome::Banned,
        "banned",
        "403 to a banned address",
        Some(403),
        None,
        ReportColumn::Banned,
    ),
    row(
        Outcome::Trap,
        "trap",
        "a trap path, refused",
        Some(404),
        Some("trap hit, refused"),
        ReportColumn::Trap,
    ),
    row(
        Outcome::WouldTrap,
        "would_trap",
        "a trap path, reported",
        None,
        Some("trap hit (report)"),
        ReportColumn::WouldTrap,
    ),
    row(
        Outcome::Disguised,
        "disguised",
        "a disguised crawler, refused",
        Some(403),
        Some("blocked, disguised crawler"),
        ReportColumn::Disguised,
    ),
    row(
        Outcome::WouldDisguised,
        "would_disguised",
        "a disguised crawler, reported",
        None,
        Some("would_block (report), disguised crawler"),
        ReportColumn::WouldDisguised,
    ),
    row(
        Outcome::PaymentRequired,
        "payment_required",
        "402 with the licence",
        Some(402),
        Some("answered with the licence (402)"),
        // A licence answer refuses the page as a block does.
        ReportColumn::Blocked,
    ),
    row(
        Outcome::WouldBan,
        "would_ban",
        "a banned address, proxied: the origin only reports",
        None,
        None,
        ReportColumn::WouldBan,
    ),
    row(
        Outcome::BanSuspended,
        "ban_suspended",
        "a banned address, proxied: bans are off",
        None,
        None,
        ReportColumn::BanSuspended,
    ),
    row(
        Outcome::RateLimited,
        "rate_limited",
        "429 for the operator's rate budget (policy.rates)",
        Some(429),
        None,
        ReportColumn::RateLimited,
    ),
    row(
        Outcome::WouldRateLimit,
        "would_rate_limit",
        "as rate_limited, but only reported",
        None,
        None,
        ReportColumn::WouldRateLimit,
    ),
];

impl Outcome {
    /// Every outcome, in the table's order.
    pub const ALL: [Outcome; 16] = {
        let mut all = [Outcome::Pass; 16];
        let mut i = 0;
        while i < OUTCOMES.len() {
            all[i] = OUTCOMES[i].outcome;
            i += 1;
        }
        all
    };

    /// Its row of the outcome table.
    pub fn info(self) -> &'static OutcomeInfo {
        &OUTCOMES[self as usize]
    }

    /// The `decision` label of `robotsguard_requests_total`.
    pub fn as_str(self) -> &'static str {
        self.info().word
    }

    /// Whether robotsguard answers the request itself with an error (nothing of the origin's
    /// reaches the client).
    pub fn refuses(self) -> bool {
        self.info().status.is_some()
    }
}

impl ReportColumn {
    /// The column's name in the reports' JSON and CSV and the console's table.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportColumn::Passed => "passed",
            ReportColumn::Allowed => "allowed",
            ReportColumn::Blocked => "blocked",
            ReportColumn::WouldBlock => "would_block",
            ReportColumn::Limited => "limited",
            ReportColumn::WouldLimit => "would_limit",
            ReportColumn::Banned => "banned",
            ReportColumn::Trap => "trap",
            ReportColumn::WouldTrap => "would_trap",
            ReportColumn::Disguised => "disguised",
            ReportColumn::WouldDisguised => "would_disguised",
            ReportColumn::WouldBan => "would_ban",
            ReportColumn::BanSuspended => "ban_suspended",
            ReportColumn::RateLimited => "rate_limited",
            ReportColumn::WouldRateLimit => "would_rate_limit",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_stands_at_its_outcomes_place_and_each_word_is_its_serde_name() {
        for (i, row) in OUTCOMES.iter().enumerate() {
            assert_eq!(row.outcome as usize, i, "{row:?}");
            assert_eq!(row.outcome.info(), row);
            let serialized = serde_json::to_string(&row.outcome).expect("serializes");
            assert_eq!(serialized, format!("\"{}\"", row.word));
        }
        let mut words: Vec<&str> = OUTCOMES.iter().map(|row| row.word).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), OUTCOMES.len(), "a word twice");
    }

    #[test]
    fn a_refused_outcome_has_a_status_and_a_reported_one_none() {
        for row in &OUTCOMES {
            if row.word.starts_with("would_") || row.word == "ban_suspended" {
                assert!(!row.outcome.refuses(), "{row:?}");
            }
        }
        assert!(Outcome::Trap.refuses());
        assert_eq!(Outcome::Trap.info().status, Some(404));
        assert_eq!(
            Outcome::PaymentRequired.info().column,
            ReportColumn::Blocked
        );
    }
}
