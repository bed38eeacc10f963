//! `robotsguard evidence verify` and `robotsguard evidence bundle`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use robotsguard::evidence::{bundle, check, export, key};

/// What `robotsguard evidence` does.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Check evidence records: every signature, each replica's hash chain (gaps counted), each
    /// rule line against the stored robots.txt copy and the engine's verdict on it. Exit 0 when
    /// all check out, 1 naming each record that does not, 2 when the input cannot be read.
    Verify {
        /// The records (JSON Lines): a record file, an export of `GET /evidence`, a bundle's
        /// evidence.jsonl.
        file: PathBuf,
        /// The public key: a JWK file (`GET /evidence/key`) or a PEM public key; default
        /// `key.jwk` beside FILE.
        #[arg(long, value_name = "JWK|PEM")]
        key: Option<PathBuf>,
        /// The stored robots.txt copies (`<sha256>` files); default `robots/` beside FILE.
        #[arg(long, value_name = "DIR")]
        robots_dir: Option<PathBuf>,
        /// Fail on gaps in a chain too (records left out between two that are there).
        #[arg(long)]
        complete: bool,
    },
    /// Pack the records of an origin and a crawler since a time, the robots.txt copies they
    /// refer to, the public key and a README on checking them into a .tar.gz.
    Bundle {
        /// The origin's name.
        #[arg(long, value_name = "NAME")]
        origin: String,
        /// The crawler's name.
        #[arg(long, value_name = "NAME")]
        crawler: String,
        /// From this time: RFC 3339 (2026-05-01T00:00:00Z) or a duration before now (7d).
        #[arg(long, value_name = "T")]
        since: String,
        /// Until this time (excluded); default now.
        #[arg(long, value_name = "T")]
        until: Option<String>,
        /// Where the evidence is: the config's `evidence.dir` (--config), or this directory.
        #[arg(long, value_name = "FILE", conflicts_with = "dir")]
        config: Option<PathBuf>,
        /// The evidence directory itself.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The bundle to write.
        #[arg(short = 'o', long = "output", value_name = "FILE.tar.gz")]
        output: PathBuf,
    },
}

/// Runs `robotsguard evidence ...`.
pub fn run(command: &EvidenceCommand) -> ExitCode {
    match command {
        EvidenceCommand::Verify {
            file,
            key,
            robots_dir,
            complete,
        } => verify(file, key.as_deref(), robots_dir.as_deref(), *complete),
        EvidenceCommand::Bundle {
            origin,
            crawler,
            since,
            until,
            config,
            dir,
            output,
        } => {
            let filter = (|| -> Result<export::Filter, String> {
                Ok(export::Filter {
                    origin: Some(origin.clone()),
                    crawler: Some(crawler.clone()),
                    since: Some(export::parse_time(since).map_err(|e| format!("--since: {e}"))?),
                    until: until
                        .as_deref()
                        .map(export::parse_time)
                        .transpose()
                        .map_err(|e| format!("--until: {e}"))?,
                })
            })();
            match filter
                .and_then(|filter| make_bundle(&filter, config.as_deref(), dir.as_deref(), output))
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn verify(file: &Path, key: Option<&Path>, robots_dir: Option<&Path>, complete: bool) -> ExitCode {
    let beside = file.parent().unwrap_or_else(|| Path::new("."));
    let key_path = key.map_or_else(
        || beside.join(robotsguard::evidence::KEY_FILE),
        Path::to_path_buf,
    );
    let public = match std::fs::read_to_string(&key_path)
        .map_err(|e| e.to_string())
        .and_then(|text| key::parse_public(&text).map_err(|e| e.to_string()))
    {
        Ok(public) => public,
        Err(e) => {
            eprintln!(
                "error: key `{}`: {e} (give --key JWK|PEM)",
                key_path.display()
            );
            return ExitCode::from(2);
        }
    };
    let robots_dir = robots_dir.map(Path::to_path_buf).or_else(|| {
        let default = beside.join(robotsguard::evidence::ROBOTS_DIR);
        default.is_dir().then_some(default)
    });
    let input = match std::fs::File::open(file) {
        Ok(input) => std::io::BufReader::new(input),
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let options = check::Options {
        key: public,
        robots_dir: robots_dir.clone(),
        complete,
    };
    let summary = check::verify(input, &options);
    for note in &summary.gap_notes {
        println!("gap: {note}");
    }
    for failure in &summary.failures {
        println!("FAILED {failure}");
    }
    println!(
        "{} records: {} signatures valid, {} links checked, {} gaps (links not checkable{}), {} chains begin before this file; {}",
        summary.records,
        summary.signatures,
        summary.links,
        summary.gaps,
        if complete { ", failing with --complete" } else { "" },
        summary.opened_midway,
        match &robots_dir {
            Some(dir) => format!(
                "{} rule lines and {} verdicts re-checked against the robots.txt copies in {}",
                summary.rules,
                summary.verdicts,
                dir.display()
            ),
            None => "rules not checked (no --robots-dir)".to_string(),
        }
    );
    if summary.passed() {
        println!("OK");
        ExitCode::SUCCESS
    } else {
        println!("FAILED: {} problem(s)", summary.failures.len());
        ExitCode::from(1)
    }
}

fn make_bundle(
    filter: &export::Filter,
    config: Option<&Path>,
    dir: Option<&Path>,
    output: &Path,
) -> Result<(), String> {
    let dir = match (dir, config) {
        (Some(dir), _) => dir.to_path_buf(),
        (None, Some(config)) => {
            let config = robotsguard::config::load_file_only(config).map_err(|e| e.to_string())?;
            robotsguard::evidence::dir_of(&config)
        }
        (None, None) => return Err("give --config FILE or --dir DIR".to_string()),
    };
    let temporary = output.with_extension("partial");
    let file =
        std::fs::File::create(&temporary).map_err(|e| format!("{}: {e}", temporary.display()))?;
    let written = bundle::write(&dir, filter, std::io::BufWriter::new(file));
    let (records, copies) = match written {
        Ok(counts) => counts,
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
    };
    std::fs::rename(&temporary, output).map_err(|e| format!("{}: {e}", output.display()))?;
    println!(
        "{}: {records} records, {copies} robots.txt copies, key.jwk, README.md",
        output.display()
    );
    Ok(())
}
