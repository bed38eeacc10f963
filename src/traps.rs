//! Trap paths: paths that the robots.txt robotsguard serves disallows to every group, so that no
//! compliant crawler of any name ever requests them; a request for one comes from a client that
//! read robots.txt and ignored it, whatever its User-Agent says.
//!
//! An origin lists its own (`traps.paths`), or gets one derived from a secret: an HMAC-SHA-256
//! of the origin's name, so that it is the same in every replica and across restarts, and
//! cannot be guessed from this code. The secret is `traps.secret_file`, else the deployment's
//! generated secret ([`install_generated_secret`]: kept in the shared store with
//! `state.backend: redis`, else in a file in `state.dir`, see [`secret_in_dir`]).
//!
//! The trap lines are put into every group of the robots.txt copy when it is stored
//! ([`with_trap_lines`]), so that what is served, enforced, shown by `/explain` and the console
//! is one text.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use crate::config::TrapsConfig;

/// The deployment's generated secret, once installed (or made up for this process).
static GENERATED: RwLock<Option<Arc<[u8]>>> = RwLock::new(None);

/// The name of the secret's file in `state.dir`.
pub const SECRET_FILE_NAME: &str = "trap-secret";

/// Installs the deployment's generated secret (from the shared store or `state.dir`): every
/// trap path derived from now on (snapshots built after this) uses it.
pub fn install_generated_secret(secret: &[u8]) {
    if let Ok(mut generated) = GENERATED.write() {
        *generated = Some(Arc::from(secret));
    }
}

/// The generated secret; a random one for this process when none was installed (an embedder
/// that never installs one gets trap paths that change with each start).
fn generated_secret() -> Arc<[u8]> {
    if let Some(secret) = GENERATED.read().ok().and_then(|g| g.clone()) {
        return secret;
    }
    let fresh: Arc<[u8]> = Arc::from(new_secret().into_bytes());
    match GENERATED.write() {
        Ok(mut generated) => generated.get_or_insert(fresh).clone(),
        Err(_) => fresh,
    }
}

/// A new secret: 32 random bytes as 64 hexadecimal digits (the text is the key).
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        // No system randomness: the time and the process are the best left, and a warning.
        tracing::warn!("no system randomness for the trap secret; it is weaker than it should be");
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        bytes.copy_from_slice(&Sha256::digest(seed.as_bytes()));
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The trap path derived from `secret` for the origin `origin`: `/` and 16 letters and digits.
pub fn derived_path(secret: &[u8], origin: &str) -> String {
    // No 0/o, 1/l: the path may be read aloud or typed from a log.
    const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let mac = hmac_sha256(
        secret,
        format!("robotsguard trap path\0{origin}").as_bytes(),
    );
    let mut path = String::with_capacity(17);
    path.push('/');
    for byte in &mac[..16] {
        path.push(char::from(ALPHABET[usize::from(byte & 31)]));
    }
    path
}

/// The trap paths of an origin named `origin` with `config`: none when traps are off, the
/// configured ones, else the one derived from its secret.
pub fn paths_for(config: &TrapsConfig, origin: &str) -> Arc<[String]> {
    if !config.enabled {
        return Arc::from(Vec::new());
    }
    if !config.paths.is_empty() {
        return Arc::from(config.paths.clone());
    }
    let secret = match &config.secret {
        Some(secret) => secret.0.clone(),
        None => generated_secret(),
    };
    Arc::from(vec![derived_path(&secret, origin)])
}

/// The trap `canonical` (a canonical path, with its query) is for: the trap path itself or
/// anything below it.
pub fn hit<'a>(traps: &'a [String], canonical: &[u8]) -> Option<&'a str> {
    let path = &canonical[..memchr::memchr(b'?', canonical).unwrap_or(canonical.len())];
    traps
        .iter()
        .find(|trap| {
            let trap = trap.as_bytes();
            let stem = trap.strip_suffix(b"/").unwrap_or(trap);
            path == stem || (path.starts_with(stem) && path.get(stem.len()) == Some(&b'/'))
        })
        .map(String::as_str)
}

/// What a robots.txt line starts with, as far as groups go.
#[derive(PartialEq, Eq)]
enum LineKind {
    /// Blank, a comment, or a key that neither opens nor closes a run of User-agent lines
    /// (Sitemap, unknown keys).
    Neutral,
    UserAgent {
        global: bool,
    },
    /// Allow, Disallow, Crawl-delay: the rules of the group the User-agent lines above opened.
    Rule,
}

/// Reads a line's key as the engine does: case-insensitive, a key counts when it merely starts
/// with a known one, Google's misspellings, and `key value` without a colon.
fn line_kind(line: &[u8]) -> LineKind {
    let line = &line[..memchr::memchr(b'#', line).unwrap_or(line.len())];
    let line = line.trim_ascii();
    let (key, value) = match memchr::memchr(b':', line) {
        Some(colon) => (line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()),
        None => {
            let mut parts = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|p| !p.is_empty());
            match (parts.next(), parts.next(), parts.next()) {
                (Some(key), Some(value), None) => (key, value),
                _ => return LineKind::Neutral,
            }
        }
    };
    let key = key.to_ascii_lowercase();
    let starts = |known: &[&str]| known.iter().any(|k| key.starts_with(k.as_bytes()));
    if starts(&["user-agent", "useragent", "user agent"]) {
        let global = crate::robots::reduce_agent_name(value).is_empty() && value.starts_with(b"*");
        return LineKind::UserAgent { global };
    }
    if starts(&[
        "allow",
        "disallow",
        "dissallow",
        "dissalow",
        "disalow",
        "diasllow",
        "disallaw",
        "crawl-delay",
    ]) {
        return LineKind::Rule;
    }
    LineKind::Neutral
}

/// `body` with one `Disallow:` line per trap path in every group (after each run of User-agent
/// lines, so that agents sharing a group keep sharing it), and a `User-agent: *` group with them
/// when the file has none (a crawler without a group of its own must not fetch them either).
pub fn with_trap_lines(body: &[u8], traps: &[String]) -> Vec<u8> {
    let mut lines = String::new();
    for trap in traps {
        lines.push_str("Disallow: ");
        lines.push_str(trap);
        lines.push('\n');
    }
    let mut out = Vec::with_capacity(body.len() + lines.len() * 4 + 32);
    let mut pending = false;
    let mut global = false;
    let mut rest = body;
    let mut first = true;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        let next = match (rest.get(end), rest.get(end + 1)) {
            (Some(b'\r'), Some(b'\n')) => end + 2,
            (Some(_), _) => end + 1,
            (None, _) => end,
        };
        let (line, terminator) = (&rest[..end], &rest[end..next]);
        let content = if first {
            line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line)
        } else {
            line
        };
        first = false;
        match line_kind(content) {
            LineKind::UserAgent { global: g } => {
                global |= g;
                pending = true;
            }
            LineKind::Rule if pending => {
                out.extend_from_slice(lines.as_bytes());
                pending = false;
            }
            _ => {}
        }
        out.extend_from_slice(line);
        out.extend_from_slice(if terminator.is_empty() {
            b"\n"
        } else {
            terminator
        });
        rest = &rest[next..];
    }
    if pending {
        out.extend_from_slice(lines.as_bytes());
    }
    if !global {
        if !out.is_empty() {
            out.push(b'\n');
        }
        out.extend_from_slice(b"User-agent: *\n");
        out.extend_from_slice(lines.as_bytes());
    }
    out
}

/// The text served for a policy without a file (allow or disallow everything), with the traps.
pub fn without_rules_text(disallow_all: bool, traps: &[String]) -> Vec<u8> {
    let base: &[u8] = if disallow_all {
        b"User-agent: *\nDisallow: /\n"
    } else {
        b"User-agent: *\nDisallow:\n"
    };
    if traps.is_empty() {
        return base.to_vec();
    }
    with_trap_lines(base, traps)
}

/// The directories tried for the generated secret, in order: `configured` (`state.dir`), else
/// `$STATE_DIRECTORY`, [`crate::config::DEFAULT_STATE_DIR`], then `$XDG_STATE_HOME/robotsguard`
/// (or `~/.local/state/robotsguard`).
pub fn state_dirs(configured: Option<&Path>) -> Vec<PathBuf> {
    if let Some(dir) = configured {
        return vec![dir.to_path_buf()];
    }
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY") {
        // systemd may list several, separated by colons: the first is ours.
        if let Some(first) = dir.to_string_lossy().split(':').next() {
            if !first.is_empty() {
                dirs.push(PathBuf::from(first));
            }
        }
    }
    dirs.push(PathBuf::from(crate::config::DEFAULT_STATE_DIR));
    match std::env::var_os("XDG_STATE_HOME") {
        Some(home) if !home.is_empty() => dirs.push(PathBuf::from(home).join("robotsguard")),
        _ => {
            if let Some(home) = std::env::var_os("HOME") {
                dirs.push(PathBuf::from(home).join(".local/state/robotsguard"));
            }
        }
    }
    dirs
}

message_error! {
    /// Why no directory could keep the trap secret: each one tried, and what went wrong there.
    SecretError
}

/// The generated secret kept in the first usable directory of [`state_dirs`]: read when its
/// file exists, else made and written there (atomically: a replica starting at the same moment
/// on the same volume reads the one that won). Returns the secret and its file.
pub fn secret_in_dir(configured: Option<&Path>) -> Result<(Vec<u8>, PathBuf), SecretError> {
    secret_in_first_dir(configured).map_err(SecretError)
}

/// [`secret_in_dir`], its error as text.
fn secret_in_first_dir(configured: Option<&Path>) -> Result<(Vec<u8>, PathBuf), String> {
    let mut problems = Vec::new();
    for dir in state_dirs(configured) {
        match secret_in(&dir) {
            Ok(secret) => return Ok((secret, dir.join(SECRET_FILE_NAME))),
            Err(e) => problems.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(problems.join("; "))
}

fn secret_in(dir: &Path) -> std::io::Result<Vec<u8>> {
    let file = dir.join(SECRET_FILE_NAME);
    if let Ok(secret) = read_secret(&file) {
        return Ok(secret);
    }
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{SECRET_FILE_NAME}.{}.{}",
        std::process::id(),
        new_secret().get(..8).unwrap_or("x")
    ));
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut out = options.open(&temporary)?;
        out.write_all(new_secret().as_bytes())?;
        out.write_all(b"\n")?;
        out.sync_all()?;
    }
    // A hard link fails when the name exists: whoever linked first wins, everyone reads it.
    let linked = std::fs::hard_link(&temporary, &file);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => read_secret(&file),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_secret(&file),
        Err(e) => Err(e),
    }
}

fn read_secret(file: &Path) -> std::io::Result<Vec<u8>> {
    crate::config::read_secret_file(file, 4096)
        .map(String::into_bytes)
        .map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robots::{MatchMode, Robots, RobotsTxt};

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // A key longer than a block is hashed first (test case 6).
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(mac[..4], [0x60, 0xe4, 0x31, 0x59]);
    }

    #[test]
    fn derived_paths_depend_on_the_secret_and_the_origin_only() {
        let a = derived_path(b"secret", "shop");
        assert_eq!(a, derived_path(b"secret", "shop"));
        assert_ne!(a, derived_path(b"secret", "blog"));
        assert_ne!(a, derived_path(b"other", "shop"));
        assert_eq!(a.len(), 17);
        assert!(a.starts_with('/'));
    }

    fn disallowed(body: &[u8], agent: &str, path: &str) -> bool {
        let robots = Robots::compile(&RobotsTxt::parse(body), MatchMode::Canonical);
        !robots.verdict(&[agent], path.as_bytes()).allowed
    }

    #[test]
    fn every_group_gets_the_trap_lines_and_shared_groups_stay_shared() {
        let traps = vec!["/trap".to_string()];
        let body = b"\xef\xbb\xbfUser-agent: a\r\nuser agent: b\r\n# c\r\nSitemap: /s.xml\r\nDisallow: /x\r\n\r\nUser-agent: *\r\nAllow: /\r\nUser-agent: dangling";
        let out = with_trap_lines(body, &traps);
        for agent in ["a", "b", "other", "dangling"] {
            assert!(disallowed(&out, agent, "/trap/page"), "{agent}");
        }
        // `a` still shares `b`'s rules.
        assert!(disallowed(&out, "a", "/x"));
        assert!(!disallowed(&out, "other", "/x"));
        // Without a `*` group, one is added.
        let out = with_trap_lines(b"User-agent: a\nDisallow: /x", &traps);
        assert!(disallowed(&out, "nobody", "/trap"));
        assert!(!disallowed(&out, "nobody", "/x"));
        assert!(disallowed(&with_trap_lines(b"", &traps), "any", "/trap"));
        assert!(disallowed(
            &without_rules_text(false, &traps),
            "any",
            "/trap"
        ));
        assert!(!disallowed(
            &without_rules_text(false, &traps),
            "any",
            "/page"
        ));
    }

    #[test]
    fn a_hit_is_the_trap_or_below_it() {
        let traps = vec!["/trap".to_string(), "/deep/".to_string()];
        for path in [
            "/trap",
            "/trap/",
            "/trap/x?y",
            "/trap?q",
            "/deep",
            "/deep/a",
        ] {
            assert!(hit(&traps, path.as_bytes()).is_some(), "{path}");
        }
        for path in ["/", "/trapdoor", "/deeper", "/x/trap"] {
            assert!(hit(&traps, path.as_bytes()).is_none(), "{path}");
        }
    }

    #[test]
    fn the_secret_in_a_directory_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().expect("a directory");
        let (first, file) = secret_in_dir(Some(dir.path())).expect("a secret");
        let (second, _) = secret_in_dir(Some(dir.path())).expect("a secret");
        assert_eq!(first, second);
        assert_eq!(first.len(), 64);
        assert_eq!(file, dir.path().join(SECRET_FILE_NAME));
    }
}
