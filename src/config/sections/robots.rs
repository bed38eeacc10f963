//! `robots` and `defaults.robots`: where each origin's robots.txt comes from and how fresh it is kept.

use super::*;

pub(crate) const REFRESH_DOC: &str = "How often robots.txt is fetched or re-read (at least `1s`).";

pub(crate) const TIMEOUT_DOC: &str = "Time limit of one fetch.";

pub(crate) const ON_UNREACHABLE_DOC: &str = "With no good copy and the origin unreachable: `disallow` everything (RFC 9309) or `allow` (fail open).";

pub(crate) const MAX_SIZE_DOC: &str =
    "Bytes of robots.txt parsed; 500 KiB (RFC 9309's minimum) to 64 MiB.";

pub(crate) const ON_UNREACHABLE_WORDS: Ty = Ty::Words(|| names(&ON_UNREACHABLE));

pub(crate) static DEFAULT_ROBOTS: Section = Section {
    id: "default_robots",
    place: "in `defaults.robots`",
    title: "robots.txt freshness (defaults)",
    doc: "The settings that make sense for every origin; `source`, `path`, `text`, `url` and `serve` are set per origin.",
    keys: &[
        key("refresh", Ty::Duration, "`5m`", REFRESH_DOC),
        key("timeout", Ty::Duration, "`10s`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE_WORDS, "`disallow`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "`500KiB`", MAX_SIZE_DOC),
    ],
};

pub(crate) static ROBOTS: Section = Section {
    id: "robots",
    place: "in `robots`",
    title: "An origin's robots.txt",
    doc: "Where the origin's robots.txt comes from, and how it is kept fresh.",
    keys: &[
        key("source", Ty::Words(source_words), "`origin`", "`origin` (fetched from the upstream), `file` (`path`) or `inline` (`text`)."),
        key("path", Ty::Path, "required for `file`", "The robots.txt file; watched and re-read every `refresh`. Missing at start it stops `serve` (and fails `validate`); gone later, the last copy read stays in force."),
        key("text", Ty::Str, "required for `inline`", "The robots.txt itself."),
        key("url", Ty::Str, "`/robots.txt`", "With `source: origin`: a path, or an http(s) URL on one of the origin's hosts."),
        key("refresh", Ty::Duration, "from `defaults.robots`", REFRESH_DOC),
        key("timeout", Ty::Duration, "from `defaults.robots`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE_WORDS, "from `defaults.robots`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "from `defaults.robots`", MAX_SIZE_DOC),
        key("serve", Ty::Bool, "`true` for `file` and `inline`, `false` for `origin`", "Answer `GET`/`HEAD /robots.txt` with the copy in force (`ETag`, `Last-Modified`, `Cache-Control`, `304`) instead of proxying it: crawlers read exactly what is enforced."),
    ],
};

/// How an origin's robots.txt is obtained and kept fresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RobotsConfig {
    /// Where robots.txt comes from.
    pub source: RobotsSource,
    /// How often to fetch or re-read it.
    pub refresh: Duration,
    /// Limit for one fetch.
    pub timeout: Duration,
    /// What to assume while no robots.txt could be obtained.
    pub on_unreachable: OnUnreachable,
    /// Bytes of robots.txt that are read and parsed; at least 512000.
    pub max_size: usize,
    /// Answer `GET`/`HEAD /robots.txt` with the copy in force instead of proxying it.
    pub serve: bool,
}

/// Where an origin's robots.txt comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RobotsSource {
    /// Fetched from the origin's upstream. `url` overrides the location: a
    /// path (`/robots.txt` is the default) or an absolute http(s) URL.
    Origin {
        /// `robots.url`, when set.
        url: Option<String>,
    },
    /// Read from a local file (absolute path; existence is checked when it
    /// is read, not at load).
    File {
        /// The file.
        path: PathBuf,
    },
    /// Written in the config.
    Inline {
        /// The robots.txt text.
        text: String,
    },
}

/// What to assume when robots.txt cannot be obtained (network error,
/// timeout, 5xx). RFC 9309 section 2.3.1.4 says to assume complete
/// disallow; `allow` is the fail-open choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnUnreachable {
    /// Crawlers may fetch nothing (RFC 9309's default).
    Disallow,
    /// Crawlers may fetch everything (fail open).
    Allow,
}

impl OnUnreachable {
    /// The spelling used in the config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnreachable::Disallow => "disallow",
            OnUnreachable::Allow => "allow",
        }
    }
}

impl fmt::Display for OnUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) const DEFAULT_ROBOTS_REFRESH: Duration = Duration::from_secs(5 * 60);

pub(crate) const DEFAULT_ROBOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// RFC 9309 section 2.5: crawlers must parse at least the first 500 KiB of
/// a robots.txt, so smaller limits are refused.
/// `robots.url`: where an origin's robots.txt is fetched when nothing else is said.
pub(crate) const DEFAULT_ROBOTS_URL: &str = "/robots.txt";

pub(crate) const MIN_ROBOTS_MAX_SIZE: usize = 500 * 1024;

pub(crate) const DEFAULT_ROBOTS_MAX_SIZE: usize = MIN_ROBOTS_MAX_SIZE;

/// A robots.txt is held in memory per origin; a cap keeps a typo such as
/// `5GiB` from becoming a memory problem.
pub(crate) const MAX_ROBOTS_MAX_SIZE: usize = 64 * 1024 * 1024;

pub(crate) const ON_UNREACHABLE: [(&str, OnUnreachable); 2] = [
    ("disallow", OnUnreachable::Disallow),
    ("allow", OnUnreachable::Allow),
];

/// The robots settings that `defaults.robots` may set for every origin.
#[derive(Clone, Debug)]
pub(crate) struct RobotsSettings {
    pub refresh: Duration,
    pub timeout: Duration,
    pub on_unreachable: OnUnreachable,
    pub max_size: usize,
}

/// Reads `refresh`, `timeout`, `on_unreachable` and `max_size` over `base`.
/// Shared by `defaults.robots` and each origin's `robots`.
pub(crate) fn robots_settings(
    sink: &mut Sink,
    table: &Table<'_>,
    base: &RobotsSettings,
) -> RobotsSettings {
    let mut out = base.clone();
    if let Some(n) = table.get("refresh") {
        if let Some(d) = reader::duration(sink, n, "refresh") {
            // Refreshing more than once a second would hammer the origin
            // and buys nothing.
            if d < Duration::from_secs(1) {
                sink.error(n.pos, "`refresh` must be at least 1s");
            } else {
                out.refresh = d;
            }
        }
    }
    if let Some(n) = table.get("timeout") {
        if let Some(d) = reader::duration(sink, n, "timeout") {
            if d.is_zero() {
                sink.error(n.pos, "`timeout` must be longer than 0s");
            } else {
                out.timeout = d;
            }
        }
    }
    if let Some(n) = table.get("on_unreachable") {
        if let Some(v) = reader::choice(sink, n, "on_unreachable", &ON_UNREACHABLE) {
            out.on_unreachable = v;
        }
    }
    if let Some(n) = table.get("max_size") {
        if let Some(bytes) = reader::size(sink, n, "max_size") {
            match usize::try_from(bytes) {
                Ok(b) if b < MIN_ROBOTS_MAX_SIZE => sink.error_hint(
                    n.pos,
                    format!("`max_size` is {b} bytes; it must be at least 500KiB ({MIN_ROBOTS_MAX_SIZE} bytes)"),
                    "RFC 9309 requires parsing at least 500 KiB of robots.txt",
                ),
                Ok(b) if b <= MAX_ROBOTS_MAX_SIZE => out.max_size = b,
                _ => sink.error(
                    n.pos,
                    format!("`max_size` must be at most 64MiB ({MAX_ROBOTS_MAX_SIZE} bytes)"),
                ),
            }
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum SourceKind {
    Origin,
    File,
    Inline,
}

/// The words `robots.source` accepts (for the reference).
pub(crate) fn source_words() -> Vec<&'static str> {
    SOURCES.iter().map(|(name, _)| *name).collect()
}

const SOURCES: [(&str, SourceKind); 3] = [
    ("origin", SourceKind::Origin),
    ("file", SourceKind::File),
    ("inline", SourceKind::Inline),
];

/// Reads an origin's `robots` section over the defaults.
pub(crate) fn robots(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &RobotsSettings,
    base_dir: &Path,
) -> RobotsConfig {
    let table = node.and_then(|n| Table::read(sink, n, &ROBOTS, "`robots`"));
    let settings = match &table {
        Some(t) => robots_settings(sink, t, base),
        None => base.clone(),
    };
    let source = match &table {
        Some(t) => robots_source(sink, t, &settings, base_dir),
        None => RobotsSource::Origin { url: None },
    };
    // A copy robotsguard holds itself (file, inline) is what crawlers must read, so it is served
    // by default; an origin's own robots.txt is proxied unless asked otherwise.
    let serve = table
        .as_ref()
        .and_then(|t| t.get("serve"))
        .and_then(|n| reader::boolean(sink, n, "serve"))
        .unwrap_or(!matches!(source, RobotsSource::Origin { .. }));
    RobotsConfig {
        source,
        refresh: settings.refresh,
        timeout: settings.timeout,
        on_unreachable: settings.on_unreachable,
        max_size: settings.max_size,
        serve,
    }
}

/// `source` and the key it needs (`path` for file, `text` for inline,
/// optionally `url` for origin). Keys that belong to another source are
/// errors rather than ignored: they show the operator meant something else.
fn robots_source(
    sink: &mut Sink,
    table: &Table<'_>,
    settings: &RobotsSettings,
    base_dir: &Path,
) -> RobotsSource {
    let source_node = table.get("source");
    let kind = source_node
        .map(|n| reader::choice(sink, n, "source", &SOURCES))
        .unwrap_or(Some(SourceKind::Origin));
    // An invalid `source` was reported; checking the other keys against a
    // guess would only add confusing errors.
    let Some(kind) = kind else {
        return RobotsSource::Origin { url: None };
    };
    let (kind_name, needs) = match kind {
        SourceKind::Origin => ("origin", None),
        SourceKind::File => ("file", Some("path")),
        SourceKind::Inline => ("inline", Some("text")),
    };
    for (key, used_by) in [("path", "file"), ("text", "inline"), ("url", "origin")] {
        if used_by == kind_name {
            continue;
        }
        if let Some(pos) = table.key_pos(key) {
            sink.error_hint(
                pos,
                format!("`{key}` is only used with `source: {used_by}`, but the source is `{kind_name}`"),
                if kind == SourceKind::Origin {
                    format!("add `source: {used_by}`, or remove `{key}`")
                } else {
                    format!("remove `{key}`")
                },
            );
        }
    }
    let needed = needs.and_then(|key| {
        let found = table.get(key);
        if found.is_none() {
            let pos = source_node.map_or(table.pos, |n| n.pos);
            sink.error_hint(
                pos,
                format!("`source: {kind_name}` needs `{key}`"),
                if key == "path" {
                    "e.g. path: robots/shop.txt (relative to the config file)"
                } else {
                    "add `text: |` followed by the robots.txt lines"
                },
            );
        }
        found
    });
    match kind {
        SourceKind::Origin => {
            let url = table.get("url").and_then(|n| {
                let url = reader::nonempty_string(sink, n, "url")?;
                match check_robots_url(url) {
                    // Written out, the default is the same setting as leaving it out.
                    Ok(()) if url == DEFAULT_ROBOTS_URL => None,
                    Ok(()) => Some(url.to_owned()),
                    Err(message) => {
                        sink.error_hint(
                            n.pos,
                            message,
                            "e.g. /robots.txt or https://cdn.example/shop/robots.txt",
                        );
                        None
                    }
                }
            });
            RobotsSource::Origin { url }
        }
        SourceKind::File => {
            let path = needed
                .and_then(|n| reader::nonempty_string(sink, n, "path"))
                .map(|p| base_dir.join(p))
                .unwrap_or_default();
            RobotsSource::File { path }
        }
        SourceKind::Inline => {
            let text = needed
                .and_then(|n| {
                    let text = reader::string(sink, n, "text")?;
                    if text.len() > settings.max_size {
                        sink.error(
                            n.pos,
                            format!(
                                "inline robots.txt is {} bytes, more than `max_size` ({} bytes)",
                                text.len(),
                                settings.max_size
                            ),
                        );
                    }
                    Some(text.to_owned())
                })
                .unwrap_or_default();
            RobotsSource::Inline { text }
        }
    }
}

/// A robots.txt location: a path on the origin (`/robots.txt`) or an
/// absolute http(s) URL with a host.
fn check_robots_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`url` {} contains spaces or control characters",
            quote(url)
        ));
    }
    if url.starts_with('/') {
        if url.starts_with("//") {
            return Err(format!(
                "`url` {} must be a path or an http(s) URL, not `//host`",
                quote(url)
            ));
        }
        return Ok(());
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(()),
        Some(_) => Err(format!("`url` {} has no host", quote(url))),
        None => Err(format!(
            "`url` {} must be a path starting with `/` or an http:// or https:// URL",
            quote(url)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_max_size_is_the_documented_value() {
        assert_eq!(DEFAULT_ROBOTS_MAX_SIZE, 512_000);
    }

    #[test]
    fn robots_urls() {
        assert!(check_robots_url("/robots.txt").is_ok());
        assert!(check_robots_url("/shop/robots.txt").is_ok());
        assert!(check_robots_url("https://cdn.example/robots.txt").is_ok());
        assert!(check_robots_url("HTTP://cdn.example").is_ok());
        assert!(check_robots_url("robots.txt").is_err());
        assert!(check_robots_url("ftp://x/robots.txt").is_err());
        assert!(check_robots_url("https://").is_err());
        assert!(check_robots_url("https:///x").is_err());
        assert!(check_robots_url("//cdn.example/robots.txt").is_err());
        assert!(check_robots_url("/a b").is_err());
    }
}
