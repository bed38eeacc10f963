//! Where the state behind Crawl-delay, the compliance signal and repeat offenders is kept: this
//! process's memory (`state.backend: memory`), or a Redis/Valkey server shared by every replica
//! (`state.backend: redis`), with this process's memory as the fallback.
//!
//! With the shared store, a decision that needs state makes at most one round trip, bounded by
//! `state.redis.timeout`; when the store fails or is slow, that decision and the following ones
//! are made from local memory at once until the store answers again (the background loop of
//! [`StoreService`] checks it every second and reconnects). Bans are checked on every request, so
//! each process mirrors the store's bans in memory ([`Offenders`]) and never asks the store for
//! them on a request.
//!
//! What this process knows stays in force whatever the store says or fails to say: the
//! Crawl-delay admissions it made (its own budget, kept beside the store's), the strike counts
//! the store answered, the reads of robots.txt it saw or mirrored and the bans it mirrors. A
//! store that refuses writes (out of memory) or has lost keys (evicted under `maxmemory`, a
//! restart) so never admits a crawler sooner than this process's own budget allows, nor lets
//! strikes it counted go uncounted.

mod endpoint;
mod reports;
mod shared;

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, DisguisedConfig, OffendersAction, OffendersConfig, StateConfig};
use crate::metrics::METRICS;
use crate::tables::clock::{coarse_now, Millis};
use crate::tables::compliance::RobotsReads;
use crate::tables::crawl_delay::{Admission, BudgetKey, CrawlDelays};
use crate::tables::disguised::DisguisedStrikes;
use crate::tables::offenders::{AddressBans, Ban, BanCause, BoundAgent, Offenders, Strike};
use crate::tables::rates::{Rate, RateBuckets, RateKey};

pub use self::reports::{Coverage, ReportsPublisher, PUBLISH_EVERY};
pub use self::shared::StoreService;

/// How a strike is to be counted for a violation.
#[derive(Debug, Clone, Copy)]
pub struct StrikeRequest<'a> {
    /// The origin's `offenders` settings.
    pub settings: OffendersConfig,
    /// Whether the origin enforces (not `mode: report`): only then does a strike ban.
    pub enforce: bool,
    /// The label of the crawler the request named (recorded in the ban it may lead to).
    pub crawler: &'a str,
    /// The client's network under `offenders.prefix`: what strikes are counted and bans
    /// imposed for.
    pub network: IpNet,
}

/// What earned a ban imposed at once (a trap hit, a disguised crawler).
#[derive(Debug, Clone, Copy)]
pub struct Earner<'a> {
    /// The signal.
    pub cause: BanCause,
    /// The crawler label of the request (`browser` for a browser's or an app's User-Agent).
    pub crawler: &'a str,
    /// The exact User-Agent the ban binds, for a client that `offenders.scope: crawlers`
    /// would let through.
    pub user_agent: Option<&'a [u8]>,
}

/// What lifting all of an origin's (or every origin's) bans did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiftedAll {
    /// Bans lifted: in this process and in the shared store, each ban once.
    pub count: usize,
    /// False when the shared store could not be reached: other replicas keep the bans it
    /// holds, and this one gets them back once it is reachable.
    pub everywhere: bool,
}

/// What the state says about a request a robots.txt rule disallowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Whether the client fetched the origin's robots.txt within the last 24 hours.
    pub read_robots: bool,
    /// What the strike led to, when one was counted.
    pub strike: Option<Strike>,
}

/// What lifting a ban did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lifted {
    /// Lifted everywhere.
    Yes,
    /// There was no such ban.
    NotBanned,
    /// Lifted in this process, but the shared store could not be reached: other replicas keep
    /// it, and this one gets it back from the store once it is reachable.
    HereOnly,
}

/// The state of Crawl-delay budgets, robots.txt reads, strikes and bans.
pub struct Store {
    delays: CrawlDelays,
    rates: RateBuckets,
    reads: Arc<RobotsReads>,
    offenders: Arc<Offenders>,
    nonces: crate::tables::nonces::Nonces,
    disguised: DisguisedStrikes,
    shared: Option<Arc<shared::Shared>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .field("delays", &self.delays)
            .field("reads", &self.reads)
            .field("offenders", &self.offenders)
            .finish()
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new(&StateConfig::Memory)
    }
}

impl Store {
    /// A store as `state` says. With Redis nothing is connected here: [`Store::service`] connects
    /// (and reconnects) in the background, and decisions use local memory until it has.
    pub fn new(state: &StateConfig) -> Store {
        let offenders = Arc::new(Offenders::default());
        let shared = match state {
            StateConfig::Memory => {
                METRICS.state_backend_up.set(1);
                None
            }
            StateConfig::Redis(settings) => {
                METRICS.state_backend_up.set(0);
                shared::Shared::new(settings).map(Arc::new)
            }
        };
        Store {
            delays: CrawlDelays::default(),
            rates: RateBuckets::default(),
            reads: Arc::new(RobotsReads::default()),
            offenders,
            nonces: crate::tables::nonces::Nonces::default(),
            disguised: DisguisedStrikes::default(),
            shared,
        }
    }

    /// `memory` or `redis`.
    pub fn backend(&self) -> &'static str {
        if self.shared.is_some() {
            "redis"
        } else {
            "memory"
        }
    }

    /// The background loop that keeps the shared store connected, its bans mirrored and the
    /// robots.txt histories of `live`'s origins shared; `None` with the memory backend.
    pub fn service(&self, live: Arc<crate::snapshot::Live>) -> Option<StoreService> {
        self.shared.as_ref().map(|shared| {
            StoreService::new(
                shared.clone(),
                self.offenders.clone(),
                self.reads.clone(),
                live,
            )
        })
    }

    /// The shared store, when there is one and it is answering.
    fn shared(&self) -> Option<&shared::Shared> {
        self.shared.as_deref().filter(|shared| shared.is_up())
    }

    /// Admits a request of `key`'s budget if at least `delay` has passed since the budget's
    /// previous admitted request (a refused request does not move it).
    ///
    /// With the shared store, the store's budget decides, and this process keeps its own beside
    /// it: a budget it admitted within the delay, or that the store refused with a wait, is
    /// refused without asking until then (the store, had it not lost the key, would refuse it
    /// too), and when the store fails the request is admitted against this process's budget
    /// alone, never for the asking. So a crawler costs the store at most one round trip per
    /// window per replica, however often it asks.
    pub async fn admit(&self, key: BudgetKey<'_>, delay: Duration) -> Admission {
        if delay.is_zero() {
            return Admission::Admitted;
        }
        let now = Millis::coarse_now();
        if let Some(shared) = self.shared() {
            if let Some(wait) = self.delays.next_admission(key, delay, now) {
                return Admission::TooSoon(wait);
            }
            if let Some(admission) = shared.admit(&key, delay).await {
                match admission {
                    // This process's own budget, from when the request arrived: a crawler
                    // keeping the delay is never refused by it.
                    Admission::Admitted => {
                        self.delays.admit(key, delay, now);
                    }
                    // Spent on another replica: held here too until the store's window ends
                    // (counted from when the request arrived, so never past it), so that a
                    // crawler that keeps asking costs no further round trip until then.
                    Admission::TooSoon(wait) => {
                        self.delays.admit(key, wait, now);
                    }
                }
                return admission;
            }
        }
        self.delays.admit(key, delay, now)
    }

    /// This process's budgets, which [`Store::admit`] checks for every request (with the shared
    /// store too): for the decision to prefetch a budget it will check.
    pub fn local_budgets(&self) -> Option<&CrawlDelays> {
        Some(&self.delays)
    }

    /// How long `key`'s budget, under `delay`, must still wait, if at all (for `/explain`): the
    /// longer of the store's wait and this process's own.
    pub async fn next_admission(&self, key: BudgetKey<'_>, delay: Duration) -> Option<Duration> {
        let here = self.delays.next_admission(key, delay, Millis::coarse_now());
        if let Some(shared) = self.shared() {
            if let Some(wait) = shared.next_admission(&key).await {
                return wait.max(here);
            }
        }
        here
    }

    /// Admits a request of `key`'s rate budget under `rate` (`None`), or says how long it must
    /// wait (`Some`), spending nothing then.
    ///
    /// With the shared store, the store's bucket decides (one atomic step there for every
    /// replica's requests: while it answers, the replicas together admit no more than the rate)
    /// and this process spends its own bucket beside it. A bucket this process alone has emptied
    /// is refused without asking (the store counted at least those requests). When the store does
    /// not answer, this process's bucket decides alone: each replica then admits at most the rate
    /// by itself, so `R` replicas cut off from the store admit at most `R` times the rate.
    pub async fn admit_rate(&self, key: RateKey<'_>, rate: Rate) -> Option<Duration> {
        let now = Instant::now();
        if let Some(shared) = self.shared() {
            if let Some(wait) = self.rates.wait(key, rate, now) {
                return Some(wait);
            }
            if let Some(answer) = shared.rate(&key, rate, true).await {
                if answer.is_none() {
                    self.rates.spend(key, rate, now);
                }
                return answer;
            }
        }
        self.rates.admit(key, rate, now)
    }

    /// How long a request of `key` must wait under `rate`, if at all, spending nothing (for
    /// `/explain`): the longer of the store's wait and this process's own.
    pub async fn rate_wait(&self, key: RateKey<'_>, rate: Rate) -> Option<Duration> {
        let here = self.rates.wait(key, rate, Instant::now());
        if let Some(shared) = self.shared() {
            if let Some(there) = shared.rate(&key, rate, false).await {
                return there.max(here);
            }
        }
        here
    }

    /// Records `agent`'s Web Bot Auth `nonce` for `lifetime` (until its signature expires):
    /// `true` the first time it is seen, `false` for a replay — here, or, with the shared
    /// store, on any replica (an atomic `SET NX` with that expiry). Kept in this process too,
    /// so replays here are caught while the store is unreachable.
    pub async fn first_nonce_use(&self, agent: &str, nonce: &str, lifetime: Duration) -> bool {
        let now = Instant::now();
        let here = self.nonces.first_use(agent, nonce, now + lifetime, now);
        let shared = match self.shared() {
            Some(shared) => shared.first_nonce_use(agent, nonce, lifetime).await,
            None => None,
        };
        here && shared.unwrap_or(true)
    }

    /// Records `client` as the address `agent`'s nonce-less signature `digest` came from, for
    /// `lifetime` (while it may be accepted): `true` from the first address, `false` from
    /// another (a replay) — here, or, with the shared store, on any replica (`SET NX` of the
    /// first address with that expiry, else a read of it). Kept in this process too, so that
    /// replays here are caught while the store is unreachable.
    pub async fn signature_from(
        &self,
        agent: &str,
        digest: &[u8; 32],
        client: IpAddr,
        lifetime: Duration,
    ) -> bool {
        let now = Instant::now();
        let shared = match self.shared() {
            Some(shared) => shared.signature_from(agent, digest, client, lifetime).await,
            None => None,
        };
        match shared {
            // The store saw every replica's first address: it decides, and this process keeps
            // the same first address for when the store is unreachable.
            Some(true) => {
                self.nonces
                    .record_sender(agent, digest, client, now + lifetime, now);
                true
            }
            Some(false) => false,
            None => self
                .nonces
                .from_first_sender(agent, digest, client, now + lifetime, now),
        }
    }

    /// Records that `client` fetched `origin`'s robots.txt.
    pub async fn record_robots_read(&self, origin: &str, client: IpAddr) {
        // Kept here too, so that the compliance signal survives the store being unreachable.
        self.reads.record(origin, client, coarse_now());
        if let Some(shared) = self.shared() {
            shared.record_read(origin, client).await;
        }
    }

    /// A request from `client` that a robots.txt rule of `origin` disallowed: whether the client
    /// read robots.txt, and, with `strike`, what counting a strike led to.
    pub async fn violation(
        &self,
        origin: &str,
        client: IpAddr,
        strike: Option<StrikeRequest<'_>>,
    ) -> Violation {
        let strike = strike.filter(|s| s.settings.action != OffendersAction::Off);
        if let Some(shared) = self.shared() {
            // Read before asking: the store's count then includes every one of them unless it
            // lost some (requests in flight meanwhile only add to it).
            let known = strike.map_or(0, |s| {
                self.offenders
                    .strikes_known(origin, s.network, coarse_now())
            });
            if let Some(outcome) = shared.violation(origin, client, strike).await {
                let now = coarse_now();
                let strike = match (outcome.strike, strike) {
                    (
                        Some(shared::SharedStrike::Banned {
                            since,
                            until,
                            strikes,
                        }),
                        Some(request),
                    ) => {
                        let network = request.network;
                        self.offenders.forget_strikes(origin, network);
                        let mut ban =
                            Ban::new(origin, network, since, until, strikes, Instant::now())
                                .earned_by(BanCause::Strikes, request.crawler, None);
                        ban.shared = true;
                        Some(match self.offenders.impose(ban, Instant::now()) {
                            Some(ban) => Strike::Banned(ban),
                            None => Strike::WouldBan(strikes),
                        })
                    }
                    (Some(shared::SharedStrike::Counted(count, left)), Some(request)) => {
                        if known >= count {
                            // The store counted fewer strikes than this process knows of: it
                            // lost them. This process's count goes on (and bans here; the
                            // store gets the ban at the next check).
                            shared.failed(
                                "violation",
                                shared::FailureKind::Lost,
                                &format!("the store counted {count} strikes, this process knows of {known} before this one"),
                            );
                            Some(self.offenders.strike(
                                origin,
                                request.network,
                                request.crawler,
                                request.settings,
                                request.enforce,
                                now,
                            ))
                        } else {
                            self.offenders.mirror_strikes(
                                origin,
                                request.network,
                                count,
                                left,
                                now,
                            );
                            Some(Strike::Counted(count))
                        }
                    }
                    (Some(shared::SharedStrike::WouldBan(count, left)), Some(request)) => {
                        let count = count.max(known + 1);
                        self.offenders
                            .mirror_strikes(origin, request.network, count, left, now);
                        Some(Strike::WouldBan(count))
                    }
                    _ => None,
                };
                return Violation {
                    // A read this process saw or mirrored counts when the store lost it.
                    read_robots: outcome.read_robots
                        || self.reads.read_recently(origin, client, now),
                    strike,
                };
            }
        }
        let now = coarse_now();
        Violation {
            read_robots: self.reads.read_recently(origin, client, now),
            strike: strike.map(|s| {
                self.offenders
                    .strike(origin, s.network, s.crawler, s.settings, s.enforce, now)
            }),
        }
    }

    /// Whether `client` read `origin`'s robots.txt within the last 24 hours, as this process
    /// knows: the reads it saw, and with the shared store those every replica recorded (mirrored
    /// each second by [`StoreService`]). One load while nobody read robots.txt, a table lookup
    /// after; never a round trip. Every request without a crawler's User-Agent asks.
    pub fn may_have_read_robots(&self, origin: &str, client: IpAddr) -> bool {
        self.reads.any() && self.reads.read_recently(origin, client, coarse_now())
    }

    /// When `client` last read `origin`'s robots.txt within the last 24 hours, as this process
    /// knows it (its own reads and those mirrored from the shared store); for evidence records.
    pub fn robots_read_at(&self, origin: &str, client: IpAddr) -> Option<std::time::SystemTime> {
        let now = coarse_now();
        let read = self.reads.read_at(origin, client, now)?;
        std::time::SystemTime::now().checked_sub(now.saturating_duration_since(read))
    }

    /// A disguised crawler's strike count on `origin` (counting one more when `strike`), for a
    /// client that read robots.txt within the last 24 hours; `None` when it did not. One round
    /// trip with the shared store.
    pub async fn disguised(
        &self,
        origin: &str,
        client: IpAddr,
        strike: bool,
        settings: DisguisedConfig,
    ) -> Option<u32> {
        if let Some(shared) = self.shared() {
            // Read before asking (requests in flight meanwhile only add to the store's count).
            let known = self.disguised.count(origin, client, coarse_now()) + u32::from(strike);
            match shared.disguised(origin, client, strike, settings).await {
                Some(Some(count)) => {
                    // Never below what this process knew; mirrored for the ban check, which
                    // never waits for the store.
                    let now = coarse_now();
                    let count = count.max(known);
                    self.disguised.mirror(origin, client, count, settings, now);
                    return Some(count);
                }
                // The store knows of no read: neither does this process, or the store lost it
                // (then this process counts, below).
                Some(None) if !self.reads.read_recently(origin, client, coarse_now()) => {
                    return None
                }
                Some(None) | None => {}
            }
        }
        let now = coarse_now();
        if !self.reads.read_recently(origin, client, now) {
            return None;
        }
        Some(if strike {
            self.disguised.strike(origin, client, settings, now)
        } else {
            self.disguised.count(origin, client, now)
        })
    }

    /// Bans `client` (a network under `offenders.prefix`) from `origin` at once for `length` (a
    /// trap hit, a disguised crawler), here; with the shared store, the background loop writes
    /// it there within a second. `None` when the most bans are in force.
    pub fn ban_now(
        &self,
        origin: &str,
        client: IpNet,
        length: Duration,
        strikes: u32,
        earner: Earner<'_>,
    ) -> Option<Ban> {
        let now = SystemTime::now();
        let ban = Ban::new(origin, client, now, now + length, strikes, Instant::now()).earned_by(
            earner.cause,
            earner.crawler,
            earner.user_agent.map(BoundAgent::of),
        );
        self.offenders.impose(ban, Instant::now())
    }

    /// The ban in force for `client` on `origin` that ends last, if any: from memory, never a
    /// round trip.
    pub fn banned(&self, origin: &str, client: IpNet) -> Option<Ban> {
        self.offenders.banned_at(origin, client, coarse_now)
    }

    /// Every ban in force for `client` on `origin`, if any: from memory, never a round trip, and
    /// without reading the clock unless the address has a ban (every request asks).
    pub fn bans_of(&self, origin: &str, client: IpNet) -> Option<AddressBans> {
        self.offenders.bans_of(origin, client, coarse_now)
    }

    /// The bans in force, on `origin` or all, soonest to end first.
    pub fn bans(&self, origin: Option<&str>) -> Vec<Ban> {
        self.offenders.list(origin, Instant::now())
    }

    /// Lifts the bans of `client` on `origin` (its own and those bound to a User-Agent), here
    /// and in the shared store.
    pub async fn lift(&self, origin: &str, client: IpNet) -> Lifted {
        let here = !self
            .offenders
            .lift(origin, client, Instant::now())
            .is_empty();
        let lifted = match &self.shared {
            None if here => Lifted::Yes,
            None => Lifted::NotBanned,
            Some(shared) => match shared.lift(Some(origin), Some(client)).await {
                Some(there) if here || !there.is_empty() => Lifted::Yes,
                Some(_) => Lifted::NotBanned,
                None => Lifted::HereOnly,
            },
        };
        if !matches!(lifted, Lifted::NotBanned) {
            crate::events::unban(origin, client, "lifted");
        }
        lifted
    }

    /// Lifts every ban on `origin` (`None`: on every origin), here and in the shared store:
    /// how many, each ban counted once wherever it was held.
    pub async fn lift_all(&self, origin: Option<&str>) -> LiftedAll {
        let here = self.offenders.lift_all(origin, Instant::now());
        let mut told = std::collections::HashSet::new();
        for ban in &here {
            if told.insert((ban.origin.clone(), ban.client)) {
                crate::events::unban(&ban.origin, ban.client, "lifted");
            }
        }
        let Some(shared) = &self.shared else {
            return LiftedAll {
                count: here.len(),
                everywhere: true,
            };
        };
        let Some(there) = shared.lift(origin, None).await else {
            return LiftedAll {
                count: here.len(),
                everywhere: false,
            };
        };
        let mut fields: std::collections::HashSet<String> = there.into_iter().collect();
        fields.extend(
            here.iter()
                .map(|ban| shared::Shared::ban_field(&ban.origin, ban.client, ban.agent.as_ref())),
        );
        LiftedAll {
            count: fields.len(),
            everywhere: true,
        }
    }

    /// Forgets bans that have ended (see [`Offenders::prune`]).
    pub fn prune_ended_bans(&self) {
        self.offenders.prune(Instant::now());
    }

    /// The strikes and bans of this process (the mirror of the store's, with the shared
    /// backend).
    pub fn offenders(&self) -> Arc<Offenders> {
        self.offenders.clone()
    }
}

/// Installs the deployment's generated trap secret when an origin of `config` needs it (`traps`
/// enabled without `paths` or `secret_file`) and none is installed yet: from the shared store
/// with `state.backend: redis` (the first replica's is every replica's), else from `state.dir`.
/// Called before the snapshot is built (start and reload); blocks for a few seconds at most.
pub fn install_trap_secret(config: &Config) {
    static INSTALLED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let needed = config.origins.iter().any(|origin| {
        origin.traps.enabled && origin.traps.paths.is_empty() && origin.traps.secret.is_none()
    });
    let Ok(mut installed) = INSTALLED.lock() else {
        return;
    };
    if !needed || *installed {
        return;
    }
    let mut problems = Vec::new();
    if let StateConfig::Redis(settings) = &config.state {
        match shared_trap_secret(settings) {
            Ok(secret) => {
                crate::traps::install_generated_secret(&secret);
                *installed = true;
                return;
            }
            Err(e) => problems.push(format!("the shared store: {e}")),
        }
    }
    match crate::traps::secret_in_dir(config.state_dir.as_deref()) {
        Ok((secret, file)) => {
            if !problems.is_empty() {
                tracing::warn!(
                    problems = %problems.join("; "),
                    file = %file.display(),
                    "the trap secret is not shared: trap paths may differ between replicas until a restart reaches the store"
                );
            }
            crate::traps::install_generated_secret(&secret);
            *installed = true;
        }
        Err(e) => {
            problems.push(format!("state.dir: {e}"));
            tracing::warn!(
                problems = %problems.join("; "),
                "no place to keep the trap secret: trap paths change when this process restarts (set traps.secret_file or state.dir)"
            );
        }
    }
}

/// The trap secret kept in the shared store, a few tries over a few seconds.
fn shared_trap_secret(settings: &crate::config::RedisConfig) -> Result<Vec<u8>, String> {
    let settings = settings.clone();
    // A thread of its own: the caller may be on an async runtime, where another cannot block.
    let worker = std::thread::spawn(move || -> Result<Vec<u8>, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let shared = shared::Shared::new(&settings).ok_or("the store's settings cannot be used")?;
        let candidate = crate::traps::new_secret();
        let mut last = String::new();
        for attempt in 0..3 {
            if attempt > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            match runtime.block_on(shared.trap_secret(&candidate)) {
                Ok(secret) => return Ok(secret),
                Err(e) => last = e,
            }
        }
        Err(last)
    });
    worker
        .join()
        .unwrap_or_else(|_| Err("the lookup failed".to_owned()))
}

/// Milliseconds since the Unix epoch (how the store writes times).
fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The time `millis` after the Unix epoch.
fn from_unix_millis(millis: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(millis)
}
