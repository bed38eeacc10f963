//! Delivers the events queued by [`crate::events`] to `events.webhooks`: a signed JSON POST per
//! receiver that wants the kind, retried with backoff. Deliveries run beside each other up to
//! [`MAX_DELIVERIES`]; beyond, an event is dropped (counted), so a hanging receiver costs
//! bounded memory and never reaches a request.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use pingora::connectors::http::Connector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use sha2::Sha256;

use crate::config::{EventsConfig, Webhook};
use crate::events::Event;
use crate::metrics::METRICS;
use crate::snapshot::Live;

/// Deliveries (one event to one receiver, with its retries) under way at once.
pub const MAX_DELIVERIES: usize = 256;

/// The first wait before a retry; each next one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The background service that sends the queued events (one per process).
pub struct WebhookSender {
    /// The snapshot in force: the receivers of each event are those of the config then.
    pub live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for WebhookSender {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        crate::events::configure(&self.live.load().config.events);
        let Some(mut queue) = crate::events::take_receiver() else {
            return;
        };
        let connector = Arc::new(Connector::new(None));
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_DELIVERIES));
        let mut generations = self.live.subscribe();
        loop {
            tokio::select! {
                event = queue.recv() => {
                    let Some(event) = event else { return };
                    let config = self.live.load().config.events.clone();
                    dispatch(&config, event, &connector, &slots);
                }
                changed = generations.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    crate::events::configure(&self.live.load().config.events);
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Starts a delivery of `event` to each receiver that wants it.
fn dispatch(
    config: &EventsConfig,
    event: Event,
    connector: &Arc<Connector>,
    slots: &Arc<tokio::sync::Semaphore>,
) {
    let Some(kind) = event.kind() else { return };
    let Ok(body) = serde_json::to_vec(&event) else {
        return;
    };
    let body = bytes::Bytes::from(body);
    for webhook in config.webhooks.iter().filter(|w| w.events.contains(&kind)) {
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            METRICS.webhook_events.with_label_values(&["dropped"]).inc();
            continue;
        };
        let webhook = webhook.clone();
        let config = config.clone();
        let connector = connector.clone();
        let body = body.clone();
        tokio::spawn(async move {
            deliver(&connector, &config, &webhook, body).await;
            drop(slot);
        });
    }
}

/// The value of `X-Robotsguard-Signature` for `body` keyed with `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(7 + digest.len() * 2);
    hex.push_str("sha256=");
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// A fresh event id (the same on every attempt of one delivery).
fn event_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique enough without the OS's randomness: the time and a counter.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = nanos.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one attempt came to.
enum Attempt {
    Delivered,
    /// Worth trying again: no answer, 5xx, 408, 429.
    Retry(String),
    /// Not worth trying again: 4xx, a redirect (not followed), a refused address, no secret.
    GiveUp(&'static str, String),
}

async fn deliver(
    connector: &Connector,
    config: &EventsConfig,
    webhook: &Webhook,
    body: bytes::Bytes,
) {
    let id = event_id();
    let mut backoff = FIRST_BACKOFF;
    for attempt in 0..=webhook.retries {
        if attempt > 0 {
            METRICS.webhook_events.with_label_values(&["retried"]).inc();
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        match attempt_once(connector, config, webhook, &id, body.clone()).await {
            Attempt::Delivered => {
                METRICS
                    .webhook_events
                    .with_label_values(&["delivered"])
                    .inc();
                return;
            }
            Attempt::Retry(why) if attempt < webhook.retries => {
                tracing::debug!(url = %webhook.url, error = %why, "webhook: attempt failed; trying again");
            }
            Attempt::Retry(why) => {
                METRICS.webhook_events.with_label_values(&["failed"]).inc();
                crate::logs::webhook_failed(&webhook.url, &why);
                return;
            }
            Attempt::GiveUp(result, why) => {
                METRICS.webhook_events.with_label_values(&[result]).inc();
                crate::logs::webhook_failed(&webhook.url, &why);
                return;
            }
        }
    }
}

async fn attempt_once(
    connector: &Connector,
    config: &EventsConfig,
    webhook: &Webhook,
    id: &str,
    body: bytes::Bytes,
) -> Attempt {
    // Read for every event: a rotated secret applies at once.
    let secret = match crate::config::read_webhook_secret(&webhook.secret_file) {
        Ok(secret) => secret,
        Err(e) => return Attempt::GiveUp("failed", format!("no secret: {e}")),
    };
    let signature = signature(&secret, &body);
    let headers = [
        ("content-type", "application/json"),
        ("x-robotsguard-signature", signature.as_str()),
        ("x-robotsguard-event-id", id),
    ];
    let allowed = |ip: std::net::IpAddr| config.target_allowed(ip);
    match crate::net::url::post_url(connector, &webhook.url, &headers, body, webhook.timeout, &allowed)
        .await
    {
        Ok((200..=299, _)) => Attempt::Delivered,
        Ok((status @ 300..=399, location)) => Attempt::GiveUp(
            "refused",
            format!(
                "answered {status} (a redirect to {}): redirects are not followed; give the final URL",
                location.as_deref().map_or_else(|| "nowhere".to_owned(), crate::logs::one_line)
            ),
        ),
        Ok((status @ (408 | 429 | 500..=599), _)) => Attempt::Retry(format!("answered {status}")),
        Ok((status, _)) => Attempt::GiveUp("failed", format!("answered {status}")),
        Err(failure) if failure.is_refused() => Attempt::GiveUp("refused", failure.to_string()),
        Err(failure) => Attempt::Retry(failure.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hex_hmac_of_the_body() {
        // RFC 4231 test case 2.
        let signed = signature(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            signed,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn event_ids_differ() {
        assert_ne!(event_id(), event_id());
        assert_eq!(event_id().len(), 32);
    }
}
