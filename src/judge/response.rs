//! The judgment's last word, made on the origin's answer: a page's own AI preferences in its
//! response head (`response_signals`). Only the proxy can make it (after the request was judged
//! and sent), so `/explain` and previews say that it is made there; it is always applied.
//!
//! A crawler whose purpose the page refuses is judged as a robots.txt line refusing it would
//! judge it: a crawler serving the purpose through its operator's own control token, or serving
//! search too (`content_signals.multi_purpose: allow`), is spared.

use std::net::IpAddr;

use http::HeaderMap;

use super::{licence_url, Refusal, RefusedFor};
use crate::config::{Mode as OriginMode, SignalAction, Spared};
use crate::enforce::response::{self, carries_signals, PageSignals};
use crate::enforce::{Decision, Outcome, ResponseSignalHit, Why};
use crate::metrics::METRICS;

/// The request a response answers, as the log line of a refusal shows it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The request method.
    pub method: &'a http::Method,
    /// The path and query, as sent.
    pub target: &'a [u8],
    /// The client, when known.
    pub client: Option<IpAddr>,
    /// The request id the access log shows, when there is one.
    pub request_id: Option<&'a str>,
}

/// Judges the origin's response head `headers` for the request `decision` let through: when
/// the page refuses one of the crawler's purposes (and the crawler is not spared), the decision
/// becomes `blocked` or `payment_required` (`response_signals.action: enforce` under `mode:
/// enforce`, returning the refusal to answer instead of the response) or `would_block` (the
/// response passes), its why [`Why::ResponseSignal`], counted and logged. A response without
/// `Content-Usage` or `X-Robots-Tag`, or for anyone but a crawler robots.txt let through, costs
/// a few comparisons.
pub fn judge_response(
    decision: &mut Decision,
    headers: &HeaderMap,
    asked: &Asked<'_>,
) -> Option<Refusal> {
    if !to_judge(decision, headers) {
        return None;
    }
    let settings = decision.origin.config.response_signals;
    if settings.action == SignalAction::Ignore {
        return None;
    }
    let crawler = decision.crawler.as_ref()?;
    let signals = response::read(headers, crawler.tokens(), response::is_image(headers));
    let origin = decision.origin.clone();
    let origin = origin.name();
    if signals.malformed > 0 {
        METRICS
            .response_signals
            .with_label_values(&[origin, response::Signal::ContentUsage.as_str(), "malformed"])
            .inc_by(u64::from(signals.malformed));
    }
    let hit = refused_purpose(decision, &signals)?;
    let enforce = settings.action == SignalAction::Enforce
        && decision.origin.config.mode == OriginMode::Enforce;
    METRICS
        .response_signals
        .with_label_values(&[
            origin,
            hit.signal.as_str(),
            if enforce { "enforce" } else { "report" },
        ])
        .inc();
    decision.refuse_for_response(hit);
    decision.outcome = match (enforce, settings.status) {
        (false, _) => Outcome::WouldBlock,
        (true, 402) => Outcome::PaymentRequired,
        (true, _) => Outcome::Blocked,
    };
    crate::logs::disallowed_request(
        decision,
        || {
            asked
                .client
                .map_or_else(|| "unknown".to_string(), |c| c.to_string())
        },
        asked.method,
        &String::from_utf8_lossy(asked.target),
        asked.request_id,
    );
    if !enforce {
        return None;
    }
    let license = (settings.status == 402)
        .then(|| licence_url(&decision.origin, &decision.robots))
        .flatten();
    Some(Refusal {
        status: settings.status,
        why: RefusedFor::ResponseSignal { license },
    })
}

/// Hands a refusal [`judge_response`] made to the evidence writer, as the judgment hands its
/// own: event `refusal` (and `payment_required` for a 402), when `evidence.events` selects it.
/// `host` and `user_agent` are the request's as sent, `status` the refusal's, `read_robots` when
/// the client last read the origin's robots.txt.
pub fn record_refusal(
    decision: &Decision,
    asked: &Asked<'_>,
    host: &[u8],
    user_agent: &[u8],
    status: u16,
    read_robots: Option<std::time::SystemTime>,
) {
    let Some(evidence) = crate::evidence::active() else {
        return;
    };
    let events = crate::evidence::Events {
        refusal: true,
        payment_required: decision.outcome == Outcome::PaymentRequired,
        ..Default::default()
    };
    if !evidence.wants(events) {
        return;
    }
    evidence.offer(&crate::evidence::Observed {
        decision,
        host,
        method: asked.method,
        target: asked.target,
        client: asked.client,
        user_agent,
        status: Some(status),
        ban_strikes: None,
        read_robots,
    });
}

/// Whether the response `headers` to the request `decision` let through are judged: a crawler's
/// request robots.txt let through (`judged`), answered with `Content-Usage` or `X-Robots-Tag`.
/// What every proxied response without them costs.
pub fn to_judge(decision: &Decision, headers: &HeaderMap) -> bool {
    judged(decision) && carries_signals(headers)
}

/// Whether a decision is one a page's preference can still change: a crawler's request that
/// robots.txt let through (allowed, or reported for something else that proxies it). A crawler
/// the policy passes, an exempt path, an allowed client, robots.txt itself and the licence
/// terms are not, nor a request already refused or reported.
fn judged(decision: &Decision) -> bool {
    decision.crawler.is_some()
        && matches!(
            decision.outcome,
            Outcome::Allowed | Outcome::WouldLimit | Outcome::WouldBan | Outcome::BanSuspended
        )
        && matches!(
            decision.why,
            Why::Rule | Why::NoRuleMatched | Why::NoGroup | Why::AllowAll
        )
}

/// The first of the crawler's purposes the page refuses that it is not spared, as the hit the
/// decision cites; the refusals it is spared are recorded in the decision and counted
/// (`spared`).
fn refused_purpose(decision: &mut Decision, signals: &PageSignals) -> Option<ResponseSignalHit> {
    let crawler = decision.crawler.as_ref()?;
    let purposes = crawler.purposes();
    let controlled = crawler.controls().purposes();
    let multi_purpose = decision.origin.config.content_signals.multi_purpose;
    let mut spared = decision.spared;
    let mut hit = None;
    for purpose in purposes.iter() {
        let Some(refusal) = signals.refusal_of(purpose) else {
            continue;
        };
        let counted_as = match crate::config::spared(purpose, purposes, controlled, multi_purpose) {
            Some(Spared::Token) => {
                spared.by_token = spared.by_token.with(purpose);
                "spared"
            }
            Some(Spared::Search) => {
                spared.for_search = spared.for_search.with(purpose);
                "spared"
            }
            None => {
                hit.get_or_insert(ResponseSignalHit {
                    purpose,
                    signal: refusal.signal,
                    value: refusal.value.clone(),
                });
                continue;
            }
        };
        METRICS
            .response_signals
            .with_label_values(&[decision.origin.name(), refusal.signal.as_str(), counted_as])
            .inc();
    }
    decision.spared = spared;
    hit
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::super::tests::{bench_for, Bench, BROWSER, GPTBOT};
    use super::super::{Facts, Mode};
    use super::*;

    const GOOGLEBOT: &[u8] =
        b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    const BINGBOT: &[u8] =
        b"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";
    const ROBOTS: &str = "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}\n    impostors: ignore";

    fn head(lines: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in lines {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("a name"),
                HeaderValue::from_str(value).expect("a value"),
            );
        }
        headers
    }

    /// The proxy's decision for a GET of `target` by `ua`, then judged on `headers`: the
    /// outcome word, the refusal's status, and the decision.
    fn on_response(
        bench: &Bench,
        ua: &[u8],
        target: &str,
        headers: &HeaderMap,
    ) -> (&'static str, Option<u16>, Decision) {
        let facts = Facts::get(b"shop.example", ua, target.as_bytes());
        let mut decision = bench
            .judge(&facts, Mode::Apply)
            .decision
            .expect("a decision");
        let asked = Asked {
            method: &http::Method::GET,
            target: target.as_bytes(),
            client: None,
            request_id: None,
        };
        let refusal = judge_response(&mut decision, headers, &asked);
        (
            decision.outcome.as_str(),
            refusal.map(|r| r.status),
            decision,
        )
    }

    #[test]
    fn a_refused_purpose_refuses_reports_or_spares_as_robots_txt_lines_do() {
        let enforce = bench_for(
            "",
            &format!("{ROBOTS}\n    response_signals: {{action: enforce}}"),
        );
        let usage = head(&[("content-usage", "train-ai=n")]);
        let (outcome, status, decision) = on_response(&enforce, GPTBOT, "/a", &usage);
        assert_eq!((outcome, status), ("blocked", Some(403)));
        assert_eq!(decision.why, Why::ResponseSignal);
        let rule = decision.rule.as_ref().expect("the header as the rule");
        assert_eq!(rule.directive, "response-header");
        assert_eq!(rule.pattern, "Content-Usage: train-ai=n");
        assert!(
            decision.reason().contains("Content-Usage"),
            "{}",
            decision.reason()
        );
        // Googlebot's training has its own token; bingbot also searches: both spared.
        let (outcome, status, decision) = on_response(&enforce, GOOGLEBOT, "/a", &usage);
        assert_eq!((outcome, status), ("allowed", None));
        assert!(!decision.spared.by_token.is_empty());
        let (outcome, _, decision) = on_response(&enforce, BINGBOT, "/a", &usage);
        assert_eq!(outcome, "allowed");
        assert!(!decision.spared.for_search.is_empty());
        // Browsers, and what robots.txt already refused, are not judged again.
        assert_eq!(on_response(&enforce, BROWSER, "/a", &usage).0, "pass");
        let (outcome, status, decision) = on_response(&enforce, GPTBOT, "/private/x", &usage);
        assert_eq!((outcome, status), ("blocked", None));
        assert_eq!(decision.why, Why::Rule);
        // No header, nothing: the response passes.
        assert_eq!(
            on_response(&enforce, GPTBOT, "/a", &HeaderMap::new()).0,
            "allowed"
        );
        // multi_purpose: block refuses bingbot too.
        let strict = bench_for(
            "",
            &format!("{ROBOTS}\n    response_signals: {{action: enforce}}\n    content_signals: {{multi_purpose: block}}"),
        );
        assert_eq!(on_response(&strict, BINGBOT, "/a", &usage).0, "blocked");
        // report, and enforce under mode: report: would_block, no refusal.
        for origin in [
            format!("{ROBOTS}\n    response_signals: {{action: report}}"),
            format!("{ROBOTS}\n    mode: report\n    response_signals: {{action: enforce}}"),
        ] {
            let bench = bench_for("", &origin);
            assert_eq!(
                on_response(&bench, GPTBOT, "/a", &usage).0,
                "would_block",
                "{origin}"
            );
        }
        // ignore: not read.
        let ignore = bench_for(
            "",
            &format!("{ROBOTS}\n    response_signals: {{action: ignore}}"),
        );
        assert_eq!(on_response(&ignore, GPTBOT, "/a", &usage).0, "allowed");
    }

    #[test]
    fn status_402_is_payment_required_with_the_licence() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    block: {{license_url: \"https://shop.example/terms\"}}\n    response_signals: {{action: enforce, status: 402}}"),
        );
        let facts = Facts::get(b"shop.example", GPTBOT, b"/a");
        let mut decision = bench
            .judge(&facts, Mode::Apply)
            .decision
            .expect("a decision");
        let asked = Asked {
            method: &http::Method::HEAD,
            target: b"/a",
            client: None,
            request_id: None,
        };
        let refusal = judge_response(
            &mut decision,
            &head(&[("x-robots-tag", "GPTBot: noai")]),
            &asked,
        )
        .expect("refused");
        assert_eq!(refusal.status, 402);
        assert!(matches!(
            refusal.why,
            RefusedFor::ResponseSignal { license: Some(ref url) } if url == "https://shop.example/terms"
        ));
        assert_eq!(decision.outcome, Outcome::PaymentRequired);
    }
}
