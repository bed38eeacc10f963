//! A request's Web Bot Auth signature, read and checked for [`super::Guard::request_filter`]
//! and the decision listener:
//! the crawler a valid signature identifies, whatever the User-Agent says, and whether its
//! agent's keys are not loaded (then the judgment can neither accept nor refuse it).

use pingora::http::RequestHeader;
use pingora::proxy::Session;

use super::forward::X_FORWARDED_PROTO;
use super::request::is_tls;
use crate::judge::Signed;
use crate::metrics::METRICS;
use crate::snapshot::Snapshot;
use crate::verify::signature::SignatureOutcome;
use crate::verify::Verifier;

/// What the request's signature says.
#[derive(Debug, Default)]
pub(crate) struct SignatureRead {
    /// The crawler a valid signature identifies.
    pub(crate) signed: Option<Signed>,
    /// Signed by a known agent whose keys are not loaded.
    pub(crate) keys_unavailable: bool,
}

/// Whether the client's request came over https, as a signature's `@scheme` names it: a TLS
/// connection, or a trusted proxy that says so (`X-Forwarded-Proto`).
pub(super) fn signed_over_https(
    session: &Session,
    request: &RequestHeader,
    peer_trusted: bool,
) -> bool {
    let forwarded_https = peer_trusted
        && request
            .headers
            .get(X_FORWARDED_PROTO)
            .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    is_tls(session) || forwarded_https
}

/// Checks the signature of `request` to `authority` (the proxy's and the decision listener's
/// one way): counted in `robotsguard_web_bot_auth_signatures_total` under the origin's Web Bot
/// Auth mode.
pub(crate) fn read_signature(
    verifier: &Verifier,
    snapshot: &Snapshot,
    request: &RequestHeader,
    authority: &str,
    https: bool,
) -> SignatureRead {
    let scheme = if https { "https" } else { "http" };
    let checked = verifier.signature_check(request, authority, scheme);
    let wba_mode = crate::judge::web_bot_auth_mode(snapshot, verifier, authority.as_bytes());
    if !matches!(checked.outcome, SignatureOutcome::Absent) {
        METRICS
            .web_bot_auth_signatures
            .with_label_values(&[wba_mode.as_str(), checked.outcome.as_str()])
            .inc();
        tracing::debug!(mode = wba_mode.as_str(), outcome = ?checked.outcome, "Web Bot Auth signature");
    }
    match checked.outcome {
        SignatureOutcome::Verified { agent, crawler } => SignatureRead {
            signed: Some(Signed {
                agent,
                crawler,
                nonce: checked.nonce,
                lifetime: checked.lifetime,
                created: checked.created,
                digest: checked.digest,
                keyid: checked.keyid,
            }),
            keys_unavailable: false,
        },
        SignatureOutcome::Unavailable(_) => SignatureRead {
            signed: None,
            keys_unavailable: true,
        },
        _ => SignatureRead::default(),
    }
}
