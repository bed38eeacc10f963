//! The config file documented key by key, generated from the key rows in `sections/` (the
//! same rows the reader checks keys against; the words a key accepts are the reader's own
//! tables, restart-only from the rows' marks): `robotsguard config schema` (a JSON
//! Schema, draft 2020-12, for editors) and `robotsguard config reference` (the book's
//! reference page).

use serde_json::{json, Map, Value};

use super::sections::{join_path as join, section_paths, Section, Ty, ALL as SECTIONS, TOP};

/// Whether a key at `path` keeps its running value until a restart.
fn restart_only(path: &str) -> bool {
    let path = path.replace("[]", "");
    super::restart_only_names().iter().any(|name| {
        path == *name
            || path
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Whether some key below `path` is restart-only (`limits` holds `limits.max_connections`).
fn restart_only_within(path: &str) -> bool {
    let prefix = format!("{}.", path.replace("[]", ""));
    super::restart_only_names()
        .iter()
        .any(|name| name.starts_with(&prefix))
}

fn literal_default(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then_some(inner)
}

fn ty_schema(ty: &Ty) -> Value {
    match ty {
        Ty::Str | Ty::Path => json!({"type": "string"}),
        Ty::Url => json!({"type": "string", "pattern": "^https?://"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        Ty::Duration => json!({
            "type": "string",
            "pattern": "^(?=[0-9])([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$",
        }),
        Ty::Size => json!({"anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": "^[0-9]+ ?([bB]|[kKmMgG][iI]?[bB])?$"},
        ]}),
        Ty::Words(words) => {
            let words = words();
            let mut allowed: Vec<Value> = words.iter().map(|w| json!(w)).collect();
            // The reader reads a YAML 1.1 boolean as the word it spells (`off` → false).
            if words.iter().any(|w| matches!(*w, "off" | "no")) {
                allowed.push(json!(false));
            }
            if words.iter().any(|w| matches!(*w, "on" | "yes")) {
                allowed.push(json!(true));
            }
            json!({"enum": allowed})
        }
        Ty::Address => {
            json!({"type": "string", "pattern": "^(\\[[0-9A-Fa-f:.]+\\]|[0-9.]+):[0-9]+$"})
        }
        Ty::HostPort => json!({"type": "string", "minLength": 1}),
        Ty::Network => json!({"type": "string", "pattern": "^[0-9A-Fa-f:.]+(/[0-9]+)?$"}),
        Ty::Section(s) => json!({"$ref": format!("#/$defs/{}", s.id)}),
        Ty::List(inner) => json!({"type": "array", "items": ty_schema(inner)}),
        Ty::OneOrList(inner) => {
            let one = ty_schema(inner);
            json!({"anyOf": [one.clone(), {"type": "array", "items": one}]})
        }
        Ty::AnyOf(options) => json!({"anyOf": options.iter().map(ty_schema).collect::<Vec<_>>()}),
        Ty::MapOf { keys, value } => {
            let mut out =
                json!({"type": ["object", "null"], "additionalProperties": ty_schema(value)});
            if let Some(keys) = keys {
                out["propertyNames"] = json!({"enum": keys()});
            }
            out
        }
    }
}

/// The config file's JSON Schema (draft 2020-12), pretty-printed with a final newline.
pub fn json_schema() -> String {
    let paths = section_paths();
    let mut defs = Map::new();
    for section in SECTIONS.iter().filter(|s| s.id != TOP.id) {
        defs.insert(section.id.to_owned(), section_schema(section, &paths));
    }
    let mut root = section_schema(&TOP, &paths);
    let top = root
        .as_object_mut()
        .expect("a section's schema is an object");
    let mut head = Map::new();
    head.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    head.insert("title".into(), json!("robotsguard configuration"));
    head.append(top);
    head.insert("$defs".into(), Value::Object(defs));
    let mut text =
        serde_json::to_string_pretty(&Value::Object(head)).expect("a JSON value always serializes");
    text.push('\n');
    text
}

fn section_schema(section: &Section, paths: &[(&str, Vec<String>)]) -> Value {
    let where_ = paths
        .iter()
        .find(|(id, _)| *id == section.id)
        .map(|(_, p)| p.clone())
        .unwrap_or_default();
    let mut properties = Map::new();
    for key in section.keys {
        let mut schema = ty_schema(&key.ty);
        let full: Vec<String> = where_.iter().map(|p| join(p, key.name)).collect();
        let mut description = key.doc.to_owned();
        if !key.default.is_empty() {
            description.push_str(&format!(" Default: {}.", key.default));
        }
        if full.iter().any(|p| restart_only(p)) {
            description.push_str(" Restart-only: a reload keeps the running value.");
        }
        let obj = schema.as_object_mut().expect("a key's schema is an object");
        obj.insert("description".into(), json!(description));
        if let Some(value) = literal_default(key.default) {
            if let Some(typed) = typed_default(&key.ty, value) {
                obj.insert("default".into(), typed);
            }
        }
        properties.insert(key.name.to_owned(), schema);
    }
    let required: Vec<&str> = section
        .keys
        .iter()
        .filter(|k| k.required)
        .map(|k| k.name)
        .collect();
    let mut out = json!({
        "type": ["object", "null"],
        "title": section.title,
        "additionalProperties": false,
        "properties": properties,
    });
    if !section.doc.is_empty() {
        out["description"] = json!(section.doc);
    }
    if !required.is_empty() {
        out["required"] = json!(required);
    }
    out
}

fn typed_default(ty: &Ty, value: &str) -> Option<Value> {
    match ty {
        Ty::Bool => value.parse::<bool>().ok().map(Value::Bool),
        Ty::Int { .. } => value.parse::<i64>().ok().map(|n| json!(n)),
        Ty::Duration | Ty::Size | Ty::Words(_) | Ty::Str | Ty::Address => Some(json!(value)),
        _ => None,
    }
}

fn ty_words(ty: &Ty) -> String {
    match ty {
        Ty::Str => "string".into(),
        Ty::Path => "file path".into(),
        Ty::Url => "URL".into(),
        Ty::Bool => "boolean".into(),
        Ty::Int { min, max } => format!("integer {min}–{max}"),
        Ty::Duration => "duration".into(),
        Ty::Size => "size".into(),
        Ty::Words(words) => words()
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(" \\| "),
        Ty::Address => "`IP:PORT`".into(),
        Ty::HostPort => "`host:port`".into(),
        Ty::Network => "CIDR or address".into(),
        Ty::Section(s) => format!("[mapping](#{})", s.id.replace('_', "-")),
        Ty::List(inner) => format!("list of {}", ty_words(inner)),
        Ty::OneOrList(inner) => format!("{} or a list", ty_words(inner)),
        Ty::AnyOf(options) => options
            .iter()
            .map(ty_words)
            .collect::<Vec<_>>()
            .join(" or "),
        Ty::MapOf { keys, value } => match keys {
            Some(keys) => format!(
                "mapping of {} → {}",
                keys()
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                ty_words(value)
            ),
            None => format!("mapping of names → {}", ty_words(value)),
        },
    }
}

/// The Markdown reference of every key (the book's `reference/configuration.md`).
pub fn markdown() -> String {
    let paths = section_paths();
    let mut out = format!(
        "<!-- Generated by `robotsguard config reference` from src/config/reference.rs: do not edit; \
         run scripts/gen-docs.sh. -->\n\n# Configuration reference\n\n\
         Every key of the config file. Durations are strings such as `250ms`, `30s`, `5m`, `24h`, `1d`, \
         `1m30s`; sizes are bytes or `500KiB`, `1MiB`. A key written with an empty value (`key:`) takes \
         its default. Unknown keys are errors. **Live** keys take effect on a reload; \
         **restart** keys keep their running value until the process restarts (the log and \
         `robotsguard_config_restart_required` say so).\n\n\
         The restart-only settings, with every key below them: {}.\n\n\
         Editors complete and check the file with the JSON Schema `config/robotsguard.schema.json` \
         (`robotsguard config schema`): start the file with\n\n\
         ```yaml\n# yaml-language-server: $schema=../config/robotsguard.schema.json\n```\n\n\
         (a path relative to the config file, or a URL where you serve the schema).\n",
        super::restart_only_list(true)
    );
    for section in SECTIONS {
        let where_ = paths
            .iter()
            .find(|(id, _)| *id == section.id)
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        out.push_str(&format!(
            "\n<a id=\"{}\"></a>\n\n## {}\n\n",
            section.id.replace('_', "-"),
            section.title
        ));
        let shown: Vec<String> = where_
            .iter()
            .map(|p| {
                if p.is_empty() {
                    "the top of the file".to_owned()
                } else {
                    format!("`{p}`")
                }
            })
            .collect();
        out.push_str(&format!("At {}.", shown.join(", ")));
        if !section.doc.is_empty() {
            out.push(' ');
            out.push_str(section.doc);
        }
        out.push_str(
            "\n\n| key | type | default | reload | meaning |\n| --- | --- | --- | --- | --- |\n",
        );
        for key in section.keys {
            let paths: Vec<String> = where_.iter().map(|p| join(p, key.name)).collect();
            let reload = if paths.iter().any(|p| restart_only(p)) {
                "restart"
            } else if paths.iter().any(|p| restart_only_within(p)) {
                "per key"
            } else {
                "live"
            };
            let default = if key.required {
                "required".to_owned()
            } else if key.default.is_empty() {
                "—".to_owned()
            } else {
                key.default.to_owned()
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                key.name,
                ty_words(&key.ty),
                default,
                reload,
                key.doc.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_is_reachable_from_the_top() {
        for (id, paths) in section_paths() {
            assert!(!paths.is_empty(), "section {id} is referenced by no key");
        }
    }

    #[test]
    fn restart_only_follows_the_reload_list() {
        assert!(restart_only("listen"));
        assert!(restart_only("state.redis.url"));
        assert!(restart_only("limits.max_connections"));
        assert!(!restart_only("limits.header_timeout"));
        assert!(!restart_only("origins[].mode"));
        assert!(!restart_only("listener"));
    }

    #[test]
    fn the_schema_lists_every_key_of_every_section() {
        let schema: Value = serde_json::from_str(&json_schema()).unwrap();
        for doc in SECTIONS {
            let props = if doc.id == TOP.id {
                &schema["properties"]
            } else {
                &schema["$defs"][doc.id]["properties"]
            };
            let mut keys: Vec<&str> = props
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut want = doc.names();
            keys.sort_unstable();
            want.sort_unstable();
            assert_eq!(keys, want, "schema of {}", doc.id);
        }
    }

    /// A config document built by path, written as YAML flow (`{a: {b: 1}}`); leaves are
    /// written as given.
    enum Doc {
        Map(Vec<(String, Doc)>),
        List(Vec<Doc>),
        Raw(String),
    }

    impl Doc {
        /// The mapping at `path` (`origins[].block`), created empty where missing.
        fn at(&mut self, path: &str) -> &mut Vec<(String, Doc)> {
            let mut here = self;
            for segment in path.split('.').filter(|s| !s.is_empty()) {
                let (name, item) = match segment.strip_suffix("[]") {
                    Some(name) => (name, true),
                    None => (segment, false),
                };
                let Doc::Map(entries) = here else {
                    panic!("{path}: not a mapping")
                };
                let index = match entries.iter().position(|(k, _)| k == name) {
                    Some(index) => index,
                    None => {
                        let fresh = if item {
                            Doc::List(vec![Doc::Map(Vec::new())])
                        } else {
                            Doc::Map(Vec::new())
                        };
                        entries.push((name.to_owned(), fresh));
                        entries.len() - 1
                    }
                };
                here = match &mut entries[index].1 {
                    Doc::List(items) => &mut items[0],
                    other => other,
                };
            }
            match here {
                Doc::Map(entries) => entries,
                _ => panic!("{path}: not a mapping"),
            }
        }

        fn set(&mut self, path: &str, key: &str, raw: &str) {
            self.at(path)
                .push((key.to_owned(), Doc::Raw(raw.to_owned())));
        }

        fn yaml(&self) -> String {
            match self {
                Doc::Map(entries) => format!(
                    "{{{}}}",
                    entries
                        .iter()
                        .map(|(k, v)| format!("{k}: {}", v.yaml()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Doc::List(items) => format!(
                    "[{}]",
                    items.iter().map(Doc::yaml).collect::<Vec<_>>().join(", ")
                ),
                Doc::Raw(raw) => raw.clone(),
            }
        }
    }

    /// A documented default as YAML: numbers, booleans and flow collections as written,
    /// anything else quoted (`robotsguard:` would otherwise start a mapping).
    fn as_yaml(text: &str) -> String {
        let plain = text.parse::<i64>().is_ok()
            || matches!(text, "true" | "false")
            || text.starts_with('{')
            || text.starts_with('[');
        if plain {
            text.to_owned()
        } else {
            format!("{text:?}")
        }
    }

    /// What a section needs besides the key under test to be read at all (a Redis section
    /// needs the Redis backend and a URL).
    fn seed(doc: &mut Doc, path: &str) {
        doc.set("origins[]", "name", "shop");
        doc.set("origins[]", "hosts", "[shop.example]");
        doc.set("origins[]", "upstream", "\"127.0.0.1:8081\"");
        if path.starts_with("state.redis") {
            doc.set("state", "backend", "redis");
            if !path.starts_with("state.redis.sentinel") && !path.starts_with("state.redis.cluster")
            {
                doc.set("state.redis", "url", "\"rediss://127.0.0.1:6380\"");
            }
        }
        if path.ends_with("health_check") {
            doc.set(path, "path", "/healthz");
        }
        if path == "admin" {
            doc.set(path, "address", "\"127.0.0.1:9090\"");
        }
        if path == "state.redis.sentinel" {
            doc.set(path, "master", "main");
            doc.set(path, "nodes", "[\"127.0.0.1:26379\"]");
        }
        if path == "state.redis.cluster" {
            doc.set(path, "nodes", "[\"127.0.0.1:7000\"]");
        }
        if path == "decision" {
            doc.set(path, "listen", "[\"127.0.0.1:8082\"]");
        }
    }

    /// Every default the reference shows as a value (`` `5m` ``) is what the reader produces
    /// when the key is left out: writing the default changes nothing. Sections reached only
    /// through a list other than `origins` (listeners, extra crawlers, feeds, agents) or a map
    /// of free names are checked by their own tests; their keys are mostly required.
    #[test]
    fn every_shown_default_is_what_the_reader_produces() {
        let load = |yaml: &str| {
            super::super::load_str(
                yaml,
                "defaults.yaml",
                std::path::Path::new("/etc/robotsguard"),
            )
        };
        let mut checked = 0;
        let mut problems = Vec::new();
        for (id, paths) in section_paths() {
            let section = SECTIONS
                .iter()
                .find(|s| s.id == id)
                .unwrap_or_else(|| unreachable!());
            for path in paths {
                let reachable =
                    !path.contains(".*") && path.replace("origins[]", "").find("[]").is_none();
                if !reachable {
                    continue;
                }
                let mut base = Doc::Map(Vec::new());
                seed(&mut base, &path);
                base.at(&path);
                let empty = match load(&base.yaml()) {
                    Ok(config) => config,
                    Err(e) => {
                        problems.push(format!(
                            "`{path}` left empty is refused: {e}\n  {}",
                            base.yaml()
                        ));
                        continue;
                    }
                };
                for key in section.keys {
                    let Some(default) = literal_default(key.default) else {
                        continue;
                    };
                    let mut written = Doc::Map(Vec::new());
                    seed(&mut written, &path);
                    written.set(&path, key.name, &as_yaml(default));
                    let yaml = written.yaml();
                    match load(&yaml) {
                        Ok(config) if config == empty => {}
                        Ok(_) => problems.push(format!(
                            "`{}` written as its documented default `{default}` reads \
                             differently from leaving it out:\n  {yaml}",
                            join(&path, key.name)
                        )),
                        Err(e) => problems.push(format!(
                            "`{}` written as its documented default `{default}` is refused: \
                             {e}\n  {yaml}",
                            join(&path, key.name)
                        )),
                    }
                    checked += 1;
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(checked > 80, "only {checked} defaults were checked");
    }
}
