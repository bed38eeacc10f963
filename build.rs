//! Puts the git commit the binary is built from into `ROBOTSGUARD_COMMIT`, for `--version`.
//!
//! The commit comes from `ROBOTSGUARD_COMMIT` in the build's environment when it is set (a
//! container build or a source tarball has no `.git`), else from `git rev-parse`, else it is
//! `unknown`: a build never fails for want of git.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ROBOTSGUARD_COMMIT");
    let commit = match std::env::var("ROBOTSGUARD_COMMIT") {
        Ok(commit) if is_commit(commit.trim()) => commit.trim().to_owned(),
        _ => from_git().unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=ROBOTSGUARD_COMMIT={commit}");
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
