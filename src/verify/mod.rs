//! Crawler verification: whether a request that claims a crawler comes from it, by the
//! operator's published IP ranges, forward-confirmed reverse DNS, or a Web Bot Auth signature.
//!
//! The sources keep their own data fresh in the background; [`verdict`] combines what they say
//! for one claim into the [`Verification`] a decision carries.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::services::background::background_service;
use pingora::services::ServiceWithDependents;

mod cache;
pub mod dns;
pub mod ranges;
pub mod refresh;
mod registry;
pub mod signature;
mod signature_keys;

use crate::config::VerifyConfig;
use crate::crawlers::VerifyData;
use crate::enforce::{Decision, Verification, VerificationResult, VerifiedBy};
use crate::metrics::METRICS;
use crate::snapshot::{Live, Snapshot};

/// What keeps the `file:` Web Bot Auth registries (and the `file:` and `data:` cards they list)
/// from being read, one line each naming the file; checked before `serve` starts and by
/// `validate`.
pub fn registry_file_problems(registries: &[crate::config::RegistrySource]) -> Vec<String> {
    registry::file_problems(registries)
}

/// How long a verdict per (crawler, address) is reused before its sources are asked again
/// (they keep their own, longer-lived data).
const VERDICT_TTL: Duration = Duration::from_secs(60);

/// Checks crawlers' claims: the range lists, the reverse DNS cache and the verdicts per
/// (crawler, address). One per process, shared by every snapshot.
pub struct Verifier {
    settings: VerifyConfig,
    /// What list and key-directory fetches go through: `verify.ranges.proxy`, else the
    /// environment's `HTTPS_PROXY`.
    proxy: Option<crate::config::FetchProxy>,
    lists: Arc<ranges::RangeLists>,
    dns: dns::ReverseDns,
    /// `verify.dns.probe_name` and `probe_interval`.
    dns_probe: crate::config::DnsProbe,
    verdicts: cache::VerdictCache,
    signatures: Arc<signature::WebBotAuth>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier with `settings` (`verify`); lists load once its services run.
    pub fn new(settings: &VerifyConfig) -> Verifier {
        let proxy = settings.ranges.proxy.clone().or_else(|| {
            match crate::config::FetchProxy::from_environment()? {
                Ok(proxy) => Some(proxy),
                Err(e) => {
                    tracing::warn!(
                        "HTTPS_PROXY is not usable ({e}): range lists and key directories are \
                         fetched directly; set verify.ranges.proxy to choose"
                    );
                    None
                }
            }
        });
        Verifier {
            settings: settings.clone(),
            lists: Arc::new(ranges::RangeLists::with_mirrors(
                settings.ranges.mirrors.clone(),
            )),
            dns: dns::ReverseDns::new(settings.dns.clone()),
            dns_probe: settings.dns_probe.clone(),
            verdicts: cache::VerdictCache::new(settings.dns.max_entries, VERDICT_TTL),
            signatures: Arc::new(signature::WebBotAuth::new(
                &settings.web_bot_auth,
                proxy.as_ref(),
                settings.refresh,
            )),
            proxy,
        }
    }

    /// The HTTP proxy list and key-directory fetches go through, if any.
    pub fn proxy(&self) -> Option<&crate::config::FetchProxy> {
        self.proxy.as_ref()
    }

    /// The request's Web Bot Auth signature, checked (`Absent` when it has none or when no
    /// agent is configured). `authority` and `scheme` are the request's as addressed.
    pub fn signature(
        &self,
        request: &pingora::http::RequestHeader,
        authority: &str,
        scheme: &str,
    ) -> signature::SignatureOutcome {
        if !self.signatures.is_active() {
            return signature::SignatureOutcome::Absent;
        }
        self.signatures
            .verify(request, authority, scheme, std::time::SystemTime::now())
    }

    /// The request's Web Bot Auth signature checked, with its nonce ([`Verifier::signature`]).
    pub fn signature_check(
        &self,
        request: &pingora::http::RequestHeader,
        authority: &str,
        scheme: &str,
    ) -> signature::Checked {
        if !self.signatures.is_active() {
            return signature::Checked {
                outcome: signature::SignatureOutcome::Absent,
                nonce: None,
                lifetime: Duration::ZERO,
                created: None,
                digest: None,
                keyid: None,
            };
        }
        self.signatures
            .check(request, authority, scheme, std::time::SystemTime::now())
    }

    /// The rule a verified signature of `agent` without a nonce must meet.
    pub fn nonceless_rule(&self, agent: &str) -> signature::NoncelessRule {
        self.signatures.nonceless_rule(agent)
    }

    /// `verify.web_bot_auth.mode`.
    pub fn web_bot_auth_mode(&self) -> crate::config::WebBotAuthMode {
        self.signatures.mode()
    }

    /// Whether `crawler` has a signing agent (configured, from a registry, or its catalogue
    /// entry's).
    pub fn has_signing_agent(&self, crawler: &str) -> bool {
        self.signatures.has_signing_agent(crawler)
    }

    /// The verdict for a request a valid signature of `agent` with its key `keyid` identified
    /// as `crawler`, counted in `robotsguard_crawler_verifications_total`.
    pub fn signed(crawler: &str, agent: &str, keyid: Option<&str>) -> Arc<Verification> {
        METRICS
            .crawler_verifications
            .with_label_values(&[crawler, VerificationResult::Verified.as_str()])
            .inc();
        Verification::by_signature(crawler, agent, keyid)
    }

    /// The range lists and their copies.
    pub fn lists(&self) -> &Arc<ranges::RangeLists> {
        &self.lists
    }

    /// The background services: the range list refresher (lists named by `live`'s catalogue;
    /// none with `verify.ranges.enabled: false`) and, unless Web Bot Auth is off, the signing
    /// agents' keys' refresher (configured, registries', and `live`'s catalogue's).
    pub fn services(&self, live: Arc<Live>) -> Vec<Box<dyn ServiceWithDependents>> {
        let mut services: Vec<Box<dyn ServiceWithDependents>> = Vec::new();
        if self.settings.ranges.enabled {
            services.push(Box::new(background_service(
                "crawler range lists",
                refresh::ListRefresher {
                    live: live.clone(),
                    lists: self.lists.clone(),
                    refresh: self.settings.refresh,
                    proxy: self.proxy.clone(),
                    private_origins: self.settings.ranges.private_origins.clone(),
                },
            )));
        }
        if self.settings.web_bot_auth.enabled {
            services.push(Box::new(background_service(
                "Web Bot Auth keys",
                self.signatures.service(Some(live)),
            )));
        }
        if self.settings.dns.enabled {
            services.push(Box::new(background_service(
                "reverse DNS probe",
                DnsProber {
                    dns: self.dns.clone(),
                    probe: self.dns_probe.clone(),
                },
            )));
        }
        services
    }

    /// Whether reverse DNS verification is available, as the latest probe found (`/explain`).
    pub fn reverse_dns(&self) -> ReverseDnsStatus {
        let reach = self.dns.reach();
        ReverseDnsStatus {
            enabled: self.settings.dns.enabled,
            available: self.settings.dns.enabled && reach.is_available(),
            probed: !matches!(reach, dns::Reach::Unknown),
            probe_name: self.dns_probe.name.clone(),
            why: if self.settings.dns.enabled {
                reach.why().map(str::to_string)
            } else {
                Some("reverse DNS is off (verify.dns.enabled: false)".to_string())
            },
        }
    }

    /// Puts the signing agents `catalogue` names in force (their keys load once the services
    /// run, which then follow the catalogue in force).
    pub fn set_catalogue_agents(&self, catalogue: &crate::crawlers::Catalogue) {
        self.signatures.set_catalogue(catalogue);
    }

    /// Checks every claim of `decision` from `client`: an impostor claim wins, else the
    /// deciding crawler's verdict. `None` when no crawler claimed has verification data. Waits
    /// for reverse DNS at most `verify.dns.timeout`.
    pub async fn verify(
        &self,
        snapshot: &Snapshot,
        decision: &Decision,
        client: IpAddr,
    ) -> Option<Arc<Verification>> {
        self.verify_claims(snapshot, decision, client, true).await
    }

    /// [`Verifier::verify`] sending no DNS query: a claim that only a reverse DNS lookup not
    /// already answered could settle stays unverified, its `how` saying [`NOT_LOOKED_UP`]
    /// (what `/explain` answers once its lookups are used up). Range lists and cached verdicts
    /// still answer.
    pub async fn verify_without_lookups(
        &self,
        snapshot: &Snapshot,
        decision: &Decision,
        client: IpAddr,
    ) -> Option<Arc<Verification>> {
        self.verify_claims(snapshot, decision, client, false).await
    }

    /// Whether checking a claim from `ip` could send a DNS query now: reverse DNS is on, the
    /// resolver is not known to be unreachable (then nothing is sent), the address is public and
    /// no answer for it is cached.
    pub fn may_look_up(&self, ip: IpAddr) -> bool {
        self.settings.dns.enabled
            && !matches!(self.dns.reach(), dns::Reach::Unreachable(_))
            && is_public(ip)
            && self.dns.peek(ip).is_none()
    }

    /// Whether the verdict on `crawler` (with `data`) from `ip` would need a DNS query now.
    fn needs_lookup(&self, crawler: &str, data: &VerifyData, ip: IpAddr) -> bool {
        !data.rdns.is_empty()
            && self.may_look_up(ip)
            && self.cached(crawler, ip).is_none()
            && !(self.settings.ranges.enabled
                && matches!(self.lists.answer(crawler, &data.ips, ip), ListAnswer::In(_)))
    }

    async fn verify_claims(
        &self,
        snapshot: &Snapshot,
        decision: &Decision,
        client: IpAddr,
        lookups: bool,
    ) -> Option<Arc<Verification>> {
        let mut found: Option<Arc<Verification>> = None;
        let primary = decision
            .crawler
            .as_ref()
            .and_then(|crawler| Some((crawler.name(), crawler.verify_data()?)));
        let catalogue = snapshot.identifier.catalogue();
        let others = decision.also_named.iter().filter_map(|name| {
            let def = catalogue.get(name)?;
            Some((def.name.as_str(), def.verify.as_ref()?))
        });
        for (name, data) in primary.into_iter().chain(others) {
            if !lookups && self.needs_lookup(name, data, client) {
                found
                    .get_or_insert_with(|| Arc::new(Verification::unverified(name, NOT_LOOKED_UP)));
                continue;
            }
            let verification = self.verify_one(name, data, client).await;
            METRICS
                .crawler_verifications
                .with_label_values(&[name, verification.result.as_str()])
                .inc();
            if verification.result == VerificationResult::Impostor {
                return Some(verification);
            }
            found.get_or_insert(verification);
        }
        found
    }

    /// The verdict on `crawler` from `ip` while it is cached: what every request after a
    /// crawler's first from an address costs.
    pub fn cached(&self, crawler: &str, ip: IpAddr) -> Option<Arc<Verification>> {
        self.verdicts
            .get(crawler, ip, Instant::now(), self.lists.version())
    }

    /// Loads every signing agent's keys once, now (the key service keeps them fresh).
    pub async fn load_keys_once(&self) {
        self.signatures.load_once().await;
    }

    /// The verdict on `crawler` (catalogue name, with its `data`) from `ip`.
    pub async fn verify_one(
        &self,
        crawler: &str,
        data: &VerifyData,
        ip: IpAddr,
    ) -> Arc<Verification> {
        let now = Instant::now();
        let version = self.lists.version();
        if let Some(cached) = self.verdicts.get(crawler, ip, now, version) {
            return cached;
        }
        let public = is_public(ip);
        let lists = if self.settings.ranges.enabled || data.ips.is_empty() {
            self.lists.answer(crawler, &data.ips, ip)
        } else {
            ListAnswer::Off
        };
        let dns = if matches!(lists, ListAnswer::In(_)) || data.rdns.is_empty() || !public {
            DnsAnswer::NotAsked
        } else if !self.settings.dns.enabled {
            DnsAnswer::Off
        } else {
            let lookup = self.dns.resolve_lookup(ip).await;
            dns_answer(&lookup.evidence(&data.rdns), &data.rdns, &self.dns.reach())
        };
        let mut verification = verdict(crawler, data, public, &lists, &dns);
        if let (ListAnswer::In(entry), Some(VerifiedBy::RangeList { fetched_at, .. })) =
            (&lists, verification.by.as_mut())
        {
            *fetched_at = self.lists.fetched_at(entry);
        }
        let verification = Arc::new(verification);
        // An unverified verdict on a public address is not kept: its cause (a list not loaded,
        // DNS down) heals on its own, and asking the sources again is cheap (the DNS failure is
        // cached there). One on an address that is not public is final while the lists stay as
        // they are (DNS is never asked for it, and the cache is keyed by the lists' version), so
        // it is kept like any other.
        if verification.result != VerificationResult::Unverified || !public {
            self.verdicts.put(ip, verification.clone(), now, version);
        }
        verification
    }
}

/// Why a claim checked without DNS queries ([`Verifier::verify_without_lookups`]) stays
/// unverified.
pub const NOT_LOOKED_UP: &str =
    "not checked: its reverse DNS was not looked up (the lookups /explain may make are used up for now; ask again in a minute)";
/// Whether reverse DNS verification works now, for `/explain`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReverseDnsStatus {
    /// `verify.dns.enabled`.
    pub enabled: bool,
    /// On, and the resolver's probe did not find it cut off from public DNS.
    pub available: bool,
    /// Whether a probe has answered yet.
    pub probed: bool,
    /// The name the probe looks up (`verify.dns.probe_name`).
    pub probe_name: String,
    /// Why it is not available.
    pub why: Option<String>,
}

/// Probes the resolver at start and every `verify.dns.probe_interval` (every 5 s at most while
/// it does not reach public DNS, so verification resumes soon after it does).
struct DnsProber {
    dns: dns::ReverseDns,
    probe: crate::config::DnsProbe,
}

/// How soon a resolver found cut off is probed again.
const UNAVAILABLE_PROBE_EVERY: Duration = Duration::from_secs(5);

#[async_trait::async_trait]
impl pingora::services::background::BackgroundService for DnsProber {
    async fn start(&self, mut shutdown: pingora::server::ShutdownWatch) {
        loop {
            let reach = self.dns.probe(&self.probe.name).await;
            let delay = if reach.is_available() {
                self.probe.interval
            } else {
                self.probe.interval.min(UNAVAILABLE_PROBE_EVERY)
            };
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => break,
            }
        }
    }
}

/// What a crawler's range lists say of an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListAnswer {
    /// The crawler has no lists.
    NoLists,
    /// The address is in this list.
    In(String),
    /// Every list of the crawler is loaded, and the address is in none.
    NotIn,
    /// Some list is not loaded (yet, or ever): nothing definite.
    NotLoaded,
    /// Lists are not fetched (`verify.ranges.enabled: false`): nothing definite.
    Off,
}

/// What reverse DNS says of an address, for one crawler's suffixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsAnswer {
    /// The crawler has no reverse DNS suffixes, or the address is not looked up.
    NotAsked,
    /// A name with one of the suffixes resolves back to the address.
    Confirmed(String),
    /// The answer contradicts the claim: a name outside the suffixes resolves back to the
    /// address, or a name under them has other addresses. Why, as a clause
    /// (`its reverse DNS name host.evil.example resolves back to it and is not under
    /// googlebot.com`).
    Disproved(String),
    /// Nothing definite: no PTR name, names that do not resolve back for want of an answer, a
    /// failed or timed-out lookup. Why, as a clause.
    Inconclusive(String),
    /// Reverse DNS verification is unavailable (the resolver does not reach public DNS), and
    /// the lookup proved nothing: why.
    Unavailable(String),
    /// Reverse DNS is not asked (`verify.dns.enabled: false`): nothing definite.
    Off,
}

/// `a`, `a or b`, `a, b or c`: a crawler's domains in a sentence.
fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// What `evidence` (from a lookup, for a crawler whose names end in `suffixes`) comes to, with
/// the resolver's `reach`: a lookup that proves nothing while reverse DNS is unavailable says
/// so.
fn dns_answer(evidence: &dns::Evidence, suffixes: &[String], reach: &dns::Reach) -> DnsAnswer {
    use dns::Evidence;
    let inconclusive = |why: String| match reach.why() {
        Some(unavailable) => DnsAnswer::Unavailable(unavailable.to_string()),
        None => DnsAnswer::Inconclusive(why),
    };
    match evidence {
        Evidence::Confirmed(name) => DnsAnswer::Confirmed(name.to_string()),
        Evidence::ConfirmedElsewhere(name) => DnsAnswer::Disproved(format!(
            "its reverse DNS name {name} resolves back to it and is not under {}",
            either(suffixes)
        )),
        Evidence::Contradicted(name) => DnsAnswer::Disproved(format!(
            "its reverse DNS name {name} is under {} but resolves to other addresses",
            either(suffixes)
        )),
        Evidence::NoName => inconclusive("the address has no reverse DNS name".to_string()),
        Evidence::NotBack(name) => inconclusive(format!(
            "its reverse DNS name {name} does not resolve back to it"
        )),
        Evidence::Failed(why) => match reach {
            dns::Reach::Unreachable(unavailable) => DnsAnswer::Unavailable(unavailable.to_string()),
            _ => inconclusive(format!("the reverse DNS lookup failed ({why})")),
        },
    }
}

/// Whether an address can be a crawler's own: loopback, private, link-local, unique-local and
/// unspecified addresses are a load balancer's or the local network's, never an operator's.
pub fn is_public(ip: IpAddr) -> bool {
    crate::net::url::is_public_address(ip)
}

/// The verdict on `crawler`'s claim from what its sources say. An impostor needs every source
/// the crawler has to have answered definitely, and a public address.
pub fn verdict(
    crawler: &str,
    data: &VerifyData,
    public: bool,
    lists: &ListAnswer,
    dns: &DnsAnswer,
) -> Verification {
    let verified = |how: String, by: VerifiedBy| Verification {
        crawler: crawler.to_owned(),
        result: VerificationResult::Verified,
        how,
        by: Some(by),
    };
    if let ListAnswer::In(list) = lists {
        return verified(
            format!("the address is in {list}"),
            VerifiedBy::RangeList {
                list: list.clone(),
                fetched_at: None,
            },
        );
    }
    if let DnsAnswer::Confirmed(name) = dns {
        return verified(
            format!("its reverse DNS name {name} resolves back to the address"),
            VerifiedBy::ReverseDns { name: name.clone() },
        );
    }
    if !public {
        return Verification::unverified(crawler, "the address is not public");
    }
    let lists_definite = match lists {
        ListAnswer::NoLists | ListAnswer::NotIn => true,
        ListAnswer::NotLoaded => {
            return Verification::unverified(crawler, "its IP range lists are not loaded yet");
        }
        ListAnswer::Off => {
            return Verification::unverified(
                crawler,
                "IP range lists are off (verify.ranges.enabled: false)",
            );
        }
        ListAnswer::In(_) => false,
    };
    let dns_definite = match dns {
        DnsAnswer::NotAsked => data.rdns.is_empty(),
        DnsAnswer::Disproved(_) => true,
        DnsAnswer::Inconclusive(why) => {
            return Verification::unverified(crawler, format!("reverse DNS proves nothing: {why}"));
        }
        DnsAnswer::Unavailable(why) => {
            return Verification::unverified(
                crawler,
                format!("reverse DNS verification is unavailable: {why}"),
            );
        }
        DnsAnswer::Off => {
            return Verification::unverified(
                crawler,
                "reverse DNS is off (verify.dns.enabled: false)",
            );
        }
        DnsAnswer::Confirmed(_) => false,
    };
    if !(lists_definite && dns_definite) || (data.ips.is_empty() && data.rdns.is_empty()) {
        return Verification::unverified(
            crawler,
            "its operator publishes nothing to check it against",
        );
    }
    let mut how = Vec::new();
    if !data.ips.is_empty() {
        how.push("the address is in none of its IP range lists".to_string());
    }
    if let DnsAnswer::Disproved(why) = dns {
        how.push(why.clone());
    }
    Verification {
        crawler: crawler.to_owned(),
        result: VerificationResult::Impostor,
        how: how.join(", and "),
        by: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(ips: &[&str], rdns: &[&str]) -> VerifyData {
        VerifyData {
            ips: ips.iter().map(|s| s.to_string()).collect(),
            rdns: rdns.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// A claim from an address that is not public is unverified for good while the lists stay
    /// as they are, so it is answered from the cache like any other final verdict; one that is
    /// unverified for a cause that heals (here, reverse DNS turned off) is asked again.
    #[tokio::test]
    async fn an_unverified_claim_is_cached_only_when_its_address_is_not_public() {
        let mut settings = VerifyConfig::default();
        settings.ranges.enabled = false;
        settings.dns.enabled = false;
        let verifier = Verifier::new(&settings);
        let google = data(&[], &["googlebot.com"]);
        let loopback: IpAddr = "127.0.0.1".parse().expect("an address");
        let public: IpAddr = "192.0.2.44".parse().expect("an address");
        assert!(verifier.cached("Googlebot", loopback).is_none());
        let first = verifier.verify_one("Googlebot", &google, loopback).await;
        assert_eq!(first.result, VerificationResult::Unverified);
        let cached = verifier.cached("Googlebot", loopback).expect("kept");
        assert_eq!(cached.result, VerificationResult::Unverified);
        assert!(Arc::ptr_eq(&first, &cached));
        let healing = verifier.verify_one("Googlebot", &google, public).await;
        assert_eq!(healing.result, VerificationResult::Unverified);
        assert!(verifier.cached("Googlebot", public).is_none());
    }

    #[test]
    fn verdicts() {
        use DnsAnswer as D;
        use ListAnswer as L;
        use VerificationResult::{Impostor, Unverified, Verified};
        let both = data(&["https://g.example/l.json"], &["googlebot.com"]);
        let lists_only = data(&["https://o.example/l.json"], &[]);
        let dns_only = data(&[], &["yandex.ru"]);
        let in_list = L::In("https://g.example/l.json".into());
        let confirmed = D::Confirmed("crawl-1.googlebot.com".into());
        let other_name = D::Disproved(
            "its reverse DNS name host.evil.example resolves back to it and is not under x".into(),
        );
        let failed = D::Inconclusive("the reverse DNS lookup failed (timed out)".into());
        let no_name = D::Inconclusive("the address has no reverse DNS name".into());
        let unavailable = D::Unavailable("the resolver does not answer".into());
        let cases: [(
            &VerifyData,
            bool,
            &ListAnswer,
            &DnsAnswer,
            VerificationResult,
        ); 20] = [
            // Turned off: never evidence either way.
            (&both, true, &L::Off, &other_name, Unverified),
            (&both, true, &L::NotIn, &D::Off, Unverified),
            (&lists_only, true, &L::Off, &D::NotAsked, Unverified),
            (&dns_only, true, &L::NoLists, &D::Off, Unverified),
            (&both, true, &in_list, &D::NotAsked, Verified),
            (&both, true, &L::NotIn, &confirmed, Verified),
            (&both, false, &in_list, &D::NotAsked, Verified),
            (&both, true, &L::NotIn, &other_name, Impostor),
            // No name (NXDOMAIN), a failure, DNS unavailable: never an impostor.
            (&both, true, &L::NotIn, &no_name, Unverified),
            (&dns_only, true, &L::NoLists, &no_name, Unverified),
            (&dns_only, true, &L::NoLists, &unavailable, Unverified),
            (&both, true, &L::NotIn, &failed, Unverified),
            (&both, true, &L::NotLoaded, &other_name, Unverified),
            (&both, false, &L::NotIn, &D::NotAsked, Unverified),
            (&lists_only, true, &L::NotIn, &D::NotAsked, Impostor),
            (&lists_only, true, &L::NotLoaded, &D::NotAsked, Unverified),
            (&dns_only, true, &L::NoLists, &other_name, Impostor),
            (&dns_only, true, &L::NoLists, &failed, Unverified),
            (&dns_only, true, &L::NoLists, &D::NotAsked, Unverified),
            (&data(&[], &[]), true, &L::NoLists, &D::NotAsked, Unverified),
        ];
        for (i, (data, public, lists, dns, want)) in cases.into_iter().enumerate() {
            let got = verdict("Bot", data, public, lists, dns);
            assert_eq!(got.result, want, "case {i}: {got:?}");
        }
    }

    #[test]
    fn reasons_read_as_sentences() {
        let google = data(
            &["https://g.example/l.json"],
            &["googlebot.com", "google.com"],
        );
        let impostor = verdict(
            "Googlebot",
            &google,
            true,
            &ListAnswer::NotIn,
            &dns_answer(
                &dns::Evidence::ConfirmedElsewhere("host.evil.example".into()),
                &google.rdns,
                &dns::Reach::Public,
            ),
        );
        assert_eq!(
            impostor.how,
            "the address is in none of its IP range lists, and its reverse DNS name \
             host.evil.example resolves back to it and is not under googlebot.com or google.com"
        );
        let no_name = verdict(
            "Googlebot",
            &google,
            true,
            &ListAnswer::NotIn,
            &dns_answer(&dns::Evidence::NoName, &google.rdns, &dns::Reach::Public),
        );
        assert_eq!(no_name.result, VerificationResult::Unverified);
        assert_eq!(
            no_name.how,
            "reverse DNS proves nothing: the address has no reverse DNS name"
        );
        let unavailable = verdict(
            "Googlebot",
            &google,
            true,
            &ListAnswer::NotIn,
            &dns_answer(
                &dns::Evidence::NoName,
                &google.rdns,
                &dns::Reach::PrivateView("the resolver says googlebot.com does not exist".into()),
            ),
        );
        assert_eq!(
            unavailable.how,
            "reverse DNS verification is unavailable: the resolver says googlebot.com does not exist"
        );
        // A contradiction proves an impostor whatever the resolver's reach.
        let spoofed = dns_answer(
            &dns::Evidence::Contradicted("crawl-2.googlebot.com".into()),
            &google.rdns,
            &dns::Reach::PrivateView("x".into()),
        );
        assert!(matches!(spoofed, DnsAnswer::Disproved(_)), "{spoofed:?}");
    }

    #[test]
    fn public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.1",
            "169.254.1.1",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
        ] {
            let ip: IpAddr = private.parse().unwrap_or_else(|_| unreachable!());
            assert!(!is_public(ip), "{private}");
        }
        for public in [
            "66.249.66.1",
            "198.51.100.7",
            "2001:db8::1",
            "2001:4860::1",
            "::ffff:66.249.66.1",
        ] {
            let ip: IpAddr = public.parse().unwrap_or_else(|_| unreachable!());
            assert!(is_public(ip), "{public}");
        }
    }
}
