//! A preview's config fragment: one origin's keys overriding the config file in force, checked
//! as `validate` checks a file.

use super::error::Sink;
use super::reader::Table;
use super::tree::Node;

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
        &super::sections::ORIGIN,
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
