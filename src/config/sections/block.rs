//! `block`: the answer a blocked request gets (status, body template, licence link).

use super::*;

pub(crate) static BLOCK: Section = Section {
    id: "block",
    place: "in `block`",
    title: "The block answer",
    doc: "",
    keys: &[
        key("status", Ty::Int { min: 400, max: 599 }, "`403`", "Status of the block response; `402` is the licence answer (with `Link: <url>; rel=\"license\"`; agents still get `403` unless a `license` policy action says otherwise)."),
        key("body", Ty::Str, "built-in text", "Body template; placeholders `{crawler} {path} {line} {rule} {robots_url} {origin} {client}`, other braces literal; expanded in one pass."),
        key("license_url", Ty::Url, "robots.txt's `License:` line", "The licence terms a `402` answer links to; every crawler may fetch it."),
    ],
};

/// The response sent for a blocked request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockConfig {
    /// 400..=599.
    pub status: u16,
    /// A template using only [`BODY_PLACEHOLDERS`](crate::config::BODY_PLACEHOLDERS) as `{name}`; other
    /// braces are literal. `None` means the built-in body.
    pub body: Option<String>,
    /// `block.license_url`: where a `402` answer's `Link: <url>; rel="license"` points; absent,
    /// robots.txt's `License:` line does.
    pub license_url: Option<String>,
}

pub(crate) const DEFAULT_BLOCK_STATUS: u16 = 403;

/// Reads a `block` section over `base`: each key given replaces the
/// inherited one, the others are kept.
pub(crate) fn block(sink: &mut Sink, node: Option<&Node>, base: &BlockConfig) -> BlockConfig {
    let mut out = base.clone();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &BLOCK, "`block`")) else {
        return out;
    };
    if let Some(n) = table.get("status") {
        if let Some(status) = reader::integer(sink, n, "status", 400, 599) {
            // In range 400..=599, so it fits a u16.
            out.status = u16::try_from(status).unwrap_or(out.status);
        }
    }
    if let Some(n) = table.get("body") {
        if let Some(body) = reader::string(sink, n, "body") {
            match check_body(body) {
                Ok(()) => out.body = Some(body.to_owned()),
                Err(p) => sink.problem(n.pos, p),
            }
        }
    }
    if let Some(n) = table.get("license_url") {
        if let Some(url) = reader::nonempty_string(sink, n, "license_url") {
            let lower = url.to_ascii_lowercase();
            let absolute = (lower.starts_with("https://") || lower.starts_with("http://"))
                && !url
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'>');
            if absolute {
                out.license_url = Some(url.to_owned());
            } else {
                sink.error_hint(
                    n.pos,
                    format!(
                        "`license_url` must be an absolute http(s) URL, not {}",
                        quote(url)
                    ),
                    "e.g. license_url: https://shop.example/license.xml",
                );
            }
        }
    }
    out
}
