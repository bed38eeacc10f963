use super::*;

pub(crate) static PATHS: Section = Section {
    id: "paths",
    place: "in `paths`",
    title: "Paths",
    doc: "",
    keys: &[
        key("escaped_slashes", Ty::Words(|| names(&crate::config::origin::ESCAPED_SLASHES)), "`decode`", "What `%2F` / `%5C` in a path mean: `decode` (slashes, as most origins read them), `reject` (`400`), `keep` (data)."),
        key("forward", Ty::Words(|| names(&crate::config::origin::FORWARD)), "`canonical`", "What the origin is sent: the canonical path decided on, or the client's bytes (then decided on every reading)."),
    ],
};
