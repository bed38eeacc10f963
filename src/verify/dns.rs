//! Forward-confirmed reverse DNS: the PTR names of an address, each kept only if its own A or
//! AAAA records contain the address again — Google's and Bing's documented way to tell their
//! crawlers' addresses. Lookups are cached (a confirmed answer for `positive_ttl`, "no name" for
//! `negative_ttl`, a failure briefly), shared by concurrent requests from one address, bounded
//! in number, and a request waits for one at most `timeout`.
//!
//! What a lookup proves depends on the crawler's domains ([`Lookup::evidence`]): only a name
//! under them that resolves back verifies, and only a name that positively contradicts the
//! claim (one outside them that resolves back to the address, or one under them whose own
//! addresses are others) proves an impostor. No name, a name that does not resolve back because
//! its lookup found nothing or failed, and every failure prove nothing.
//!
//! A probe ([`ReverseDns::probe`]) looks up a name that must exist: a resolver that does not
//! answer it (silence, `SERVFAIL`, `REFUSED`) does not reach public DNS, and lookups are not
//! sent while that lasts (each would cost a request the timeout for nothing); one that answers
//! `NXDOMAIN` for it sees a private view of DNS. Either way reverse DNS verification is
//! unavailable, and says so.
//!
//! [`ReverseDns::resolve`] needs a tokio runtime (it spawns the lookup and uses tokio's timer);
//! [`ReverseDns::new`] and [`ReverseDns::peek`] do not.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use hickory_resolver::config::ResolveHosts;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;

use crate::config::DnsConfig;
use crate::metrics::METRICS;

/// PTR names forward-checked at most: an address has one or two; a hostile zone could list
/// hundreds, each costing a lookup.
const MAX_NAMES: usize = 4;

/// The longest DNS name in text form (RFC 1035: 255 bytes on the wire).
const MAX_NAME_LEN: usize = 253;

/// Lookups in flight at most: each new address a client comes from starts one, and addresses
/// are cheap (an IPv6 /64 holds 2^64). Beyond this a new address is not looked up now (its
/// claim stays unverified, never an impostor) until lookups finish.
const MAX_IN_FLIGHT: usize = 256;

/// How long a failed lookup is remembered (at most; never longer than `negative_ttl`): long
/// enough that a flood of requests from one address does not hammer the resolver, short enough
/// that an outage heals soon.
const FAILURE_TTL: Duration = Duration::from_secs(30);

/// Cache shards: requests on many worker threads read the cache; one lock would serialise them.
const SHARDS: usize = 16;

/// A probe says reverse DNS is unavailable at most this often: one that flaps must not fill the
/// log (the metric follows every probe).
const UNAVAILABLE_LINE_EVERY: Duration = Duration::from_secs(60);

/// What reverse DNS says of an address. Cheap to clone (shared text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fcrdns {
    /// PTR names whose A/AAAA records contain the address (lower case, no trailing dot).
    Confirmed(Arc<[Box<str>]>),
    /// A definite answer with no confirmed name: NXDOMAIN or no PTR record, or names that do not
    /// resolve back to the address (the first such name, when there was one, for messages).
    NoName(Option<Arc<str>>),
    /// No definite answer: a timeout, SERVFAIL, REFUSED or a network error. Never evidence of
    /// an impostor.
    Failed(Arc<str>),
}

/// What the forward lookup of one PTR name found for the address it was the name of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// Its addresses hold the address: the name is confirmed.
    Confirmed,
    /// It has addresses of the address's family, none of them the address.
    Elsewhere,
    /// No address of the family: `NXDOMAIN`, or no A/AAAA record. Proves nothing.
    NoAddress,
    /// No answer: a timeout, `SERVFAIL`, `REFUSED`. Proves nothing.
    Failed,
}

/// A reverse lookup in full: its [`Fcrdns`] answer, and each PTR name (at most four, lower
/// case) with what its forward lookup found. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The answer as [`ReverseDns::resolve`] gives it.
    pub answer: Fcrdns,
    /// The PTR names and their forward lookups (empty without a PTR name, or after a failure
    /// of the PTR lookup itself).
    pub names: Arc<[(Box<str>, Forward)]>,
}

/// What a lookup proves about a claim of a crawler whose reverse DNS names end in given
/// domains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// A name under the domains resolves back to the address: verified.
    Confirmed(Box<str>),
    /// The address's name is another's: a name outside the domains resolves back to it, and no
    /// name under them is left unchecked. Proves an impostor.
    ConfirmedElsewhere(Box<str>),
    /// A name under the domains whose own addresses are others (a PTR record the address's
    /// owner wrote, which the domain's owner contradicts), and no name resolves back. Proves an
    /// impostor.
    Contradicted(Box<str>),
    /// The address has no PTR name. Proves nothing.
    NoName,
    /// Names that do not resolve back for want of an answer (no address, a failed lookup) or
    /// are outside the domains without resolving back. Proves nothing.
    NotBack(Box<str>),
    /// The lookup failed. Proves nothing.
    Failed(Arc<str>),
}

impl Lookup {
    /// A lookup without PTR names (no name, or a failure).
    fn bare(answer: Fcrdns) -> Lookup {
        Lookup {
            answer,
            names: Arc::from(Vec::new()),
        }
    }

    /// What the lookup proves for a crawler whose names end in one of `suffixes`.
    pub fn evidence(&self, suffixes: &[String]) -> Evidence {
        let under = |name: &str| suffixes.iter().any(|suffix| name_has_suffix(name, suffix));
        if self.names.is_empty() {
            return match &self.answer {
                Fcrdns::Failed(why) => Evidence::Failed(why.clone()),
                _ => Evidence::NoName,
            };
        }
        if let Some((name, _)) = self
            .names
            .iter()
            .find(|(name, forward)| *forward == Forward::Confirmed && under(name))
        {
            return Evidence::Confirmed(name.clone());
        }
        // A name under the domains that could not be checked might have confirmed.
        let unchecked = self.names.iter().find(|(name, forward)| {
            under(name) && matches!(forward, Forward::NoAddress | Forward::Failed)
        });
        if let Some((name, forward)) = unchecked {
            return match (forward, &self.answer) {
                (Forward::Failed, Fcrdns::Failed(why)) => Evidence::Failed(why.clone()),
                _ => Evidence::NotBack(name.clone()),
            };
        }
        if let Some((name, _)) = self
            .names
            .iter()
            .find(|(_, forward)| *forward == Forward::Confirmed)
        {
            return Evidence::ConfirmedElsewhere(name.clone());
        }
        if let Some((name, _)) = self
            .names
            .iter()
            .find(|(name, forward)| *forward == Forward::Elsewhere && under(name))
        {
            return Evidence::Contradicted(name.clone());
        }
        let first = self.names[0].0.clone();
        Evidence::NotBack(first)
    }
}

/// Whether the resolver reaches public DNS, as the latest probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Not probed (yet, or no probe runs): lookups are sent.
    Unknown,
    /// The probe's name resolved.
    Public,
    /// The resolver answers, but says the probe's name does not exist: it does not see public
    /// DNS. Lookups are still sent (their answers are the resolver's), and what they cannot
    /// prove is said to be for this.
    PrivateView(Arc<str>),
    /// The resolver does not answer the probe (silence, `SERVFAIL`, `REFUSED`, no route): no
    /// lookup is sent until a probe answers.
    Unreachable(Arc<str>),
}

impl Reach {
    /// Whether reverse DNS verification is available: not known otherwise.
    pub fn is_available(&self) -> bool {
        matches!(self, Reach::Unknown | Reach::Public)
    }

    /// Why it is not available.
    pub fn why(&self) -> Option<&str> {
        match self {
            Reach::PrivateView(why) | Reach::Unreachable(why) => Some(why),
            _ => None,
        }
    }
}

impl Fcrdns {
    /// The first confirmed name under one of `suffixes` (see [`name_has_suffix`]).
    pub fn name_under(&self, suffixes: &[String]) -> Option<&str> {
        match self {
            Fcrdns::Confirmed(names) => names
                .iter()
                .map(|name| &**name)
                .find(|name| suffixes.iter().any(|suffix| name_has_suffix(name, suffix))),
            _ => None,
        }
    }

    /// Whether a confirmed name is under one of `suffixes`.
    pub fn matches(&self, suffixes: &[String]) -> bool {
        self.name_under(suffixes).is_some()
    }

    /// The `result` label of `robotsguard_verify_dns_lookups_total`.
    fn label(&self) -> &'static str {
        match self {
            Fcrdns::Confirmed(_) => "confirmed",
            Fcrdns::NoName(_) => "no_name",
            Fcrdns::Failed(_) => "failed",
        }
    }
}

/// Whether DNS name `name` is `suffix` or ends in `.suffix` (ASCII case-insensitive, a trailing
/// dot ignored): `crawl-1.googlebot.com` is under `googlebot.com`, `evilgooglebot.com` is not.
pub fn name_has_suffix(name: &str, suffix: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).as_bytes();
    let suffix = suffix.strip_suffix('.').unwrap_or(suffix).as_bytes();
    if suffix.is_empty() || name.len() < suffix.len() {
        return false;
    }
    let start = name.len() - suffix.len();
    name[start..].eq_ignore_ascii_case(suffix) && (start == 0 || name[start - 1] == b'.')
}

struct Entry {
    answer: Lookup,
    until: Instant,
}

/// Answers by address, bounded and expiring.
///
/// Hand-written rather than a caching crate (moka is in the dependency tree): a read here is a
/// shard's read lock and one hash probe, tens of nanoseconds, while moka's reads also record
/// access order and run pending maintenance; this cache needs neither — entries expire by
/// time, and a full shard drops the expired, then the unconfirmed, then any (the answers come
/// back by a lookup).
struct Cache {
    shards: Box<[RwLock<HashMap<IpAddr, Entry>>]>,
    /// Picks the shard; independent of the maps' own hashers so a shard's keys still spread
    /// over its buckets.
    hasher: RandomState,
    per_shard: usize,
    len: AtomicUsize,
}

impl Cache {
    /// At most `max_entries` addresses in all.
    fn new(max_entries: usize) -> Cache {
        Cache::with_shards(max_entries, SHARDS)
    }

    /// At most `max_entries` addresses in up to `shards` shards (fewer when `max_entries` is
    /// smaller: each shard holds one at least, and the sum stays within the bound).
    fn with_shards(max_entries: usize, shards: usize) -> Cache {
        let shards = max_entries.clamp(1, shards.max(1));
        Cache {
            shards: (0..shards).map(|_| RwLock::default()).collect(),
            hasher: RandomState::new(),
            per_shard: max_entries / shards,
            len: AtomicUsize::new(0),
        }
    }

    fn shard(&self, ip: &IpAddr) -> &RwLock<HashMap<IpAddr, Entry>> {
        // The modulo keeps the index in bounds whatever the hash.
        &self.shards[(self.hasher.hash_one(ip) as usize) % self.shards.len()]
    }

    fn get(&self, ip: &IpAddr, now: Instant) -> Option<Lookup> {
        let shard = self.shard(ip).read().unwrap_or_else(|e| e.into_inner());
        shard
            .get(ip)
            .filter(|entry| entry.until > now)
            .map(|entry| entry.answer.clone())
    }

    fn put(&self, ip: IpAddr, answer: Lookup, until: Instant, now: Instant) {
        if self.per_shard == 0 {
            return;
        }
        let mut shard = self.shard(&ip).write().unwrap_or_else(|e| e.into_inner());
        let before = shard.len();
        if before >= self.per_shard && !shard.contains_key(&ip) {
            // Free a tenth of the shard at once, so the scans this costs happen once per many
            // new addresses, not on each.
            let keep = (self.per_shard - self.per_shard / 10).min(self.per_shard - 1);
            shard.retain(|_, entry| entry.until > now);
            // Confirmed names are the crawlers' own and go last: a flood from many addresses
            // (mostly without names) should not push them out.
            for drop_confirmed in [false, true] {
                let mut excess = shard.len().saturating_sub(keep);
                if excess == 0 {
                    break;
                }
                shard.retain(|_, entry| {
                    let droppable =
                        drop_confirmed || !matches!(entry.answer.answer, Fcrdns::Confirmed(_));
                    if excess > 0 && droppable {
                        excess -= 1;
                        false
                    } else {
                        true
                    }
                });
            }
        }
        shard.insert(ip, Entry { answer, until });
        let after = shard.len();
        // Counted under the shard's lock, so the sum never runs below zero.
        if after >= before {
            self.len.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.len.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

type Waiter = tokio::sync::watch::Receiver<Option<Lookup>>;

/// A lookup in flight: its answer when it comes, and when its first waiter stops waiting. A
/// request that joins it waits no longer than that: a silent zone must not cost each request
/// from the address a full timeout of its own.
#[derive(Clone)]
struct Pending {
    answer: Waiter,
    give_up_at: tokio::time::Instant,
}

struct Inner {
    resolver: Result<TokioResolver, String>,
    settings: DnsConfig,
    cache: Cache,
    in_flight: Mutex<HashMap<IpAddr, Pending>>,
    /// What the latest probe found; read by every lookup.
    reach: ArcSwap<Reach>,
    /// When a probe last said, in a line, that reverse DNS is unavailable.
    said_unavailable: Mutex<Option<Instant>>,
}

/// Forward-confirmed reverse DNS with its cache. Clones share the cache and the lookups.
#[derive(Clone)]
pub struct ReverseDns {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ReverseDns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReverseDns")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

fn resolver(settings: &DnsConfig) -> Result<TokioResolver, String> {
    let provider = TokioRuntimeProvider::default();
    let mut builder = if settings.servers.is_empty() {
        TokioResolver::builder(provider)
            .map_err(|e| format!("cannot read the system's resolver configuration: {e}"))?
    } else {
        let servers = settings
            .servers
            .iter()
            .map(|address| {
                // UDP, and TCP for answers too long for UDP.
                let mut server = NameServerConfig::udp_and_tcp(address.ip());
                for connection in &mut server.connections {
                    connection.port = address.port();
                }
                server
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, Vec::new(), servers),
            provider,
        )
    };
    let options: &mut ResolverOpts = builder.options_mut();
    options.timeout = settings.timeout;
    // One try per server: the request waits `timeout` at most anyway, and a failure is retried
    // after FAILURE_TTL.
    options.attempts = 1;
    // Answers are cached here, by the rules above; the resolver's cache would only hold them
    // past those rules.
    options.cache_size = 0;
    // /etc/hosts names loopback and local machines, never a crawler operator's addresses.
    options.use_hosts_file = ResolveHosts::Never;
    builder
        .build()
        .map_err(|e| format!("cannot build a DNS resolver: {e}"))
}

/// Removes an address's in-flight entry when its lookup ends, however it ends (an aborted task
/// included), so the address is never stuck with a dead lookup.
struct InFlight {
    inner: Arc<Inner>,
    ip: IpAddr,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut in_flight = self
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        in_flight.remove(&self.ip);
    }
}

impl ReverseDns {
    /// A resolver with `settings` (`servers` empty: the system's configuration, read now). If
    /// none can be built, every lookup fails (claims stay unverified) and the reason is logged
    /// once: verification must not stop the proxy from starting. Needs no runtime.
    pub fn new(settings: DnsConfig) -> ReverseDns {
        // Turned off (`verify.dns.enabled: false`): no resolver, and nothing to warn about.
        let resolver = if settings.enabled {
            resolver(&settings)
        } else {
            Err("reverse DNS is off (verify.dns.enabled: false)".to_string())
        };
        if let (Err(e), true) = (&resolver, settings.enabled) {
            tracing::warn!("reverse DNS verification is unavailable: {e}");
        }
        ReverseDns {
            inner: Arc::new(Inner {
                resolver,
                cache: Cache::new(settings.max_entries),
                settings,
                in_flight: Mutex::default(),
                reach: ArcSwap::from_pointee(Reach::Unknown),
                said_unavailable: Mutex::new(None),
            }),
        }
    }

    /// The cached, unexpired answer for `ip`, without waiting or looking anything up: for the
    /// request path.
    pub fn peek(&self, ip: IpAddr) -> Option<Fcrdns> {
        self.peek_lookup(ip).map(|lookup| lookup.answer)
    }

    /// [`ReverseDns::peek`], in full.
    pub fn peek_lookup(&self, ip: IpAddr) -> Option<Lookup> {
        self.inner.cache.get(&canonical(ip), Instant::now())
    }

    /// What the latest probe found ([`Reach::Unknown`] before one).
    pub fn reach(&self) -> Reach {
        (**self.inner.reach.load()).clone()
    }

    /// Looks up `name` (a name that must exist, `verify.dns.probe_name`) to tell whether the
    /// resolver reaches public DNS, and keeps what it found for [`ReverseDns::reach`] and the
    /// lookups: `robotsguard_verify_dns_available`, and a line when reverse DNS becomes
    /// unavailable (at most one a minute) or available again. Needs a tokio runtime.
    pub async fn probe(&self, name: &str) -> Reach {
        let inner = &self.inner;
        let reach = match &inner.resolver {
            Err(e) => Reach::Unreachable(short(e)),
            Ok(resolver) => {
                let fqdn = format!("{}.", name.trim_end_matches('.'));
                let budget = inner.settings.timeout.saturating_mul(2);
                match tokio::time::timeout(budget, resolver.ipv4_lookup(fqdn.as_str())).await {
                    Ok(Ok(_)) => Reach::Public,
                    Ok(Err(e)) if e.is_nx_domain() => Reach::PrivateView(
                        format!(
                            "the resolver says {name}, a name that must exist, does not \
                             (NXDOMAIN): it does not see public DNS"
                        )
                        .into(),
                    ),
                    // The name exists, without an IPv4 address: the resolver reached it.
                    Ok(Err(e)) if e.is_no_records_found() => Reach::Public,
                    Ok(Err(e)) => Reach::Unreachable(short(format!(
                        "the resolver does not answer a lookup of {name} ({e})"
                    ))),
                    Err(_) => Reach::Unreachable(
                        format!(
                            "the resolver does not answer a lookup of {name} within {budget:?}"
                        )
                        .into(),
                    ),
                }
            }
        };
        let before = inner.reach.swap(Arc::new(reach.clone()));
        METRICS
            .verify_dns_available
            .set(i64::from(matches!(reach, Reach::Public)));
        let now = Instant::now();
        match (&reach, before.is_available()) {
            (Reach::PrivateView(why) | Reach::Unreachable(why), _) => {
                let mut said = inner
                    .said_unavailable
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let changed = *before != reach;
                let due = said.is_none_or(|at| now.duration_since(at) >= UNAVAILABLE_LINE_EVERY);
                if changed && due {
                    *said = Some(now);
                    tracing::warn!(
                        probe = name,
                        "reverse DNS verification is unavailable: {why}; claims checked by \
                         reverse DNS stay unverified (never impostors) until it answers"
                    );
                }
            }
            (Reach::Public, false) => {
                tracing::info!(probe = name, "reverse DNS verification is available again");
            }
            _ => {}
        }
        reach
    }

    /// Addresses cached now (expired ones included until they are dropped), at most
    /// `max_entries`.
    pub fn cached(&self) -> usize {
        self.inner.cache.len()
    }

    /// The answer for `ip`: cached, or looked up (one lookup per address however many ask at
    /// once). Waits at most `timeout` from the lookup's start: the request that started it waits
    /// `timeout`, one that joins it only what is left of that. A lookup still running then goes
    /// on and fills the cache for the next request, and this answers `Failed`. Needs a tokio
    /// runtime.
    pub async fn resolve(&self, ip: IpAddr) -> Fcrdns {
        self.resolve_lookup(ip).await.answer
    }

    /// [`ReverseDns::resolve`], in full: with each PTR name's forward lookup. While the probe
    /// finds the resolver unreachable, nothing is sent and the answer is a failure saying so.
    pub async fn resolve_lookup(&self, ip: IpAddr) -> Lookup {
        let ip = canonical(ip);
        if let Some(answer) = self.peek_lookup(ip) {
            return answer;
        }
        if let Reach::Unreachable(why) = &**self.inner.reach.load() {
            return Lookup::bare(Fcrdns::Failed(
                format!("reverse DNS is unavailable: {why}").into(),
            ));
        }
        let Pending {
            answer: mut waiter,
            give_up_at,
        } = match self.join_or_start(ip) {
            Ok(pending) => pending,
            Err(answer) => return answer,
        };
        let timeout = self.inner.settings.timeout;
        let waited = tokio::time::timeout_at(give_up_at, async {
            match waiter.wait_for(Option::is_some).await {
                Ok(answer) => answer.clone(),
                Err(_) => None,
            }
        })
        .await;
        match waited {
            Ok(Some(answer)) => answer,
            Ok(None) => Lookup::bare(Fcrdns::Failed("the lookup was abandoned".into())),
            Err(_) => Lookup::bare(Fcrdns::Failed(
                format!("timeout: no answer within {timeout:?}").into(),
            )),
        }
    }

    /// The lookup in flight for `ip`, joined or started; or an answer without one (cached since
    /// the caller looked, or too many lookups in flight).
    fn join_or_start(&self, ip: IpAddr) -> Result<Pending, Lookup> {
        let (done, waiter) = {
            let mut in_flight = self
                .inner
                .in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(pending) = in_flight.get(&ip) {
                return Ok(pending.clone());
            }
            // A lookup that ended since the caller's peek stored its answer before leaving
            // `in_flight`: look again under the lock rather than send a second one.
            if let Some(answer) = self.peek_lookup(ip) {
                return Err(answer);
            }
            if in_flight.len() >= MAX_IN_FLIGHT {
                let why = "too many lookups in flight";
                crate::logs::verification_lookup_failed(ip, why);
                return Err(Lookup::bare(Fcrdns::Failed(why.into())));
            }
            let (done, waiter) = tokio::sync::watch::channel(None);
            let pending = Pending {
                answer: waiter,
                give_up_at: tokio::time::Instant::now() + self.inner.settings.timeout,
            };
            in_flight.insert(ip, pending.clone());
            (done, pending)
        };
        // Made with the lock released: it takes the lock when dropped, even if spawning fails.
        let guard = InFlight {
            inner: self.inner.clone(),
            ip,
        };
        tokio::spawn(async move {
            let inner = guard.inner.clone();
            // The resolver times out each query on its own; this bounds the whole chain (PTR,
            // then the forward lookups, each maybe retried over TCP) whatever happens.
            let budget = inner.settings.timeout.saturating_mul(4);
            let answer = match tokio::time::timeout(budget, lookup(&inner, ip)).await {
                Ok(answer) => answer,
                Err(_) => Lookup::bare(Fcrdns::Failed(
                    format!("timeout: lookups ran past {budget:?}").into(),
                )),
            };
            inner.remember(ip, answer.clone());
            // Cached first, then out of `in_flight`: a caller always finds one or the other.
            drop(guard);
            let _ = done.send(Some(answer));
        });
        Ok(waiter)
    }
}

impl Inner {
    fn remember(&self, ip: IpAddr, answer: Lookup) {
        let ttl = match &answer.answer {
            Fcrdns::Confirmed(_) => self.settings.positive_ttl,
            Fcrdns::NoName(_) => self.settings.negative_ttl,
            Fcrdns::Failed(_) => FAILURE_TTL.min(self.settings.negative_ttl),
        };
        METRICS
            .verify_dns_lookups
            .with_label_values(&[answer.answer.label()])
            .inc();
        if let Fcrdns::Failed(why) = &answer.answer {
            crate::logs::verification_lookup_failed(ip, why);
        }
        let now = Instant::now();
        // An absurd TTL (years) must not overflow `Instant`: cap it at a year.
        let until = now
            .checked_add(ttl)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        self.cache.put(ip, answer, until, now);
        METRICS
            .verify_dns_cache_entries
            .set(i64::try_from(self.cache.len()).unwrap_or(i64::MAX));
    }
}

/// IPv4-mapped IPv6 addresses are their IPv4 address (a dual-stack listener reports IPv4
/// clients so), looked up in in-addr.arpa.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Text of a DNS name as compared: lower case, no trailing dot; `None` when empty or overlong.
fn name_text(name: &hickory_resolver::proto::rr::Name) -> Option<Box<str>> {
    let text = name.to_ascii().to_ascii_lowercase();
    let text = text.strip_suffix('.').unwrap_or(&text);
    (!text.is_empty() && text.len() <= MAX_NAME_LEN).then(|| text.into())
}

/// An error's text, cut short: it may quote names from a zone a client controls.
fn short(error: impl std::fmt::Display) -> Arc<str> {
    let text = error.to_string();
    text.chars().take(200).collect::<String>().into()
}

/// The addresses `name` has in the family of `ip`.
async fn forward(
    resolver: &TokioResolver,
    name: &str,
    ip: IpAddr,
) -> Result<Vec<IpAddr>, hickory_resolver::net::NetError> {
    // Fully qualified: the resolver's search domains must not be tried.
    let fqdn = format!("{name}.");
    let found = match ip {
        IpAddr::V4(_) => resolver.ipv4_lookup(fqdn.as_str()).await?,
        IpAddr::V6(_) => resolver.ipv6_lookup(fqdn.as_str()).await?,
    };
    Ok(found
        .answers()
        .iter()
        .filter_map(|record| match &record.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(aaaa) => Some(IpAddr::V6(aaaa.0)),
            _ => None,
        })
        .collect())
}

async fn lookup(inner: &Inner, ip: IpAddr) -> Lookup {
    let resolver = match &inner.resolver {
        Ok(resolver) => resolver,
        Err(e) => return Lookup::bare(Fcrdns::Failed(short(e))),
    };
    let found = match resolver.reverse_lookup(ip).await {
        Ok(found) => found,
        Err(e) if e.is_no_records_found() => return Lookup::bare(Fcrdns::NoName(None)),
        Err(e) => return Lookup::bare(Fcrdns::Failed(short(format!("PTR lookup: {e}")))),
    };
    let mut names: Vec<Box<str>> = Vec::with_capacity(MAX_NAMES);
    let ptr_names = found
        .answers()
        .iter()
        .filter_map(|record| match &record.data {
            RData::PTR(ptr) => name_text(&ptr.0),
            _ => None,
        });
    for name in ptr_names {
        if names.len() == MAX_NAMES {
            break;
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let Some(first) = names.first().map(|name| Arc::<str>::from(&**name)) else {
        return Lookup::bare(Fcrdns::NoName(None));
    };
    // The names are checked at once: a request waits for the PTR answer and the slowest
    // forward answer, not their sum.
    let answers =
        futures::future::join_all(names.iter().map(|name| forward(resolver, name, ip))).await;
    let mut confirmed = Vec::new();
    let mut failed = None;
    let mut checked = Vec::with_capacity(names.len());
    for (name, addresses) in names.into_iter().zip(answers) {
        let found = match addresses {
            Ok(addresses) if addresses.contains(&ip) => {
                confirmed.push(name.clone());
                Forward::Confirmed
            }
            Ok(addresses) if addresses.is_empty() => Forward::NoAddress,
            Ok(_) => Forward::Elsewhere,
            Err(e) if e.is_no_records_found() => Forward::NoAddress,
            Err(e) => {
                failed = Some(short(format!("forward lookup of {name}: {e}")));
                Forward::Failed
            }
        };
        checked.push((name, found));
    }
    let answer = if !confirmed.is_empty() {
        Fcrdns::Confirmed(confirmed.into())
    } else {
        match failed {
            // A name that might have confirmed could not be checked: nothing definite.
            Some(why) => Fcrdns::Failed(why),
            None => Fcrdns::NoName(Some(first)),
        }
    };
    Lookup {
        answer,
        names: checked.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_end_on_a_label_boundary() {
        assert!(name_has_suffix(
            "crawl-66-249-66-1.googlebot.com",
            "googlebot.com"
        ));
        assert!(name_has_suffix(
            "Crawl-66-249-66-1.GoogleBot.com.",
            "googlebot.com"
        ));
        assert!(name_has_suffix("googlebot.com", "googlebot.com"));
        assert!(name_has_suffix("googlebot.com.", "GOOGLEBOT.COM"));
        assert!(name_has_suffix(
            "msnbot-1.search.msn.com",
            "search.msn.com."
        ));
        assert!(!name_has_suffix("evilgooglebot.com", "googlebot.com"));
        assert!(!name_has_suffix(
            "googlebot.com.evil.example",
            "googlebot.com"
        ));
        assert!(!name_has_suffix("com", "googlebot.com"));
        assert!(!name_has_suffix("x.googlebot.com", ""));
        assert!(!name_has_suffix("x.googlebot.com", "."));
        assert!(!name_has_suffix("", "googlebot.com"));
    }

    #[test]
    fn confirmed_names_under_suffixes() {
        let answer =
            Fcrdns::Confirmed(vec!["a.example.net".into(), "crawl.googlebot.com".into()].into());
        let google = ["googlebot.com".to_string(), "google.com".to_string()];
        assert_eq!(answer.name_under(&google), Some("crawl.googlebot.com"));
        assert!(answer.matches(&google));
        assert!(!answer.matches(&["search.msn.com".to_string()]));
        assert!(!answer.matches(&[]));
        assert!(!Fcrdns::NoName(Some("crawl.googlebot.com".into())).matches(&google));
        assert!(!Fcrdns::Failed("timeout".into()).matches(&google));
    }

    fn lookup(answer: Fcrdns, names: &[(&str, Forward)]) -> Lookup {
        Lookup {
            answer,
            names: names
                .iter()
                .map(|(name, forward)| (Box::from(*name), *forward))
                .collect(),
        }
    }

    #[test]
    fn only_a_contradicting_answer_proves_an_impostor() {
        use Forward::{Confirmed, Elsewhere, Failed, NoAddress};
        let google = ["googlebot.com".to_string()];
        let confirmed =
            |names: &[&str]| Fcrdns::Confirmed(names.iter().map(|n| Box::from(*n)).collect());
        let cases: [(Lookup, Evidence); 9] = [
            (
                lookup(
                    confirmed(&["crawl-1.googlebot.com"]),
                    &[("crawl-1.googlebot.com", Confirmed)],
                ),
                Evidence::Confirmed("crawl-1.googlebot.com".into()),
            ),
            (
                lookup(
                    confirmed(&["host.evil.example"]),
                    &[("host.evil.example", Confirmed)],
                ),
                Evidence::ConfirmedElsewhere("host.evil.example".into()),
            ),
            (
                lookup(
                    Fcrdns::NoName(Some("crawl-2.googlebot.com".into())),
                    &[("crawl-2.googlebot.com", Elsewhere)],
                ),
                Evidence::Contradicted("crawl-2.googlebot.com".into()),
            ),
            // NXDOMAIN for the PTR, and for the forward name: nothing proven.
            (Lookup::bare(Fcrdns::NoName(None)), Evidence::NoName),
            (
                lookup(
                    Fcrdns::NoName(Some("gone.googlebot.com".into())),
                    &[("gone.googlebot.com", NoAddress)],
                ),
                Evidence::NotBack("gone.googlebot.com".into()),
            ),
            // A name outside that does not resolve back proves nothing either.
            (
                lookup(
                    Fcrdns::NoName(Some("host.evil.example".into())),
                    &[("host.evil.example", Elsewhere)],
                ),
                Evidence::NotBack("host.evil.example".into()),
            ),
            // A name under the domains left unchecked keeps a confirmed other name from
            // proving anything.
            (
                lookup(
                    confirmed(&["host.evil.example"]),
                    &[
                        ("crawl-3.googlebot.com", NoAddress),
                        ("host.evil.example", Confirmed),
                    ],
                ),
                Evidence::NotBack("crawl-3.googlebot.com".into()),
            ),
            (
                lookup(
                    Fcrdns::Failed("forward lookup of crawl-4.googlebot.com: SERVFAIL".into()),
                    &[
                        ("crawl-4.googlebot.com", Failed),
                        ("other.example.net", Elsewhere),
                    ],
                ),
                Evidence::Failed("forward lookup of crawl-4.googlebot.com: SERVFAIL".into()),
            ),
            (
                Lookup::bare(Fcrdns::Failed("timeout".into())),
                Evidence::Failed("timeout".into()),
            ),
        ];
        for (i, (lookup, want)) in cases.into_iter().enumerate() {
            assert_eq!(lookup.evidence(&google), want, "case {i}");
        }
    }

    #[test]
    fn mapped_addresses_are_their_ipv4_address() {
        let mapped: IpAddr = "::ffff:198.51.100.7"
            .parse()
            .unwrap_or_else(|_| unreachable!());
        let v4: IpAddr = "198.51.100.7".parse().unwrap_or_else(|_| unreachable!());
        let v6: IpAddr = "2001:db8::7".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(canonical(mapped), v4);
        assert_eq!(canonical(v4), v4);
        assert_eq!(canonical(v6), v6);
    }

    fn address(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0xC633_6400 + n))
    }

    #[test]
    fn cached_answers_expire() {
        let cache = Cache::new(100);
        let now = Instant::now();
        cache.put(
            address(1),
            Lookup::bare(Fcrdns::NoName(None)),
            now + Duration::from_secs(10),
            now,
        );
        assert_eq!(
            cache.get(&address(1), now).map(|l| l.answer),
            Some(Fcrdns::NoName(None))
        );
        assert_eq!(cache.get(&address(1), now + Duration::from_secs(10)), None);
        assert_eq!(cache.get(&address(2), now), None);
    }

    #[test]
    fn many_addresses_stay_within_the_bound() {
        for max in [1, 7, 16, 100, 1000] {
            let cache = Cache::new(max);
            let now = Instant::now();
            let until = now + Duration::from_secs(60);
            for n in 0..5_000 {
                cache.put(address(n), Lookup::bare(Fcrdns::NoName(None)), until, now);
                assert!(cache.len() <= max, "{max}: {}", cache.len());
            }
            let held = cache.shards.iter().map(|s| s.read().map_or(0, |s| s.len()));
            assert_eq!(held.sum::<usize>(), cache.len());
        }
        // Nothing is kept at all when nothing may be.
        let cache = Cache::new(0);
        let now = Instant::now();
        cache.put(address(1), Lookup::bare(Fcrdns::NoName(None)), now, now);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_flood_without_names_does_not_push_out_confirmed_ones() {
        let cache = Cache::new(1600);
        let now = Instant::now();
        let until = now + Duration::from_secs(60);
        let crawler = Lookup::bare(Fcrdns::Confirmed(
            vec!["crawl-1.googlebot.com".into()].into(),
        ));
        for n in 0..100 {
            cache.put(address(n), crawler.clone(), until, now);
        }
        for n in 100..50_000 {
            cache.put(address(n), Lookup::bare(Fcrdns::NoName(None)), until, now);
        }
        for n in 0..100 {
            assert_eq!(cache.get(&address(n), now), Some(crawler.clone()), "{n}");
        }
    }

    #[test]
    fn expired_entries_go_first() {
        let cache = Cache::with_shards(16, 1);
        let now = Instant::now();
        let later = now + Duration::from_secs(120);
        for n in 0..16 {
            cache.put(
                address(n),
                Lookup::bare(Fcrdns::NoName(None)),
                now + Duration::from_secs(60),
                now,
            );
        }
        let live = Lookup::bare(Fcrdns::Failed("x".into()));
        for n in 16..32 {
            cache.put(
                address(n),
                live.clone(),
                later + Duration::from_secs(1),
                later,
            );
        }
        for n in 16..32 {
            assert_eq!(cache.get(&address(n), later), Some(live.clone()), "{n}");
        }
    }
}
