use super::*;

pub(crate) static OFFENDERS: Section = Section {
    id: "offenders",
    place: "in `offenders`",
    title: "Repeat offenders",
    doc: "A strike is a request a robots.txt rule blocks that every robots.txt in force over the previous 24 hours also disallowed.",
    keys: &[
        key("action", Ty::Words(|| names(&crate::config::origin::OFFENDERS_ACTIONS)), "`report`", "`ban` (an address reaching `strikes` within `window` is refused for `ban` on every path but `/robots.txt`), `report` (logs `client would be banned`; bans in force for repeated violations are not applied: proxied, decision `would_ban`), `off` (no strikes, and no ban in force is applied: decision `ban_suspended`)."),
        key("scope", Ty::Words(|| names(&crate::config::origin::BAN_SCOPES)), "`crawlers`", "Which requests of a banned address are refused: `crawlers` (those identifying as a crawler or with no User-Agent, and those with the exact User-Agent of a client a trap or disguised ban caught) or `address` (all)."),
        key("strikes", Ty::Int { min: 1, max: 1_000_000 }, "`20`", "Strikes that ban."),
        key("window", Ty::Duration, "`10m`", "Counted from the first strike."),
        key("ban", Ty::Duration, "`1h`", "How long a ban lasts."),
    ],
};
