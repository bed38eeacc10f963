//! `preview`: how much recent crawler traffic each origin keeps to replay against a candidate
//! robots.txt or policy (`POST /robots/preview`).

use super::*;

/// `preview.max_paths_per_origin` when not set.
pub const DEFAULT_MAX_PATHS_PER_ORIGIN: usize = 20_000;

/// The largest `preview.max_paths_per_origin` accepted: a bound on the memory an origin's
/// sample may take, whatever the config says.
pub const MAX_MAX_PATHS_PER_ORIGIN: usize = 1_000_000;

/// What the preview keeps (`preview`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PreviewConfig {
    /// Distinct (crawler, path) pairs kept per origin; beyond it the least-requested pair is
    /// evicted and its requests are counted as not replayable.
    pub max_paths_per_origin: usize,
}

impl Default for PreviewConfig {
    fn default() -> Self {
        PreviewConfig {
            max_paths_per_origin: DEFAULT_MAX_PATHS_PER_ORIGIN,
        }
    }
}

pub(crate) static PREVIEW: Section = Section {
    id: "preview",
    place: "in `preview`",
    title: "Preview",
    doc: "The recent crawler traffic `POST /robots/preview` replays against a candidate robots.txt or policy (over `reports.window`).",
    keys: &[key(
        "max_paths_per_origin",
        Ty::Int {
            min: 1,
            max: MAX_MAX_PATHS_PER_ORIGIN as i128,
        },
        "`20000`",
        "Distinct (crawler, path) pairs kept per origin; beyond it the least-requested is evicted and its requests count as `requests_not_replayable`.",
    )],
};

/// Reads the `preview` section (absent: the defaults).
pub(crate) fn preview(sink: &mut Sink, node: Option<&Node>) -> PreviewConfig {
    let mut config = PreviewConfig::default();
    let Some(table) = node.and_then(|n| Table::read(sink, n, &PREVIEW, "`preview`")) else {
        return config;
    };
    if let Some(paths) = table
        .get("max_paths_per_origin")
        .and_then(|n| {
            reader::integer(
                sink,
                n,
                "max_paths_per_origin",
                1,
                MAX_MAX_PATHS_PER_ORIGIN as i128,
            )
        })
        .and_then(|n| usize::try_from(n).ok())
    {
        config.max_paths_per_origin = paths;
    }
    config
}
