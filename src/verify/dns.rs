//! Forward-confirmed reverse DNS: the PTR names of an address, each kept only if its own A or
//! AAAA records contain the address again — Google's and Bing's documented way to tell their
//! crawlers' addresses. Lookups are cached (a confirmed answer for `positive_ttl`, "no name" for
//! `negative_ttl`, a failure briefly), shared by concurrent requests from one address, bounded
//! in number, and a request waits for one at most `timeout`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Lookups in flight at most: each new address a client comes from starts one, and addresses
/// are cheap (an IPv6 /64 holds 2^64). Beyond this a new address is not looked up now (its
/// claim stays unverified, never an impostor) until lookups finish.
const MAX_IN_FLIGHT: usize = 256;

/// How long a failed lookup is remembered: long enough that a flood of requests from one
/// address does not hammer the resolver, short enough that an outage heals soon.
const FAILURE_TTL: Duration = Duration::from_secs(30);

/// What reverse DNS says of an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fcrdns {
    /// PTR names whose A/AAAA records contain the address (lower case, no trailing dot).
    Confirmed(Arc<[Box<str>]>),
    /// A definite answer with no confirmed name: no PTR record, or names that do not resolve
    /// back to the address (the first such name, when there was one).
    NoName(Option<Box<str>>),
    /// No definite answer: a timeout, SERVFAIL, REFUSED or a network error.
    Failed(Box<str>),
}

impl Fcrdns {
    /// The first confirmed name under one of `suffixes`.
    pub fn name_under(&self, suffixes: &[String]) -> Option<&str> {
        match self {
            Fcrdns::Confirmed(names) => names
                .iter()
                .map(|name| &**name)
                .find(|name| suffixes.iter().any(|suffix| name_has_suffix(name, suffix))),
            _ => None,
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

struct Cached {
    answer: Fcrdns,
    until: Instant,
}

type Waiter = tokio::sync::watch::Receiver<Option<Fcrdns>>;

struct Inner {
    resolver: Result<TokioResolver, String>,
    settings: DnsConfig,
    cache: Mutex<HashMap<IpAddr, Cached>>,
    in_flight: Mutex<HashMap<IpAddr, Waiter>>,
}

/// Forward-confirmed reverse DNS with its cache.
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

impl ReverseDns {
    /// A resolver with `settings` (`servers` empty: the system's configuration). If none can be
    /// built, every lookup fails (claims stay unverified) and the reason is logged once.
    pub fn new(settings: DnsConfig) -> ReverseDns {
        let resolver = resolver(&settings);
        if let Err(e) = &resolver {
            tracing::warn!("reverse DNS verification is unavailable: {e}");
        }
        ReverseDns {
            inner: Arc::new(Inner {
                resolver,
                settings,
                cache: Mutex::default(),
                in_flight: Mutex::default(),
            }),
        }
    }

    /// The cached, unexpired answer for `ip`, without waiting.
    pub fn peek(&self, ip: IpAddr) -> Option<Fcrdns> {
        let ip = canonical(ip);
        let cache = self.inner.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(&ip)
            .filter(|cached| cached.until > Instant::now())
            .map(|cached| cached.answer.clone())
    }

    /// Addresses cached now.
    pub fn cached(&self) -> usize {
        self.inner.cache.lock().map_or(0, |cache| cache.len())
    }

    /// The answer for `ip`: cached, or looked up (one lookup per address however many ask at
    /// once). Waits at most `timeout`; a lookup still running then goes on and fills the cache.
    pub async fn resolve(&self, ip: IpAddr) -> Fcrdns {
        let ip = canonical(ip);
        if let Some(answer) = self.peek(ip) {
            return answer;
        }
        let mut waiter = {
            let mut in_flight = self
                .inner
                .in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match in_flight.get(&ip) {
                Some(waiter) => waiter.clone(),
                None if in_flight.len() >= MAX_IN_FLIGHT => {
                    METRICS
                        .verify_dns_lookups
                        .with_label_values(&["failed"])
                        .inc();
                    return Fcrdns::Failed("too many lookups in flight".into());
                }
                None => {
                    let (done, waiter) = tokio::sync::watch::channel(None);
                    in_flight.insert(ip, waiter.clone());
                    let inner = self.inner.clone();
                    tokio::spawn(async move {
                        // The resolver times out on its own; this bounds the whole chain of
                        // lookups (PTR, then each name's forward lookup).
                        let budget = inner.settings.timeout.saturating_mul(2 + MAX_NAMES as u32);
                        let answer = match tokio::time::timeout(budget, lookup(&inner, ip)).await {
                            Ok(answer) => answer,
                            Err(_) => Fcrdns::Failed("the lookups timed out".into()),
                        };
                        inner.remember(ip, answer.clone());
                        if let Ok(mut in_flight) = inner.in_flight.lock() {
                            in_flight.remove(&ip);
                        }
                        let _ = done.send(Some(answer));
                    });
                    waiter
                }
            }
        };
        let waited = tokio::time::timeout(self.inner.settings.timeout, async {
            match waiter.wait_for(Option::is_some).await {
                Ok(answer) => answer.clone(),
                Err(_) => None,
            }
        })
        .await;
        match waited {
            Ok(Some(answer)) => answer,
            Ok(None) => Fcrdns::Failed("the lookup was abandoned".into()),
            Err(_) => {
                Fcrdns::Failed(format!("no answer within {:?}", self.inner.settings.timeout).into())
            }
        }
    }
}

impl Inner {
    fn remember(&self, ip: IpAddr, answer: Fcrdns) {
        let ttl = match &answer {
            Fcrdns::Confirmed(_) => self.settings.positive_ttl,
            Fcrdns::NoName(_) => self.settings.negative_ttl,
            Fcrdns::Failed(_) => FAILURE_TTL.min(self.settings.negative_ttl),
        };
        let result = match &answer {
            Fcrdns::Confirmed(_) => "confirmed",
            Fcrdns::NoName(_) => "no_name",
            Fcrdns::Failed(_) => "failed",
        };
        METRICS
            .verify_dns_lookups
            .with_label_values(&[result])
            .inc();
        if let Fcrdns::Failed(why) = &answer {
            crate::logs::verification_lookup_failed(ip, why);
        }
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= self.settings.max_entries && !cache.contains_key(&ip) {
            cache.retain(|_, cached| cached.until > now);
            // Still full of live answers: drop a tenth (whichever come first); they are looked
            // up again when asked.
            if cache.len() >= self.settings.max_entries {
                let drop: Vec<IpAddr> = cache
                    .keys()
                    .take((self.settings.max_entries / 10).max(1))
                    .copied()
                    .collect();
                for key in drop {
                    cache.remove(&key);
                }
            }
        }
        cache.insert(
            ip,
            Cached {
                answer,
                until: now + ttl,
            },
        );
        METRICS
            .verify_dns_cache_entries
            .set(i64::try_from(cache.len()).unwrap_or(i64::MAX));
    }
}

/// IPv4-mapped IPv6 addresses are their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Text of a DNS name as compared: lower case, no trailing dot; `None` when overlong.
fn name_text(name: &hickory_resolver::proto::rr::Name) -> Option<Box<str>> {
    let text = name.to_ascii().to_ascii_lowercase();
    let text = text.strip_suffix('.').unwrap_or(&text);
    (!text.is_empty() && text.len() <= 253).then(|| text.into())
}

fn short(error: impl std::fmt::Display) -> Box<str> {
    let text = error.to_string();
    text.chars().take(200).collect::<String>().into()
}

async fn lookup(inner: &Inner, ip: IpAddr) -> Fcrdns {
    let resolver = match &inner.resolver {
        Ok(resolver) => resolver,
        Err(e) => return Fcrdns::Failed(short(e)),
    };
    let names: Vec<Box<str>> = match resolver.reverse_lookup(ip).await {
        Ok(found) => found
            .answers()
            .iter()
            .filter_map(|record| match &record.data {
                RData::PTR(ptr) => name_text(&ptr.0),
                _ => None,
            })
            .take(MAX_NAMES)
            .collect(),
        Err(e) if e.is_no_records_found() => return Fcrdns::NoName(None),
        Err(e) => return Fcrdns::Failed(short(format!("PTR lookup: {e}"))),
    };
    let Some(first) = names.first().cloned() else {
        return Fcrdns::NoName(None);
    };
    let mut confirmed = Vec::new();
    let mut failed = None;
    for name in names {
        let fqdn = format!("{name}.");
        let addresses: Result<Vec<IpAddr>, _> = match ip {
            IpAddr::V4(_) => resolver.ipv4_lookup(fqdn.as_str()).await.map(|found| {
                found
                    .answers()
                    .iter()
                    .filter_map(|record| match &record.data {
                        RData::A(a) => Some(IpAddr::V4(a.0)),
                        _ => None,
                    })
                    .collect()
            }),
            IpAddr::V6(_) => resolver.ipv6_lookup(fqdn.as_str()).await.map(|found| {
                found
                    .answers()
                    .iter()
                    .filter_map(|record| match &record.data {
                        RData::AAAA(aaaa) => Some(IpAddr::V6(aaaa.0)),
                        _ => None,
                    })
                    .collect()
            }),
        };
        match addresses {
            Ok(addresses) if addresses.contains(&ip) => confirmed.push(name),
            Ok(_) => {}
            Err(e) if e.is_no_records_found() => {}
            Err(e) => failed = Some(short(format!("forward lookup of {name}: {e}"))),
        }
    }
    if !confirmed.is_empty() {
        return Fcrdns::Confirmed(confirmed.into());
    }
    match failed {
        // A name that might have confirmed could not be checked: nothing definite.
        Some(why) => Fcrdns::Failed(why),
        None => Fcrdns::NoName(Some(first)),
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
    }

    #[test]
    fn confirmed_names_under_suffixes() {
        let answer =
            Fcrdns::Confirmed(vec!["a.example.net".into(), "crawl.googlebot.com".into()].into());
        let google = ["googlebot.com".to_string(), "google.com".to_string()];
        assert_eq!(answer.name_under(&google), Some("crawl.googlebot.com"));
        assert_eq!(answer.name_under(&["search.msn.com".to_string()]), None);
        assert_eq!(Fcrdns::NoName(None).name_under(&google), None);
    }
}
