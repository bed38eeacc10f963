//! `paths`: how request paths are matched against robots.txt and forwarded.

use super::*;

pub(crate) static PATHS: Section = Section {
    id: "paths",
    place: "in `paths`",
    title: "Paths",
    doc: "",
    keys: &[
        key("escaped_slashes", Ty::Words(|| names(&ESCAPED_SLASHES)), "`decode`", "What `%2F` / `%5C` in a path mean: `decode` (slashes, as most origins read them), `reject` (`400`), `keep` (data)."),
        key("forward", Ty::Words(|| names(&FORWARD)), "`canonical`", "What the origin is sent: the canonical path decided on, or the client's bytes (then decided on every reading)."),
    ],
};

/// How request paths are read for the decision and what the origin is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathsConfig {
    /// What `%2F` and `%5C` mean (`paths.escaped_slashes`).
    pub escaped_slashes: EscapedSlashes,
    /// Which target the origin receives (`paths.forward`).
    pub forward: Forward,
}

impl Default for PathsConfig {
    fn default() -> Self {
        PathsConfig {
            escaped_slashes: EscapedSlashes::Decode,
            forward: Forward::Canonical,
        }
    }
}

/// What `%2F` and `%5C` in a request path mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EscapedSlashes {
    /// They are slashes (as nginx, Apache and most frameworks read them): decoded before dot
    /// segments are removed and slashes merged.
    Decode,
    /// Paths holding them are refused with 400.
    Reject,
    /// They are data, not separators (for origins that route on encoded slashes).
    Keep,
}

impl EscapedSlashes {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            EscapedSlashes::Decode => "decode",
            EscapedSlashes::Reject => "reject",
            EscapedSlashes::Keep => "keep",
        }
    }
}

/// Which request target the origin receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Forward {
    /// The canonical path and query the decision was made on.
    Canonical,
    /// The client's bytes; the decision is then the most restrictive over every reading an
    /// origin could take of them.
    Original,
}

impl Forward {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Canonical => "canonical",
            Forward::Original => "original",
        }
    }
}

pub(crate) const ESCAPED_SLASHES: [(&str, EscapedSlashes); 3] = [
    ("decode", EscapedSlashes::Decode),
    ("reject", EscapedSlashes::Reject),
    ("keep", EscapedSlashes::Keep),
];

pub(crate) const FORWARD: [(&str, Forward); 2] = [
    ("canonical", Forward::Canonical),
    ("original", Forward::Original),
];

/// Reads a `paths` section over `base`, key by key.
pub(crate) fn paths(sink: &mut Sink, node: Option<&Node>, base: &PathsConfig) -> PathsConfig {
    let mut out = *base;
    let Some(table) = node.and_then(|n| Table::read(sink, n, &PATHS, "`paths`")) else {
        return out;
    };
    if let Some(v) = table
        .get("escaped_slashes")
        .and_then(|n| reader::choice(sink, n, "escaped_slashes", &ESCAPED_SLASHES))
    {
        out.escaped_slashes = v;
    }
    if let Some(v) = table
        .get("forward")
        .and_then(|n| reader::choice(sink, n, "forward", &FORWARD))
    {
        out.forward = v;
    }
    out
}
