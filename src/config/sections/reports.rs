//! `reports`: what the reports (`/reports/*`, the console) keep.

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

/// The reports of the admin endpoint and console (`reports`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReportsConfig {
    /// Violation rows kept per origin and time slice (a heavy-hitters sketch: more distinct
    /// rows than this cost no memory, and counts carry an error bound).
    pub top: usize,
    /// How far back the reports reach.
    pub window: Duration,
}

impl Default for ReportsConfig {
    fn default() -> Self {
        ReportsConfig {
            top: DEFAULT_REPORTS_TOP,
            window: DEFAULT_REPORTS_WINDOW,
        }
    }
}

/// `reports.top`: violation rows kept per origin and time slice.
pub(crate) const DEFAULT_REPORTS_TOP: usize = 1000;

/// `reports.window`: how far back the reports reach.
pub(crate) const DEFAULT_REPORTS_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// The shortest and longest `reports.window`.
const MIN_WINDOW: Duration = Duration::from_secs(60 * 60);
const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// `reports`: what the reports keep.
pub(crate) fn reports(sink: &mut Sink, node: &Node) -> ReportsConfig {
    let mut reports = ReportsConfig::default();
    let Some(table) = Table::read(sink, node, &REPORTS, "`reports`") else {
        return reports;
    };
    if let Some(top) = table
        .get("top")
        .and_then(|n| reader::integer(sink, n, "top", 10, 100_000))
        .and_then(|n| usize::try_from(n).ok())
    {
        reports.top = top;
    }
    if let Some(n) = table.get("window") {
        match reader::duration(sink, n, "window") {
            Some(window) if window < MIN_WINDOW => {
                sink.error(n.pos, "`reports.window` must be at least 1h");
            }
            Some(window) if window > MAX_WINDOW => {
                sink.error(n.pos, "`reports.window` must be at most 7d");
            }
            Some(window) => reports.window = window,
            None => {}
        }
    }
    reports
}
