use super::*;

pub(crate) static TRAPS: Section = Section {
    id: "traps",
    place: "in `traps`",
    title: "Trap paths",
    doc: "With traps on, robotsguard serves the origin's robots.txt itself (whatever its source), with one `Disallow:` line per trap path in every group (and a `User-agent: *` group when the file has none). A request for a trap path or below it, from anyone but `policy.allow_clients` and the trusted proxies' own addresses, is a trap hit.",
    keys: &[
        key("enabled", Ty::Bool, "`false`", "Put trap paths in the robots.txt served and watch them."),
        key("paths", Ty::List(&Ty::Str), "one derived path", "The trap paths (plain paths, at most 16); none: one per origin, `/` and 16 letters and digits, an HMAC-SHA-256 of the origin's name under the secret (the same in every replica and across restarts)."),
        key("action", Ty::Words(|| names(&crate::config::traps::TRAP_ACTIONS)), "`report`", "`report` (counted and logged, answered by the origin), `block` (`404` without contacting the origin), `ban` (`404`, and the address banned at once for `offenders.ban`, with the exact User-Agent of a browser or app that took the trap, refused as `offenders.scope` says; a request another site's page caused is never banned). `mode: report` only reports."),
        key("secret_file", Ty::Str, "the generated secret", "A file holding the secret trap paths are derived from; without it, a secret generated at first start and kept in the shared store (`state.backend: redis`) or in `state.dir`."),
    ],
};

pub(crate) static DISGUISED: Section = Section {
    id: "disguised",
    place: "in `disguised`",
    title: "Disguised crawlers",
    doc: "A client without a crawler's User-Agent that read `/robots.txt` (GET or HEAD) and then, `strikes` times within `window`, asks for paths the robots.txt in force disallows to every group is the crawler `disguised` (bound by the `*` group) for that origin. Exempt paths, allowed clients and trusted proxies never count.",
    keys: &[
        key("action", Ty::Words(|| names(&crate::config::traps::DISGUISED_ACTIONS)), "`report`", "`report` (proxied, logged as would_block, decision `would_disguised`), `block` (`403` on the paths robots.txt disallows, with a body saying why), `ban` (banned with the origin's `offenders` settings, together with its exact User-Agent)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`5`", "Requests for paths disallowed to every group that make the address a disguised crawler."),
        key("window", Ty::Duration, "`10m`", "Within how long (from the first; each later one extends it)."),
    ],
};
