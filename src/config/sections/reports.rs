use super::*;

pub(crate) static REPORTS: Section = Section {
    id: "reports",
    place: "in `reports`",
    title: "Reports",
    doc: "",
    keys: &[
        key("top", Ty::Int { min: 10, max: 100_000 }, "`1000`", "Violation rows kept per origin and time slice (a heavy-hitters sketch: more distinct paths cost no memory, counts then carry an error bound)."),
        key("window", Ty::Duration, "`24h`", "How far back `/reports/*` and the console reach (1h–7d)."),
    ],
};
