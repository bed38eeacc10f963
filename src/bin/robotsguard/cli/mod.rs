//! The `robotsguard` command line: subcommands and their dispatch.

pub mod check;
pub mod evidence;
pub mod healthcheck;
pub mod preview;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "robotsguard",
    version = crate::VERSION,
    about = "An edge reverse proxy that makes crawlers obey robots.txt"
)]
pub struct Cli {
    /// Log format: human-readable text or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy with a config file.
    Serve {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Take over the sockets of a running instance (send it SIGQUIT after starting this one).
        #[arg(long)]
        upgrade: bool,
        /// Upgrade socket path shared by the old and the new instance.
        #[arg(long, value_name = "PATH")]
        upgrade_socket: Option<String>,
    },
    /// Run a demo origin, the proxy and the admin endpoint on loopback, and print curl lines to try.
    Demo,
    /// Check URLs against a robots.txt exactly as Google's reference library would; with
    /// `--robots FILE` alone, warn when the file would take the site out of a search engine.
    Check(check::CheckArgs),
    /// Ask a running instance what a candidate robots.txt or config fragment would change on
    /// an origin, from its recent crawler traffic: exit 0, or 3 when a search engine would lose
    /// the site or the file refuses everything.
    Preview(preview::PreviewArgs),
    /// Check a config file and what it refers to (TLS files, robots.txt files, secrets, the
    /// crawler catalogue): exit 0 when `serve` would start with it, else print every error and
    /// exit 1. Warnings are printed too; with --strict they also make it exit 1.
    Validate {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Check the file alone and open no other (for a config rendered for another machine,
        /// such as a Helm chart's, where its secrets and files are not mounted).
        #[arg(long)]
        config_only: bool,
        /// Exit 1 on warnings too (a setting `serve` accepts but that is probably not meant,
        /// such as refusing a search engine's crawler on every path).
        #[arg(long)]
        strict: bool,
    },
    /// Ask a running instance's admin listener for /healthz (a container's HEALTHCHECK): exit 0
    /// when it answers 200, else 1.
    Healthcheck {
        /// The admin listener's address.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
        address: String,
        /// The path to ask for (/readyz also tells whether the instance takes traffic).
        #[arg(long, default_value = "/healthz")]
        path: String,
        /// How long connecting and the answer may take together.
        #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Print what the config file may hold: a JSON Schema for editors, or the Markdown reference.
    Config {
        #[command(subcommand)]
        what: ConfigDoc,
    },
    /// Print the Markdown reference of every Prometheus metric (name, type, labels, help).
    Metrics,
    /// Check signed evidence records, or bundle them for a third party.
    Evidence {
        #[command(subcommand)]
        what: evidence::EvidenceCommand,
    },
    /// Tell which crawler a User-Agent string belongs to.
    Identify {
        /// The User-Agent header value.
        user_agent: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Use the crawler settings of this config (extra crawlers, generic detection, and
        /// `verify` for --client).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Also check the claim for a request from this address: the crawler's published IP
        /// ranges (fetched now) and forward-confirmed reverse DNS.
        #[arg(long, value_name = "ADDR")]
        client: Option<std::net::IpAddr>,
    },
}

/// What `robotsguard config` prints.
#[derive(Debug, Subcommand)]
pub enum ConfigDoc {
    /// The config file's JSON Schema (draft 2020-12), as in config/robotsguard.schema.json.
    Schema,
    /// Every key with its type, default, allowed words and whether a reload applies it (Markdown).
    Reference,
}

fn init_logging(format: LogFormat) {
    robotsguard::logs::init(format == LogFormat::Json);
}

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Check(args) => check::run(args),
        Command::Preview(args) => preview::run(args),
        Command::Config { what } => write_stdout(&match what {
            ConfigDoc::Schema => robotsguard::config::reference::json_schema(),
            ConfigDoc::Reference => robotsguard::config::reference::markdown(),
        }),
        Command::Metrics => write_stdout(&robotsguard::metrics_reference::reference_markdown()),
        Command::Evidence { what } => evidence::run(what),
        Command::Validate {
            config,
            config_only,
            strict,
        } => validate(config, *config_only, *strict),
        Command::Healthcheck {
            address,
            path,
            timeout,
        } => healthcheck::run(address, path, *timeout),
        Command::Identify {
            user_agent,
            json,
            config,
            client,
        } => identify(user_agent, *json, config.as_deref(), *client),
        Command::Serve {
            config,
            upgrade,
            upgrade_socket,
        } => {
            init_logging(cli.log_format);
            let options = crate::server::ServeOptions {
                upgrade: *upgrade,
                upgrade_socket: upgrade_socket.clone(),
            };
            serve(config, &options)
        }
        Command::Demo => {
            init_logging(cli.log_format);
            match crate::demo::run() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// `validate`: exits 1 exactly when `serve` would refuse to start (but for addresses another
/// process holds: `validate` runs beside the instance it checks for). With `config_only`, opens
/// no file but the config (not the Redis `url_file` either: a Helm pre-upgrade check runs where
/// secrets are not mounted).
fn validate(path: &std::path::Path, config_only: bool, strict: bool) -> ExitCode {
    let loaded = if config_only {
        robotsguard::config::load_file_only(path)
    } else {
        robotsguard::config::load_file(path)
    };
    let config = match loaded {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(1);
        }
    };
    let identifier = match robotsguard::snapshot::build_identifier(&config) {
        Ok(identifier) => identifier,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    let mut warned = 0;
    if !config_only {
        if let Err(e) = crate::server::preflight(&config, false) {
            for line in e.to_string().lines() {
                eprintln!("{}: {line}", path.display());
            }
            return ExitCode::from(1);
        }
        for warning in crate::server::resolution_warnings(&config) {
            eprintln!("{}: warning: {warning}", path.display());
            warned += 1;
        }
    }
    for warning in robotsguard::enforce::config_warnings(&config, identifier.catalogue()) {
        eprintln!("{}: warning: {warning}", path.display());
        warned += 1;
    }
    if strict && warned > 0 {
        eprintln!(
            "{}: {warned} warning{} (--strict)",
            path.display(),
            if warned == 1 { "" } else { "s" }
        );
        return ExitCode::from(1);
    }
    println!(
        "{}: valid ({} origin{})",
        path.display(),
        config.origins.len(),
        if config.origins.len() == 1 { "" } else { "s" }
    );
    ExitCode::SUCCESS
}

fn identify(
    user_agent: &str,
    json: bool,
    config: Option<&std::path::Path>,
    client: Option<std::net::IpAddr>,
) -> ExitCode {
    let config = match config {
        Some(path) => match robotsguard::config::load_file(path) {
            Ok(config) => Some(config),
            Err(errors) => {
                eprintln!("{errors}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let identifier = match &config {
        Some(config) if !config.crawlers.feeds.is_empty() => identifier_with_feeds(config),
        Some(config) => robotsguard::snapshot::build_identifier(config).map_err(|e| e.to_string()),
        None => robotsguard::crawlers::Identifier::builtin(true)
            .map_err(|e| format!("built-in crawler catalogue: {e}")),
    };
    let identifier = match identifier {
        Ok(identifier) => identifier,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let identity = identifier.identify(user_agent.as_bytes(), None);
    let verification = match (client, identity.as_ref()) {
        (Some(address), Some(identity)) => {
            let settings = config
                .as_ref()
                .map(|c| c.verify.clone())
                .unwrap_or_default();
            let def = identifier.catalogue().get(identity.name);
            let data = def.and_then(|def| def.verify.clone());
            // A remote feed's lists are fetched as the proxy would: https, public addresses.
            let from_remote_feed = def
                .and_then(|def| def.feed.as_deref())
                .is_some_and(|feed| !feed.starts_with("file:"));
            Some(match data {
                Some(data) => {
                    verify_claim(&settings, identity.name, &data, address, from_remote_feed)
                }
                None => robotsguard::enforce::Verification::unverified(
                    identity.name,
                    "its operator publishes no IP ranges or reverse DNS names",
                ),
            })
        }
        _ => None,
    };
    if json {
        let mut report =
            match serde_json::to_value(robotsguard::crawlers::report(identity.as_ref())) {
                Ok(report) => report,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
        if let (Some(verification), Some(object)) = (&verification, report.as_object_mut()) {
            object.insert(
                "verification".into(),
                serde_json::to_value(verification).unwrap_or_default(),
            );
        }
        write_stdout(&format!("{report}\n"))
    } else {
        let mut text = format!("{}\n", robotsguard::crawlers::describe(identity.as_ref()));
        if let Some(verification) = &verification {
            text.push_str(&format!(
                "from {}: {} ({})\n",
                client.map(|c| c.to_string()).unwrap_or_default(),
                verification.result.as_str(),
                verification.how
            ));
        }
        write_stdout(&text)
    }
}

/// Writes a command's output. A reader that stops early (`| head`) closes the pipe: that ends
/// the output quietly with success, as other command-line tools do, where `print!` would panic.
fn write_stdout(text: &str) -> ExitCode {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            ExitCode::from(2)
        }
    }
}

/// Checks one claim now: the crawler's lists are fetched once, reverse DNS asked once.
/// The identifier of `config` with its catalogue feeds fetched (or read) once, now; a feed
/// that fails is said on stderr and left out.
fn identifier_with_feeds(
    config: &robotsguard::config::Config,
) -> Result<robotsguard::crawlers::Identifier, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let store = robotsguard::crawlers::feed::FeedStore::default();
    let proxy = config.verify.ranges.proxy.clone();
    let failures = runtime.block_on(robotsguard::feeds::load_once(
        &store,
        &config.crawlers.feeds,
        proxy.as_ref(),
    ));
    for (feed, error) in failures {
        eprintln!("warning: catalogue feed {feed}: {error}");
    }
    robotsguard::snapshot::build_identifier_with(config, Some(&store)).map_err(|e| e.to_string())
}

fn verify_claim(
    settings: &robotsguard::config::VerifyConfig,
    crawler: &str,
    data: &robotsguard::crawlers::VerifyData,
    address: std::net::IpAddr,
    from_remote_feed: bool,
) -> robotsguard::enforce::Verification {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return robotsguard::enforce::Verification::unverified(
                crawler,
                format!("cannot start a runtime: {e}"),
            )
        }
    };
    runtime.block_on(async {
        let verifier = robotsguard::verify::Verifier::new(settings);
        let wanted: Vec<robotsguard::verify::ranges::WantedList> = data
            .ips
            .iter()
            .map(|entry| robotsguard::verify::ranges::WantedList {
                entry: entry.clone(),
                format: data.format_of(entry),
                public_only: from_remote_feed,
            })
            .collect();
        if settings.ranges.enabled {
            let lists = verifier.lists();
            for (list, error) in robotsguard::verify::refresh::load_wanted_once(
                lists,
                &wanted,
                verifier.proxy(),
                &settings.ranges.private_origins,
            )
            .await
            {
                eprintln!("warning: {list}: {error}");
            }
        }
        (*verifier.verify_one(crawler, data, address).await).clone()
    })
}

fn serve(path: &std::path::Path, options: &crate::server::ServeOptions) -> ExitCode {
    // The guard watches and re-reads the file by its absolute path, so what is reloaded cannot
    // depend on the working directory.
    let guard = match robotsguard::guard::Guard::from_file(path) {
        Ok(guard) => guard,
        Err(e) => {
            match e.config_errors() {
                Some(errors) => eprintln!("{errors}"),
                None => eprintln!("error: {e}"),
            }
            return ExitCode::from(1);
        }
    };
    match crate::server::build(guard, options) {
        Ok(server) => {
            // Not `run_forever`: it exits the process before the log writer has written the
            // last lines of the shutdown.
            server.run(pingora::server::RunArgs::default());
            robotsguard::logs::flush(std::time::Duration::from_secs(1));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
