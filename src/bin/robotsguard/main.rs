//! The `robotsguard` command: the edge proxy (`serve`, `demo`) built on the library's `Guard`,
//! and the tools around it (`validate`, `check`, `identify`).

/// jemalloc instead of the system allocator: pingora allocates some seventy times per proxied
/// request, and glibc's malloc spends more per call as a long-running proxy's heap fragments
/// (~13k of the ~104k user-space instructions per request; docs/BENCHMARKS.md, "Whole proxy").
/// jemalloc rather than mimalloc: within 4 % of its speed here, with 418 MiB instead of 492 MiB
/// resident for 10,000 origins. Small growths are moved more cheaply than jemalloc's `realloc`
/// does ([`robotsguard::allocator`]). Set in the binary, not the library, so code embedding the
/// library keeps its own choice.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: robotsguard::allocator::Allocator = robotsguard::allocator::Allocator;

/// What `--version` prints after the name: the package version, the commit it was built from
/// and the release tag it is or descends from (`build.rs`: the commit `unknown` and no tag when
/// built without git and without `ROBOTSGUARD_COMMIT` / `ROBOTSGUARD_DESCRIBE`), e.g.
/// `0.3.0 (commit 0123456789ab) v0.3.0`.
pub const VERSION: &str = if env!("ROBOTSGUARD_DESCRIBE").is_empty() {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (commit ",
        env!("ROBOTSGUARD_COMMIT"),
        ")"
    )
} else {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (commit ",
        env!("ROBOTSGUARD_COMMIT"),
        ") ",
        env!("ROBOTSGUARD_DESCRIBE")
    )
};

mod cli;
mod connections;
mod demo;
mod edge;
mod frames;
mod http1;
mod http2;
mod proxy;
mod proxy_protocol;
mod server;
mod waits;

fn main() -> std::process::ExitCode {
    cli::main()
}
