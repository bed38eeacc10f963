//! The documentation's generated files equal their generators' output, every config example in
//! the README and the book passes `robotsguard validate --config-only`, and every `robotsguard …`
//! command line in them names a real subcommand and real flags.

use std::path::{Path, PathBuf};
use std::process::Command;

const REGENERATE: &str = "regenerate with scripts/gen-docs.sh";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn robotsguard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .args(args)
        .output()
        .expect("robotsguard runs")
}

fn generated(args: &[&str], file: &str) {
    let out = robotsguard(args);
    assert!(out.status.success(), "robotsguard {args:?} failed");
    let want = String::from_utf8(out.stdout).expect("UTF-8 output");
    let have = std::fs::read_to_string(root().join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}; {REGENERATE}"));
    if have != want {
        let first = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "{file} differs from `robotsguard {}` (first at line {}); {REGENERATE}",
            args.join(" "),
            first + 1
        );
    }
}

#[test]
fn config_schema_file_is_the_generators_output() {
    generated(&["config", "schema"], "config/robotsguard.schema.json");
}

#[test]
fn config_reference_page_is_the_generators_output() {
    generated(
        &["config", "reference"],
        "docs/src/reference/configuration.md",
    );
}

#[test]
fn metrics_reference_page_is_the_generators_output() {
    generated(&["metrics"], "docs/src/reference/metrics.md");
}

/// README.md, the chart's README and every page of the book.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![
        root().join("README.md"),
        root().join("helm/robotsguard/README.md"),
    ];
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/src readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Fenced code blocks: (info string, first line number, text).
fn blocks(text: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((info.trim().to_owned(), n + 2, String::new()));
                }
            }
            Some((_, _, body)) => {
                if trimmed.starts_with("```") {
                    out.extend(open.take());
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    out
}

/// Strips the indentation every line of a block shares (a block inside a list item).
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or("").to_owned() + "\n")
        .collect()
}

/// A YAML block is a whole robotsguard config when it has `origins:` at the top level, or
/// when its info string says so (```` ```yaml robotsguard ````); a fragment (a `defaults:` or
/// `verify:` excerpt) gets a minimal origin added so its keys are still checked.
fn as_config(info: &str, body: &str) -> Option<String> {
    let words: Vec<&str> = info.split([' ', ',']).collect();
    if words.first() != Some(&"yaml") || words.contains(&"not-config") {
        return None;
    }
    const TOP: [&str; 14] = [
        "listen:",
        "admin:",
        "threads:",
        "shutdown:",
        "limits:",
        "trusted_proxies:",
        "access_log:",
        "defaults:",
        "crawlers:",
        "origins:",
        "verify:",
        "state:",
        "reports:",
        "decision:",
    ];
    let top_keys: Vec<&str> = body
        .lines()
        .filter(|l| !l.starts_with([' ', '#', '-']) && !l.trim().is_empty())
        .collect();
    // A Helm values file: its `config:` is a robotsguard config, indented.
    if top_keys.iter().any(|l| l.starts_with("config:")) {
        let inner: String = body
            .lines()
            .skip_while(|l| !l.starts_with("config:"))
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with([' ', '#']))
            .map(|l| format!("{l}\n"))
            .collect();
        return as_config("yaml robotsguard", &dedent(&inner));
    }
    let marked = words.contains(&"robotsguard");
    if !marked
        && (top_keys.is_empty()
            || !top_keys
                .iter()
                .all(|l| TOP.iter().any(|k| l.starts_with(k))))
    {
        return None;
    }
    if top_keys.iter().any(|l| l.starts_with("origins:")) {
        Some(body.to_owned())
    } else {
        Some(format!(
            "{body}origins: [{{name: docs, hosts: [docs.example], upstream: \"127.0.0.1:9\", robots: {{source: inline, text: \"\"}}}}]\n"
        ))
    }
}

#[test]
fn every_config_example_in_the_docs_validates() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("a doc file is readable");
        let name = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (info, line, body) in blocks(&text) {
            let Some(config) = as_config(&info, &dedent(&body)) else {
                continue;
            };
            let path = dir.path().join(format!("example-{checked}.yaml"));
            std::fs::write(&path, &config).expect("a temporary file is writable");
            checked += 1;
            let out = robotsguard(&["validate", "--config-only", "--config", path_str(&path)]);
            if !out.status.success() {
                failures.push(format!(
                    "{name}:{line}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(checked >= 3, "only {checked} config examples found");
    assert!(
        failures.is_empty(),
        "config examples that do not validate (mark a block that is not a config ```yaml not-config):\n{}",
        failures.join("\n")
    );
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// A subcommand, its long flags and its own subcommands (`config schema`).
#[derive(Debug)]
struct Subcommand {
    name: String,
    flags: Vec<String>,
    subs: Vec<String>,
}

/// The subcommands and their long flags, read from `robotsguard --help`.
fn cli_surface() -> Vec<Subcommand> {
    let help = String::from_utf8(robotsguard(&["--help"]).stdout).expect("UTF-8 help");
    let mut commands = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
            else {
                break;
            };
            if name != "help" {
                commands.push(name.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    for command in commands {
        let mut flags = long_flags(&[command.as_str(), "--help"]);
        flags.extend(long_flags(&["--help"]));
        // `config schema` and `config reference`: subcommands of a subcommand.
        let sub_help = String::from_utf8(robotsguard(&[command.as_str(), "--help"]).stdout)
            .unwrap_or_default();
        let mut subs = Vec::new();
        if let Some(list) = sub_help.split("\nCommands:\n").nth(1) {
            for line in list.lines() {
                match line
                    .strip_prefix("  ")
                    .and_then(|l| l.split_whitespace().next())
                {
                    Some(sub) if sub != "help" => subs.push(sub.to_owned()),
                    _ => break,
                }
            }
        }
        // The flags of `evidence verify` and `evidence bundle` are their own.
        for sub in &subs {
            flags.extend(long_flags(&[command.as_str(), sub.as_str(), "--help"]));
        }
        flags.sort();
        flags.dedup();
        out.push(Subcommand {
            name: command,
            flags,
            subs,
        });
    }
    out
}

fn long_flags(args: &[&str]) -> Vec<String> {
    let help = String::from_utf8(robotsguard(args).stdout).unwrap_or_default();
    help.split_whitespace()
        .filter_map(|word| word.strip_prefix("--"))
        .map(|flag| {
            flag.trim_end_matches([',', '.', ')'])
                .split(['=', '[', '<'])
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .filter(|f| !f.is_empty())
        .map(|f| format!("--{f}"))
        .collect()
}

/// Command lines that run robotsguard: lines of shell blocks, and inline code spans of prose
/// that start with `robotsguard ` (`robotsguard validate --config FILE`). (line number, text)
fn command_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (info, line, body) in blocks(text) {
        if matches!(info.as_str(), "sh" | "console" | "bash" | "shell") {
            for (offset, command) in body.lines().enumerate() {
                out.push((line + offset, command.to_owned()));
            }
        }
    }
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("robotsguard ") {
                out.push((n + 1, span.to_owned()));
            }
        }
    }
    out
}

#[test]
fn every_robotsguard_command_line_in_the_docs_is_real() {
    let surface = cli_surface();
    assert!(surface.len() >= 7, "subcommands found: {surface:?}");
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("a doc file is readable");
        let name = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, command) in command_lines(&text) {
            let command = command.trim_start().trim_start_matches("$ ");
            // `robotsguard …` and `target/release/robotsguard …` name the binary; so does
            // `kubectl exec … -- robotsguard …`.
            let words: Vec<&str> = command.split_whitespace().collect();
            let Some(at) = words
                .iter()
                .position(|w| *w == "robotsguard" || w.ends_with("/robotsguard"))
            else {
                continue;
            };
            if at > 0 && !words[..at].contains(&"--") && !words[at - 1].ends_with('=') {
                // An argument of another tool (`helm install robotsguard …`, `docker run …`).
                continue;
            }
            let rest = &words[at + 1..];
            let Some(sub) = rest.first() else { continue };
            if sub.starts_with(|c: char| c.is_ascii_digit()) {
                continue; // `robotsguard 0.2.0 (commit …)`: what --version prints
            }
            if sub.starts_with("--") {
                if !matches!(*sub, "--version" | "--help" | "--log-format") {
                    failures.push(format!("{name}:{line}: unknown flag {sub}"));
                }
                continue;
            }
            checked += 1;
            let Some(known) = surface.iter().find(|c| c.name == *sub) else {
                failures.push(format!("{name}:{line}: no subcommand `{sub}`"));
                continue;
            };
            if !known.subs.is_empty() {
                let next = rest.get(1).copied().unwrap_or("");
                if !known.subs.iter().any(|s| s == next) {
                    failures.push(format!(
                        "{name}:{line}: `robotsguard {sub}` has no subcommand `{next}`"
                    ));
                }
            }
            let flags = &known.flags;
            for word in rest.iter().skip(1) {
                if word.starts_with('#') || matches!(*word, "|" | "&&" | ">" | ";" | "/") {
                    break;
                }
                let word = word.trim_start_matches(['[', '(']);
                if let Some(flag) = word.strip_prefix("--") {
                    let flag = flag.split(['=', ']', ')', ',', '`']).next().unwrap_or("");
                    let flag = format!("--{flag}");
                    if !flags.contains(&flag) {
                        failures.push(format!(
                            "{name}:{line}: `robotsguard {sub}` has no flag {flag}"
                        ));
                    }
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} command lines found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The text between `<!-- marker ... -->` and `<!-- /marker -->` in `file`, each occurrence.
fn marked(file: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let open = format!("<!-- {marker}");
    let close = format!("<!-- /{marker} -->");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find(&open) {
        let after = &rest[start..];
        let Some(end_of_open) = after.find("-->") else {
            break;
        };
        let inner = &after[end_of_open + 3..];
        let end = inner
            .find(&close)
            .unwrap_or_else(|| panic!("{file}: `{open}` is not closed"));
        out.push(inner[..end].to_string());
        rest = &inner[end..];
    }
    out
}

#[test]
fn every_list_of_restart_only_settings_is_the_configs_own() {
    let markdown = robotsguard::config::restart_only_list(true);
    for page in ["docs/src/operations/reload.md", "docs/src/kubernetes.md"] {
        let lists = marked(page, "restart-only");
        assert_eq!(
            lists.len(),
            1,
            "{page} has no restart-only list; {REGENERATE}"
        );
        assert_eq!(lists[0], markdown, "{page}; {REGENERATE}");
    }
    let plain = robotsguard::config::restart_only_list(false);
    for file in ["helm/robotsguard/values.yaml", "helm/robotsguard/README.md"] {
        let text = std::fs::read_to_string(root().join(file)).expect("chart file readable");
        assert!(
            text.contains(&format!("apply only on restart ({plain})")),
            "the RobotsguardRestartRequired alert in {file} names other settings; {REGENERATE}"
        );
    }
    // The reference page says the list too (it is generated: see above), and so does the
    // metric's note.
    let reference = robotsguard::config::reference::markdown();
    assert!(reference.contains(&markdown));
    let metrics = robotsguard::metrics_reference::reference_markdown();
    assert!(metrics.contains(&markdown));
}

#[test]
fn decision_words_are_the_outcomes_and_every_list_of_them_is_whole() {
    use robotsguard::enforce::Outcome;
    use robotsguard::metrics::{ACCESS_LOG_ONLY, DECISIONS, METRICS};
    let words: Vec<&str> = DECISIONS.iter().map(|(word, _)| *word).collect();
    let mut want: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
    want.extend(["error", "unrouted"]);
    assert_eq!(
        words, want,
        "metrics::DECISIONS and enforce::Outcome::ALL disagree"
    );
    // The metric's help names every word it is counted with.
    use prometheus::core::Collector as _;
    let help = METRICS
        .requests
        .desc()
        .first()
        .map(|desc| desc.help.clone())
        .unwrap_or_default();
    let counted: Vec<&str> = words
        .iter()
        .copied()
        .filter(|word| !ACCESS_LOG_ONLY.contains(word))
        .collect();
    assert!(
        help.contains(&format!("({}).", counted.join(", "))),
        "{help}"
    );
    assert!(!help.contains("unrouted"), "{help}");
    // The logs page lists them all, as the metrics reference does.
    let listed = marked("docs/src/operations/logs.md", "decisions");
    assert_eq!(listed.len(), 1, "{REGENERATE}");
    assert_eq!(
        listed[0],
        robotsguard::metrics_reference::decisions_markdown(true),
        "{REGENERATE}"
    );
}

#[test]
fn every_script_the_docs_and_deployments_name_exists() {
    let mut files = doc_files();
    let mut dirs = vec![
        root().join("deploy"),
        root().join("helm"),
        root().join("scripts"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("directory readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.push(root().join(".ci/run"));
    files.push(root().join("Dockerfile"));
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (at, _) in text.match_indices("scripts/") {
            // A path of this repository: `scripts/` not inside a longer path or word.
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '/' | '_' | '-' | '.')) {
                continue;
            }
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'))
                .collect();
            let name = name.trim_end_matches('.');
            if name == "scripts/" || !name.contains('.') && !name.ends_with("cmake") {
                continue;
            }
            if !root().join(name).exists() {
                missing.push(format!("{}: {name}", path_str(&file)));
            }
        }
    }
    assert!(missing.is_empty(), "named but missing: {missing:#?}");
}

/// The image's `org.opencontainers.image.source` label (scripts/source-url.sh) is a web address
/// without credentials, or nothing: never the path a local clone's `origin` is.
#[test]
fn the_image_source_label_is_a_web_address_or_nothing() {
    for (remote, want) in [
        (
            "https://github.com/example/robotsguard.git",
            "https://github.com/example/robotsguard",
        ),
        (
            "git@github.com:example/robotsguard.git",
            "https://github.com/example/robotsguard",
        ),
        (
            "ssh://git@git.example/team/robotsguard",
            "https://git.example/team/robotsguard",
        ),
        (
            "https://ci:secret-token@git.example/team/robotsguard",
            "https://git.example/team/robotsguard",
        ),
        ("/work/main", ""),
        ("../robotsguard", ""),
        ("file:///srv/git/robotsguard", ""),
    ] {
        let output = Command::new("sh")
            .arg(root().join("scripts/source-url.sh"))
            .env("ROBOTSGUARD_SOURCE", remote)
            .current_dir(root())
            .output()
            .expect("sh runs");
        assert!(output.status.success(), "{remote}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            want,
            "{remote}"
        );
    }
}
