//! Typed reads from the YAML tree that collect errors: each accessor reports
//! a located error and returns `None` when a value has the wrong shape, so
//! checking goes on and finds the file's other problems too.

use std::path::PathBuf;
use std::time::Duration;

use super::duration::parse_duration;
use super::error::{did_you_mean, one_of, quote, Pos, Sink};
use super::sections::{Section, MISPLACED};
use super::size::parse_size;
use super::tree::{Node, Value};

/// A mapping's entries, checked against the keys its section allows.
pub(crate) struct Table<'a> {
    /// Where the mapping is: the anchor for "missing key" errors.
    pub pos: Pos,
    entries: Vec<(&'a str, Pos, &'a Node)>,
}

impl<'a> Table<'a> {
    /// Reads `node` as a mapping of `section`, reporting every unknown or
    /// non-string key. An empty value (`robots:` with everything commented
    /// out) is an empty table. Returns `None`, after reporting, if `node` is
    /// not a mapping; `what` names it in that message.
    pub(crate) fn read(
        sink: &mut Sink,
        node: &'a Node,
        section: &Section,
        what: &str,
    ) -> Option<Table<'a>> {
        let map: &[(Node, Node)] = match &node.value {
            Value::Map(map) => map,
            Value::Null => &[],
            other => {
                sink.error_hint(
                    node.pos,
                    format!("{what} must be a mapping, not {}", other.kind()),
                    one_of(&section.names()),
                );
                return None;
            }
        };
        let mut entries = Vec::with_capacity(map.len());
        for (key, value) in map {
            let Value::Str(name) = &key.value else {
                sink.error(
                    key.pos,
                    format!(
                        "keys must be strings, not {} {}",
                        key.value.kind(),
                        section.place
                    ),
                );
                continue;
            };
            if !section.has(name) {
                report_unknown_key(sink, key.pos, name, section);
                continue;
            }
            entries.push((name.as_str(), key.pos, value));
        }
        Some(Table {
            pos: node.pos,
            entries,
        })
    }

    /// The value of `key`, if it is present and not empty. An empty value
    /// (`key:` or `key: ~`) counts as absent, so it means "use the default".
    pub(crate) fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(name, _, value)| *name == key && value.value != Value::Null)
            .map(|(_, _, value)| *value)
    }

    /// Where `key` is written, if it is present (even with an empty value).
    pub(crate) fn key_pos(&self, key: &str) -> Option<Pos> {
        self.entries
            .iter()
            .find(|(name, _, _)| *name == key)
            .map(|(_, pos, _)| *pos)
    }
}

fn report_unknown_key(sink: &mut Sink, pos: Pos, name: &str, section: &Section) {
    let misplaced = MISPLACED
        .iter()
        .find(|(place, key, _)| *place == section.place && *key == name);
    match misplaced {
        Some((_, _, hint)) => sink.error_hint(
            pos,
            format!("key {} is not allowed {}", quote(name), section.place),
            *hint,
        ),
        None => sink.error_hint(
            pos,
            format!(
                "unknown key {} {}{}",
                quote(name),
                section.place,
                did_you_mean(name, &section.names())
            ),
            one_of(&section.names()),
        ),
    }
}

/// A string value. Numbers and booleans are refused rather than converted:
/// YAML has already changed their spelling (`0x1F` became 31).
pub(crate) fn string<'a>(sink: &mut Sink, node: &'a Node, what: &str) -> Option<&'a str> {
    match &node.value {
        Value::Str(s) => Some(s),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
            sink.error_hint(
                node.pos,
                format!("`{what}` must be a string, not {}", node.value.kind()),
                "put the value in quotes",
            );
            None
        }
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be a string, not {}", other.kind()),
            );
            None
        }
    }
}

/// A string that is not empty.
pub(crate) fn nonempty_string<'a>(sink: &mut Sink, node: &'a Node, what: &str) -> Option<&'a str> {
    let s = string(sink, node, what)?;
    if s.is_empty() {
        sink.error(node.pos, format!("`{what}` must not be empty"));
        return None;
    }
    Some(s)
}

/// `true` or `false`. YAML 1.1 spellings (`yes`, `on`) are not booleans in
/// this config; they get a hint.
pub(crate) fn boolean(sink: &mut Sink, node: &Node, what: &str) -> Option<bool> {
    match &node.value {
        Value::Bool(b) => Some(*b),
        Value::Str(s) => {
            sink.error_hint(
                node.pos,
                format!("`{what}` must be true or false, not {}", quote(s)),
                "write true or false",
            );
            None
        }
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be true or false, not {}", other.kind()),
            );
            None
        }
    }
}

/// An integer in `min..=max`.
pub(crate) fn integer(
    sink: &mut Sink,
    node: &Node,
    what: &str,
    min: i128,
    max: i128,
) -> Option<i128> {
    match &node.value {
        Value::Int(n) if (min..=max).contains(n) => Some(*n),
        Value::Int(n) => {
            sink.error(
                node.pos,
                format!("`{what}` must be between {min} and {max}, not {n}"),
            );
            None
        }
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be an integer, not {}", other.kind()),
            );
            None
        }
    }
}

/// A list's items.
pub(crate) fn list<'a>(sink: &mut Sink, node: &'a Node, what: &str) -> Option<&'a [Node]> {
    match &node.value {
        Value::Seq(items) => Some(items),
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be a list, not {}", other.kind()),
            );
            None
        }
    }
}

/// A list's items, or the value itself as a one-item list, for keys that
/// take one value or many (`upstream: a:80` or `upstream: [a:80, b:80]`).
pub(crate) fn one_or_many(node: &Node) -> &[Node] {
    match &node.value {
        Value::Seq(items) => items,
        _ => std::slice::from_ref(node),
    }
}

/// The words YAML 1.1 reads as each boolean. Helm reads values files as YAML 1.1, so a chart
/// value written `mode: off` reaches the rendered config as `mode: false`.
const YAML_11_FALSE: [&str; 2] = ["off", "no"];
const YAML_11_TRUE: [&str; 2] = ["on", "yes"];

/// One of a fixed set of words. A boolean stands for the one word among the options that YAML
/// 1.1 reads as it (`false` for `off`), so that a value passed through Helm keeps its meaning.
pub(crate) fn choice<T: Copy>(
    sink: &mut Sink,
    node: &Node,
    what: &str,
    options: &[(&'static str, T)],
) -> Option<T> {
    let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
    if let Value::Bool(b) = &node.value {
        let spellings: &[&str] = if *b { &YAML_11_TRUE } else { &YAML_11_FALSE };
        let mut meant = options.iter().filter(|(name, _)| spellings.contains(name));
        if let (Some((_, value)), None) = (meant.next(), meant.next()) {
            return Some(*value);
        }
        sink.error_hint(
            node.pos,
            format!(
                "`{what}` must be a word, not the boolean {b}: YAML 1.1 readers such as Helm read \
                 {} as {b}, and no word of `{what}` is one of them",
                spellings.join(" and ")
            ),
            format!("quote the word; {}", one_of(&names)),
        );
        return None;
    }
    let Value::Str(word) = &node.value else {
        sink.error_hint(
            node.pos,
            format!("`{what}` must be a word, not {}", node.value.kind()),
            one_of(&names),
        );
        return None;
    };
    match options.iter().find(|(name, _)| name == word) {
        Some((_, value)) => Some(*value),
        None => {
            sink.error_hint(
                node.pos,
                format!(
                    "unknown `{what}` {}{}",
                    quote(word),
                    did_you_mean(word, &names)
                ),
                one_of(&names),
            );
            None
        }
    }
}

/// A duration such as `30s`. A bare number is refused with a hint showing
/// the same number with a unit.
pub(crate) fn duration(sink: &mut Sink, node: &Node, what: &str) -> Option<Duration> {
    let text = match &node.value {
        Value::Str(s) => s.clone(),
        // Run numbers through the string parser for its "has no unit" /
        // "has a fraction" messages and hints.
        Value::Int(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be a duration like 30s, not {}", other.kind()),
            );
            return None;
        }
    };
    parse_duration(&text)
        .map_err(|p| sink.problem(node.pos, p))
        .ok()
}

/// A size in bytes: an integer, or a string such as `500KiB`.
pub(crate) fn size(sink: &mut Sink, node: &Node, what: &str) -> Option<u64> {
    match &node.value {
        Value::Int(n) => match u64::try_from(*n) {
            Ok(n) => Some(n),
            Err(_) => {
                sink.error(node.pos, format!("`{what}` must not be negative"));
                None
            }
        },
        Value::Str(s) => parse_size(s).map_err(|p| sink.problem(node.pos, p)).ok(),
        Value::Float(f) => parse_size(&f.to_string())
            .map_err(|p| sink.problem(node.pos, p))
            .ok(),
        other => {
            sink.error(
                node.pos,
                format!("`{what}` must be a size like 500KiB, not {}", other.kind()),
            );
            None
        }
    }
}

/// A TLS client's certificate files: the CAs to trust, and its own certificate and key.
pub(crate) type TlsClientFiles = (Option<PathBuf>, Option<(PathBuf, PathBuf)>);

/// The certificate files of a TLS client mapping (`ca`, and `client_cert` with `client_key`,
/// both or neither), as paths relative to `base_dir`; `None` after an error.
pub(crate) fn tls_client_files(
    sink: &mut Sink,
    table: &Table<'_>,
    base_dir: &std::path::Path,
) -> Option<TlsClientFiles> {
    let mut path = |key: &str| -> Option<Option<PathBuf>> {
        match table.get(key) {
            Some(n) => nonempty_string(sink, n, key).map(|p| Some(base_dir.join(p))),
            None => Some(None),
        }
    };
    let ca = path("ca")?;
    let cert = path("client_cert")?;
    let key = path("client_key")?;
    match (cert, key) {
        (Some(cert), Some(key)) => Some((ca, Some((cert, key)))),
        (None, None) => Some((ca, None)),
        _ => {
            sink.error_hint(
                table.pos,
                "`client_cert` and `client_key` go together",
                "give both PEM files for mTLS, or neither",
            );
            None
        }
    }
}

/// A list of IP networks (`10.0.0.0/8`, `2001:db8::/32`, or a bare address for one host).
pub(crate) fn networks(sink: &mut Sink, node: &Node, what: &str) -> Vec<ipnet::IpNet> {
    let mut out = Vec::new();
    for item in one_or_many(node) {
        let Some(text) = nonempty_string(sink, item, what) else {
            continue;
        };
        let parsed = text
            .parse::<ipnet::IpNet>()
            .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
        match parsed {
            // Widening `127.0.0.5/8` to 127.0.0.0/8 silently would trust (or allow) a whole
            // network where the writer may have meant one host: say which was meant.
            Ok(net) if net != net.trunc() => sink.error(
                item.pos,
                format!("{text} has host bits set; did you mean {}?", net.trunc()),
            ),
            Ok(net) => out.push(net),
            Err(_) => sink.error_hint(
                item.pos,
                format!("{} is not an IP network", quote(text)),
                "write an address with a prefix length, e.g. 10.0.0.0/8 or 2001:db8::/32, or one address",
            ),
        }
    }
    out
}

/// A duration that must be longer than zero.
pub(crate) fn positive_duration(sink: &mut Sink, node: &Node, what: &str) -> Option<Duration> {
    let d = duration(sink, node, what)?;
    if d.is_zero() {
        sink.error(node.pos, format!("`{what}` must be longer than 0s"));
        return None;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::super::sections::{ORIGIN, TOP};
    use super::super::tree::parse;
    use super::*;

    fn with_root<R>(yaml: &str, f: impl FnOnce(&mut Sink, &Node) -> R) -> (R, Vec<String>) {
        let root = parse(yaml).unwrap_or_else(|e| panic!("{e:?}"));
        let mut sink = Sink::new("t.yaml");
        let r = f(&mut sink, &root);
        let errors = sink.into_errors().0.iter().map(|e| e.to_string()).collect();
        (r, errors)
    }

    #[test]
    fn table_reports_every_unknown_key_with_suggestions() {
        let (count, errors) = with_root(
            "name: a\nupstreams: x\nhots: y\n3: z\nzzz: 1\nlisten: 2\n",
            |sink, root| Table::read(sink, root, &ORIGIN, "origin").map(|t| t.entries.len()),
        );
        assert_eq!(count, Some(1));
        assert_eq!(
            errors,
            [
                "t.yaml:2:1: unknown key `upstreams` in origin; did you mean `upstream`? (expected one of: name, hosts, upstream, tls, mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)",
                "t.yaml:3:1: unknown key `hots` in origin; did you mean `hosts`? (expected one of: name, hosts, upstream, tls, mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)",
                "t.yaml:4:1: keys must be strings, not an integer in origin",
                "t.yaml:5:1: unknown key `zzz` in origin (expected one of: name, hosts, upstream, tls, mode, block, robots, paths, upstream_timeouts, passive_health, health_check, dns_refresh, policy, impostors, crawl_delay, offenders, web_bot_auth, traps, disguised, content_signals, response_signals)",
                "t.yaml:6:1: key `listen` is not allowed in origin (`listen` is set once, at the top level)",
            ]
        );
    }

    #[test]
    fn empty_values_count_as_absent() {
        let (found, errors) = with_root("admin:\nthreads: ~\nlisten: []\n", |sink, root| {
            let t = Table::read(sink, root, &TOP, "config")?;
            Some((
                t.get("admin").is_none(),
                t.get("threads").is_none(),
                t.get("listen").is_some(),
                t.key_pos("admin"),
            ))
        });
        assert_eq!(found, Some((true, true, true, Some(Pos::new(1, 1)))));
        assert!(errors.is_empty());
    }

    #[test]
    fn scalar_type_errors() {
        let yaml = "a: 5\nb: yes\nc: [1]\nd: 30\ne: 1.5\nf: -1\ng: enforcing\nh: 70000\n";
        let (_, errors) = with_root(yaml, |sink, root| {
            let Value::Map(m) = &root.value else { return };
            string(sink, &m[0].1, "name");
            boolean(sink, &m[1].1, "tls");
            string(sink, &m[2].1, "name");
            duration(sink, &m[3].1, "refresh");
            duration(sink, &m[4].1, "refresh");
            size(sink, &m[5].1, "max_size");
            choice(
                sink,
                &m[6].1,
                "mode",
                &[("enforce", 0), ("report", 1), ("off", 2)],
            );
            integer(sink, &m[7].1, "status", 400, 599);
        });
        assert_eq!(
            errors,
            [
                "t.yaml:1:4: `name` must be a string, not an integer (put the value in quotes)",
                "t.yaml:2:4: `tls` must be true or false, not `yes` (write true or false)",
                "t.yaml:3:4: `name` must be a string, not a list",
                "t.yaml:4:4: duration `30` has no unit (write 30s)",
                "t.yaml:5:4: duration `1.5` has a fraction (use a smaller unit, e.g. 1500ms instead of 1.5s)",
                "t.yaml:6:4: `max_size` must not be negative",
                "t.yaml:7:4: unknown `mode` `enforcing`; did you mean `enforce`? (expected one of: enforce, report, off)",
                "t.yaml:8:4: `status` must be between 400 and 599, not 70000",
            ]
        );
    }
}
