//! Phase 4 of the judgment ([`Judging::signals`]): a trap hit and a disguised crawler, the two
//! signals that can make a client a crawler whatever its User-Agent says, and the test that
//! keeps another site's page from making one ([`Judging::third_party`]).

use std::net::IpAddr;

use super::phases::{Judging, Step};
use super::{ban_suspension, earner, log_disallowed, Answer, Judgment, Refusal, RefusedFor};
use crate::config::{DisguisedAction, Mode as OriginMode, TrapAction};
use crate::enforce::{is_blank_user_agent, Crawler, Decision, Outcome, Readings, Why};
use crate::metrics::METRICS;
use crate::tables::offenders::{Ban, BanCause};
use std::ops::ControlFlow::{Break, Continue};

impl Judging<'_, '_> {
    /// Phase 4: on an origin that watches (not `mode: off`, not a robots.txt read), a trap hit
    /// and, for a request without a crawler's User-Agent from an address that may have read
    /// robots.txt, a disguised crawler (everyone else, browsers that never read it, pays one
    /// lookup, no more).
    pub(super) async fn signals(&self, mut decision: Decision) -> Step<Decision> {
        let watched = decision.origin.config.mode != OriginMode::Off && !decision.reads_robots_txt;
        if !watched {
            return Continue(decision);
        }
        if !decision.origin.robots.traps.is_empty() {
            if let Some(judgment) = self.trap(&mut decision) {
                return Break(judgment);
            }
        }
        if let (None, Some(client)) = (&decision.crawler, self.facts.client) {
            if self
                .store
                .may_have_read_robots(decision.origin.name(), client)
            {
                if let Some(judgment) = self.disguised(&mut decision, client).await {
                    return Break(judgment);
                }
            }
        }
        Continue(decision)
    }

    /// Whether the request is one another site's page caused ([`super::Fetch::third_party`]):
    /// then it is counted (applied) in `robotsguard_third_party_requests_total{signal}` and
    /// logged. Only a browser's request can be (a User-Agent that names no crawler): a page
    /// cannot make a browser send a crawler's User-Agent, or none, so those are judged whatever
    /// they send.
    pub(super) fn third_party(&self, decision: &Decision, signal: &'static str) -> bool {
        let facts = self.facts;
        if decision.crawler.is_some() || is_blank_user_agent(facts.user_agent) {
            return false;
        }
        let Some(why) = facts.fetch.third_party(self.snapshot, &decision.origin) else {
            return false;
        };
        self.effects.record(|| {
            METRICS
                .third_party_requests
                .with_label_values(&[decision.origin.name(), signal])
                .inc();
            crate::logs::third_party_request(
                decision.origin.name(),
                facts.client,
                signal,
                why.as_str(),
                facts.request_id,
            );
        });
        true
    }

    /// Whether the address is one no signal may count: an allowed client, or a trusted proxy's
    /// own address (it stands for every client behind it).
    fn exempt_client(&self, decision: &Decision, client: IpAddr) -> bool {
        decision.origin.allow_clients.contains(client)
            || crate::client_address::is_trusted(&self.snapshot.config.trusted_proxies, client)
    }

    /// A request for a trap path, from anyone but an allowed client or a trusted proxy's own
    /// address: counted and logged (applied); `block` and `ban` answer 404 without the origin
    /// (`ban` also bans the address at once for `offenders.ban`: a client `offenders.scope:
    /// crawlers` lets through, such as a browser's User-Agent, together with its exact
    /// User-Agent), `report` proxies it as the origin answers (unless robots.txt already
    /// refuses the crawler). A browser's hit that another site's page caused
    /// ([`super::Fetch::third_party`]) never bans: `ban` answers it as `block` does. `None`: not
    /// a trap hit, or one that goes on to the rest of the judgment.
    pub(super) fn trap(&self, decision: &mut Decision) -> Option<Judgment> {
        let facts = self.facts;
        let origin = decision.origin.clone();
        if facts
            .client
            .is_some_and(|client| self.exempt_client(decision, client))
        {
            return None;
        }
        let readings = crate::enforce::read_target(facts.target, origin.config.paths).ok()?;
        let trap = readings
            .all()
            .find_map(|reading| crate::traps::hit(&origin.robots.traps, reading))?;
        let settings = &origin.config.traps;
        self.effects
            .record(|| METRICS.trap_hits.with_label_values(&[origin.name()]).inc());
        let refuse =
            origin.config.mode == OriginMode::Enforce && settings.action != TrapAction::Report;
        if !refuse && !matches!(decision.outcome, Outcome::Pass | Outcome::Allowed) {
            // Reported, and robots.txt already refuses (or reports) the crawler for it: that
            // judgment stands, and counts as the violation it is.
            self.effects.record(|| {
                crate::logs::trap_hit(origin.name(), facts.client, trap, None, facts.request_id)
            });
            return None;
        }
        decision.outcome = if refuse {
            Outcome::Trap
        } else {
            Outcome::WouldTrap
        };
        decision.why = Why::Trap;
        decision.group = Some("*".to_string());
        decision.rule =
            crate::enforce::global_disallows(&decision.robots, &readings.canonical).flatten();
        self.effects.record(|| {
            let ban = (refuse && settings.action == TrapAction::Ban)
                .then(|| self.trap_ban(decision))
                .flatten();
            if let Some(ban) = &ban {
                self.banned(ban.strikes);
            }
            crate::logs::trap_hit(
                origin.name(),
                facts.client,
                trap,
                ban.as_ref(),
                facts.request_id,
            );
            log_disallowed(decision, facts);
        });
        Some(Judgment {
            decision: Some(decision.clone()),
            answer: if refuse {
                Answer::Refuse(Refusal::new(RefusedFor::Trap))
            } else {
                Answer::Proxy
            },
            read_robots: None,
        })
    }

    /// The ban a trap hit under `traps.action: ban` imposes at once (applied only), unless bans
    /// of traps are suspended or another site's page caused the hit.
    fn trap_ban(&self, decision: &Decision) -> Option<Ban> {
        let client = self.facts.client?;
        let origin = &decision.origin;
        if ban_suspension(origin, BanCause::Trap).is_some() || self.third_party(decision, "trap") {
            return None;
        }
        self.store.ban_now(
            origin.name(),
            origin.config.offenders.prefix.network(client),
            origin.config.offenders.ban,
            1,
            earner(decision, self.facts, BanCause::Trap),
        )
    }

    /// A request without a crawler's User-Agent from an address that may have read robots.txt:
    /// a strike when the robots.txt in force disallows the path to every group (exempt paths
    /// and allowed clients never count, nor a trusted proxy's own address); once the address
    /// reached `disguised.strikes` within the window it is a crawler named `disguised`, bound
    /// by the `*` group: `report` logs would_block, `block` answers 403, `ban` bans the address
    /// with the origin's `offenders` settings. `None`: nothing changes.
    pub(super) async fn disguised(
        &self,
        decision: &mut Decision,
        client: IpAddr,
    ) -> Option<Judgment> {
        let facts = self.facts;
        let origin = decision.origin.clone();
        if self.exempt_client(decision, client) {
            return None;
        }
        let mut readings: Readings<'_> =
            crate::enforce::read_target(facts.target, origin.config.paths).ok()?;
        readings.reads = *facts.method == http::Method::GET || *facts.method == http::Method::HEAD;
        if crate::enforce::is_exempt_reading(&origin, &readings) {
            return None;
        }
        let copy = decision.robots.clone();
        let rule = readings
            .all()
            .find_map(|reading| crate::enforce::global_disallows(&copy, reading))?;
        // Another site's page can make a visitor's browser ask for anything: never a strike,
        // never refused as a disguised crawler.
        if self.third_party(decision, "disguised") {
            return None;
        }
        let strike = self.effects.applies()
            && readings
                .all()
                .any(|reading| crate::enforce::disallowed_to_every_group(&copy, reading));
        let settings = origin.config.disguised;
        let count = self
            .store
            .disguised(origin.name(), client, strike, settings)
            .await?;
        if strike {
            METRICS
                .disguised_strikes
                .with_label_values(&[origin.name()])
                .inc();
        }
        if count < settings.strikes {
            return None;
        }
        let refuse =
            origin.config.mode == OriginMode::Enforce && settings.action != DisguisedAction::Report;
        decision.crawler = Some(Crawler::signal("disguised"));
        decision.outcome = if refuse {
            Outcome::Disguised
        } else {
            Outcome::WouldDisguised
        };
        decision.why = Why::Disguised;
        decision.group = Some("*".to_string());
        decision.rule = rule;
        self.effects
            .record(|| self.disguised_applied(decision, client, count, refuse));
        Some(Judgment {
            decision: Some(decision.clone()),
            answer: if refuse {
                Answer::Refuse(Refusal::new(RefusedFor::Disguised))
            } else {
                Answer::Proxy
            },
            read_robots: Some(true),
        })
    }

    /// What an applied disguised-crawler judgment does: under `disguised.action: ban` (unless
    /// such bans are suspended) the address is banned at once; the crawler's first judgment
    /// and its ban are logged, and the request as a refusal.
    fn disguised_applied(&self, decision: &Decision, client: IpAddr, count: u32, refuse: bool) {
        let facts = self.facts;
        let origin = &decision.origin;
        let settings = origin.config.disguised;
        let mut ban = None;
        if refuse
            && settings.action == DisguisedAction::Ban
            && ban_suspension(origin, BanCause::Disguised).is_none()
        {
            ban = self.store.ban_now(
                origin.name(),
                origin.config.offenders.prefix.network(client),
                origin.config.offenders.ban,
                count,
                earner(decision, facts, BanCause::Disguised),
            );
            if let Some(ban) = &ban {
                self.banned(ban.strikes);
                crate::logs::offender(origin.name(), client, count, Some(ban), facts.request_id);
            }
        }
        if count == settings.strikes || ban.is_some() {
            crate::logs::disguised_crawler(origin.name(), client, count, settings.action);
        }
        log_disallowed(decision, facts);
    }
}
