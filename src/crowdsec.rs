//! The CrowdSec-compatible decision stream of the admin listener: `GET /v1/decisions/stream`
//! and `GET /v1/decisions` as the CrowdSec Local API answers its bouncers (the firewall, nginx,
//! HAProxy, Traefik bouncers), so robotsguard's bans reach the kernel with no new code on the
//! host. A bouncer authenticates with `X-Api-Key` (a key of `admin.bouncer_keys_file`); for each
//! key, what was sent is remembered, so that a later pull gets only the decisions that are new
//! and those that were deleted.
//!
//! One decision per banned address (or prefix): the ban there that ends last, of the bans
//! `events.firewall.export` lets out (by default, those of origins whose `offenders.scope` is
//! `address`, and only bans that are applied). The answer is streamed in chunks: every ban in
//! force may be in one answer (the protocol has no paging), and it is never whole in memory.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::config::{BanScope, FirewallExport};
use crate::snapshot::Snapshot;
use crate::tables::offenders::Ban;

/// The `origin` of every decision.
pub const ORIGIN: &str = "robotsguard";

/// The size a chunk of the answer reaches before it is written.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Bouncer keys remembered at once (a keys file with more lines is cut here).
const MAX_KEYS: usize = 256;

/// A decision as the stream writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Stable for the ban it stands for.
    pub id: u64,
    /// The address, or the prefix (`2001:db8::/64`).
    pub value: String,
    /// The ban's reason.
    pub scenario: &'static str,
    /// When the ban ends.
    pub until: SystemTime,
}

impl Decision {
    /// `Ip` for an address, `Range` for a prefix.
    pub fn scope(&self) -> &'static str {
        if self.value.contains('/') {
            "Range"
        } else {
            "Ip"
        }
    }

    /// The decision as JSON, with `duration` left until it ends (`0s` for a deleted one).
    pub fn write_json(&self, out: &mut String, deleted: bool) {
        let left = if deleted {
            Duration::ZERO
        } else {
            self.until
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO)
        };
        let _ = write!(
            out,
            "{{\"id\":{},\"origin\":\"{ORIGIN}\",\"scenario\":{},\"scope\":\"{}\",\"value\":{},\"type\":\"ban\",\"duration\":\"{}\",\"until\":\"{}\"}}",
            self.id,
            json_string(self.scenario),
            self.scope(),
            json_string(&self.value),
            go_duration(left),
            humantime::format_rfc3339_seconds(self.until),
        );
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// `d` as Go's `time.Duration.String` writes whole seconds: `1h0m0s`, `59m59s`, `42s`, `0s`.
pub fn go_duration(d: Duration) -> String {
    // Rounded up: a bouncer that drops the address when it ends must not drop it early.
    let seconds = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// A stable id for the decision on `value` ending at `until` for `scenario`: the same in every
/// replica and after a restart, so a bouncer is not sent the same decision under two ids.
fn decision_id(value: &str, until: SystemTime, scenario: &str) -> u64 {
    let seconds = until
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let digest = Sha256::new()
        .chain_update(value.as_bytes())
        .chain_update(seconds.to_be_bytes())
        .chain_update(scenario.as_bytes())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    // Positive, and exact in a JSON reader's double: 53 bits.
    (u64::from_be_bytes(bytes) & ((1 << 53) - 1)).max(1)
}

/// What a bouncer asks to be sent (the query parameters bouncers send).
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// `scopes=ip,range` (lower case).
    pub scopes: Option<Vec<String>>,
    /// `origins=`: none match unless it names `robotsguard`.
    pub origins: Option<Vec<String>>,
    /// `scenarios_containing=`: one of these words in the scenario.
    pub scenarios_containing: Vec<String>,
    /// `scenarios_not_containing=`: none of these words in the scenario.
    pub scenarios_not_containing: Vec<String>,
    /// `/v1/decisions`: `ip=` (the address, or a range holding it), `range=` (decisions within
    /// it), `value=`, `type=`.
    pub ip: Option<std::net::IpAddr>,
    /// `range=`.
    pub range: Option<ipnet::IpNet>,
    /// `value=`.
    pub value: Option<String>,
    /// `type=` (only `ban` is ever sent).
    pub kind: Option<String>,
}

/// A query parameter of the decision stream that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterError {
    /// `ip=` that is not an address (the value as sent).
    Ip(String),
    /// `range=` that is not a network (the value as sent).
    Range(String),
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ip(value) => write!(f, "`ip` is not an address: {value:?}"),
            Self::Range(value) => write!(f, "`range` is not a network: {value:?}"),
        }
    }
}

impl std::error::Error for FilterError {}

fn words(text: &str) -> Vec<String> {
    text.split(',')
        .map(|word| word.trim().to_ascii_lowercase())
        .filter(|word| !word.is_empty())
        .collect()
}

impl Filter {
    /// The filter of a query; `Err` names a parameter that cannot be read.
    pub fn from_params(params: &[(String, String)]) -> Result<Filter, FilterError> {
        let mut filter = Filter::default();
        for (name, value) in params {
            match name.as_str() {
                "scopes" => filter.scopes = Some(words(value)),
                "scope" => filter.scopes = Some(words(value)),
                "origins" => filter.origins = Some(words(value)),
                "scenarios_containing" => filter.scenarios_containing = words(value),
                "scenarios_not_containing" => filter.scenarios_not_containing = words(value),
                "type" => filter.kind = Some(value.to_ascii_lowercase()),
                "value" => filter.value = Some(value.clone()),
                "ip" => {
                    filter.ip = Some(
                        value
                            .parse::<std::net::IpAddr>()
                            .map_err(|_| FilterError::Ip(value.clone()))?
                            .to_canonical(),
                    );
                }
                "range" => {
                    filter.range = Some(
                        value
                            .parse::<ipnet::IpNet>()
                            .map_err(|_| FilterError::Range(value.clone()))?
                            .trunc(),
                    );
                }
                _ => {}
            }
        }
        Ok(filter)
    }

    fn admits(&self, decision: &Decision) -> bool {
        let scope = decision.scope().to_ascii_lowercase();
        if self
            .scopes
            .as_ref()
            .is_some_and(|scopes| !scopes.contains(&scope))
        {
            return false;
        }
        if self
            .origins
            .as_ref()
            .is_some_and(|origins| !origins.iter().any(|o| o == ORIGIN))
        {
            return false;
        }
        let scenario = decision.scenario.to_ascii_lowercase();
        if !self.scenarios_containing.is_empty()
            && !self
                .scenarios_containing
                .iter()
                .any(|w| scenario.contains(w.as_str()))
        {
            return false;
        }
        if self
            .scenarios_not_containing
            .iter()
            .any(|w| scenario.contains(w.as_str()))
        {
            return false;
        }
        if self.kind.as_deref().is_some_and(|kind| kind != "ban") {
            return false;
        }
        if self
            .value
            .as_ref()
            .is_some_and(|value| *value != decision.value)
        {
            return false;
        }
        let network = decision.value.parse::<ipnet::IpNet>().or_else(|_| {
            decision
                .value
                .parse::<std::net::IpAddr>()
                .map(ipnet::IpNet::from)
        });
        if let Some(ip) = self.ip {
            if !network.as_ref().is_ok_and(|net| net.contains(&ip)) {
                return false;
            }
        }
        if let Some(range) = self.range {
            if !network.as_ref().is_ok_and(|net| range.contains(net)) {
                return false;
            }
        }
        true
    }
}

/// The decisions in force now, one per address or prefix, as `export` lets them out.
pub fn in_force(
    snapshot: &Snapshot,
    offenders: &crate::tables::offenders::Offenders,
    export: FirewallExport,
    filter: &Filter,
) -> HashMap<String, Decision> {
    let mut decisions: HashMap<String, Decision> = HashMap::new();
    if export == FirewallExport::Off {
        return decisions;
    }
    offenders.each_in_force(Instant::now(), |ban| {
        if !exported(snapshot, ban, export) {
            return;
        }
        let value = crate::client_address::shown_network(&ban.client);
        if decisions
            .get(&value)
            .is_some_and(|held| held.until >= ban.until)
        {
            return;
        }
        let scenario = ban.cause.as_str();
        let decision = Decision {
            id: decision_id(&value, ban.until, scenario),
            value: value.clone(),
            scenario,
            until: ban.until,
        };
        if filter.admits(&decision) {
            decisions.insert(value, decision);
        }
    });
    decisions
}

/// Whether `ban` goes to firewalls: applied (not suspended by `offenders.action`), and of an
/// origin whose `offenders.scope` is `address` unless `all_bans`.
fn exported(snapshot: &Snapshot, ban: &Ban, export: FirewallExport) -> bool {
    let Some(origin) = snapshot.origin_named(&ban.origin) else {
        return false;
    };
    if crate::judge::ban_state(snapshot, ban) != "applied" {
        return false;
    }
    match export {
        FirewallExport::Off => false,
        FirewallExport::AllBans => true,
        FirewallExport::AddressBans => origin.config.offenders.scope == BanScope::Address,
    }
}

/// What one pull sends.
#[derive(Debug, Default)]
pub struct Pull {
    /// Decisions the bouncer has not been sent.
    pub new: Vec<Decision>,
    /// Decisions it was sent that are no longer in force.
    pub deleted: Vec<Decision>,
}

/// What a bouncer was sent for one value: enough to tell it changed, and to write its deletion.
#[derive(Debug, Clone, Copy)]
struct Sent {
    id: u64,
    scenario: &'static str,
    until: SystemTime,
}

/// The bouncers' keys and, per key, the decisions sent (by value): a small entry per exported
/// address, the only state kept between pulls.
#[derive(Default)]
pub struct Bouncers {
    sent: Mutex<HashMap<[u8; 32], SentTo>>,
}

/// What one bouncer key was sent, by value.
type SentTo = HashMap<Box<str>, Sent>;

/// Why a bouncer is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No keys file configured or readable.
    NoKeys,
    /// No `X-Api-Key`, or one not in the file.
    WrongKey,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl Bouncers {
    /// The digest of `given` when it is one of the keys in `keys_file` (compared as digests:
    /// in constant time for the key's bytes). Forgets what was sent to keys no longer listed.
    pub fn authenticate(
        &self,
        keys_file: Option<&Path>,
        given: Option<&str>,
    ) -> Result<[u8; 32], Refused> {
        let keys = keys_file
            .and_then(|path| crate::config::read_bouncer_keys(path).ok())
            .ok_or(Refused::NoKeys)?;
        let digests: Vec<[u8; 32]> = keys.iter().take(MAX_KEYS).map(|key| digest(key)).collect();
        if let Ok(mut sent) = self.sent.lock() {
            sent.retain(|key, _| digests.contains(key));
        }
        let given = digest(given.ok_or(Refused::WrongKey)?.trim());
        let mut found = false;
        for key in &digests {
            // Every byte compared, found or not.
            let same = key
                .iter()
                .zip(given.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
            found |= same;
        }
        if found {
            Ok(given)
        } else {
            Err(Refused::WrongKey)
        }
    }

    /// What the bouncer with `key` is to be sent: with `startup`, every decision in force (and
    /// what was sent is forgotten); else the decisions new since its last pull (or changed: a
    /// longer ban on an address sent again) and those deleted since (lifted, ended).
    pub fn pull(&self, key: [u8; 32], startup: bool, current: HashMap<String, Decision>) -> Pull {
        let Ok(mut all) = self.sent.lock() else {
            return Pull::default();
        };
        let sent = all.entry(key).or_default();
        if startup {
            sent.clear();
        }
        let mut pull = Pull::default();
        sent.retain(|value, held| {
            let kept = current.contains_key(&**value);
            if !kept {
                pull.deleted.push(Decision {
                    id: held.id,
                    value: value.to_string(),
                    scenario: held.scenario,
                    until: held.until,
                });
            }
            kept
        });
        // Moved, not copied: the decisions in force are held once while the answer is written.
        for (_, decision) in current {
            if sent
                .get(decision.value.as_str())
                .is_some_and(|held| held.id == decision.id)
            {
                continue;
            }
            sent.insert(
                decision.value.as_str().into(),
                Sent {
                    id: decision.id,
                    scenario: decision.scenario,
                    until: decision.until,
                },
            );
            pull.new.push(decision);
        }
        pull
    }
}

/// Part of a JSON list of decisions: `[` before the first part, `,` between decisions, `]`
/// after the last part. The answer is written part by part, so it is never whole in memory.
pub fn write_part(part: &[Decision], first: bool, last: bool, deleted: bool, out: &mut String) {
    if first {
        out.push('[');
    }
    for (i, decision) in part.iter().enumerate() {
        if !first || i > 0 {
            out.push(',');
        }
        decision.write_json(out, deleted);
    }
    if last {
        out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(value: &str, id: u64) -> Decision {
        Decision {
            id,
            value: value.to_owned(),
            scenario: "strikes",
            until: SystemTime::now() + Duration::from_secs(3600),
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_secs(3599)), "59m59s");
        assert_eq!(go_duration(Duration::from_millis(41_200)), "42s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn pulls_send_what_is_new_and_what_was_deleted() {
        let bouncers = Bouncers::default();
        let key = digest("k");
        let now: HashMap<String, Decision> =
            [("192.0.2.1".to_owned(), decision("192.0.2.1", 1))].into();
        let first = bouncers.pull(key, false, now.clone());
        assert_eq!(first.new.len(), 1);
        assert!(first.deleted.is_empty());
        let again = bouncers.pull(key, false, now.clone());
        assert!(again.new.is_empty() && again.deleted.is_empty());
        let gone = bouncers.pull(key, false, HashMap::new());
        assert_eq!(gone.deleted.len(), 1);
        assert_eq!(gone.deleted[0].value, "192.0.2.1");
        let startup = bouncers.pull(key, true, now);
        assert_eq!(startup.new.len(), 1);
        // Another key has its own state.
        assert_eq!(
            bouncers
                .pull(digest("other"), false, HashMap::new())
                .deleted
                .len(),
            0
        );
    }

    #[test]
    fn filters_follow_the_bouncers_parameters() {
        let params = |query: &str| -> Vec<(String, String)> {
            form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        };
        let ip = decision("192.0.2.1", 1);
        let range = decision("2001:db8::/64", 2);
        let only_ip = Filter::from_params(&params("scopes=ip")).unwrap_or_default();
        assert!(only_ip.admits(&ip) && !only_ip.admits(&range));
        let other_origin =
            Filter::from_params(&params("origins=crowdsec,cscli")).unwrap_or_default();
        assert!(!other_origin.admits(&ip));
        let within = Filter::from_params(&params("ip=2001:db8::5")).unwrap_or_default();
        assert!(within.admits(&range) && !within.admits(&ip));
        assert_eq!(
            Filter::from_params(&params("ip=nope")).err(),
            Some(FilterError::Ip("nope".to_owned()))
        );
        assert_eq!(
            Filter::from_params(&params("range=10.0.0.0/33")).err(),
            Some(FilterError::Range("10.0.0.0/33".to_owned()))
        );
    }

    #[test]
    fn lists_written_in_parts_are_one_json_list() {
        let many: Vec<Decision> = (0..2000)
            .map(|i| decision(&format!("10.0.{}.{}", i / 256, i % 256), i + 1))
            .collect();
        let mut out = String::new();
        let parts: Vec<&[Decision]> = many.chunks(256).collect();
        for (i, part) in parts.iter().enumerate() {
            write_part(part, i == 0, i + 1 == parts.len(), false, &mut out);
        }
        let parsed: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap_or_default();
        assert_eq!(parsed.len(), 2000);
        assert_eq!(parsed[0]["origin"], "robotsguard");
        assert_eq!(parsed[0]["type"], "ban");
        assert_eq!(parsed[0]["scope"], "Ip");
        assert_eq!(parsed[0]["duration"], "1h0m0s");
    }
}
