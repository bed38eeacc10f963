//! Parses YAML text into a tree of values that remember their line and column.
//!
//! The config is not deserialised straight into typed structs: serde stops at
//! the first error, and the config must report every problem (unknown keys,
//! bad durations, duplicate hosts) with its position in one pass. So the
//! document is read once into this generic tree, with each node's position
//! taken from serde-saphyr's `Spanned`, and `validate` walks the tree.
//!
//! This is also where hostile input is bounded: a size cap before parsing and
//! serde-saphyr's budget and alias limits during parsing.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{MessageFormatter, Spanned};

use super::error::{escape_controls, Pos};

/// A YAML node and where it is in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: Value,
    pub pos: Pos,
}

/// A YAML value, as YAML 1.2's core schema types it (`off` is a string).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in file order; keys are nodes so a non-string key can be
    /// reported where it is.
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// The kind of value, for "must be X, not Y" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "empty",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// The largest config accepted. A config with 10,000 origins is about 2 MB;
/// inline robots.txt texts are the only other large thing.
pub(crate) const MAX_INPUT_BYTES: usize = 16 * 1024 * 1024;

/// Parses one YAML document. On failure returns the parser's position (or
/// `Pos::UNKNOWN`) and message; a syntax error stops parsing, so there is
/// only ever one.
pub(crate) fn parse(text: &str) -> Result<Node, (Pos, String)> {
    if text.len() > MAX_INPUT_BYTES {
        return Err((
            Pos::UNKNOWN,
            format!(
                "the config is {} bytes; the limit is {} bytes",
                text.len(),
                MAX_INPUT_BYTES
            ),
        ));
    }
    match serde_saphyr::from_str_with_options::<Spanned<Value>>(text, options()) {
        Ok(spanned) => Ok(spanned.into()),
        Err(err) => {
            let pos = err
                .location()
                .map(|l| Pos::new(to_usize(l.line()), to_usize(l.column())))
                .unwrap_or(Pos::UNKNOWN);
            // The user formatter gives the message without a location suffix
            // or snippet; the position goes in our own `file:line:col` prefix.
            let message = limit_message(&err).unwrap_or_else(|| {
                serde_saphyr::UserMessageFormatter
                    .format_message(err.without_snippet())
                    .into_owned()
            });
            // The parser may quote file text in its message; escape control
            // characters so they cannot reach a terminal raw.
            Err((pos, escape_controls(&message)))
        }
    }
}

/// Plain words for the limits set in `options`, instead of the parser's
/// internal counter names.
fn limit_message(err: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;
    use serde_saphyr::granit_parser::ErrorKind;
    use serde_saphyr::{Error, ExternalMessageSource};
    let text = match err.without_snippet() {
        Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => "the config is nested too deeply (16 levels at most)",
            BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => {
                "the config has too many values (1000000 at most)"
            }
            BudgetBreach::ScalarBytes { .. } => "the config's text values are too large in total",
            BudgetBreach::Documents { .. } => "the config must be a single YAML document",
            _ => "the config uses too many anchors, aliases or merge keys",
        },
        Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. }
        | Error::AliasReplayCounterOverflow { .. } => {
            "aliases in the config expand to too much data"
        }
        // Errors met while replaying an alias carry the real cause inside.
        Error::AliasError { error, .. } => return limit_message(error),
        // The parser's own flow-nesting guard (`flow_nesting_limit`), with its structured error.
        Error::ExternalMessage { source, .. }
            if matches!(
                source.as_ref(),
                ExternalMessageSource::Parser(scan)
                    if *scan.kind() == ErrorKind::RecursionLimitExceeded
            ) =>
        {
            "the config is nested too deeply (16 levels at most)"
        }
        _ => return None,
    };
    Some(text.to_owned())
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Parser options: a config is small and shallow, so every limit is set far
/// below serde-saphyr's defaults, which are sized for general YAML. These
/// stop deep nesting, alias bombs ("billion laughs") and node floods early,
/// with an error rather than memory or stack exhaustion.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            // The deepest real path is origins[].robots.<key> or
            // listen[].tls.<key>: four levels. Sixteen leaves room for odd
            // but valid layouts and keeps recursion shallow.
            max_depth: 16,
            flow_nesting_limit: 16,
            // Two, so a second document gets the parser's clear "single document
            // expected" error rather than a budget breach.
            max_documents: 2,
            max_nodes: 1_000_000,
            max_events: 2_500_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_merge_keys: 1_000,
            max_recorded_anchor_events: 100_000,
            max_recorded_anchor_bytes: 8 * 1024 * 1024,
            max_total_scalar_bytes: MAX_INPUT_BYTES,
            max_inclusion_depth: 0,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 100_000,
            max_replay_stack_depth: 16,
        },
        // YAML 1.1 booleans turn `mode: off` or a host named `no` into
        // booleans; only true/false are booleans here.
        strict_booleans: true,
        // A `!tag` the config does not understand would be silently dropped.
        reject_unsupported_tags: true,
        // Comments are not needed, and not buffering them saves work.
        emit_comments: false,
        // The message is rendered without serde-saphyr's source snippet.
        with_snippet: false,
    }
}

impl From<Spanned<Value>> for Node {
    fn from(spanned: Spanned<Value>) -> Node {
        // `referenced` is where the value is used (the alias site for an
        // alias), which is where the operator looks for the mistake.
        let loc = if spanned.referenced.line() > 0 {
            spanned.referenced
        } else {
            spanned.defined
        };
        Node {
            value: spanned.value,
            pos: Pos::new(to_usize(loc.line()), to_usize(loc.column())),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        i128::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom("integer is too large"))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Value>>()? {
            items.push(item.into());
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<Spanned<Value>, Spanned<Value>>()? {
            entries.push((key.into(), value.into()));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(node: &Node) -> &[(Node, Node)] {
        match &node.value {
            Value::Map(m) => m,
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn positions_are_one_based_and_point_at_values() {
        let root = parse("a: 1\nb:\n  - x\n  - {c: d}\n").unwrap_or_else(|e| panic!("{e:?}"));
        let m = map(&root);
        assert_eq!(m[0].0.pos, Pos::new(1, 1));
        assert_eq!(m[0].1.pos, Pos::new(1, 4));
        assert_eq!(m[0].1.value, Value::Int(1));
        let Value::Seq(items) = &m[1].1.value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].pos, Pos::new(3, 5));
        assert_eq!(map(&items[1])[0].1.pos, Pos::new(4, 9));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let root = parse("a: off\nb: yes\nc: true\n").unwrap_or_else(|e| panic!("{e:?}"));
        let m = map(&root);
        assert_eq!(m[0].1.value, Value::Str("off".into()));
        assert_eq!(m[1].1.value, Value::Str("yes".into()));
        assert_eq!(m[2].1.value, Value::Bool(true));
    }

    #[test]
    fn aliases_resolve_and_point_at_the_alias() {
        let root = parse("a: &x hello\nb: *x\n").unwrap_or_else(|e| panic!("{e:?}"));
        let m = map(&root);
        assert_eq!(m[1].1.value, Value::Str("hello".into()));
        assert_eq!(m[1].1.pos.line, 2);
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let (pos, msg) = parse("a: [1, 2\n").err().unwrap_or_default();
        assert_eq!(pos, Pos::new(1, 4));
        assert!(msg.contains("bracket"), "{msg}");
        let (pos, msg) = parse("a: 1\na: 2\n").err().unwrap_or_default();
        assert_eq!(pos, Pos::new(2, 1));
        assert!(msg.contains("duplicate"), "{msg}");
        let (pos, _) = parse("a: 1\n---\nb: 2\n").err().unwrap_or_default();
        assert_eq!(pos.line, 3);
    }

    #[test]
    fn unknown_tags_are_rejected() {
        assert!(parse("a: !secret x\n").is_err());
    }

    #[test]
    fn oversized_input_is_rejected_before_parsing() {
        let text = "#".repeat(MAX_INPUT_BYTES + 1);
        let (pos, msg) = parse(&text).err().unwrap_or_default();
        assert_eq!(pos, Pos::UNKNOWN);
        assert!(msg.contains("limit"), "{msg}");
    }

    /// Hostile input is refused; a budget breach stops the parser early, so this returns quickly
    /// (how quickly is for benchmarks to say, not tests).
    fn assert_fails_fast(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("hostile input was accepted"),
            Err((_, msg)) => msg,
        }
    }

    #[test]
    fn deep_flow_nesting_fails_fast() {
        let text = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_fails_fast(&text);
    }

    #[test]
    fn deep_block_nesting_fails_fast() {
        let mut text = String::new();
        for depth in 0..5_000 {
            text.push_str(&" ".repeat(depth));
            text.push_str("k:\n");
        }
        assert_fails_fast(&text);
    }

    #[test]
    fn billion_laughs_fails_fast() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for pair in names.windows(2) {
            let refs = vec![format!("*{}", pair[0]); 9].join(",");
            text.push_str(&format!("{}: &{} [{}]\n", pair[1], pair[1], refs));
        }
        assert_fails_fast(&text);
    }

    #[test]
    fn self_referencing_alias_fails() {
        assert_fails_fast("a: &a [*a, *a, *a]\n");
    }

    #[test]
    fn node_flood_fails_fast() {
        // 4.8 MB of list items: under the size cap, over the node budget.
        let text = format!("a:\n{}", "- x\n".repeat(1_200_000));
        assert!(text.len() < MAX_INPUT_BYTES);
        assert_fails_fast(&text);
    }
}
