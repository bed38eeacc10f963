//! [`super::Judge::judge`] as named phases, in the order the judgment runs them:
//!
//! 1. [`Judging::identify`]: route the Host, name the crawler, decide the policy and the
//!    robots.txt verdict ([`crate::enforce`], pure);
//! 2. [`Judging::robots_txt`]: a robots.txt read recorded, the copy in force served;
//! 3. [`Judging::bans`]: a banned address refused (or counted while its ban is suspended);
//! 4. [`Judging::signals`]: a trap hit, a disguised crawler ([`super::signals`]);
//! 5. [`Judging::web_bot_auth`] and [`Judging::verify`]: signatures' refusals, then the claim
//!    checked (signature, IP ranges, reverse DNS);
//! 6. [`Judging::budgets`]: the Crawl-delay budget; [`Judging::rates`]: the operator's rate
//!    budget (`policy.rates`);
//! 7. [`Judging::strikes`]: a robots.txt violation, its strike and ban;
//! 8. [`Judging::answer`]: the licence answer, the log line, the answer.
//!
//! Each phase either hands the decision on ([`ControlFlow::Continue`]) or ends the judgment with
//! its answer ([`ControlFlow::Break`]). What a phase may change is asked of one value,
//! [`Effects`]: applying and previewing run the same phases.

use std::net::IpAddr;
use std::ops::ControlFlow::{self, Break, Continue};
use std::time::{Duration, Instant};

use super::{
    asks_for_robots_txt, ban_suspension, banned_browser_request, crawl_delay_action,
    licence_answer, log_disallowed, targets_licence, Answer, Effects, Facts, Judgment, Refusal,
    RefusedFor, Signed,
};
use crate::config::{
    BanScope, CrawlDelayAction, Mode as OriginMode, OffendersAction, WebBotAuthMode,
};
use crate::enforce::{
    decide_routed, is_blank_user_agent, route, Decision, Outcome, Refused,
    Request as DecideRequest, Why,
};
use crate::metrics::METRICS;
use crate::snapshot::Snapshot;
use crate::store::{Store, StrikeRequest};
use crate::tables::offenders::{Ban, Strike};
use crate::verify::Verifier;

/// A phase's result: the decision handed on, or the judgment it ended with.
pub(super) type Step<T> = ControlFlow<Judgment, T>;

/// One judgment in progress: what it reads and what it may change.
pub(super) struct Judging<'r, 'f> {
    pub(super) snapshot: &'r Snapshot,
    pub(super) verifier: &'r Verifier,
    pub(super) store: &'r Store,
    pub(super) facts: &'r Facts<'f>,
    pub(super) effects: Effects,
    /// The strikes of the ban this request earned (0: none), for its evidence record.
    pub(super) imposed: std::sync::atomic::AtomicU32,
}

/// What robots.txt said of the request before its claim was checked: a verification may turn
/// an allowed claim into an impostor, and the Crawl-delay phase must know both.
#[derive(Debug, Clone, Copy)]
pub(super) struct Allowance {
    /// robots.txt allows the request (or only a reported content signal refuses it).
    robots_allows: bool,
    /// A content signal in report mode refused it: still held to Crawl-delay.
    signal_reported: bool,
}

impl Allowance {
    fn of(decision: &Decision) -> Allowance {
        let signal_reported =
            decision.why == Why::ContentSignal && decision.outcome == Outcome::WouldBlock;
        Allowance {
            robots_allows: decision.outcome == Outcome::Allowed || signal_reported,
            signal_reported,
        }
    }
}

/// A judgment that ends with `answer` for `decision`.
fn ended(decision: Decision, answer: Answer) -> Judgment {
    Judgment {
        decision: Some(decision),
        answer,
        read_robots: None,
    }
}

impl Judging<'_, '_> {
    /// Runs every phase in order: the judgment the first one to end gives, else the answer.
    pub(super) async fn run(&self) -> Judgment {
        let judgment = match self.phases().await {
            Break(judgment) | Continue(judgment) => judgment,
        };
        if self.effects.applies() {
            self.evidence(&judgment).await;
        }
        judgment
    }

    /// Records that the request earned a ban of `strikes` strikes (for its evidence record).
    pub(super) fn banned(&self, strikes: u32) {
        self.imposed
            .store(strikes.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Hands the applied judgment to the evidence writer: a violation, a ban, a refusal or a
    /// licence answer gets a record when `evidence.events` selects it. A request refused before
    /// any decision (unknown host, escaped slash) has no origin to give evidence for.
    async fn evidence(&self, judgment: &Judgment) {
        let (Some(decision), Some(evidence)) = (&judgment.decision, crate::evidence::active())
        else {
            return;
        };
        let strikes = self.imposed.load(std::sync::atomic::Ordering::Relaxed);
        let ban_strikes = (strikes > 0).then_some(strikes);
        let events = crate::evidence::Events {
            // The strikes phase says whether the client read robots.txt exactly for violations.
            violation: judgment.read_robots.is_some(),
            ban: ban_strikes.is_some(),
            refusal: matches!(judgment.answer, Answer::Refuse(_)),
            payment_required: decision.outcome == Outcome::PaymentRequired,
        };
        if !evidence.wants(events) {
            return;
        }
        let facts = self.facts;
        // The judgment checks no claim it refuses anyway (nothing a check could change); the
        // record says what the range lists and cached reverse DNS answers show of it, without
        // sending a DNS query.
        let checked = match (&decision.verification, &decision.crawler, facts.client) {
            (None, Some(_), Some(client)) => self
                .verifier
                .verify_without_lookups(self.snapshot, decision, client)
                .await
                .map(|verification| {
                    let mut checked = decision.clone();
                    checked.verification = Some(verification);
                    checked
                }),
            _ => None,
        };
        evidence.offer(&crate::evidence::Observed {
            decision: checked.as_ref().unwrap_or(decision),
            host: facts.host,
            method: facts.method,
            target: facts.target,
            client: facts.client,
            user_agent: facts.user_agent,
            status: judgment.answer.status(),
            ban_strikes,
            read_robots: facts
                .client
                .and_then(|client| self.store.robots_read_at(decision.origin.name(), client)),
        });
    }

    async fn phases(&self) -> Step<Judgment> {
        let (decision, wba_mode) = self.identify()?;
        let decision = self.robots_txt(decision).await?;
        let (decision, suspended) = self.bans(decision)?;
        // A trap's or a disguised crawler's judgment from a banned address whose ban is
        // suspended is counted as the suspended ban, as the answer's is.
        let decision = self
            .signals(decision)
            .await
            .map_break(|judgment| judgment.with_suspended_ban(suspended))?;
        let signed = self.signed(wba_mode);
        let mut decision = self.web_bot_auth(decision, signed, wba_mode).await?;
        let allowance = Allowance::of(&decision);
        self.verify(&mut decision, signed).await;
        let decision = self.budgets(decision, allowance).await?;
        let decision = self.rates(decision).await?;
        let read_robots = self.strikes(&decision).await;
        Continue(
            self.answer(decision, read_robots)
                .with_suspended_ban(suspended),
        )
    }

    /// The Web Bot Auth mode of the request's origin, else `verify.web_bot_auth.mode`.
    fn web_bot_auth_mode(
        &self,
        routed: Option<&std::sync::Arc<crate::snapshot::Origin>>,
    ) -> WebBotAuthMode {
        routed
            .and_then(|origin| origin.config.web_bot_auth)
            .unwrap_or_else(|| self.verifier.web_bot_auth_mode())
    }

    /// The verified signature the judgment stands on: none under `observe`, where a signature
    /// is verified and counted, never let change the decision.
    pub(super) fn signed(&self, wba_mode: WebBotAuthMode) -> Option<&Signed> {
        self.facts
            .signed
            .filter(|_| wba_mode != WebBotAuthMode::Observe)
    }

    /// Phase 1: routes the Host (once: the origin gives both the Web Bot Auth mode and the
    /// decision), names the crawler and decides the policy and robots.txt verdict. A Host no
    /// origin serves (421) and an escaped slash the origin refuses (400) end here.
    pub(super) fn identify(&self) -> Step<(Decision, WebBotAuthMode)> {
        let facts = self.facts;
        let decided = Instant::now();
        let routed = route(self.snapshot, facts.host);
        let wba_mode = self.web_bot_auth_mode(routed.ok());
        let signed = self.signed(wba_mode);
        let decision = routed.and_then(|origin| {
            decide_routed(
                self.snapshot,
                origin,
                &DecideRequest {
                    host: facts.host,
                    user_agent: facts.user_agent,
                    path: facts.target,
                    client: facts.client,
                    method: facts.method,
                    signed_by: signed.map(|signed| signed.crawler.as_str()),
                    budgets: self.effects.local_budgets(self.store),
                },
            )
        });
        self.effects.record(|| {
            METRICS
                .decision_duration
                .observe(decided.elapsed().as_secs_f64())
        });
        match decision {
            Ok(decision) => Continue((decision, wba_mode)),
            Err(refused) => Break(Judgment {
                decision: None,
                answer: Answer::Refuse(Refusal::new(match refused {
                    Refused::UnknownHost => RefusedFor::UnknownHost,
                    Refused::EscapedSlash => RefusedFor::EscapedSlash,
                })),
                read_robots: None,
            }),
        }
    }

    /// Phase 2: a robots.txt read is recorded (one another site's page made a visitor's
    /// browser send is not the visitor reading it: it would make their own later visits
    /// strikes); when robotsguard serves robots.txt, the copy in force answers any spelling of
    /// a read (what goes to the origin, or counts as having read robots.txt, must be exactly
    /// it; with trap paths, the copy carrying them is the one every client must read).
    pub(super) async fn robots_txt(&self, decision: Decision) -> Step<Decision> {
        if let (true, Some(client)) = (decision.reads_robots_txt, self.facts.client) {
            if !self.third_party(&decision, "robots_read") {
                self.effects
                    .robots_read(self.store, decision.origin.name(), client)
                    .await;
            }
        }
        let serves = (decision.origin.robots.settings.serve || decision.robots.carries_additions())
            && asks_for_robots_txt(self.facts.method, self.facts.target);
        if !serves {
            return Continue(decision);
        }
        // The copy robotsguard enforces is the one crawlers read, never the origin's.
        let copy = decision.robots.clone();
        Break(ended(decision, Answer::ServeRobots(copy)))
    }

    /// Phase 3: a banned address (its network, under `offenders.prefix`) gets nothing but
    /// robots.txt: for every request
    /// (`offenders.scope: address`), or for those that identify as a crawler and those with
    /// the User-Agent a ban binds (`crawlers`: an address is often shared, and the people
    /// behind it are not the crawler). An allowed client is never refused for a ban (one
    /// imposed before it was allowed, or by a replica configured otherwise). While the
    /// origin's settings suspend bans, the request is judged as without it and says so: the
    /// outcome handed on (`would_ban`, `ban_suspended`).
    pub(super) fn bans(&self, mut decision: Decision) -> Step<(Decision, Option<Outcome>)> {
        let facts = self.facts;
        let Some(client) = facts.client.filter(|_| !decision.reads_robots_txt) else {
            return Continue((decision, None));
        };
        if decision.origin.allow_clients.contains(client) {
            return Continue((decision, None));
        }
        let network = decision.origin.config.offenders.prefix.network(client);
        let Some(bans) = self.store.bans_of(decision.origin.name(), network) else {
            return Continue((decision, None));
        };
        let browser = decision.crawler.is_none() && !is_blank_user_agent(facts.user_agent);
        if let (true, Some(latest)) = (browser, bans.latest()) {
            self.effects
                .record(|| banned_browser_request(&decision, latest, facts));
        }
        let address_wide = match decision.origin.config.offenders.scope {
            BanScope::Address => true,
            BanScope::Crawlers => decision.is_bannable_crawler(facts.user_agent),
        };
        let refusing: Vec<&Ban> = if address_wide {
            bans.iter().collect()
        } else {
            bans.binding(facts.user_agent).into_iter().collect()
        };
        let applied = refusing
            .iter()
            .filter(|ban| ban_suspension(&decision.origin, ban.cause).is_none())
            .max_by_key(|ban| ban.until);
        if let Some(ban) = applied {
            let ban = (*ban).clone();
            decision.outcome = Outcome::Banned;
            return Break(ended(
                decision,
                Answer::Refuse(Refusal::new(RefusedFor::Banned(ban))),
            ));
        }
        let suspended = refusing
            .first()
            .and_then(|ban| ban_suspension(&decision.origin, ban.cause));
        Continue((decision, suspended))
    }

    /// Phase 5a: Web Bot Auth's own refusals ([`Judging::web_bot_auth_refusal`]), counted and
    /// logged as what the client gets: refused (403), or told to come back (429, 503).
    pub(super) async fn web_bot_auth(
        &self,
        mut decision: Decision,
        signed: Option<&Signed>,
        wba_mode: WebBotAuthMode,
    ) -> Step<Decision> {
        let Some(refusal) = self.web_bot_auth_refusal(&decision, signed, wba_mode).await else {
            return Continue(decision);
        };
        decision.outcome = match refusal.why {
            RefusedFor::Replayed { .. } | RefusedFor::KeysUnavailable => Outcome::Limited,
            _ => Outcome::Blocked,
        };
        Break(ended(decision, Answer::Refuse(refusal)))
    }

    /// Phase 5b: the claim checked: by its verified signature, else (for a claim a check could
    /// change) by IP ranges and reverse DNS.
    pub(super) async fn verify(&self, decision: &mut Decision, signed: Option<&Signed>) {
        if let Some(signed) = signed {
            let verification = self.effects.signature_verification(signed);
            decision.apply_verification(verification);
            return;
        }
        let Some(client) = self.facts.client.filter(|_| decision.wants_verification()) else {
            return;
        };
        if let Some(verification) = self
            .effects
            .verify(self.verifier, self.snapshot, decision, client)
            .await
        {
            decision.apply_verification(verification);
        }
    }

    /// Phase 6: a crawler robots.txt allows is held to its Crawl-delay (429 when enforced,
    /// `would_limit` when reported). A reported impostor (`impostors: report`) is let through,
    /// so it is held to the Crawl-delay of the claim, per address, as an unverified claim is.
    pub(super) async fn budgets(
        &self,
        mut decision: Decision,
        allowance: Allowance,
    ) -> Step<Decision> {
        let reported_impostor =
            decision.why == Why::Impostor && decision.outcome == Outcome::WouldBlock;
        let held = allowance.robots_allows
            && (decision.outcome == Outcome::Allowed
                || reported_impostor
                || allowance.signal_reported);
        if !held {
            return Continue(decision);
        }
        let Some((delay, wait)) = self.crawl_delay_wait(&decision).await else {
            return Continue(decision);
        };
        if crawl_delay_action(&decision) == CrawlDelayAction::Enforce
            && decision.origin.config.mode == OriginMode::Enforce
        {
            self.effects.record(|| {
                if reported_impostor {
                    // Still reported: the 429 must not hide the impostor from the log.
                    log_disallowed(&decision, self.facts);
                }
                METRICS
                    .rate_limited
                    .with_label_values(&[decision.origin.name(), decision.crawler_label()])
                    .inc();
            });
            decision.outcome = Outcome::Limited;
            let limited = RefusedFor::Limited { delay, wait };
            return Break(ended(decision, Answer::Refuse(Refusal::new(limited))));
        }
        if !reported_impostor && !allowance.signal_reported {
            decision.outcome = Outcome::WouldLimit;
        }
        Continue(decision)
    }

    /// Phase 6b: a crawler's request that would be proxied spends the operator's rate budget
    /// for it (`policy.rates`), whatever robots.txt's `Crawl-delay` says: over the budget it is
    /// answered 429 with `Retry-After` (`rate_limited`), or, on an origin that only reports,
    /// proxied and counted `would_rate_limit`. An allowed client, an exempt path, robots.txt and
    /// the licence terms spend nothing.
    pub(super) async fn rates(&self, mut decision: Decision) -> Step<Decision> {
        let spends = !decision.reads_robots_txt
            && decision.origin.config.mode != OriginMode::Off
            && !decision.outcome.refuses()
            && !matches!(
                decision.why,
                Why::AllowedClient | Why::ExemptPath | Why::RobotsTxtPath | Why::LicenseUrl
            );
        if !spends {
            return Continue(decision);
        }
        let Some((key, rule, scope)) = decision.rate_budget(self.facts.client) else {
            return Continue(decision);
        };
        let rate = crate::tables::rates::Rate {
            limit: rule.limit,
            period: rule.period,
        };
        let Some(wait) = self.effects.rate_wait(self.store, key, rate).await else {
            return Continue(decision);
        };
        self.effects.record(|| {
            METRICS
                .rate_budget_exceeded
                .with_label_values(&[
                    decision.origin.name(),
                    decision.crawler_label(),
                    scope.as_str(),
                ])
                .inc();
        });
        if decision.origin.config.mode == OriginMode::Enforce {
            decision.outcome = Outcome::RateLimited;
            let refusal = Refusal::new(RefusedFor::RateLimited { rule, wait });
            return Break(ended(decision, Answer::Refuse(refusal)));
        }
        if matches!(decision.outcome, Outcome::Allowed | Outcome::Pass) {
            decision.outcome = Outcome::WouldRateLimit;
        }
        Continue(decision)
    }

    /// The delay that applies to a crawler robots.txt allows and how long it must still wait
    /// under it ([`Decision::budget`]); `None` when it is admitted now, or nothing limits it.
    async fn crawl_delay_wait(&self, decision: &Decision) -> Option<(Duration, Duration)> {
        if crawl_delay_action(decision) == CrawlDelayAction::Ignore {
            return None;
        }
        let (key, delay) = decision.budget(self.facts.client)?;
        if delay.is_zero() {
            return None;
        }
        let wait = self
            .effects
            .crawl_delay_wait(self.store, key, delay)
            .await?;
        Some((delay, wait))
    }

    /// Phase 7: a violation is a rule of the robots.txt in force disallowing the request (not a
    /// policy block, an impostor, or the disallow-all of an unreachable robots.txt): whether the
    /// client read robots.txt within the last 24 hours (returned), and, applied, its strike.
    pub(super) async fn strikes(&self, decision: &Decision) -> Option<bool> {
        let violation = matches!(decision.outcome, Outcome::Blocked | Outcome::WouldBlock)
            && decision.why == Why::Rule;
        if !violation {
            return None;
        }
        let read = match self.facts.client {
            Some(client) => self.violation(decision, client).await,
            None => false,
        };
        self.effects.record(|| {
            METRICS
                .violations
                .with_label_values(&[
                    decision.origin.name(),
                    decision.crawler_label(),
                    if read { "yes" } else { "no" },
                ])
                .inc()
        });
        Some(read)
    }

    /// A request a robots.txt rule blocked: whether the client read robots.txt within the last
    /// 24 hours (returned), and (applied) a strike when every robots.txt in force over those
    /// hours disallowed it too; enough strikes ban the address (`offenders`). One round trip at
    /// most with the shared store.
    async fn violation(&self, decision: &Decision, client: IpAddr) -> bool {
        let settings = decision.origin.config.offenders;
        // A trusted proxy's own address stands for every client behind it (a request that came
        // through it without X-Forwarded-For): never a strike, so never banned.
        let strikes = self.effects.applies()
            && !crate::client_address::is_trusted(&self.snapshot.config.trusted_proxies, client)
            && settings.action != OffendersAction::Off;
        let strike = (strikes
            && decision
                .origin
                .robots
                .throughout_history(Instant::now(), |copy| {
                    // The copy the decision was made with disallowed it (that is the block):
                    // matching it again would only repeat the decision's work.
                    std::ptr::eq(copy, std::sync::Arc::as_ptr(&decision.robots))
                        || crate::enforce::copy_disallows(copy, decision, self.facts.target)
                }))
        .then_some(StrikeRequest {
            settings,
            enforce: decision.origin.config.mode == OriginMode::Enforce,
            crawler: decision.crawler_label(),
            network: settings.prefix.network(client),
        });
        let origin = decision.origin.name();
        let violation = self.store.violation(origin, client, strike).await;
        let request_id = self.facts.request_id;
        match violation.strike {
            Some(Strike::Banned(ban)) => {
                self.banned(ban.strikes);
                crate::logs::offender(origin, client, ban.strikes, Some(&ban), request_id)
            }
            Some(Strike::WouldBan(strikes)) if strikes == settings.strikes => {
                crate::logs::offender(origin, client, strikes, None, request_id)
            }
            _ => {}
        }
        violation.read_robots
    }

    /// Phase 8: the content signal counted, the licence answer (402, or the licence URL itself
    /// let through), the log line of a refusal (or one that would be), and the answer.
    pub(super) fn answer(&self, mut decision: Decision, read_robots: Option<bool>) -> Judgment {
        if let Some(hit) = decision.content_signal() {
            let action = if decision.outcome == Outcome::Blocked {
                "enforce"
            } else {
                "report"
            };
            let labels = [
                decision.origin.name(),
                decision.crawler_label(),
                hit.purpose.as_str(),
                action,
            ];
            self.effects
                .record(|| METRICS.content_signals.with_label_values(&labels).inc());
        }
        let license = self.licence(&mut decision);
        if matches!(
            decision.outcome,
            Outcome::Blocked | Outcome::WouldBlock | Outcome::PaymentRequired
        ) {
            self.effects
                .record(|| log_disallowed(&decision, self.facts));
        }
        let answer = match decision.outcome {
            // An impostor is refused for who it is, not for a robots.txt rule: always 403.
            Outcome::Blocked if decision.why == Why::Impostor => {
                Answer::Refuse(Refusal::new(RefusedFor::Impostor))
            }
            Outcome::Blocked => Answer::Refuse(Refusal::blocked(&decision)),
            Outcome::PaymentRequired => {
                Answer::Refuse(Refusal::new(RefusedFor::PaymentRequired { license }))
            }
            _ => Answer::Proxy,
        };
        Judgment {
            decision: Some(decision),
            answer,
            read_robots,
        }
    }

    /// A block answered with the origin's licence: `payment_required` with the licence URL the
    /// answer links to (returned), or, for the licence URL itself, let through (the terms a 402
    /// points at are for every crawler to read).
    fn licence(&self, decision: &mut Decision) -> Option<String> {
        if decision.outcome != Outcome::Blocked || decision.why == Why::Impostor {
            return None;
        }
        let url = licence_answer(decision)?;
        if targets_licence(&url, self.facts) {
            decision.outcome = Outcome::Pass;
            decision.why = Why::LicenseUrl;
            decision.clear_content_signal();
            return None;
        }
        decision.outcome = Outcome::PaymentRequired;
        url.into_link()
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::ops::ControlFlow::{Break, Continue};

    use super::super::tests::{bench_for, Bench, BROWSER, EVERY_GROUP, GPTBOT, LISTED, ROBOTS};
    use super::super::{Answer, Effects, Facts, Mode, RefusedFor, Signed};
    use super::*;

    const CLIENT: &str = "192.0.2.9";

    fn client(address: &str) -> IpAddr {
        address.parse().expect("an address")
    }

    fn facts<'a>(ua: &'a [u8], target: &'a str, address: &str) -> Facts<'a> {
        Facts::get(b"shop.example", ua, target.as_bytes()).from_client(client(address))
    }

    impl Bench {
        /// The judgment of `facts` in progress, to run one phase of it.
        fn judging<'r, 'f>(&'r self, facts: &'r Facts<'f>, mode: Mode) -> Judging<'r, 'f> {
            Judging {
                snapshot: &self.snapshot,
                verifier: &self.verifier,
                store: &self.store,
                facts,
                effects: Effects::of(mode),
                imposed: Default::default(),
            }
        }

        /// The decision phase 1 hands on for `facts`.
        fn identified(&self, facts: &Facts<'_>) -> Decision {
            match self.judging(facts, Mode::Preview).identify() {
                Continue((decision, _)) => decision,
                Break(judgment) => panic!("ended at identify: {judgment:?}"),
            }
        }
    }

    fn refusal(step: Step<impl std::fmt::Debug>) -> (u16, RefusedFor, Outcome) {
        let Break(judgment) = step else {
            panic!("handed on: {step:?}")
        };
        let Answer::Refuse(refusal) = judgment.answer else {
            panic!("not a refusal: {judgment:?}")
        };
        let outcome = judgment.decision.map_or(Outcome::Pass, |d| d.outcome);
        (refusal.status, refusal.why, outcome)
    }

    #[test]
    fn identify_ends_an_unknown_host_and_hands_on_the_verdict() {
        let bench = bench_for("", ROBOTS);
        let unknown = Facts::get(b"elsewhere.example", GPTBOT, b"/");
        let (status, why, _) = refusal(bench.judging(&unknown, Mode::Preview).identify());
        assert_eq!(status, 421);
        assert!(matches!(why, RefusedFor::UnknownHost), "{why:?}");
        let blocked = facts(GPTBOT, "/private", CLIENT);
        let decision = bench.identified(&blocked);
        assert_eq!(
            (decision.outcome, decision.why),
            (Outcome::Blocked, Why::Rule)
        );
        assert_eq!(decision.crawler_label(), "GPTBot");
        let browser = facts(BROWSER, "/private", CLIENT);
        assert_eq!(bench.identified(&browser).outcome, Outcome::Pass);
    }

    #[test]
    fn robots_txt_records_a_read_only_when_applied_and_serves_the_copy() {
        let bench = bench_for("", ROBOTS);
        let read = facts(GPTBOT, "/robots.txt", CLIENT);
        let decision = bench.identified(&read);
        let handed = bench.runtime.block_on(
            bench
                .judging(&read, Mode::Preview)
                .robots_txt(decision.clone()),
        );
        assert!(matches!(handed, Continue(_)), "serve: false proxies it");
        assert!(!bench.store.may_have_read_robots("shop", client(CLIENT)));
        let handed = bench
            .runtime
            .block_on(bench.judging(&read, Mode::Apply).robots_txt(decision));
        assert!(matches!(handed, Continue(_)));
        assert!(bench.store.may_have_read_robots("shop", client(CLIENT)));

        let serving = bench_for("", "    robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\", serve: true}");
        let decision = serving.identified(&read);
        let step = serving
            .runtime
            .block_on(serving.judging(&read, Mode::Preview).robots_txt(decision));
        let Break(judgment) = step else {
            panic!("not served: {step:?}")
        };
        assert_eq!(judgment.answer.action(), "serve_robots");
    }

    #[test]
    fn bans_refuse_a_banned_crawler_and_hand_on_a_suspended_ban() {
        let enforcing = bench_for("", &format!("{ROBOTS}\n    offenders: {{action: ban}}"));
        enforcing.ban(CLIENT);
        let page = facts(GPTBOT, "/page", CLIENT);
        let step = enforcing
            .judging(&page, Mode::Preview)
            .bans(enforcing.identified(&page));
        let (status, why, outcome) = refusal(step);
        assert_eq!((status, outcome), (403, Outcome::Banned));
        assert!(matches!(why, RefusedFor::Banned(_)), "{why:?}");
        let elsewhere = facts(GPTBOT, "/page", "192.0.2.10");
        let step = enforcing
            .judging(&elsewhere, Mode::Preview)
            .bans(enforcing.identified(&elsewhere));
        assert!(matches!(step, Continue((_, None))), "{step:?}");

        let reporting = bench_for("", &format!("{ROBOTS}\n    mode: report"));
        reporting.ban(CLIENT);
        let step = reporting
            .judging(&page, Mode::Preview)
            .bans(reporting.identified(&page));
        let Continue((decision, suspended)) = step else {
            panic!("refused in report mode: {step:?}")
        };
        assert_eq!(suspended, Some(Outcome::WouldBan));
        assert_eq!(
            decision.outcome,
            Outcome::Allowed,
            "judged as without the ban"
        );
    }

    #[test]
    fn signals_answer_a_trap_404_and_ban_only_when_applied() {
        let bench = bench_for(
            "",
            &format!("{EVERY_GROUP}\n    traps: {{enabled: true, paths: [/trap/], action: ban}}"),
        );
        let hit = facts(GPTBOT, "/trap/x", CLIENT);
        for mode in [Mode::Preview, Mode::Apply] {
            let step = bench
                .runtime
                .block_on(bench.judging(&hit, mode).signals(bench.identified(&hit)));
            let (status, why, outcome) = refusal(step);
            assert_eq!((status, outcome), (404, Outcome::Trap));
            assert!(matches!(why, RefusedFor::Trap), "{why:?}");
            assert_eq!(bench.banned(CLIENT), mode == Mode::Apply, "{mode:?}");
        }
        let page = facts(GPTBOT, "/page", "192.0.2.10");
        let step = bench.runtime.block_on(
            bench
                .judging(&page, Mode::Apply)
                .signals(bench.identified(&page)),
        );
        assert!(matches!(step, Continue(_)), "{step:?}");
    }

    #[test]
    fn web_bot_auth_refuses_a_replayed_nonce_only_once_it_was_spent() {
        let bench = bench_for("", ROBOTS);
        let signed = Signed {
            nonce: Some("n-1".to_string()),
            lifetime: std::time::Duration::from_secs(60),
            ..Signed::new("https://chatgpt.com", "GPTBot")
        };
        let page = Facts {
            signed: Some(&signed),
            ..facts(GPTBOT, "/page", CLIENT)
        };
        let run = |mode| {
            let judging = bench.judging(&page, mode);
            let decision = bench.identified(&page);
            bench.runtime.block_on(judging.web_bot_auth(
                decision,
                Some(&signed),
                WebBotAuthMode::Optional,
            ))
        };
        assert!(matches!(run(Mode::Preview), Continue(_)));
        assert!(matches!(run(Mode::Apply), Continue(_)), "the first use");
        let (status, why, outcome) = refusal(run(Mode::Apply));
        assert_eq!((status, outcome), (429, Outcome::Limited));
        assert!(why.accept_signature().is_some(), "{why:?}");
        // Under `observe` a signature never changes the answer.
        let judging = bench.judging(&page, Mode::Apply);
        let observed = bench.runtime.block_on(judging.web_bot_auth(
            bench.identified(&page),
            None,
            WebBotAuthMode::Observe,
        ));
        assert!(matches!(observed, Continue(_)));
    }

    #[test]
    fn verify_confirms_a_listed_address_and_unmasks_any_other() {
        let bench = bench_for("", ROBOTS);
        for (address, outcome) in [
            ("198.51.100.7", Outcome::Allowed),
            ("192.0.2.7", Outcome::Blocked),
        ] {
            let page = facts(LISTED.as_bytes(), "/page", address);
            let mut decision = bench.identified(&page);
            assert_eq!(decision.outcome, Outcome::Allowed);
            let judging = bench.judging(&page, Mode::Preview);
            bench.runtime.block_on(judging.verify(&mut decision, None));
            assert_eq!(decision.outcome, outcome, "{address}");
        }
    }

    #[test]
    fn budgets_limit_the_second_request_and_a_preview_spends_nothing() {
        let bench = bench_for("", ROBOTS);
        let page = facts(GPTBOT, "/page", CLIENT);
        let run = |mode| {
            let decision = bench.identified(&page);
            let allowance = Allowance::of(&decision);
            bench
                .runtime
                .block_on(bench.judging(&page, mode).budgets(decision, allowance))
        };
        for _ in 0..2 {
            let Continue(decision) = run(Mode::Preview) else {
                panic!("a preview spent the budget")
            };
            assert_eq!(decision.outcome, Outcome::Allowed);
        }
        assert!(
            matches!(run(Mode::Apply), Continue(_)),
            "the first is admitted"
        );
        let (status, why, outcome) = refusal(run(Mode::Apply));
        assert_eq!((status, outcome), (429, Outcome::Limited));
        assert!(matches!(why, RefusedFor::Limited { .. }), "{why:?}");
    }

    #[test]
    fn rates_refuse_over_the_budget_only_when_applied_and_an_origin_that_reports_counts() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    policy: {{rates: {{GPTBot: 2/m}}}}"),
        );
        let page = facts(GPTBOT, "/page", CLIENT);
        let run = |bench: &Bench, facts: &Facts<'_>, mode| {
            let decision = bench.identified(facts);
            bench
                .runtime
                .block_on(bench.judging(facts, mode).rates(decision))
        };
        for _ in 0..3 {
            assert!(matches!(run(&bench, &page, Mode::Preview), Continue(_)));
        }
        for n in 0..2 {
            let Continue(decision) = run(&bench, &page, Mode::Apply) else {
                panic!("request {n} refused");
            };
            assert_eq!(decision.outcome, Outcome::Allowed);
        }
        let (status, why, outcome) = refusal(run(&bench, &page, Mode::Apply));
        assert_eq!((status, outcome), (429, Outcome::RateLimited));
        assert!(
            why.retry_after().is_some_and(|s| (1..=30).contains(&s)),
            "{why:?}"
        );
        let (_, _, outcome) = refusal(run(&bench, &page, Mode::Preview));
        assert_eq!(
            outcome,
            Outcome::RateLimited,
            "a preview sees the spent budget"
        );
        // Another client's budget is its own; a path robots.txt refuses spends nothing.
        let elsewhere = facts(GPTBOT, "/page", "192.0.2.10");
        assert!(matches!(run(&bench, &elsewhere, Mode::Apply), Continue(_)));
        let blocked = facts(GPTBOT, "/private", "192.0.2.10");
        for _ in 0..3 {
            let Continue(decision) = run(&bench, &blocked, Mode::Apply) else {
                panic!("a block is refused by its own phase");
            };
            assert_eq!(decision.outcome, Outcome::Blocked);
        }
        assert!(matches!(run(&bench, &elsewhere, Mode::Apply), Continue(_)));

        let reporting = bench_for(
            "",
            &format!("{ROBOTS}\n    mode: report\n    policy: {{rates: {{GPTBot: 1/h}}}}"),
        );
        assert!(matches!(
            run(&reporting, &page, Mode::Apply),
            Continue(ref d) if d.outcome == Outcome::Allowed
        ));
        let Continue(decision) = run(&reporting, &page, Mode::Apply) else {
            panic!("an origin that reports refuses nothing");
        };
        assert_eq!(decision.outcome, Outcome::WouldRateLimit);
    }

    #[test]
    fn strikes_are_counted_for_a_rule_only_and_only_when_applied() {
        let bench = bench_for(
            "",
            &format!("{ROBOTS}\n    offenders: {{action: ban, strikes: 1}}"),
        );
        let allowed = facts(GPTBOT, "/page", CLIENT);
        let judging = bench.judging(&allowed, Mode::Apply);
        let read = bench
            .runtime
            .block_on(judging.strikes(&bench.identified(&allowed)));
        assert_eq!(read, None, "not a violation");
        let blocked = facts(GPTBOT, "/private", CLIENT);
        let decision = bench.identified(&blocked);
        let preview = bench.judging(&blocked, Mode::Preview);
        assert_eq!(
            bench.runtime.block_on(preview.strikes(&decision)),
            Some(false)
        );
        assert!(!bench.banned(CLIENT), "a preview never strikes");
        let apply = bench.judging(&blocked, Mode::Apply);
        assert_eq!(
            bench.runtime.block_on(apply.strikes(&decision)),
            Some(false)
        );
        assert!(bench.banned(CLIENT), "one strike bans at strikes: 1");
    }

    #[test]
    fn answer_refuses_a_block_with_the_origin_status_or_its_licence() {
        let bench = bench_for("", ROBOTS);
        let blocked = facts(GPTBOT, "/private", CLIENT);
        let judgment = bench
            .judging(&blocked, Mode::Preview)
            .answer(bench.identified(&blocked), None);
        assert_eq!(judgment.answer.status(), Some(403));
        let allowed = facts(GPTBOT, "/page", CLIENT);
        let judgment = bench
            .judging(&allowed, Mode::Preview)
            .answer(bench.identified(&allowed), None);
        assert_eq!(judgment.answer.action(), "proxy");

        let licensing = bench_for(
            "",
            &format!("{ROBOTS}\n    block: {{status: 402, license_url: \"https://shop.example/private/terms\"}}"),
        );
        let judgment = licensing
            .judging(&blocked, Mode::Preview)
            .answer(licensing.identified(&blocked), None);
        let Answer::Refuse(refusal) = &judgment.answer else {
            panic!("{judgment:?}")
        };
        assert_eq!(refusal.status, 402);
        assert!(
            matches!(&refusal.why, RefusedFor::PaymentRequired { license: Some(url) } if url == "https://shop.example/private/terms"),
            "{refusal:?}"
        );
        let terms = facts(GPTBOT, "/private/terms", CLIENT);
        let judgment = licensing
            .judging(&terms, Mode::Preview)
            .answer(licensing.identified(&terms), None);
        assert_eq!(
            judgment.answer.action(),
            "proxy",
            "the terms are for every crawler"
        );
    }
}
