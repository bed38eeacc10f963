use super::*;

pub(crate) const REFRESH_DOC: &str = "How often robots.txt is fetched or re-read (at least `1s`).";

pub(crate) const TIMEOUT_DOC: &str = "Time limit of one fetch.";

pub(crate) const ON_UNREACHABLE_DOC: &str = "With no good copy and the origin unreachable: `disallow` everything (RFC 9309) or `allow` (fail open).";

pub(crate) const MAX_SIZE_DOC: &str =
    "Bytes of robots.txt parsed; 500 KiB (RFC 9309's minimum) to 64 MiB.";

pub(crate) const ON_UNREACHABLE: Ty = Ty::Words(|| names(&crate::config::origin::ON_UNREACHABLE));

pub(crate) static DEFAULT_ROBOTS: Section = Section {
    id: "default_robots",
    place: "in `defaults.robots`",
    title: "robots.txt freshness (defaults)",
    doc: "The settings that make sense for every origin; `source`, `path`, `text`, `url` and `serve` are set per origin.",
    keys: &[
        key("refresh", Ty::Duration, "`5m`", REFRESH_DOC),
        key("timeout", Ty::Duration, "`10s`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE, "`disallow`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "`500KiB`", MAX_SIZE_DOC),
    ],
};

pub(crate) static ROBOTS: Section = Section {
    id: "robots",
    place: "in `robots`",
    title: "An origin's robots.txt",
    doc: "Where the origin's robots.txt comes from, and how it is kept fresh.",
    keys: &[
        key("source", Ty::Words(crate::config::origin::source_words), "`origin`", "`origin` (fetched from the upstream), `file` (`path`) or `inline` (`text`)."),
        key("path", Ty::Path, "required for `file`", "The robots.txt file; watched and re-read every `refresh`. Missing at start it stops `serve` (and fails `validate`); gone later, the last copy read stays in force."),
        key("text", Ty::Str, "required for `inline`", "The robots.txt itself."),
        key("url", Ty::Str, "`/robots.txt`", "With `source: origin`: a path, or an http(s) URL on one of the origin's hosts."),
        key("refresh", Ty::Duration, "from `defaults.robots`", REFRESH_DOC),
        key("timeout", Ty::Duration, "from `defaults.robots`", TIMEOUT_DOC),
        key("on_unreachable", ON_UNREACHABLE, "from `defaults.robots`", ON_UNREACHABLE_DOC),
        key("max_size", Ty::Size, "from `defaults.robots`", MAX_SIZE_DOC),
        key("serve", Ty::Bool, "`true` for `file` and `inline`, `false` for `origin`", "Answer `GET`/`HEAD /robots.txt` with the copy in force (`ETag`, `Last-Modified`, `Cache-Control`, `304`) instead of proxying it: crawlers read exactly what is enforced."),
    ],
};
