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
