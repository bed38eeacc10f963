//! The config of crawler verification: the top-level `verify` section, a crawler's own
//! `verify` data (`crawlers.extra[].verify`), and the `impostors` action.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::error::{quote, Sink};
use super::origin::KnownCrawlers;
use super::reader::{self, Table};
use super::schema::{
    CRAWLER_VERIFY, SIGNATURE_AGENT, VERIFY, VERIFY_DNS, VERIFY_RANGES, WEB_BOT_AUTH,
};
use super::tree::{Node, Value};
use super::{
    DnsConfig, DnsProbe, FetchProxy, RangesConfig, RegistrySource, SignatureAgent, VerifyConfig,
    WebBotAuthConfig,
};
use crate::crawlers::VerifyData;

/// The most addresses a DNS cache may be told to hold: enough for any site, small enough that
/// a typo cannot let clients grow memory without bound.
const MAX_DNS_ENTRIES: i128 = 10_000_000;

/// Range lists are refreshed at most this often (as robots.txt): operators publish them daily,
/// and a conditional refresh costs them a 304.
const MIN_LIST_REFRESH: Duration = Duration::from_secs(1);

/// The most clock skew accepted on signatures: the draft's lifetimes are minutes to hours.
const MAX_SKEW: Duration = Duration::from_secs(3600);

/// The longest a signature without a nonce may be accepted after its `created`.
const MAX_NONCELESS_WINDOW: Duration = Duration::from_secs(3600);

/// `verify`, over the built-in values. Agents must name crawlers in `known`; mirrors, lists the
/// crawlers of `crawlers` name.
pub(crate) fn verify(
    sink: &mut Sink,
    node: Option<&Node>,
    base_dir: &Path,
    known: &KnownCrawlers,
    crawlers: &super::CrawlersConfig,
) -> VerifyConfig {
    let mut out = VerifyConfig::default();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &VERIFY, "`verify`")) else {
        return out;
    };
    if let Some(n) = table.get("refresh") {
        if let Some(d) = reader::duration(sink, n, "refresh") {
            if d < MIN_LIST_REFRESH {
                sink.error_hint(
                    n.pos,
                    "`verify.refresh` must be at least 1s",
                    "operators update their lists about daily; 24h is the default",
                );
            } else {
                out.refresh = d;
            }
        }
    }
    if let Some(n) = table.get("ranges") {
        out.ranges = ranges(sink, n, base_dir, crawlers);
    }
    if let Some(n) = table.get("dns") {
        (out.dns, out.dns_probe) = dns(sink, n);
    }
    if let Some(n) = table.get("web_bot_auth") {
        out.web_bot_auth = web_bot_auth(sink, n, base_dir, known);
    }
    out
}

fn positive(sink: &mut Sink, table: &Table<'_>, key: &str) -> Option<Duration> {
    let n = table.get(key)?;
    let d = reader::duration(sink, n, key)?;
    if d.is_zero() {
        sink.error(n.pos, format!("`{key}` must be longer than 0s"));
        return None;
    }
    Some(d)
}

/// `verify.ranges: {enabled, mirrors, proxy, private_origins}`. A mirror of a list no crawler of `crawlers`
/// names is an error, since a typo there would leave the real list fetched unnoticed (not
/// checked when the catalogue is broken: that is reported already).
fn ranges(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
    crawlers: &super::CrawlersConfig,
) -> RangesConfig {
    let mut out = RangesConfig::default();
    let Some(table) = Table::read(sink, node, &VERIFY_RANGES, "`verify.ranges`") else {
        return out;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("mirrors") {
        // Built only when there are mirrors: reading the catalogue costs more than the rest.
        let lists: Option<Vec<String>> = crawlers.catalogue_defs().ok().map(|defs| {
            defs.into_iter()
                .filter_map(|def| def.verify)
                .flat_map(|verify| verify.ips)
                .collect()
        });
        let lists = lists.as_deref();
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let Some(list) = reader::nonempty_string(sink, key, "mirrors") else {
                        continue;
                    };
                    if !is_http_url(list) {
                        sink.error_hint(
                            key.pos,
                            format!("{} is not a list URL", quote(list)),
                            "each key is the URL of a crawler's IP range list, as the catalogue \
                             names it (crates/robotsguard-crawlers/crawlers.yaml lists them under `verify: {ips}`)",
                        );
                        continue;
                    }
                    if lists.is_some_and(|lists| !lists.iter().any(|named| named == list)) {
                        sink.error_hint(
                            key.pos,
                            format!("no crawler's `verify.ips` names {}", quote(list)),
                            "mirror a list the catalogue or crawlers.extra names \
                             (crates/robotsguard-crawlers/crawlers.yaml lists them under `verify: {ips}`)",
                        );
                        continue;
                    }
                    if out.mirrors.iter().any(|(known, _)| known == list) {
                        sink.error(key.pos, format!("{} is mirrored twice", quote(list)));
                        continue;
                    }
                    let Some(text) = reader::nonempty_string(sink, value, "mirror") else {
                        continue;
                    };
                    match list_source(text, base_dir) {
                        Ok(mirror) => out.mirrors.push((list.to_owned(), mirror)),
                        Err(why) => sink.error_hint(
                            value.pos,
                            format!("mirror {} {why}", quote(text)),
                            "write an http(s) URL or file:path/to/list.json (relative to this file)",
                        ),
                    }
                }
            }
            other => sink.error_hint(
                n.pos,
                format!("`mirrors` must be a mapping, not {}", other.kind()),
                "e.g. mirrors: {\"https://openai.com/gptbot.json\": \"file:lists/gptbot.json\"}",
            ),
        }
    }
    let private = table
        .get("private_origins")
        .and_then(|n| reader::list(sink, n, "private_origins"))
        .unwrap_or_default();
    for item in private {
        let Some(text) = reader::nonempty_string(sink, item, "private_origins") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.private_origins.contains(&origin) => {
                out.private_origins.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("private origin {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("private origin {} is not an https origin", quote(text)),
                "e.g. private_origins: [\"https://lists.internal.example\"]",
            ),
        }
    }
    if let Some(n) = table.get("proxy") {
        if let Some(text) = reader::nonempty_string(sink, n, "proxy") {
            match FetchProxy::parse(text, "verify.ranges.proxy") {
                Ok(proxy) => out.proxy = Some(proxy),
                Err(why) => sink.error_hint(
                    n.pos,
                    format!("proxy {}: {why}", quote(text)),
                    "e.g. proxy: \"http://proxy.internal:3128\"",
                ),
            }
        }
    }
    out
}

fn is_http_url(text: &str) -> bool {
    url::Url::parse(text)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
}

fn dns(sink: &mut Sink, node: &Node) -> (DnsConfig, DnsProbe) {
    let mut out = DnsConfig::default();
    let mut probe = DnsProbe::default();
    let Some(table) = Table::read(sink, node, &VERIFY_DNS, "`verify.dns`") else {
        return (out, probe);
    };
    if let Some(n) = table.get("probe_name") {
        if let Some(text) = reader::nonempty_string(sink, n, "probe_name") {
            match dns_suffix(text) {
                Some(name) => probe.name = name,
                None => sink.error_hint(
                    n.pos,
                    format!("probe name {} is not a DNS name", quote(text)),
                    "a name that must exist in public DNS, e.g. googlebot.com",
                ),
            }
        }
    }
    if let Some(n) = table.get("probe_interval") {
        if let Some(d) = reader::duration(sink, n, "probe_interval") {
            if d < Duration::from_secs(1) {
                sink.error(n.pos, "`probe_interval` must be at least 1s");
            } else {
                probe.interval = d;
            }
        }
    }
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("servers") {
        let mut servers = Vec::new();
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "servers") else {
                continue;
            };
            match name_server(text) {
                Some(address) => servers.push(address),
                None => sink.error_hint(
                    item.pos,
                    format!("{} is not a name server address", quote(text)),
                    "write an IP address, optionally with a port: 10.0.0.2, 10.0.0.2:5353, [2001:db8::53]:53",
                ),
            }
        }
        out.servers = servers;
    }
    if let Some(d) = positive(sink, &table, "timeout") {
        out.timeout = d;
    }
    if let Some(d) = positive(sink, &table, "positive_ttl") {
        out.positive_ttl = d;
    }
    if let Some(d) = positive(sink, &table, "negative_ttl") {
        out.negative_ttl = d;
    }
    if let Some(n) = table
        .get("max_entries")
        .and_then(|n| reader::integer(sink, n, "max_entries", 1, MAX_DNS_ENTRIES))
    {
        out.max_entries = usize::try_from(n).unwrap_or(out.max_entries);
    }
    (out, probe)
}

/// `10.0.0.2`, `10.0.0.2:5353`, `2001:db8::53`, `[2001:db8::53]:53`; port 53 by default.
fn name_server(text: &str) -> Option<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Some(address);
    }
    let bare = text.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, 53))
}

fn web_bot_auth(
    sink: &mut Sink,
    node: &Node,
    base_dir: &Path,
    known: &KnownCrawlers,
) -> WebBotAuthConfig {
    let mut out = WebBotAuthConfig::default();
    let Some(table) = Table::read(sink, node, &WEB_BOT_AUTH, "`verify.web_bot_auth`") else {
        return out;
    };
    if let Some(enabled) = table
        .get("enabled")
        .and_then(|n| reader::boolean(sink, n, "enabled"))
    {
        out.enabled = enabled;
    }
    if let Some(n) = table.get("max_skew") {
        if let Some(d) = reader::duration(sink, n, "max_skew") {
            if d > MAX_SKEW {
                sink.error(n.pos, "`max_skew` must be at most 1h");
            } else {
                out.max_skew = d;
            }
        }
    }
    if let Some(mode) = table
        .get("mode")
        .and_then(|n| reader::choice(sink, n, "mode", &super::origin::WEB_BOT_AUTH_MODES))
    {
        out.mode = mode;
    }
    let registries = table
        .get("registries")
        .and_then(|n| reader::list(sink, n, "registries"))
        .unwrap_or_default();
    for item in registries {
        let Some(text) = reader::nonempty_string(sink, item, "registries") else {
            continue;
        };
        let source = match text.strip_prefix("file:") {
            Some(path) if !path.is_empty() => Some(RegistrySource::File(base_dir.join(path))),
            Some(_) => None,
            None => url::Url::parse(text)
                .ok()
                .filter(|url| matches!(url.scheme(), "https" | "http") && url.host().is_some())
                .map(|_| RegistrySource::Url(text.to_string())),
        };
        match source {
            Some(source) if !out.registries.contains(&source) => out.registries.push(source),
            Some(_) => sink.error(
                item.pos,
                format!("registry {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!(
                    "registry {} is neither an https URL nor a `file:` path",
                    quote(text)
                ),
                "e.g. registries: [\"https://registry.example/agents.txt\", \"file:agents.txt\"]",
            ),
        }
    }
    let private = table
        .get("private_agents")
        .and_then(|n| reader::list(sink, n, "private_agents"))
        .unwrap_or_default();
    for item in private {
        let Some(text) = reader::nonempty_string(sink, item, "private_agents") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.private_agents.contains(&origin) => {
                out.private_agents.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("private agent {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("private agent {} is not an https origin", quote(text)),
                "e.g. private_agents: [\"https://agent.internal.example\"]",
            ),
        }
    }
    let nonceless = table
        .get("nonceless_agents")
        .and_then(|n| reader::list(sink, n, "nonceless_agents"))
        .unwrap_or_default();
    for item in nonceless {
        let Some(text) = reader::nonempty_string(sink, item, "nonceless_agents") else {
            continue;
        };
        match https_origin(text) {
            Some(origin) if !out.nonceless_agents.contains(&origin) => {
                out.nonceless_agents.push(origin)
            }
            Some(_) => sink.error(
                item.pos,
                format!("nonce-less agent {} is listed twice", quote(text)),
            ),
            None => sink.error_hint(
                item.pos,
                format!("nonce-less agent {} is not an https origin", quote(text)),
                "write the Signature-Agent value the bot sends, e.g. https://chatgpt.com",
            ),
        }
    }
    if let Some(n) = table.get("nonceless_window") {
        if let Some(d) = reader::duration(sink, n, "nonceless_window") {
            if d < Duration::from_secs(1) || d > MAX_NONCELESS_WINDOW {
                sink.error_hint(
                    n.pos,
                    "`nonceless_window` must be between 1s and 1h",
                    "a signature without a nonce can be replayed for this long: keep it short (5m is the default)",
                );
            } else {
                out.nonceless_window = d;
            }
        }
    }
    let items = table
        .get("agents")
        .and_then(|n| reader::list(sink, n, "agents"))
        .unwrap_or_default();
    for item in items {
        let Some(agent_table) = Table::read(sink, item, &SIGNATURE_AGENT, "each agent") else {
            continue;
        };
        let agent = match agent_table.get("agent") {
            Some(n) => reader::nonempty_string(sink, n, "agent").and_then(|text| {
                let origin = https_origin(text);
                if origin.is_none() {
                    sink.error_hint(
                        n.pos,
                        format!("agent {} is not an https origin", quote(text)),
                        "write the Signature-Agent value the bot sends, e.g. https://chatgpt.com",
                    );
                }
                origin
            }),
            None => {
                sink.error_hint(
                    agent_table.pos,
                    "agent is missing `agent`",
                    "e.g. agent: \"https://chatgpt.com\"",
                );
                None
            }
        };
        let repeated = agent
            .as_ref()
            .and_then(|agent| out.agents.iter().find(|a| a.agent == *agent));
        if let (Some(agent), Some(first)) = (&agent, repeated) {
            let at = agent_table.key_pos("agent").unwrap_or(agent_table.pos);
            sink.error(
                at,
                format!(
                    "agent {} is listed twice (for {})",
                    quote(agent),
                    first.crawler
                ),
            );
            continue;
        }
        let crawler = match agent_table.get("crawler") {
            Some(n) => reader::nonempty_string(sink, n, "crawler").and_then(|name| {
                let found = known.find(name).map(str::to_owned);
                if found.is_none() {
                    sink.error(
                        n.pos,
                        format!("no crawler is named {}{}", quote(name), known.suggest(name)),
                    );
                }
                found
            }),
            None => {
                sink.error_hint(
                    agent_table.pos,
                    "agent is missing `crawler`",
                    "the crawler a valid signature identifies, e.g. crawler: ChatGPT-Agent",
                );
                None
            }
        };
        let keys = match agent_table.get("keys") {
            Some(n) => match reader::nonempty_string(sink, n, "keys") {
                Some(text) => match text.strip_prefix("file:") {
                    Some(path) if !path.is_empty() => Some(Some(base_dir.join(path))),
                    _ => {
                        sink.error_hint(
                            n.pos,
                            format!("keys {} is not a `file:` path", quote(text)),
                            "e.g. keys: \"file:keys/example.json\" (a JWKS file); leave it out to use the agent's key directory",
                        );
                        None
                    }
                },
                None => None,
            },
            None => Some(None),
        };
        if let (Some(agent), Some(crawler), Some(keys)) = (agent, crawler, keys) {
            out.agents.push(SignatureAgent {
                agent,
                crawler,
                keys,
            });
        }
    }
    out
}

/// `https://host[:port]` with nothing after it (a trailing `/` is dropped), lower-cased: the
/// form `Signature-Agent` values are compared in.
pub(crate) fn https_origin(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
    if url.scheme() != "https" || !bare || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("https://{host}:{port}"),
        None => format!("https://{host}"),
    })
}

/// The origin (`https://host[:port]`, lower-cased) of an https URL with any path: what
/// `verify.ranges.private_origins` and `verify.web_bot_auth.private_agents` are compared with.
pub fn https_origin_of(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    if url.scheme() != "https" {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port() {
        Some(port) => format!("https://{host}:{port}"),
        None => format!("https://{host}"),
    })
}

/// A crawler's `verify` mapping: `ips` (URLs or `file:` paths relative to the config) and
/// `rdns` suffixes.
pub(crate) fn crawler_verify(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<VerifyData> {
    let table = Table::read(sink, node, &CRAWLER_VERIFY, "crawler `verify`")?;
    let mut out = VerifyData::default();
    let mut ok = true;
    if let Some(n) = table.get("ips") {
        for item in reader::one_or_many(n) {
            // `{url: ..., format: ...}`: a list read other than by its shape.
            let (item, format) = match &item.value {
                super::tree::Value::Map(_) => match list_with_format(sink, item) {
                    Some(pair) => pair,
                    None => {
                        ok = false;
                        continue;
                    }
                },
                _ => (item, crate::crawlers::ListFormat::Auto),
            };
            let Some(text) = reader::nonempty_string(sink, item, "ips") else {
                ok = false;
                continue;
            };
            match list_source(text, base_dir) {
                Ok(source) => {
                    if !format.is_auto() {
                        out.formats.push((source.clone(), format));
                    }
                    out.ips.push(source);
                }
                Err(why) => {
                    ok = false;
                    sink.error_hint(
                        item.pos,
                        format!("{} {why}", quote(text)),
                        "write an http(s) URL or file:path/to/list.json (relative to this file)",
                    );
                }
            }
        }
    }
    if let Some(n) = table.get("rdns") {
        for item in reader::one_or_many(n) {
            let Some(text) = reader::nonempty_string(sink, item, "rdns") else {
                ok = false;
                continue;
            };
            match dns_suffix(text) {
                Some(suffix) => out.rdns.push(suffix),
                None => {
                    ok = false;
                    sink.error_hint(
                        item.pos,
                        format!("{} is not a DNS name suffix", quote(text)),
                        "write the domain the crawler's reverse DNS names end in, e.g. googlebot.com",
                    );
                }
            }
        }
    }
    if out.ips.is_empty() && out.rdns.is_empty() && ok {
        sink.error_hint(
            table.pos,
            "`verify` names no `ips` and no `rdns`",
            "leave `verify` out for a crawler that cannot be verified",
        );
        return None;
    }
    ok.then_some(out)
}

/// An `ips` entry as stored: the URL as written, or `file:` and the absolute path.
/// An `ips` item written `{url, format}`: the url's node and the format (`jafar`, `auto`,
/// `{json_pointer: "/prefixes/*/ip_prefix"}` or `{regex: "..."}` with one capture group).
fn list_with_format<'a>(
    sink: &mut Sink,
    node: &'a Node,
) -> Option<(&'a Node, crate::crawlers::ListFormat)> {
    use crate::crawlers::ListFormat;
    let table = Table::read(sink, node, &super::schema::RANGE_LIST, "an `ips` list")?;
    let Some(url) = table.get("url") else {
        sink.error_hint(
            table.pos,
            "list is missing `url`",
            "e.g. {url: \"https://example.com/ips.html\", format: {regex: \"ip: ([0-9./]+)\"}}",
        );
        return None;
    };
    let format = match table.get("format") {
        None => ListFormat::Auto,
        Some(f) => match &f.value {
            super::tree::Value::Str(word) if word == "auto" || word == "json" => ListFormat::Auto,
            super::tree::Value::Str(word) if word == "jafar" => ListFormat::Jafar,
            super::tree::Value::Map(_) => {
                let inner = Table::read(
                    sink,
                    f,
                    &super::schema::RANGE_LIST_FORMAT,
                    "a list `format`",
                )?;
                let pointer = inner.get("json_pointer");
                let regex = inner.get("regex");
                let format = match (pointer, regex) {
                    (Some(p), None) => ListFormat::JsonPointer(
                        reader::nonempty_string(sink, p, "json_pointer")?.to_owned(),
                    ),
                    (None, Some(r)) => {
                        ListFormat::Regex(reader::nonempty_string(sink, r, "regex")?.to_owned())
                    }
                    _ => {
                        sink.error(f.pos, "a list `format` is one of `json_pointer` or `regex`");
                        return None;
                    }
                };
                if let Err(e) = crate::crawlers::check_format(&format) {
                    sink.error(f.pos, e.to_string());
                    return None;
                }
                format
            }
            _ => {
                sink.error_hint(
                    f.pos,
                    "a list `format` is `auto`, `jafar`, `{json_pointer: ...}` or `{regex: ...}`",
                    "e.g. format: {json_pointer: \"/prefixes/*/ip_prefix\"}",
                );
                return None;
            }
        },
    };
    Some((url, format))
}

fn list_source(text: &str, base_dir: &Path) -> Result<String, &'static str> {
    if let Some(path) = text.strip_prefix("file:") {
        if path.is_empty() {
            return Err("names no file");
        }
        return Ok(format!("file:{}", base_dir.join(path).display()));
    }
    let url = url::Url::parse(text).map_err(|_| "is neither a URL nor a file: path")?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("is not an http(s) URL");
    }
    Ok(text.to_owned())
}

/// A reverse DNS suffix, lower-cased, without a trailing dot: labels of letters, digits and
/// `-`, at least two labels (a bare `com` would admit any `.com` name).
fn dns_suffix(text: &str) -> Option<String> {
    let lower = text.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = lower.split('.').collect();
    let good = labels.len() >= 2
        && lower.len() <= 253
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    good.then_some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_servers() {
        assert_eq!(name_server("10.0.0.2"), "10.0.0.2:53".parse().ok());
        assert_eq!(name_server("10.0.0.2:5353"), "10.0.0.2:5353".parse().ok());
        assert_eq!(
            name_server("2001:db8::53"),
            "[2001:db8::53]:53".parse().ok()
        );
        assert_eq!(
            name_server("[2001:db8::53]:54"),
            "[2001:db8::53]:54".parse().ok()
        );
        assert_eq!(name_server("dns.example"), None);
    }

    #[test]
    fn https_origins() {
        assert_eq!(
            https_origin("https://ChatGPT.com/"),
            Some("https://chatgpt.com".into())
        );
        assert_eq!(
            https_origin("https://bot.example:8443"),
            Some("https://bot.example:8443".into())
        );
        assert_eq!(https_origin("http://chatgpt.com"), None);
        assert_eq!(https_origin("https://chatgpt.com/keys"), None);
        assert_eq!(https_origin("chatgpt.com"), None);
    }

    #[test]
    fn dns_suffixes() {
        assert_eq!(dns_suffix("GoogleBot.com."), Some("googlebot.com".into()));
        assert_eq!(dns_suffix("crawl.baidu.jp"), Some("crawl.baidu.jp".into()));
        for bad in [
            "com",
            ".googlebot.com",
            "*.google.com",
            "goo gle.com",
            "-x.com",
            "a..b",
        ] {
            assert_eq!(dns_suffix(bad), None, "{bad}");
        }
    }

    #[test]
    fn list_sources() {
        let base = Path::new("/etc/robotsguard");
        assert_eq!(
            list_source("file:ranges/google.json", base),
            Ok("file:/etc/robotsguard/ranges/google.json".into())
        );
        assert_eq!(
            list_source("https://openai.com/gptbot.json", base),
            Ok("https://openai.com/gptbot.json".into())
        );
        assert!(list_source("ftp://x.example/list", base).is_err());
        assert!(list_source("file:", base).is_err());
        assert!(list_source("ranges.json", base).is_err());
    }
}
