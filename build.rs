//! Puts the git commit the binary is built from into `ROBOTSGUARD_COMMIT`, and the release tag
//! it is (or descends from) into `ROBOTSGUARD_DESCRIBE`, for `--version`.
//!
//! The commit comes from `ROBOTSGUARD_COMMIT` in the build's environment when it is set (a
//! container build or a source tarball has no `.git`), else from `git rev-parse`, else it is
//! `unknown`; the tag from `ROBOTSGUARD_DESCRIBE`, else `git describe --tags --match 'v*'`
//! (`v0.3.0` on the tag, `v0.3.0-12-gabc123def456` after it), else it is empty and `--version`
//! names the commit alone: a build never fails for want of git.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ROBOTSGUARD_COMMIT");
    let commit = match std::env::var("ROBOTSGUARD_COMMIT") {
        Ok(commit) if is_commit(commit.trim()) => commit.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=ROBOTSGUARD_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=ROBOTSGUARD_DESCRIBE");
    let describe = match std::env::var("ROBOTSGUARD_DESCRIBE") {
        Ok(describe) if is_describe(describe.trim()) => describe.trim().to_owned(),
        _ => describe_from_git().unwrap_or_default(),
    };
    println!("cargo:rustc-env=ROBOTSGUARD_DESCRIBE={describe}");
}

/// What `git describe` writes for a release tag (`v` and a version, then `-N-gHASH` and
/// `-dirty`): nothing else reaches `--version`.
fn is_describe(text: &str) -> bool {
    text.starts_with('v')
        && text.len() <= 80
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
}

/// The nearest release tag, as `git describe` names it, watching the tags so that a new one
/// reruns this script.
fn describe_from_git() -> Option<String> {
    let output = Command::new("git")
        .args(["describe", "--tags", "--match", "v[0-9]*", "--abbrev=12"])
        .output()
        .ok()?;
    if let Ok(tags) = Command::new("git")
        .args(["rev-parse", "--git-path", "refs/tags"])
        .output()
    {
        let tags = PathBuf::from(String::from_utf8_lossy(&tags.stdout).trim());
        if tags.exists() {
            println!("cargo:rerun-if-changed={}", tags.display());
        }
    }
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.success() && is_describe(&text)).then_some(text)
}

/// A short hexadecimal commit name (also what keeps stray text out of `--version`).
fn is_commit(text: &str) -> bool {
    (7..=40).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The checked-out commit, and the files whose change moves it (so that a new commit reruns
/// this script, and nothing else does).
fn from_git() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| is_commit(c))?;
    // HEAD names the branch; the branch's ref (loose or packed) names the commit. In a worktree
    // these live in different directories, which --git-path resolves.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched {
        let path = PathBuf::from(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(commit)
}
