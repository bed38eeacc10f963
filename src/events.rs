//! Events robotsguard tells other systems about (`events.webhooks`): what happened is put on one
//! bounded, process-wide queue here, from wherever it happens, without ever waiting; the
//! webhook sender ([`crate::webhooks`]) takes them off and delivers them. A full queue drops the
//! event (counted: `robotsguard_webhook_events_total{result="dropped"}`): a request is never
//! slowed by a receiver.

use std::collections::HashMap;

use ipnet::IpNet;
use std::sync::{LazyLock, Mutex};
use std::time::{Instant, SystemTime};

use arc_swap::ArcSwap;
use serde::Serialize;

pub use crate::config::EventKind;
use crate::config::EventsConfig;
use crate::metrics::METRICS;

/// Events waiting for the sender. Beyond this, new ones are dropped (and counted).
pub const QUEUE_CAPACITY: usize = 1024;

/// Failed robots.txt fetches in a row that make a `robots_fetch_failing` event.
pub const FAILING_FETCHES: u32 = 3;

/// One event, as its JSON body is sent.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// The event's kind, as `events.webhooks[].events` spells it.
    pub kind: &'static str,
    /// RFC 3339, UTC.
    pub time: String,
    /// The origin it concerns; `null` for the process's own events (`config_rejected`).
    pub origin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The client address (or prefix) it concerns.
    pub client: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The crawler it concerns.
    pub crawler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why, in words (a ban's cause, an error).
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// How many (strikes, verdicts, failures, errors).
    pub count: Option<u64>,
    /// When a ban ends (`ban` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(skip)]
    pub(crate) of: Option<EventKind>,
}

impl Event {
    /// An event of `kind` now, on `origin`.
    pub fn new(kind: EventKind, origin: Option<&str>) -> Event {
        Event {
            kind: kind.as_str(),
            time: rfc3339(SystemTime::now()),
            origin: origin.map(str::to_owned),
            client: None,
            crawler: None,
            reason: None,
            count: None,
            until: None,
            of: Some(kind),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> Option<EventKind> {
        self.of
    }
}

/// The longest text field sent (a reason quoting a config error, a warning).
const MAX_FIELD_CHARS: usize = 1024;

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_FIELD_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

struct Hub {
    config: ArcSwap<EventsConfig>,
    sender: tokio::sync::mpsc::Sender<Event>,
    receiver: Mutex<Option<tokio::sync::mpsc::Receiver<Event>>>,
    /// Per origin: the minute a count started and impostor verdicts within it, and whether a
    /// surge was already sent for it.
    impostors: Mutex<HashMap<String, (Instant, u64, bool)>>,
    /// Per origin: robots.txt fetches that failed in a row.
    failing: Mutex<HashMap<String, u32>>,
}

static HUB: LazyLock<Hub> = LazyLock::new(|| {
    let (sender, receiver) = tokio::sync::mpsc::channel(QUEUE_CAPACITY);
    Hub {
        config: ArcSwap::from_pointee(EventsConfig::default()),
        sender,
        receiver: Mutex::new(Some(receiver)),
        impostors: Mutex::new(HashMap::new()),
        failing: Mutex::new(HashMap::new()),
    }
});

/// Puts `config` in force (at start and at every reload).
pub fn configure(config: &EventsConfig) {
    if **HUB.config.load() != *config {
        HUB.config.store(std::sync::Arc::new(config.clone()));
    }
}

/// The queue's receiving end, for the one sender task of the process (`None` once taken).
pub(crate) fn take_receiver() -> Option<tokio::sync::mpsc::Receiver<Event>> {
    HUB.receiver.lock().ok()?.take()
}

/// Queues `event` when a webhook wants its kind; never waits.
pub fn emit(event: Event) {
    let Some(kind) = event.of else { return };
    if !HUB.config.load().wants(kind) {
        return;
    }
    let mut event = event;
    event.reason = event.reason.as_deref().map(cut);
    if HUB.sender.try_send(event).is_err() {
        METRICS.webhook_events.with_label_values(&["dropped"]).inc();
    }
}

/// A ban imposed by this process: on `origin`, of `client`, earned by `crawler` for `cause`
/// with `strikes`, until `until`.
pub fn ban(
    origin: &str,
    client: IpNet,
    crawler: &str,
    cause: &str,
    strikes: u32,
    until: SystemTime,
) {
    let mut event = Event::new(EventKind::Ban, Some(origin));
    event.client = Some(crate::client_address::shown_network(&client));
    event.crawler = Some(crawler.to_owned());
    event.reason = Some(cause.to_owned());
    event.count = Some(u64::from(strikes));
    event.until = Some(rfc3339(until));
    emit(event);
}

/// `at` in RFC 3339, UTC, to the second (as the admin endpoint writes times).
fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A ban lifted from the admin endpoint or the console.
pub fn unban(origin: &str, client: IpNet, reason: &str) {
    let mut event = Event::new(EventKind::Unban, Some(origin));
    event.client = Some(crate::client_address::shown_network(&client));
    event.reason = Some(reason.to_owned());
    emit(event);
}

/// Counts an impostor verdict on `origin`; an `impostor_surge` event once the minute's count
/// passes `events.impostor_surge_per_minute` (one a minute per origin at most).
pub fn impostor(origin: &str, crawler: &str) {
    let config = HUB.config.load();
    if !config.wants(EventKind::ImpostorSurge) {
        return;
    }
    let limit = config.impostor_surge_per_minute;
    let now = Instant::now();
    let surged = {
        let Ok(mut counts) = HUB.impostors.lock() else {
            return;
        };
        // Origins come from the config: the map is bounded by it (cleared when it grows past).
        if counts.len() > 4096 {
            counts.clear();
        }
        let entry = counts.entry(origin.to_owned()).or_insert((now, 0, false));
        if now.duration_since(entry.0).as_secs() >= 60 {
            *entry = (now, 0, false);
        }
        entry.1 += 1;
        if entry.1 > limit && !entry.2 {
            entry.2 = true;
            Some(entry.1)
        } else {
            None
        }
    };
    if let Some(count) = surged {
        let mut event = Event::new(EventKind::ImpostorSurge, Some(origin));
        event.crawler = Some(crawler.to_owned());
        event.count = Some(count);
        event.reason = Some(format!(
            "more than {limit} impostor verdicts within a minute"
        ));
        emit(event);
    }
}

/// Counts a robots.txt fetch of `origin` (`failed` or not): a `robots_fetch_failing` event on
/// the [`FAILING_FETCHES`]th failure in a row (once per run of failures).
pub fn robots_fetch(origin: &str, failed: bool, reason: impl FnOnce() -> String) {
    let in_a_row = {
        let Ok(mut failing) = HUB.failing.lock() else {
            return;
        };
        if !failed {
            failing.remove(origin);
            return;
        }
        if failing.len() > 4096 {
            failing.clear();
        }
        let count = failing.entry(origin.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        *count
    };
    if in_a_row == FAILING_FETCHES {
        let mut event = Event::new(EventKind::RobotsFetchFailing, Some(origin));
        event.count = Some(u64::from(in_a_row));
        event.reason = Some(reason());
        emit(event);
    }
}

/// A reload refused: the first errors.
pub fn config_rejected(errors: &[String]) {
    let mut event = Event::new(EventKind::ConfigRejected, None);
    event.count = Some(errors.len() as u64);
    event.reason = Some(
        errors
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("; "),
    );
    emit(event);
}

/// A config in force refuses a search engine's crawler (the `search_crawler_refused` warning).
pub fn search_engine_refused(warning: &str) {
    let mut event = Event::new(EventKind::SearchEngineRefused, None);
    event.reason = Some(warning.to_owned());
    emit(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_spelled_as_configured() {
        let event = Event::new(EventKind::RobotsFetchFailing, Some("site"));
        let body = serde_json::to_value(&event).unwrap_or_default();
        assert_eq!(body["kind"], "robots_fetch_failing");
        assert_eq!(body["origin"], "site");
        assert!(body.get("client").is_none());
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(5000);
        assert_eq!(cut(&long).chars().count(), MAX_FIELD_CHARS + 1);
        assert_eq!(cut("short"), "short");
    }
}
