//! One preview of a request for `/explain` and the console's Explain: the judgment as the proxy
//! would make it now, and what checking the crawler's claim from the client finds, worded once
//! for both (a crawler not checked is `unverified`, as the reports count it). The DNS lookups a
//! preview makes come out of `/explain`'s allowance ([`super::throttle`]).

use std::sync::Arc;

use crate::enforce::{Decision, Verification};
use crate::judge::{Facts, Judge, Judgment, Mode};
use crate::metrics::METRICS;
use crate::snapshot::Snapshot;

use super::throttle::Throttles;

/// The request `/explain` and the console's Explain describe, read from their query parameters
/// (`host`, `ua`, `path`, `client`, `method`) by one parser: the same words mean the same
/// request on both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExplainQuery<'q> {
    /// `host`: the Host asked about.
    pub host: &'q str,
    /// `ua`: the User-Agent (none when absent).
    pub user_agent: &'q str,
    /// `path`: the path and query, `/` when absent, a `/` put before one without.
    pub target: String,
    /// `client`: the client's address, when given (blank is not given).
    pub client: Option<std::net::IpAddr>,
    /// `method`: `GET` when absent.
    pub method: http::Method,
}

/// Why an explain query does not describe a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExplainQueryError {
    /// No `host` (or a blank one).
    NoHost,
    /// `client` is not an IP address.
    Client,
    /// `method` is not an HTTP method.
    Method,
}

impl<'q> ExplainQuery<'q> {
    /// Reads the query whose parameters `param` gives.
    pub(crate) fn parse(
        param: impl Fn(&str) -> Option<&'q str>,
    ) -> Result<ExplainQuery<'q>, ExplainQueryError> {
        let host = param("host")
            .filter(|host| !host.trim().is_empty())
            .ok_or(ExplainQueryError::NoHost)?;
        let client = match param("client").map(str::trim).filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(
                text.parse::<std::net::IpAddr>()
                    .map_err(|_| ExplainQueryError::Client)?
                    .to_canonical(),
            ),
        };
        let method = match param("method").map(str::trim) {
            None => http::Method::GET,
            Some(method) => http::Method::from_bytes(method.as_bytes())
                .map_err(|_| ExplainQueryError::Method)?,
        };
        let path = param("path").unwrap_or("/");
        let target = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        Ok(ExplainQuery {
            host,
            user_agent: param("ua").unwrap_or(""),
            target,
            client,
            method,
        })
    }

    /// The facts the preview judges: what a request with no signature and no Fetch Metadata
    /// would carry.
    pub(crate) fn facts(&self) -> Facts<'_> {
        Facts {
            host: self.host.as_bytes(),
            user_agent: self.user_agent.as_bytes(),
            target: self.target.as_bytes(),
            method: &self.method,
            client: self.client,
            signed: None,
            keys_unavailable: false,
            request_id: None,
            fetch: crate::judge::Fetch::default(),
        }
    }
}

/// What `/explain` and the console's Explain show for one request: the judgment, and what
/// checking the crawler's claim from the client found, worded once for both.
pub(crate) struct Preview {
    /// The judgment, as the proxy would make it now.
    pub judgment: Judgment,
    /// The verification shown: what checking the claim found (also when the judgment had no
    /// need to check it), or, for a crawler not checked, `unverified` and why. `None` for a
    /// request that claims no crawler.
    pub verification: Option<Arc<Verification>>,
    /// A claim was left unchecked because `/explain`'s DNS lookups are used up for now.
    pub lookups_limited: bool,
}

/// Judges `facts` in preview for `caller` (the admin client's address): DNS lookups for the
/// `client` claim are taken from `/explain`'s allowance ([`Throttles`]); beyond it the claim is
/// left unverified and the preview says so.
pub(crate) async fn preview(
    snapshot: &Snapshot,
    verifier: &crate::verify::Verifier,
    store: &crate::store::Store,
    throttles: &Throttles,
    caller: Option<std::net::IpAddr>,
    facts: &Facts<'_>,
) -> Preview {
    let lookups = match facts.client {
        Some(address) if verifier.may_look_up(address) => throttles.take_explain_lookup(caller),
        _ => true,
    };
    if !lookups {
        METRICS
            .admin_refusals
            .with_label_values(&["explain_lookups"])
            .inc();
    }
    let judge = Judge {
        snapshot,
        verifier,
        store,
    };
    let mode = if lookups {
        Mode::Preview
    } else {
        Mode::PreviewWithoutLookups
    };
    let judgment = judge.judge(facts, mode).await;
    let mut checked = judgment
        .decision
        .as_ref()
        .and_then(|decision| decision.verification.clone());
    // The proxy verifies only what verification could change; the preview shows what checking
    // the claim finds whenever a client is given, without letting it change the answer.
    if let (None, Some(decision), Some(address)) = (&checked, &judgment.decision, facts.client) {
        checked = if lookups {
            verifier.verify(snapshot, decision, address).await
        } else {
            verifier
                .verify_without_lookups(snapshot, decision, address)
                .await
        };
    }
    let lookups_limited = checked
        .as_ref()
        .is_some_and(|v| v.how == crate::verify::NOT_LOOKED_UP);
    let verification = judgment
        .decision
        .as_ref()
        .and_then(|decision| shown_verification(decision, checked, facts.client));
    Preview {
        judgment,
        verification,
        lookups_limited,
    }
}

/// The verification a preview shows: `checked` when the claim was checked; for a crawler that
/// was not, `unverified` (as the reports count it) with why; `None` when no crawler is claimed.
fn shown_verification(
    decision: &Decision,
    checked: Option<Arc<Verification>>,
    client: Option<std::net::IpAddr>,
) -> Option<Arc<Verification>> {
    if checked.is_some() {
        return checked;
    }
    let crawler = decision.crawler.as_ref()?;
    decision.verification_result()?;
    let why = if client.is_none() {
        "not checked: no client address given (add client=ADDRESS)"
    } else {
        "nothing to check against: its operator publishes no IP ranges, reverse DNS names or signing keys"
    };
    Some(Arc::new(Verification::unverified(crawler.name(), why)))
}
