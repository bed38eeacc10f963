//! The `preview:` section: how much recent crawler traffic each origin keeps to replay against a
//! candidate robots.txt or policy (`POST /robots/preview`). Everything of the section is here:
//! its settings, default, reader, accepted keys and reference rows.

use super::error::Sink;
use super::reader::{self, Table};
use super::reference::{key, SectionDoc, Ty};
use super::schema::Section;
use super::tree::Node;

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

pub(crate) const PREVIEW: Section = Section {
    place: "in `preview`",
    keys: &["max_paths_per_origin"],
};

pub(crate) static PREVIEW_DOC: SectionDoc = SectionDoc {
    id: "preview",
    section: &PREVIEW,
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

/// The largest config fragment a preview takes (it is one origin's keys).
pub const MAX_FRAGMENT_BYTES: usize = 256 * 1024;

/// The config `text` (read from `file_name`, relative paths against `base_dir`) with the origin
/// `origin` overridden by `fragment`, a YAML mapping of origin keys (`policy: {...}`): each key
/// of the fragment replaces the origin's, mappings merged key by key. Checked as `validate`
/// checks a file: problems of the fragment are reported at their line and column in it
/// (`config fragment:2:5: ...`), with did-you-mean for unknown keys. Returns the whole config,
/// so that its warnings can be found too.
pub fn with_origin_fragment(
    text: &str,
    file_name: &str,
    base_dir: &std::path::Path,
    origin: &str,
    fragment: &str,
) -> Result<super::Config, super::ConfigErrors> {
    const FRAGMENT: &str = "config fragment";
    let located = |file: &str, (pos, message): (super::error::Pos, String)| {
        super::ConfigErrors(vec![super::ConfigError {
            file: file.to_owned(),
            line: pos.line,
            column: pos.column,
            message,
            hint: None,
        }])
    };
    if fragment.len() > MAX_FRAGMENT_BYTES {
        return Err(located(
            FRAGMENT,
            (
                super::error::Pos::new(1, 1),
                format!("the config fragment is larger than {MAX_FRAGMENT_BYTES} bytes"),
            ),
        ));
    }
    let overrides = super::tree::parse(fragment).map_err(|e| located(FRAGMENT, e))?;
    let mut sink = Sink::new(FRAGMENT);
    // Every key must be one an origin takes (did-you-mean for the others); the values are
    // checked with the whole config below.
    let _ = Table::read(
        &mut sink,
        &overrides,
        &super::schema::ORIGIN,
        "the config fragment",
    );
    if !sink.is_empty() {
        return Err(sink.into_errors());
    }
    let super::tree::Value::Map(overrides) = overrides.value else {
        return Err(located(
            FRAGMENT,
            (
                overrides.pos,
                "the config fragment must be a mapping of origin keys".into(),
            ),
        ));
    };
    let mut root = super::tree::parse(text).map_err(|e| located(file_name, e))?;
    let Some(entry) = origin_node(&mut root, origin) else {
        return Err(located(
            file_name,
            (
                super::error::Pos::new(1, 1),
                format!("the config has no origin named `{origin}`"),
            ),
        ));
    };
    merge(entry, overrides);
    let mut sink = Sink::new(FRAGMENT);
    let config = super::validate::build(&root, &mut sink, base_dir);
    if sink.is_empty() {
        Ok(config)
    } else {
        Err(sink.into_errors())
    }
}

/// The mapping of the origin named `name` in a config's tree.
fn origin_node<'a>(root: &'a mut Node, name: &str) -> Option<&'a mut Vec<(Node, Node)>> {
    use super::tree::Value;
    let Value::Map(top) = &mut root.value else {
        return None;
    };
    let (_, origins) = top
        .iter_mut()
        .find(|(key, _)| key.value == Value::Str("origins".into()))?;
    let Value::Seq(items) = &mut origins.value else {
        return None;
    };
    items.iter_mut().find_map(|item| match &mut item.value {
        Value::Map(entries)
            if entries.iter().any(|(key, value)| {
                key.value == Value::Str("name".into()) && value.value == Value::Str(name.into())
            }) =>
        {
            Some(entries)
        }
        _ => None,
    })
}

/// Puts `overrides` into `entries`: a mapping into a mapping key by key, anything else in place
/// of what was there.
fn merge(entries: &mut Vec<(Node, Node)>, overrides: Vec<(Node, Node)>) {
    use super::tree::Value;
    for (key, value) in overrides {
        match entries
            .iter_mut()
            .find(|(known, _)| known.value == key.value)
        {
            Some((_, existing)) => match (&mut existing.value, value.value) {
                (Value::Map(inner), Value::Map(more)) => merge(inner, more),
                (_, value_now) => {
                    *existing = Node {
                        value: value_now,
                        pos: value.pos,
                    }
                }
            },
            None => entries.push((key, value)),
        }
    }
}
