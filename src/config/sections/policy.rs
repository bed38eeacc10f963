use super::*;

pub(crate) const POLICY_ACTION: Ty = Ty::Words(|| names(&crate::config::origin::ACTIONS));

pub(crate) static POLICY: Section = Section {
    id: "policy",
    place: "in `policy`",
    title: "Policy",
    doc: "Who is bound by robots.txt. `enforce`: robots.txt decides; `pass`: never blocked; `block`: blocked everywhere but `/robots.txt` and exempt paths.",
    keys: &[
        key("categories", Ty::MapOf { keys: Some(categories), value: &POLICY_ACTION }, "`{library: pass, monitoring: pass}`, every other category `enforce`", "Per crawler category; merged category by category."),
        key("crawlers", Ty::MapOf { keys: None, value: &POLICY_ACTION }, "`{}`", "Per crawler, by catalogue name (case-insensitive); wins over its purposes and category; merged crawler by crawler."),
        key("purposes", Ty::MapOf { keys: Some(purposes), value: &Ty::AnyOf(&[POLICY_ACTION, Ty::Section(&PURPOSE_POLICY)]) }, "`{}`", "Per purpose (`search`, `training`, `agent`, `other`): an action, or `{action, multi_purpose}`. Wins over the category, loses to `crawlers`; a crawler with several purposes gets the most restrictive of their actions, except that a refusal (`block`, `license`) does not refuse a crawler that serves the purpose through its operator's own robots.txt token (Googlebot's training: `Google-Extended`; the served robots.txt gets a `Disallow: /` group for the token instead), nor, unless `multi_purpose: block`, one that serves `search` too. `license` answers with the origin's licence (`402`)."),
        key("allow_clients", Ty::OneOrList(&Ty::Network), "`[]`", "Client networks never blocked, whatever the User-Agent."),
        key("exempt_paths", Ty::OneOrList(&Ty::Str), "`[]`", "Path prefixes (starting with `/`, matched on the canonical path) never blocked for GET and HEAD without a query."),
    ],
};

pub(crate) static PURPOSE_POLICY: Section = Section {
    id: "purpose_policy",
    place: "in a purpose's policy",
    title: "A purpose's policy",
    doc: "The long form of a `policy.purposes` entry: `training: {action: block, multi_purpose: block}`.",
    keys: &[
        required("action", POLICY_ACTION, "As the short form's word: `enforce`, `pass`, `block` or `license`."),
        key("multi_purpose", Ty::Words(|| names(&crate::config::origin::MULTI_PURPOSE)), "`allow`", "What a refusal does to a crawler that serves `search` too and whose operator names no robots.txt token for this purpose (bingbot): `allow` lets it in (refusing it would take the site out of its search), `block` refuses it too. A crawler with a control token (Googlebot, Applebot) is never refused for the purpose: its token's group is."),
    ],
};

pub(crate) static CONTENT_SIGNALS: Section = Section {
    id: "content_signals",
    place: "in `content_signals`",
    title: "Content signals",
    doc: "robots.txt's `Content-Signal:` (`search`, `ai-input`, `ai-train`) and `Content-Usage:` (`train-ai`, `search`) lines, for the crawler's group and the path (path-scoped lines by longest match, only on paths the group may crawl).",
    keys: &[
        key("action", Ty::Words(|| names(&crate::config::origin::SIGNAL_ACTIONS)), "`report`", "`enforce` (a crawler whose purposes include `training` is refused on `ai-train=no`/`train-ai=n`, `search` on `search=no`/`search=n`, `agent` on `ai-input=no`, but for the refusals `multi_purpose` spares), `report` (counted and logged as would_block, policy `content-signal`), `ignore`."),
        key("header", Ty::Bool, "`false`", "Proxied responses carry `Content-Usage` with the preferences for the path, unless the origin set one."),
        key("multi_purpose", Ty::Words(|| names(&crate::config::origin::MULTI_PURPOSE)), "`allow`", "As `policy.purposes`' `multi_purpose`: whether a refused purpose also refuses a crawler that serves `search` too with no token of its operator's own for the purpose (bingbot on `search=yes, ai-train=no`). A crawler with a control token (Googlebot, Applebot) is never refused for it: under `enforce` the served robots.txt carries the token's group instead."),
    ],
};
