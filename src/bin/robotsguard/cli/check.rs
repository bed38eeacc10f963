//! `robotsguard check`: robots.txt verdicts from the command line, for URLs, URL lists and JSON
//! Lines batches. The verdicts, their records and the batch protocol are the engine's
//! (`robotsguard_robots::check`); this module reads the arguments and files, prints, and chooses
//! the exit code.

use std::io::{self, BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use robotsguard::robots::check::{Batch, BatchError, UrlVerdict};
use robotsguard::robots::{path_params_query, MatchMode, Robots, RobotsTxt, Verdict};
use robotsguard::robots::{Preferences, Use};

/// Exit code when every URL is allowed.
pub const EXIT_ALLOWED: u8 = 0;
/// Exit code when some URL is disallowed.
pub const EXIT_DISALLOWED: u8 = 1;
/// Exit code for usage and input errors.
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// robots.txt file to check against (`-` for standard input).
    #[arg(long, value_name = "FILE", required_unless_present = "batch")]
    pub robots: Option<PathBuf>,
    /// Product token of the crawler (e.g. `googlebot`). Repeat for a crawler with several tokens,
    /// most specific first: the first one with a group of its own selects it.
    /// Without --agent and URLs, `--robots FILE` prints the warnings of the file from the
    /// crawler catalogue alone (a search engine refused everywhere, `Disallow: /` for `*`,
    /// lines the engine ignores) and exits 3 when a search engine would lose the site or
    /// everything is refused.
    #[arg(long = "agent", value_name = "TOKEN")]
    pub agents: Vec<String>,
    /// File with one URL or path per line (`-` for standard input); blank lines are skipped.
    #[arg(long, value_name = "FILE", conflicts_with = "batch")]
    pub urls: Option<PathBuf>,
    /// Print only the counts of allowed and disallowed URLs.
    #[arg(long)]
    pub summary: bool,
    /// Print one JSON object per URL instead of text.
    #[arg(long)]
    pub json: bool,
    /// Read JSON Lines `{"robots": "...", "agent": "...", "url": "..."}` (optional `robots_b64`)
    /// from standard input and write one JSON verdict per line, in order.
    #[arg(long, conflicts_with_all = ["robots", "agents", "urls", "summary"])]
    pub batch: bool,
    /// Canonicalise paths and patterns as the proxy does (percent-decoding of unreserved
    /// characters, dot segments, repeated slashes) instead of matching byte for byte like Google.
    #[arg(long)]
    pub normalize: bool,
    /// Bytes of robots.txt to parse (never less than 500 KiB).
    #[arg(long, value_name = "BYTES", default_value_t = robotsguard::robots::DEFAULT_MAX_SIZE)]
    pub max_size: usize,
    /// URLs or paths to check.
    #[arg(value_name = "URL", conflicts_with = "batch")]
    pub url_args: Vec<String>,
}

impl CheckArgs {
    fn mode(&self) -> MatchMode {
        if self.normalize {
            MatchMode::Canonical
        } else {
            MatchMode::Exact
        }
    }
}

pub fn run(args: &CheckArgs) -> ExitCode {
    let result = if args.batch {
        run_batch(
            args,
            io::stdin().lock(),
            &mut BufWriter::new(io::stdout().lock()),
        )
    } else {
        run_urls(args)
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::stdin().lock(), &mut bytes)
            .map_err(|e| format!("cannot read {what} from standard input: {e}"))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| format!("cannot read {what} `{}`: {e}", path.display()))
}

/// Exit code when the file would take the site out of a search engine or refuses everything.
pub const EXIT_WARNED: u8 = 3;

/// `check --robots FILE` alone: the file's warnings from the built-in crawler catalogue.
fn offline_warnings(args: &CheckArgs, robots_path: &Path) -> Result<u8, String> {
    let body = read_input(robots_path, "robots.txt")?;
    robotsguard::preview::body::check_robots(&body).map_err(|e| e.to_string())?;
    let catalogue = robotsguard::crawlers::Catalogue::builtin().map_err(|e| e.to_string())?;
    let warnings = robotsguard::preview::offline_warnings(&body, &catalogue);
    let blocking = warnings.iter().any(|w| {
        w.kind == robotsguard::preview::SEARCH_ENGINE_LOSES_SITE
            || w.kind == robotsguard::preview::REFUSES_EVERYTHING
    });
    let mut out = BufWriter::new(io::stdout().lock());
    let written = if args.json {
        warnings.iter().try_for_each(|warning| {
            serde_json::to_writer(&mut out, warning)?;
            writeln!(out)
        })
    } else if warnings.is_empty() {
        writeln!(
            out,
            "no warning: no search engine refused everywhere, nothing ignored"
        )
    } else {
        warnings.iter().try_for_each(|warning| {
            let crawler = warning
                .crawler
                .as_deref()
                .map(|c| format!(" {c}:"))
                .unwrap_or_default();
            writeln!(
                out,
                "warning: [{}]{crawler} {}",
                warning.kind, warning.message
            )
        })
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot write: {e}"))?;
    Ok(if blocking { EXIT_WARNED } else { EXIT_ALLOWED })
}

fn run_urls(args: &CheckArgs) -> Result<u8, String> {
    let robots_path = args
        .robots
        .as_deref()
        .ok_or("--robots FILE is required (or use --batch)")?;
    if args.agents.is_empty() && args.url_args.is_empty() && args.urls.is_none() {
        return offline_warnings(args, robots_path);
    }
    if args.agents.is_empty() {
        return Err("give the crawler's product token with --agent TOKEN".into());
    }
    if args.url_args.is_empty() && args.urls.is_none() {
        return Err("give URLs to check as arguments or with --urls FILE".into());
    }
    if args.urls.as_deref().is_some_and(|p| p.as_os_str() == "-") && robots_path.as_os_str() == "-"
    {
        return Err("--robots and --urls cannot both read standard input".into());
    }
    let body = read_input(robots_path, "robots.txt")?;
    let robots = Robots::compile(
        &RobotsTxt::parse_with_limit(&body, args.max_size),
        args.mode(),
    );
    let agents: Vec<&str> = args.agents.iter().map(String::as_str).collect();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut tally = Tally::default();
    let mut check = |url: &[u8], out: &mut dyn Write| -> io::Result<()> {
        let path = path_params_query(url);
        let verdict = robots.verdict(&agents, &path);
        tally.count(verdict.allowed);
        if args.summary {
            return Ok(());
        }
        let preferences = robots.preferences(&verdict, &path);
        if args.json {
            let record = UrlVerdict::new(url, &path, &verdict);
            if preferences.is_empty() {
                serde_json::to_writer(&mut *out, &record)?;
            } else {
                let mut value = serde_json::to_value(&record)?;
                if let Some(object) = value.as_object_mut() {
                    object.insert("preferences".into(), preferences_json(&preferences));
                }
                serde_json::to_writer(&mut *out, &value)?;
            }
            writeln!(out)
        } else {
            writeln!(out, "{}", describe(&path, &verdict))?;
            for line in preferences.lines() {
                writeln!(
                    out,
                    "            preference  line {}: {}",
                    line.line,
                    line.display()
                )?;
            }
            Ok(())
        }
    };
    let write_error = |e: io::Error| format!("cannot write output: {e}");
    for url in &args.url_args {
        check(url.as_bytes(), &mut out).map_err(write_error)?;
    }
    if let Some(list) = &args.urls {
        let mut reader: Box<dyn BufRead> = if list.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            let file = std::fs::File::open(list)
                .map_err(|e| format!("cannot read URL list `{}`: {e}", list.display()))?;
            Box::new(io::BufReader::new(file))
        };
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("cannot read URL list: {e}"))?;
            if read == 0 {
                break;
            }
            let url = line.trim_ascii();
            if !url.is_empty() {
                check(url, &mut out).map_err(write_error)?;
            }
        }
    }
    if args.summary {
        if args.json {
            serde_json::to_writer(&mut out, &tally).map_err(|e| e.to_string())?;
            writeln!(out).map_err(write_error)?;
        } else {
            writeln!(
                out,
                "checked {}: {} allowed, {} disallowed",
                tally.checked, tally.allowed, tally.disallowed
            )
            .map_err(write_error)?;
        }
    }
    out.flush().map_err(write_error)?;
    Ok(if tally.disallowed > 0 {
        EXIT_DISALLOWED
    } else {
        EXIT_ALLOWED
    })
}

#[derive(Debug, Default, Serialize)]
struct Tally {
    checked: u64,
    allowed: u64,
    disallowed: u64,
}

impl Tally {
    fn count(&mut self, allowed: bool) {
        self.checked += 1;
        if allowed {
            self.allowed += 1;
        } else {
            self.disallowed += 1;
        }
    }
}

/// The preferences that apply to a URL, for `--json`: each use's statement (`true` yes, `false`
/// no, `null` none) with the line that made it, and every applicable line.
fn preferences_json(preferences: &Preferences<'_>) -> serde_json::Value {
    let statement = |category: Use| match preferences.statement(category) {
        Some(s) => serde_json::json!({"allowed": s.allowed, "line": s.line.line}),
        None => serde_json::Value::Null,
    };
    let lines: Vec<serde_json::Value> = preferences
        .lines()
        .map(|line| {
            serde_json::json!({
                "line": line.line,
                "text": line.display(),
                "path": line.path,
            })
        })
        .collect();
    serde_json::json!({
        "search": statement(Use::Search),
        "ai_input": statement(Use::AiInput),
        "train_ai": statement(Use::TrainAi),
        "lines": lines,
    })
}

/// `disallowed  /private/x  (line 7: Disallow: /private)`
pub fn describe(path: &[u8], verdict: &Verdict<'_>) -> String {
    let word = if verdict.allowed {
        "allowed"
    } else {
        "disallowed"
    };
    let reason = match verdict.rule {
        Some(rule) => format!("line {}: {}: {}", rule.line, rule.directive, rule.pattern),
        None => "no matching rule".to_string(),
    };
    format!("{word:<11} {}  ({reason})", String::from_utf8_lossy(path))
}

/// Runs a batch; exits 0 once every line has an answer (verdicts are data, not failures).
fn run_batch(args: &CheckArgs, input: impl BufRead, out: &mut impl Write) -> Result<u8, String> {
    Batch::new(args.mode(), args.max_size)
        .run(input, out)
        .map_err(|e| match e {
            BatchError::Read(e) => format!("cannot read standard input: {e}"),
            e => e.to_string(),
        })?;
    Ok(EXIT_ALLOWED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: CheckArgs,
    }

    fn batch(input: &str, extra: &[&str]) -> Vec<serde_json::Value> {
        let mut argv = vec!["check", "--batch"];
        argv.extend_from_slice(extra);
        let wrapper = Wrapper::parse_from(argv);
        let mut out = Vec::new();
        let code = run_batch(&wrapper.args, input.as_bytes(), &mut out);
        assert_eq!(code, Ok(EXIT_ALLOWED));
        String::from_utf8_lossy(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null))
            .collect()
    }

    #[test]
    fn batch_normalize_switches_to_canonical_matching() {
        let input =
            r#"{"robots": "User-agent: *\nDisallow: /private", "agent": "a", "url": "/%70rivate"}"#;
        assert_eq!(batch(input, &[])[0]["allowed"], true);
        assert_eq!(batch(input, &["--normalize"])[0]["allowed"], false);
    }

    #[test]
    fn describes_verdicts_with_their_rule() {
        let robots = Robots::parse(b"User-agent: *\n\nDisallow: /private\n");
        let verdict = robots.verdict(&["x"], b"/private/x");
        assert_eq!(
            describe(b"/private/x", &verdict),
            "disallowed  /private/x  (line 3: Disallow: /private)"
        );
        let verdict = robots.verdict(&["x"], b"/open");
        assert_eq!(
            describe(b"/open", &verdict),
            "allowed     /open  (no matching rule)"
        );
    }
}
