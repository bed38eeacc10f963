//! `events`: decisions pushed out of robotsguard: webhooks, and what the CrowdSec-compatible
//! decision stream of the admin listener exports to firewalls.

use super::*;

pub(crate) static EVENTS: Section = Section {
    id: "events",
    place: "in `events`",
    title: "Events: webhooks and the firewall stream",
    doc: "What robotsguard tells other systems: signed webhooks when a ban starts or is lifted, impostors surge, a robots.txt fetch keeps failing, a search engine is refused or a reload is rejected; and which bans the admin listener's CrowdSec-compatible decision stream (`/v1/decisions/stream`) exports.",
    keys: &[
        key("webhooks", Ty::List(&Ty::Section(&WEBHOOK)), "`[]`", "Receivers of signed JSON events, each with the kinds it wants."),
        key("private_targets", Ty::List(&Ty::Network), "`[]`", "Networks (CIDRs) webhooks may reach although they are not public (loopback, private, link-local, unique-local). Any other private target is refused by `validate`, and an address a name resolves to when sending is checked again."),
        key("impostor_surge_per_minute", Ty::Int { min: 1, max: 1_000_000_000 }, "`60`", "An `impostor_surge` event is sent when an origin sees more impostor verdicts than this within a minute (once per minute at most)."),
        key("firewall", Ty::Section(&FIREWALL), "", "What the decision stream exports."),
    ],
};

pub(crate) static WEBHOOK: Section = Section {
    id: "webhook",
    place: "in a webhook",
    title: "A webhook",
    doc: "A receiver of events: `POST url` with a JSON body, signed in `X-Robotsguard-Signature`.",
    keys: &[
        required("url", Ty::Url, "Where events are POSTed: `https://` (or `http://` to a network in `events.private_targets`). Redirects are not followed."),
        key("events", Ty::List(&Ty::Words(|| names(&EVENT_KINDS))), "every kind", "The kinds sent to this receiver."),
        required("secret_file", Ty::Path, "A file whose content (less one trailing newline) keys the HMAC-SHA256 of the body sent as `X-Robotsguard-Signature: sha256=<hex>`; re-read for every event."),
        key("timeout", Ty::Duration, "`5s`", "How long one attempt may take, connection included."),
        key("retries", Ty::Int { min: 0, max: 20 }, "`5`", "Attempts after the first when the receiver fails (no answer, 5xx, 408, 429), with backoff doubling from 1 s (at most 60 s)."),
    ],
};

pub(crate) static FIREWALL: Section = Section {
    id: "firewall",
    place: "in `events.firewall`",
    title: "The firewall stream",
    doc: "",
    keys: &[key(
        "export",
        Ty::Words(|| names(&FIREWALL_EXPORTS)),
        "`address_bans`",
        "Which bans `/v1/decisions/stream` and `/v1/decisions` hand to bouncers: `address_bans` (bans of origins whose `offenders.scope` is `address`: a crawler-scope ban must not drop a NAT's browsers at the firewall), `all_bans`, or `off` (none).",
    )],
};

/// The kinds of events, as their `kind` field and `events` list spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A ban imposed by this process.
    Ban,
    /// A ban lifted (admin endpoint or console).
    Unban,
    /// More impostor verdicts in a minute than `impostor_surge_per_minute`.
    ImpostorSurge,
    /// An origin's robots.txt fetch failed [`crate::events::FAILING_FETCHES`] times in a row.
    RobotsFetchFailing,
    /// The config in force refuses a search engine's crawler on every path.
    SearchEngineRefused,
    /// A reload was rejected (the previous config stays in force).
    ConfigRejected,
}

pub(crate) const EVENT_KINDS: [(&str, EventKind); 6] = [
    ("ban", EventKind::Ban),
    ("unban", EventKind::Unban),
    ("impostor_surge", EventKind::ImpostorSurge),
    ("robots_fetch_failing", EventKind::RobotsFetchFailing),
    ("search_engine_refused", EventKind::SearchEngineRefused),
    ("config_rejected", EventKind::ConfigRejected),
];

impl EventKind {
    /// The spelling of the body's `kind` and of `events`.
    pub fn as_str(self) -> &'static str {
        EVENT_KINDS
            .iter()
            .find(|(_, kind)| *kind == self)
            .map_or("unknown", |(name, _)| name)
    }
}

/// `events.firewall.export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FirewallExport {
    /// Bans of origins with `offenders.scope: address`.
    AddressBans,
    /// Every applied ban.
    AllBans,
    /// None: the stream answers empty lists.
    Off,
}

pub(crate) const FIREWALL_EXPORTS: [(&str, FirewallExport); 3] = [
    ("address_bans", FirewallExport::AddressBans),
    ("all_bans", FirewallExport::AllBans),
    ("off", FirewallExport::Off),
];

/// One `events.webhooks` entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Webhook {
    /// Where events are POSTed.
    pub url: String,
    /// The kinds it wants.
    pub events: Vec<EventKind>,
    /// Absolute path of the HMAC key.
    pub secret_file: PathBuf,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
}

/// `events`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventsConfig {
    /// The receivers.
    pub webhooks: Vec<Webhook>,
    /// Networks webhooks may reach although not public.
    pub private_targets: Vec<ipnet::IpNet>,
    /// Impostor verdicts a minute, per origin, beyond which a surge is told.
    pub impostor_surge_per_minute: u64,
    /// `firewall.export`: which bans the decision stream exports.
    pub firewall: FirewallExport,
}

pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_WEBHOOK_RETRIES: u32 = 5;
pub const DEFAULT_IMPOSTOR_SURGE_PER_MINUTE: u64 = 60;
/// Webhooks in one config: each event is sent to each of them.
pub const MAX_WEBHOOKS: usize = 16;
/// The largest secret file read.
pub(crate) const MAX_WEBHOOK_SECRET_BYTES: u64 = 4096;

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            webhooks: Vec::new(),
            private_targets: Vec::new(),
            impostor_surge_per_minute: DEFAULT_IMPOSTOR_SURGE_PER_MINUTE,
            firewall: FirewallExport::AddressBans,
        }
    }
}

impl EventsConfig {
    /// Whether a webhook may connect to `ip`: a public address, or one in `private_targets`.
    pub fn target_allowed(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        crate::config::address::is_public(ip)
            || self.private_targets.iter().any(|n| n.contains(&ip))
    }

    /// Whether any webhook wants events of `kind`.
    pub fn wants(&self, kind: EventKind) -> bool {
        self.webhooks.iter().any(|w| w.events.contains(&kind))
    }
}

/// Reads `events`.
pub(crate) fn events(sink: &mut Sink, node: Option<&Node>, base_dir: &Path) -> EventsConfig {
    let mut config = EventsConfig::default();
    let Some(node) = node else {
        return config;
    };
    let Some(table) = Table::read(sink, node, &EVENTS, "`events`") else {
        return config;
    };
    if let Some(n) = table.get("private_targets") {
        config.private_targets = reader::networks(sink, n, "events.private_targets");
    }
    if let Some(n) = table.get("impostor_surge_per_minute") {
        if let Some(count) = reader::integer(
            sink,
            n,
            "events.impostor_surge_per_minute",
            1,
            1_000_000_000,
        ) {
            config.impostor_surge_per_minute = count as u64;
        }
    }
    if let Some(n) = table.get("firewall") {
        if let Some(firewall) = Table::read(sink, n, &FIREWALL, "`events.firewall`") {
            if let Some(n) = firewall.get("export") {
                if let Some(export) =
                    reader::choice(sink, n, "events.firewall.export", &FIREWALL_EXPORTS)
                {
                    config.firewall = export;
                }
            }
        }
    }
    if let Some(n) = table.get("webhooks") {
        if let Some(items) = reader::list(sink, n, "events.webhooks") {
            if items.len() > MAX_WEBHOOKS {
                sink.error(
                    n.pos,
                    format!(
                        "`events.webhooks` lists {} receivers; at most {MAX_WEBHOOKS}",
                        items.len()
                    ),
                );
            }
            for item in items.iter().take(MAX_WEBHOOKS) {
                if let Some(webhook) = webhook(sink, item, base_dir, &config) {
                    config.webhooks.push(webhook);
                }
            }
        }
    }
    config
}

fn webhook(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
    events: &EventsConfig,
) -> Option<Webhook> {
    let table = Table::read(sink, node, &WEBHOOK, "a webhook")?;
    let Some(url_node) = table.get("url") else {
        sink.error_hint(
            table.pos,
            "a webhook is missing `url`",
            "e.g. - {url: \"https://hooks.example.com/robotsguard\", secret_file: webhook.secret}",
        );
        return None;
    };
    let url = webhook_url(sink, url_node, events);
    let Some(secret_node) = table.get("secret_file") else {
        sink.error_hint(
            table.pos,
            "a webhook is missing `secret_file`",
            "every event is signed: make a secret with e.g. `openssl rand -hex 32 > webhook.secret`",
        );
        return None;
    };
    let secret_file =
        reader::nonempty_string(sink, secret_node, "secret_file").map(|p| base_dir.join(p));
    if let Some(path) = &secret_file {
        if !sink.config_only {
            match crate::config::read_secret_file(path, MAX_WEBHOOK_SECRET_BYTES) {
                Ok(secret) if secret.is_empty() => sink.error(
                    secret_node.pos,
                    format!("the webhook secret file `{}` is empty", path.display()),
                ),
                Ok(_) => {}
                Err(e) => sink.error(secret_node.pos, format!("webhook `secret_file`: {e}")),
            }
        }
    }
    let events_list = match table.get("events") {
        None => EVENT_KINDS.iter().map(|(_, kind)| *kind).collect(),
        Some(n) => {
            let mut kinds = Vec::new();
            for item in reader::list(sink, n, "events").unwrap_or_default() {
                if let Some(kind) = reader::choice(sink, item, "events", &EVENT_KINDS) {
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
            }
            kinds
        }
    };
    let timeout = table
        .get("timeout")
        .and_then(|n| positive_duration(sink, n, "timeout"))
        .unwrap_or(DEFAULT_WEBHOOK_TIMEOUT);
    let retries = table
        .get("retries")
        .and_then(|n| reader::integer(sink, n, "retries", 0, 20))
        .map_or(DEFAULT_WEBHOOK_RETRIES, |n| n as u32);
    Some(Webhook {
        url: url?,
        events: events_list,
        secret_file: secret_file?,
        timeout,
        retries,
    })
}

/// A webhook's URL: `https://`, or `http://` to a private target; an address literal (or
/// `localhost`) that is private must be in `private_targets`. Names are checked again on every
/// send, against the address they resolve to.
fn webhook_url(sink: &mut Sink, node: &Node, events: &EventsConfig) -> Option<String> {
    let text = reader::nonempty_string(sink, node, "url")?;
    let Ok(parsed) = url::Url::parse(text) else {
        sink.error_hint(
            node.pos,
            format!("{} is not a URL", quote(text)),
            "e.g. https://hooks.example.com/robotsguard",
        );
        return None;
    };
    let ip = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        Some(url::Host::Domain(name)) if name.eq_ignore_ascii_case("localhost") => {
            Some(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST))
        }
        Some(url::Host::Domain(_)) => None,
        None => {
            sink.error(node.pos, format!("{} names no host", quote(text)));
            return None;
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        sink.error(
            node.pos,
            "a webhook URL must not carry credentials: the body is signed with `secret_file`",
        );
        return None;
    }
    let private = ip.is_some_and(|ip| !crate::config::address::is_public(ip));
    if let Some(ip) = ip.filter(|ip| private && !events.target_allowed(*ip)) {
        sink.error_hint(
            node.pos,
            format!("webhook {} is a private address ({ip})", quote(text)),
            "webhooks reach public addresses only; list the receiver's network in `events.private_targets` (e.g. 127.0.0.1/32) if it is meant",
        );
        return None;
    }
    match parsed.scheme() {
        "https" => {}
        "http" if private => {}
        "http" => {
            sink.error_hint(
                node.pos,
                format!("webhook {} is plain http to a public host", quote(text)),
                "use https://; plain http is accepted only for targets in `events.private_targets`",
            );
            return None;
        }
        other => {
            sink.error(
                node.pos,
                format!("webhook {}: `{other}:` is not http(s)", quote(text)),
            );
            return None;
        }
    }
    Some(text.to_string())
}
