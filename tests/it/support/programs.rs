//! The programs the tests run beside robotsguard (nginx, redis-server, tinyproxy, curl, openssl,
//! kill, caddy, ...): the system's when it has them, else Debian's package, fetched once per
//! machine without root and unpacked into a cache, so that a plain `cargo test` passes on a
//! machine that has only what the README asks for.
//!
//! Fetching works where `apt-get` and `dpkg-deb` are (Debian, Ubuntu): `apt-get update` into a
//! package-list directory of the cache, `apt-get install --download-only` of the package (apt
//! works out which of its dependencies the system lacks), `dpkg-deb -x` of each into one tree.
//! A program from the tree runs with `LD_LIBRARY_PATH` pointing at the tree's libraries. The
//! cache is `$ROBOTSGUARD_TOOL_CACHE`, else `$XDG_CACHE_HOME/robotsguard`, else
//! `~/.cache/robotsguard` (as for `scripts/cmake`), under `debs/`; a lock file keeps test
//! processes from fetching at once, a mutex the threads of one. `ROBOTSGUARD_TEST_FETCH=1` (or a
//! comma-separated list of programs) fetches even what the system has: how the fetching itself is
//! tested on a machine that has everything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Every program the tests run that a fresh machine may lack, with the Debian package that has
/// it (the first of the names a release has: bookworm splits tinyproxy's binary into
/// `tinyproxy-bin`) and the packages its executable lives in besides (Debian's `redis-server` is
/// a link to `redis-check-rdb` of `redis-tools`), which must be there even when the system has
/// them, for the link to lead somewhere in the tree.
const PACKAGES: &[(&str, &[&str], &[&str])] = &[
    ("nginx", &["nginx"], &[]),
    ("redis-server", &["redis-server"], &["redis-tools"]),
    ("tinyproxy", &["tinyproxy-bin", "tinyproxy"], &[]),
    ("curl", &["curl"], &[]),
    ("openssl", &["openssl"], &[]),
    ("kill", &["procps"], &[]),
    ("caddy", &["caddy"], &[]),
    ("crowdsec-custom-bouncer", &["crowdsec-custom-bouncer"], &[]),
];

/// Directories searched besides `PATH`: Debian puts servers in `sbin`, which is not on a
/// non-root user's `PATH`.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// How long one `apt-get` or `dpkg-deb` run may take.
const STEP_TIMEOUT: &str = "600";

/// One fetch at a time in this process.
static FETCHING: Mutex<()> = Mutex::new(());

/// A program found for the tests.
#[derive(Debug, Clone)]
pub struct Program {
    /// Its executable.
    pub path: PathBuf,
    /// Environment it needs (`LD_LIBRARY_PATH` for a fetched one).
    pub env: Vec<(&'static str, OsString)>,
}

impl Program {
    /// A command running it.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.path);
        command.envs(self.env.iter().map(|(name, value)| (*name, value)));
        command
    }

    /// A command running it under `timeout SECONDS` (ended then, whatever happens).
    pub fn with_timeout(&self, seconds: u32) -> Command {
        let mut command = Command::new("timeout");
        command
            .arg(seconds.to_string())
            .arg(&self.path)
            .envs(self.env.iter().map(|(name, value)| (*name, value)));
        command
    }
}

/// `name`, from the system or fetched (see the module's docs); panics with what to install when
/// neither works.
pub fn program(name: &str) -> Program {
    if !forced(name) {
        if let Some(path) = on_system(name) {
            return Program {
                path,
                env: Vec::new(),
            };
        }
    }
    let Some(&(_, names, with)) = PACKAGES.iter().find(|(program, _, _)| *program == name) else {
        panic!("{name} is not installed and the tests know no package for it");
    };
    let package = names[0];
    match fetched(name, names, with) {
        Ok(program) => program,
        Err(why) => panic!(
            "{name} is not installed, and fetching Debian's `{package}` package without root \
             failed:\n{why}\nInstall it (apt-get install {package}, or your system's package) or \
             put `{name}` on PATH."
        ),
    }
}

/// A command running `name` ([`program`]).
pub fn command(name: &str) -> Command {
    program(name).command()
}

/// The first of `names` the system has, else the first fetched.
pub fn first_of(names: &[&str]) -> Program {
    names
        .iter()
        .filter(|name| !forced(name))
        .find_map(|name| on_system(name))
        .map(|path| Program {
            path,
            env: Vec::new(),
        })
        .unwrap_or_else(|| program(names[0]))
}

/// Whether `ROBOTSGUARD_TEST_FETCH` asks for `name` to be fetched whatever the system has.
fn forced(name: &str) -> bool {
    std::env::var("ROBOTSGUARD_TEST_FETCH")
        .is_ok_and(|value| value == "1" || value.split(',').any(|wanted| wanted.trim() == name))
}

/// `name` on `PATH` or in the system's `sbin` and `bin` directories.
fn on_system(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SYSTEM_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The cache directory for fetched packages.
fn cache_dir() -> PathBuf {
    let base = std::env::var_os("ROBOTSGUARD_TOOL_CACHE")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|dir| !dir.is_empty())
                .map(|dir| PathBuf::from(dir).join("robotsguard"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|dir| !dir.is_empty())
                .map(|dir| PathBuf::from(dir).join(".cache/robotsguard"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("robotsguard-cache"));
    base.join("debs")
}

/// `name` from the first package of `names` Debian has (and `with`), unpacked in the cache
/// (fetched now when it is not there yet).
fn fetched(name: &str, names: &[&str], with: &[&str]) -> Result<Program, String> {
    let package = names[0];
    let cache = cache_dir();
    let root = cache.join("root");
    let _in_process = FETCHING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let lock_path = cache.join("lock");
    let lock =
        std::fs::File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // Another test process may be fetching into the same cache: wait for it.
    lock.lock()
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let marker = cache.join(format!("{package}.unpacked"));
    if !marker.exists() || find_in(&root, name).is_none() {
        fetch_packages(&cache, &root, names, with)?;
        std::fs::write(&marker, b"").map_err(|e| format!("{}: {e}", marker.display()))?;
    }
    let path = find_in(&root, name).ok_or_else(|| {
        format!(
            "`{package}` was unpacked into {} but has no {name}",
            root.display()
        )
    })?;
    Ok(Program {
        env: environment(&root),
        path,
    })
}

/// `name` in the unpacked tree's `sbin` and `bin` directories.
fn find_in(root: &Path, name: &str) -> Option<PathBuf> {
    ["usr/sbin", "usr/bin", "sbin", "bin", "usr/local/bin"]
        .iter()
        .map(|dir| root.join(dir).join(name))
        .find(|candidate| is_executable(candidate))
}

/// Downloads the first of `names` that Debian has, `with`, and what the system lacks of their
/// dependencies, and unpacks them.
fn fetch_packages(cache: &Path, root: &Path, names: &[&str], with: &[&str]) -> Result<(), String> {
    let apt = cache.join("apt");
    for dir in ["lists/partial", "archives/partial"] {
        std::fs::create_dir_all(apt.join(dir)).map_err(|e| format!("{}: {e}", apt.display()))?;
    }
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let has_lists = std::fs::read_dir(apt.join("lists"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name() != "partial")
        })
        .unwrap_or(false);
    if !has_lists {
        apt_get(&apt, &["update"])?;
    }
    // The packages themselves, installed or not (`ROBOTSGUARD_TEST_FETCH` on a machine that has
    // them), then the dependencies the system lacks.
    let download = |apt: &Path| {
        let mut errors = Vec::new();
        let package = names
            .iter()
            .find(|name| match apt_get(apt, &["download", name]) {
                Ok(()) => true,
                Err(e) => {
                    errors.push(e);
                    false
                }
            })
            .ok_or_else(|| errors.join("\n"))?;
        for extra in with {
            apt_get(apt, &["download", extra])?;
        }
        let mut install = vec![
            "install",
            "--download-only",
            "--no-install-recommends",
            "--yes",
        ];
        install.push(package);
        install.extend_from_slice(with);
        apt_get(apt, &install)
    };
    if let Err(first) = download(&apt) {
        // Lists a day old may name files the mirror no longer has: read them again once.
        apt_get(&apt, &["update"]).map_err(|e| format!("{first}\n{e}"))?;
        download(&apt)?;
    }
    let archives = apt.join("archives");
    let mut debs: Vec<PathBuf> = std::fs::read_dir(&archives)
        .map_err(|e| format!("{}: {e}", archives.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .collect();
    debs.sort();
    for deb in &debs {
        let done = deb.with_extension("deb.unpacked");
        if done.exists() {
            continue;
        }
        run(Command::new("timeout")
            .arg(STEP_TIMEOUT)
            .arg("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(root))?;
        std::fs::write(&done, b"").map_err(|e| format!("{}: {e}", done.display()))?;
    }
    point_links_into(root, root, 0);
    Ok(())
}

/// Runs `apt-get` with its state and downloads in `apt` (no root, no system lock).
fn apt_get(apt: &Path, args: &[&str]) -> Result<(), String> {
    let user = String::from_utf8_lossy(
        &Command::new("id")
            .arg("-un")
            .output()
            .map_err(|e| format!("id: {e}"))?
            .stdout,
    )
    .trim()
    .to_string();
    let option = |name: &str, value: &Path| format!("{name}={}", value.display());
    let mut command = Command::new("timeout");
    command
        .arg(STEP_TIMEOUT)
        .arg("apt-get")
        .arg("-q")
        .args(["-o", &option("Dir::State::Lists", &apt.join("lists"))])
        .args(["-o", &option("Dir::Cache", apt)])
        .args(["-o", &option("Dir::Cache::archives", &apt.join("archives"))])
        .args(["-o", "Debug::NoLocking=1"])
        // apt drops to the `_apt` user to download, who may not write into this user's cache.
        .args(["-o", &format!("APT::Sandbox::User={user}")])
        .args(args)
        // `apt-get download` saves into the working directory.
        .current_dir(apt.join("archives"))
        .env("DEBIAN_FRONTEND", "noninteractive");
    run(&mut command)
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{command:?} could not run: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{command:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// Points the tree's absolute symbolic links that name a file of the tree at that file (Debian
/// links `/usr/lib/ssl/openssl.cnf` to `/etc/ssl/openssl.cnf`, both in the package).
fn point_links_into(root: &Path, dir: &Path, depth: usize) {
    if depth > 12 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            point_links_into(root, &path, depth + 1);
        } else if kind.is_symlink() {
            let Ok(target) = std::fs::read_link(&path) else {
                continue;
            };
            let Ok(inside) = target.strip_prefix("/") else {
                continue;
            };
            let within = root.join(inside);
            if within.exists() && !target.starts_with(root) {
                let _ = std::fs::remove_file(&path);
                let _ = std::os::unix::fs::symlink(&within, &path);
            }
        }
    }
}

/// What a program from the tree needs: its libraries first on `LD_LIBRARY_PATH`, and OpenSSL's
/// configuration from the tree when the system has none.
fn environment(root: &Path) -> Vec<(&'static str, OsString)> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for base in ["usr/lib", "lib"] {
        let base = root.join(base);
        dirs.push(base.clone());
        if let Ok(entries) = std::fs::read_dir(&base) {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                // Multiarch directories (`x86_64-linux-gnu`) hold the shared libraries.
                if path.is_dir()
                    && path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().contains("-linux-"))
                {
                    dirs.push(path);
                }
            }
        }
    }
    dirs.retain(|dir| dir.is_dir());
    if let Some(existing) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&existing));
    }
    let mut env = Vec::new();
    if let Ok(joined) = std::env::join_paths(&dirs) {
        env.push(("LD_LIBRARY_PATH", joined));
    }
    let config = root.join("usr/lib/ssl/openssl.cnf");
    if config.exists() && !Path::new("/usr/lib/ssl/openssl.cnf").exists() {
        env.push(("OPENSSL_CONF", config.into_os_string()));
    }
    env
}
