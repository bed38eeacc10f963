//! Registries of Web Bot Auth signature agents (draft-meunier-webbotauth-registry): a registry
//! is a text list of Signature Agent Card URLs, one a line, `#` starting a comment; a card is a
//! JSON document naming the agent (`client_id`, the `Signature-Agent` URL its requests carry),
//! its keys (`jwks` inline, or `jwks_uri`, else the agent's own key directory) and the crawler
//! it stands for (`rfc9309-product-token`, at the top or in its `web_bot_auth` object).
//!
//! A registry is the operator's (an https URL or a `file:` path in the config); what it lists is
//! not: card URLs may be https (public addresses only, no redirects), `data:` (a registry that
//! inlines its cards), or `file:` only in a `file:` registry. Key directories named by cards
//! are fetched under the same public-address rule.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pingora::connectors::http::Connector;

use crate::config::{FetchProxy, RegistrySource};
use crate::fetch::Validators;
use crate::net::file::ReadCappedError;
use crate::net::url::get_url_to;

/// The largest registry list read.
pub(crate) const MAX_REGISTRY_BYTES: usize = 256 * 1024;

/// The largest card read.
pub(crate) const MAX_CARD_BYTES: usize = 64 * 1024;

/// The most cards one registry lists.
pub(crate) const MAX_CARDS: usize = 1000;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a card's agent keeps its keys.
#[derive(Debug, Clone)]
pub(crate) enum CardKeys {
    /// A JWKS in the card itself.
    Inline(super::signature_keys::KeySet),
    /// A key directory URL (`jwks_uri`, or the agent's well-known directory).
    Directory(String),
}

/// What one card says.
#[derive(Debug, Clone)]
pub(crate) struct Card {
    /// The `Signature-Agent` origin (`https://agent.example`).
    pub agent: String,
    /// The crawler's product token (what its robots.txt group is named).
    pub crawler: String,
    /// Its keys.
    pub keys: CardKeys,
}

/// The card URLs of a registry's text: one a line, blank lines and `#` comments skipped, at
/// most [`MAX_CARDS`].
pub(crate) fn card_urls(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            line.split_once('#')
                .map_or(line, |(before, _)| before)
                .trim()
        })
        .filter(|line| !line.is_empty())
        .take(MAX_CARDS)
        .map(str::to_string)
        .collect()
}

/// Why a registry or one of its cards could not be read.
#[derive(Debug)]
pub(crate) enum RegistryError {
    /// A `file:` registry or card that could not be read.
    File(ReadCappedError),
    /// A fetch that failed, or an answer that was not the document (the reason).
    Fetch(String),
    /// A registry that is not UTF-8 text.
    NotText,
    /// A card that is not one (the reason).
    Card(String),
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(e) => e.fmt(f),
            Self::Fetch(reason) | Self::Card(reason) => f.write_str(reason),
            Self::NotText => f.write_str("the registry is not UTF-8 text"),
        }
    }
}

impl std::error::Error for RegistryError {}

/// A card's JSON, read.
pub(crate) fn parse_card(body: &[u8]) -> Result<Card, RegistryError> {
    read_card(body).map_err(RegistryError::Card)
}

/// [`parse_card`], the reason in words. `None` fields are errors with their reason.
fn read_card(body: &[u8]) -> Result<Card, String> {
    let card: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON card: {e}"))?;
    let text = |name: &str| -> Option<&str> {
        card.get(name)
            .or_else(|| card.get("web_bot_auth").and_then(|inner| inner.get(name)))
            .and_then(|value| value.as_str())
    };
    let client_id = text("client_id").ok_or("the card has no `client_id`")?;
    let agent = crate::config::https_origin(client_id)
        .ok_or_else(|| format!("`client_id` {client_id:?} is not an https origin"))?;
    let crawler = text("rfc9309-product-token")
        .map(str::trim)
        .filter(|token| {
            !token.is_empty()
                && token.len() <= 64
                && token
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .ok_or("the card has no usable `rfc9309-product-token`")?
        .to_string();
    let jwks = card
        .get("jwks")
        .or_else(|| card.get("web_bot_auth").and_then(|inner| inner.get("jwks")));
    let keys = match (jwks, text("jwks_uri")) {
        (Some(jwks), _) => CardKeys::Inline(
            super::signature_keys::KeySet::from_value(jwks).map_err(|e| e.to_string())?,
        ),
        (None, Some(uri)) => {
            let url = url::Url::parse(uri).map_err(|e| format!("`jwks_uri`: {e}"))?;
            if url.scheme() != "https" {
                return Err(format!("`jwks_uri` {uri:?} is not https"));
            }
            CardKeys::Directory(url.to_string())
        }
        (None, None) => {
            CardKeys::Directory(format!("{agent}{}", super::signature_keys::DIRECTORY_PATH))
        }
    };
    Ok(Card {
        agent,
        crawler,
        keys,
    })
}

/// Fetches an https URL a registry or card named: public addresses only, no redirects, 200
/// only, at most `max` bytes.
pub(crate) async fn fetch_public(
    connector: &Connector,
    url: &str,
    max: usize,
    proxy: Option<&FetchProxy>,
) -> Result<Vec<u8>, RegistryError> {
    if !url.starts_with("https://") {
        return Err(RegistryError::Fetch(format!("{url} is not an https URL")));
    }
    let answer = get_url_to(
        connector,
        url,
        &Validators::default(),
        max,
        FETCH_TIMEOUT,
        proxy,
        Some(super::is_public),
    )
    .await
    .map_err(|e| RegistryError::Fetch(e.to_string()))?;
    if answer.status != 200 {
        return Err(RegistryError::Fetch(format!(
            "HTTP {} from {url}",
            answer.status
        )));
    }
    if answer.over_limit {
        return Err(RegistryError::Fetch(format!(
            "{url} is larger than {max} bytes"
        )));
    }
    Ok(answer.body.to_vec())
}

/// [`crate::net::file::read_capped`] off the async workers.
async fn read_capped(path: PathBuf, max: usize) -> Result<Vec<u8>, RegistryError> {
    match tokio::task::spawn_blocking(move || crate::net::file::read_capped(&path, max)).await {
        Ok(read) => read.map_err(RegistryError::File),
        Err(e) => Err(RegistryError::Fetch(format!(
            "the read did not finish: {e}"
        ))),
    }
}

/// A `data:` card's bytes.
fn data_card(url: &str) -> Result<Vec<u8>, RegistryError> {
    let bad = |e: &dyn std::fmt::Debug| RegistryError::Card(format!("a bad data: URL ({e:?})"));
    let data = data_url::DataUrl::process(url).map_err(|e| bad(&e))?;
    let (body, _) = data.decode_to_vec().map_err(|e| bad(&e))?;
    if body.len() > MAX_CARD_BYTES {
        return Err(RegistryError::Card(format!(
            "a data: card larger than {MAX_CARD_BYTES} bytes"
        )));
    }
    Ok(body)
}

/// A registry file's text, read now.
fn registry_text(path: &Path) -> Result<String, RegistryError> {
    let body =
        crate::net::file::read_capped(path, MAX_REGISTRY_BYTES).map_err(RegistryError::File)?;
    String::from_utf8(body).map_err(|_| RegistryError::NotText)
}

/// What keeps the `file:` registries of `registries` from being read, one line each, naming
/// the registry (and the card): the file itself (missing, unreadable, over the cap, not
/// UTF-8) and each `file:` or `data:` card it lists (unreadable, not a card). Cards at https
/// URLs are fetched at run time and not checked here. `validate`, `serve` and a reload refuse
/// the same (as a `file:` catalogue feed): a broken local registry is a mistake to fix, not a
/// list to run without.
pub(crate) fn file_problems(registries: &[RegistrySource]) -> Vec<String> {
    let mut problems = Vec::new();
    for source in registries {
        let RegistrySource::File(path) = source else {
            continue;
        };
        let name = format!("verify.web_bot_auth.registries `file:{}`", path.display());
        let text = match registry_text(path) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let base = path.parent().unwrap_or(Path::new("/"));
        for url in card_urls(&text) {
            let body = if url.starts_with("data:") {
                data_card(&url)
            } else if let Some(card) = url.strip_prefix("file:") {
                crate::net::file::read_capped(&base.join(card), MAX_CARD_BYTES)
                    .map_err(RegistryError::File)
            } else {
                continue;
            };
            if let Err(e) = body.and_then(|body| parse_card(&body)) {
                let shown: String = url.chars().take(120).collect();
                problems.push(format!("{name}: card `{shown}`: {e}"));
            }
        }
    }
    problems
}

/// A registry's text: the operator's URL (fetched as configured, through the proxy) or file.
pub(crate) async fn fetch_registry(
    connector: &Connector,
    source: &RegistrySource,
    proxy: Option<&FetchProxy>,
) -> Result<String, RegistryError> {
    let body = match source {
        RegistrySource::File(path) => read_capped(path.clone(), MAX_REGISTRY_BYTES).await?,
        RegistrySource::Url(url) => {
            let answer = get_url_to(
                connector,
                url,
                &Validators::default(),
                MAX_REGISTRY_BYTES,
                FETCH_TIMEOUT,
                proxy,
                None,
            )
            .await
            .map_err(|e| RegistryError::Fetch(e.to_string()))?;
            if answer.status != 200 {
                return Err(RegistryError::Fetch(format!(
                    "HTTP {} from {url}",
                    answer.status
                )));
            }
            if answer.over_limit {
                return Err(RegistryError::Fetch(format!(
                    "larger than {MAX_REGISTRY_BYTES} bytes"
                )));
            }
            answer.body.to_vec()
        }
    };
    String::from_utf8(body).map_err(|_| RegistryError::NotText)
}

/// One card, from the URL its registry lists. `base` is the registry file's folder, for a
/// `file:` card in a `file:` registry (relative paths are read from there).
pub(crate) async fn fetch_card(
    connector: &Connector,
    url: &str,
    base: Option<&Path>,
    proxy: Option<&FetchProxy>,
) -> Result<Card, RegistryError> {
    let body = if url.starts_with("data:") {
        data_card(url)?
    } else if let Some(path) = url.strip_prefix("file:") {
        let Some(base) = base else {
            return Err(RegistryError::Card(
                "a `file:` card is only read from a `file:` registry".into(),
            ));
        };
        read_capped(base.join(path), MAX_CARD_BYTES).await?
    } else {
        fetch_public(connector, url, MAX_CARD_BYTES, proxy).await?
    };
    parse_card(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lines() {
        let text = "# agents we know\nhttps://a.example/card.json\n\n  data:application/json,{} # inline\n#https://gone.example\n";
        assert_eq!(
            card_urls(text),
            ["https://a.example/card.json", "data:application/json,{}"]
        );
    }

    #[test]
    fn cards() {
        let inline = br#"{"client_id":"https://Agent.example/","client_name":"Agent","rfc9309-product-token":"AgentBot","jwks":{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}}"#;
        let card = parse_card(inline).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(card.agent, "https://agent.example");
        assert_eq!(card.crawler, "AgentBot");
        assert!(matches!(card.keys, CardKeys::Inline(ref keys) if keys.len() == 1));
        let nested = br#"{"client_id":"https://agent.example","web_bot_auth":{"rfc9309-product-token":"AgentBot"}}"#;
        let card = parse_card(nested).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(matches!(card.keys, CardKeys::Directory(ref url)
            if url == "https://agent.example/.well-known/http-message-signatures-directory"));
        for bad in [
            &br#"{"rfc9309-product-token":"AgentBot"}"#[..],
            br#"{"client_id":"http://agent.example","rfc9309-product-token":"AgentBot"}"#,
            br#"{"client_id":"https://agent.example","rfc9309-product-token":"Agent Bot/1"}"#,
            br#"{"client_id":"https://agent.example","rfc9309-product-token":"A","jwks_uri":"http://x.example/k"}"#,
            br#"{"client_id":"https://agent.example","rfc9309-product-token":"A","jwks":{"keys":[]}}"#,
            b"<html>",
        ] {
            assert!(
                matches!(parse_card(bad), Err(RegistryError::Card(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
