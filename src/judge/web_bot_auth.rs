//! Web Bot Auth's own refusals (phase 5a of the judgment, [`Judging::web_bot_auth`]), under
//! `optional` and `required` alike: a replayed signature (429), and under `required`, a claim of
//! a signing crawler without a valid signature (403) or with one whose keys are not loaded
//! (503).

use std::time::Duration;

use super::phases::Judging;
use super::{Refusal, RefusedFor, Signed};
use crate::config::{Mode as OriginMode, WebBotAuthMode};
use crate::enforce::{Decision, Outcome};
use crate::metrics::METRICS;

impl Judging<'_, '_> {
    /// The refusal Web Bot Auth gives the request, if any: a verified signature whose nonce was
    /// seen before while still valid (429; recorded when applied only, so a preview never
    /// spends a nonce), and under `required`, a claim of a crawler that has a signing agent,
    /// allowed by robots.txt on an enforcing origin, without a valid signature (403; both carry
    /// a fresh `Accept-Signature`), or, when its signature's agent has no keys loaded, 503 with
    /// `Retry-After`. Each is counted in `robotsguard_web_bot_auth_refusals_total` (applied).
    pub(super) async fn web_bot_auth_refusal(
        &self,
        decision: &Decision,
        signed: Option<&Signed>,
        wba_mode: WebBotAuthMode,
    ) -> Option<Refusal> {
        if wba_mode == WebBotAuthMode::Observe {
            return None;
        }
        let why = match signed {
            Some(signed) => self.replayed(signed).await.then(|| RefusedFor::Replayed {
                accept_signature: crate::verify::signature::accept_signature(),
            })?,
            None => self.unsigned_refusal(decision, wba_mode)?,
        };
        let reason = match why {
            RefusedFor::Replayed { .. } => "replayed",
            RefusedFor::KeysUnavailable => "keys_unavailable",
            _ => "signature_required",
        };
        self.effects.record(|| {
            METRICS
                .web_bot_auth_refusals
                .with_label_values(&[decision.origin.name(), reason])
                .inc()
        });
        Some(Refusal::new(why))
    }

    /// Whether a verified signature is a replay: its nonce seen before, or, without one,
    /// [`Judging::nonceless_replayed`].
    async fn replayed(&self, signed: &Signed) -> bool {
        match signed.nonce.as_deref() {
            Some(nonce) => {
                self.effects
                    .nonce_replayed(self.store, &signed.agent, nonce, signed.lifetime)
                    .await
            }
            None => self.nonceless_replayed(signed).await,
        }
    }

    /// Under `required`, a request without a verified signature that claims a crawler with a
    /// signing agent, allowed by robots.txt on an enforcing origin: told to come back when the
    /// agent it is signed by has no keys loaded, else refused as unsigned.
    fn unsigned_refusal(
        &self,
        decision: &Decision,
        wba_mode: WebBotAuthMode,
    ) -> Option<RefusedFor> {
        if wba_mode != WebBotAuthMode::Required
            || decision.outcome != Outcome::Allowed
            || decision.origin.config.mode != OriginMode::Enforce
        {
            return None;
        }
        let catalogue = self.snapshot.identifier.catalogue();
        let claims_signer = decision
            .crawler
            .as_ref()
            .map(|crawler| crawler.name())
            .into_iter()
            .chain(
                decision
                    .also_named
                    .iter()
                    .filter_map(|name| catalogue.get(name).map(|def| def.name.as_str())),
            )
            .any(|name| self.verifier.has_signing_agent(name));
        if !claims_signer {
            return None;
        }
        Some(if self.facts.keys_unavailable {
            RefusedFor::KeysUnavailable
        } else {
            RefusedFor::SignatureRequired {
                accept_signature: crate::verify::signature::accept_signature(),
            }
        })
    }

    /// Whether a verified signature without a nonce is refused as a replay: unless its agent is
    /// in `nonceless_agents`, one made more than `nonceless_window` ago (clock skew tolerated),
    /// or one first sent from another address within that time (applying records the first
    /// address; a preview only reads the time). A signature checked elsewhere (no `created` or
    /// digest) is not bound.
    async fn nonceless_replayed(&self, signed: &Signed) -> bool {
        use crate::verify::signature::NoncelessRule;
        let NoncelessRule::Bounded { window, skew } = self.verifier.nonceless_rule(&signed.agent)
        else {
            return false;
        };
        let Some(created) = signed.created else {
            return false;
        };
        let now = std::time::SystemTime::now();
        let Some(valid_until) = created.checked_add(window.saturating_add(skew)) else {
            return false;
        };
        let Ok(left) = valid_until.duration_since(now) else {
            // Made longer ago than the window: a signature kept and sent again.
            return true;
        };
        let lifetime = left.min(signed.lifetime).max(Duration::from_secs(1));
        self.effects
            .signature_from_elsewhere(
                self.store,
                &signed.agent,
                signed.digest.as_ref(),
                self.facts.client,
                lifetime,
            )
            .await
    }
}
