use super::*;

pub(crate) static VERIFY: Section = Section {
    id: "verify",
    place: "in `verify`",
    title: "Crawler verification",
    doc: "How a User-Agent's claim to be a crawler is checked. Offline (no lists, no DNS) everything is `unverified`, and nothing is refused that would not be without verification.",
    keys: &[
        key("refresh", Ty::Duration, "`24h`", "How often the range lists are fetched again (conditional requests; at least `1s`)."),
        key("ranges", Ty::Section(&VERIFY_RANGES), "", "The operators' published IP range lists."),
        key("dns", Ty::Section(&VERIFY_DNS), "", "Forward-confirmed reverse DNS."),
        key("web_bot_auth", Ty::Section(&WEB_BOT_AUTH), "", "HTTP Message Signatures (Web Bot Auth)."),
    ],
};

pub(crate) static VERIFY_RANGES: Section = Section {
    id: "verify_ranges",
    place: "in `verify.ranges`",
    title: "Range lists",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by lists alone stay `unverified`."),
        key("mirrors", Ty::MapOf { keys: None, value: &Ty::Str }, "`{}`", "A list's URL → another URL, or a `file:` path you keep up to date (re-read when it changes). The URL must be one some crawler's `verify.ips` names."),
        key("proxy", Ty::Url, "`HTTPS_PROXY`, minus the hosts `NO_PROXY` names", "An HTTP proxy (CONNECT) for the list and key directory fetches."),
        key("private_origins", Ty::List(&Ty::Url), "`[]`", "https origins (`https://host[:port]`) whose range lists a catalogue feed fetched over the network may name on a loopback, private or link-local address (a list server inside your network). Any other list such a feed names is fetched over https from public addresses only, every redirect checked again; a list that fails the check is not fetched (`robotsguard_verify_list_fetches_total{outcome=\"refused\"}`)."),
    ],
};

pub(crate) static VERIFY_DNS: Section = Section {
    id: "verify_dns",
    place: "in `verify.dns`",
    title: "Reverse DNS",
    doc: "",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "`false`: crawlers checked by DNS alone stay `unverified`."),
        key("servers", Ty::OneOrList(&Ty::Str), "the system resolver, without `/etc/hosts`", "Resolvers (`IP` or `IP:PORT`), UDP and TCP."),
        key("timeout", Ty::Duration, "`2s`", "The longest the first request from an address waits for its lookup (the lookup goes on)."),
        key("positive_ttl", Ty::Duration, "`24h`", "How long a confirmed name is cached."),
        key("negative_ttl", Ty::Duration, "`1h`", "How long \"no name\" is cached (failures: 30 s, or this if shorter)."),
        key("max_entries", Ty::Int { min: 1, max: 10_000_000 }, "`100000`", "Addresses cached; a full cache drops expired answers first."),
        key("probe_name", Ty::Str, "`googlebot.com`", "A name that must exist in public DNS, looked up at start and every `probe_interval` to tell whether the resolver reaches public DNS. A resolver that does not answer it (silence, `SERVFAIL`, `REFUSED`) gets no lookups until it does; one that answers `NXDOMAIN` does not see public DNS. Either way reverse DNS verification reports itself unavailable (`robotsguard_verify_dns_available` 0, one log line, `/explain`'s `reverse_dns`) and its claims stay `unverified`."),
        key("probe_interval", Ty::Duration, "`60s`", "How often the probe runs while the name resolves (at least `1s`); every 5 s at most while it does not, so verification resumes soon after the resolver does."),
    ],
};

pub(crate) static WEB_BOT_AUTH: Section = Section {
    id: "web_bot_auth",
    place: "in `verify.web_bot_auth`",
    title: "Web Bot Auth",
    doc: "A request signed by a listed agent (RFC 9421 as the webbotauth draft profiles it) is `verified` as the agent's crawler, whatever its User-Agent.",
    keys: &[
        key("enabled", Ty::Bool, "`true`", "Check signatures."),
        key("max_skew", Ty::Duration, "`60s`", "How far `created`/`expires` may be from now (at most `1h`)."),
        key("agents", Ty::List(&Ty::Section(&SIGNATURE_AGENT)), "`[]`", "The signing agents trusted."),
        key("mode", WEB_BOT_AUTH_MODE, "`optional`", "What signatures may change: `observe` (verified and counted, no decision changed), `optional` (a valid signature identifies its crawler; a replayed nonce gets `429`), `required` (also: a request claiming a crawler that has a signing agent and carrying no valid signature gets `403` with `Accept-Signature`). An origin or `defaults` may set its own."),
        key("registries", Ty::List(&Ty::Str), "`[]`", "Registries of signature-agent cards (an https URL or `file:path`; one card URL a line, `#` comments; cards `https:`, `data:`, or `file:` in a `file:` registry), whose agents join `agents` (which win); read at start and every `verify.refresh`, the last good copy kept."),
        key("private_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) the catalogue, a feed or a registry names whose key directory may be fetched from a loopback, private or link-local address (an agent inside your network). Any other agent not in `agents` is fetched from public addresses only."),
        key("nonceless_agents", Ty::List(&Ty::Url), "`[]`", "Agents (https origins) whose signatures without a `nonce` are accepted for their whole validity, from any address: your word that the agent reuses its signatures (the drafts give an agent no way to say so). Any other agent's nonce-less signature is accepted only within `nonceless_window` of its `created` and only from the address that first sent it; a later or cross-address replay gets `429` with a fresh `Accept-Signature`."),
        key("nonceless_window", Ty::Duration, "`5m`", "How long after its `created` (plus `max_skew`) a signature without a `nonce` is accepted, for agents not in `nonceless_agents` (1s to 1h)."),
    ],
};

pub(crate) static ORIGIN_WEB_BOT_AUTH: Section = Section {
    id: "origin_web_bot_auth",
    place: "in `web_bot_auth` (of an origin or `defaults`)",
    title: "Web Bot Auth per origin",
    doc: "An origin's (or `defaults`') own Web Bot Auth mode.",
    keys: &[key(
        "mode",
        WEB_BOT_AUTH_MODE,
        "`verify.web_bot_auth.mode`",
        "`observe`, `optional` or `required`, as `verify.web_bot_auth.mode`.",
    )],
};

pub(crate) static SIGNATURE_AGENT: Section = Section {
    id: "signature_agent",
    place: "in a `web_bot_auth` agent",
    title: "A signing agent",
    doc: "",
    keys: &[
        required("agent", Ty::Url, "The `Signature-Agent` origin (https), whose `/.well-known/http-message-signatures-directory` holds its keys."),
        required("crawler", Ty::Str, "The catalogue crawler a valid signature proves."),
        key("keys", Ty::Str, "the agent's key directory", "A `file:` JWKS instead of the directory (re-read when it changes)."),
    ],
};
