//! What checking a crawler's claim found, and what it does to a decision: an impostor of a
//! verifiable crawler is refused (`impostors: block`), reported, or ignored. How the claim is
//! checked (range lists, reverse DNS, signatures) is the `verify` module's job; this is the
//! outcome the decision, logs, metrics and `/explain` share.

use std::sync::Arc;

use serde::Serialize;

use super::{Decision, Outcome, Why};
use crate::config::{Impostors, Mode};

/// The verdict on one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VerificationResult {
    /// The address is in the operator's published ranges, its reverse DNS name is the
    /// operator's and confirms forward, or the request carries a valid signature of the agent.
    Verified,
    /// The crawler's operator publishes who it is, every source answered definitely, and the
    /// answers contradict the claim (the address is in none of its lists; its reverse DNS name,
    /// when it has domains, is another's).
    Impostor,
    /// Nothing definite: no published data for this crawler, data not loaded yet, a reverse DNS
    /// answer that proves nothing (no name, `NXDOMAIN`, a failure or timeout, reverse DNS
    /// unavailable), or an address that is not public. Never treated as an impostor.
    Unverified,
}

impl VerificationResult {
    /// The `result` label of `robotsguard_crawler_verifications_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerificationResult::Verified => "verified",
            VerificationResult::Impostor => "impostor",
            VerificationResult::Unverified => "unverified",
        }
    }
}

/// A checked claim: which crawler, the verdict, and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// The crawler the request claims to be (catalogue name).
    pub crawler: String,
    /// The verdict.
    pub result: VerificationResult,
    /// How, in a sentence for logs and `/explain` (`the address is in
    /// https://openai.com/gptbot.json`, `its reverse DNS name crawl-66-249-66-1.googlebot.com
    /// resolves back to the address`, `reverse DNS proves nothing: the address has no reverse
    /// DNS name`).
    pub how: String,
    /// What a verified claim stood on, for evidence records (`None` unless verified).
    #[serde(skip)]
    pub by: Option<VerifiedBy>,
}

/// What a verified claim stood on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifiedBy {
    /// The address is in this published IP range list (its entry: a URL or `file:` path),
    /// fetched at that time.
    RangeList {
        /// The list's entry as written in the catalogue or config.
        list: String,
        /// When the copy in force was fetched.
        fetched_at: Option<std::time::SystemTime>,
    },
    /// This reverse DNS name, one of the operator's, resolves back to the address.
    ReverseDns {
        /// The name.
        name: String,
    },
    /// A valid Web Bot Auth signature of this agent.
    WebBotAuth {
        /// The signing agent.
        agent: String,
        /// The signature's `keyid`: the JWK thumbprint of the agent's key that verified it.
        keyid: Option<String>,
    },
}

impl Verification {
    /// An unverified claim, for `how`.
    pub fn unverified(crawler: &str, how: impl Into<String>) -> Verification {
        Verification {
            crawler: crawler.to_owned(),
            result: VerificationResult::Unverified,
            how: how.into(),
            by: None,
        }
    }

    /// The verdict for a request a valid Web Bot Auth signature of `agent` (by its key
    /// `keyid`) identified as `crawler`.
    pub fn by_signature(crawler: &str, agent: &str, keyid: Option<&str>) -> Arc<Verification> {
        Arc::new(Verification {
            crawler: crawler.to_owned(),
            result: VerificationResult::Verified,
            how: format!("a valid Web Bot Auth signature of {agent}"),
            by: Some(VerifiedBy::WebBotAuth {
                agent: agent.to_owned(),
                keyid: keyid.map(str::to_owned),
            }),
        })
    }
}

impl Decision {
    /// Whether a verification could change this decision: a crawler whose request robots.txt
    /// or the policy would let through. Requests already refused, exempt paths, allowed clients,
    /// `/robots.txt` and origins in mode `off` are not checked (nothing would change), and
    /// neither are crawlers of origins that ignore impostors.
    pub fn wants_verification(&self) -> bool {
        // A content signal only reported leaves the request as open as robots.txt allowed it.
        let open = matches!(self.outcome, Outcome::Pass | Outcome::Allowed)
            || (self.outcome == Outcome::WouldBlock && self.why == Why::ContentSignal);
        let checkable = !matches!(
            self.why,
            Why::NotCrawler
                | Why::ModeOff
                | Why::RobotsTxtPath
                | Why::ExemptPath
                | Why::AllowedClient
        );
        open && checkable && self.origin.config.impostors != Impostors::Ignore
    }

    /// The verdict on the request's claim as the reports, the log lines, `/explain` and the
    /// console word it: what checking found, or `unverified` for a crawler whose claim was not
    /// checked (a claim is never taken as proven); `None` when no crawler is claimed.
    pub fn verification_result(&self) -> Option<VerificationResult> {
        match self.verification.as_ref().map(|v| v.result) {
            None if self.crawler.is_some() && self.why != Why::NotCrawler => {
                Some(VerificationResult::Unverified)
            }
            result => result,
        }
    }

    /// The crawler names the request claims: the deciding crawler first, then the others its
    /// User-Agent names.
    pub fn claimed(&self) -> impl Iterator<Item = &str> {
        self.crawler
            .as_ref()
            .map(|crawler| crawler.name())
            .into_iter()
            .chain(self.also_named.iter().map(String::as_str))
    }

    /// Records `verification`; for an impostor, applies the origin's `impostors` action:
    /// `block` refuses the request (`report` mode reports it instead), `report` reports it.
    pub fn apply_verification(&mut self, verification: Arc<Verification>) {
        if verification.result == VerificationResult::Impostor && self.wants_verification() {
            let refuse = self.origin.config.impostors == Impostors::Block
                && self.origin.config.mode != Mode::Report;
            self.outcome = if refuse {
                Outcome::Blocked
            } else {
                Outcome::WouldBlock
            };
            self.why = Why::Impostor;
            self.rule = None;
            // Refused for who it is, not for what the site's lines say.
            self.clear_content_signal();
        }
        self.verification = Some(verification);
    }
}
