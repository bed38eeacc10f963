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
