/// jemalloc instead of the system allocator: pingora allocates some seventy times per proxied
/// request, and glibc's malloc spends more per call as a long-running proxy's heap fragments
/// (~13k of the ~104k user-space instructions per request; docs/BENCHMARKS.md, "Whole proxy").
/// jemalloc rather than mimalloc: within 4 % of its speed here, with 418 MiB instead of 492 MiB
/// resident for 10,000 origins. Set in the binary, not the library, so code embedding the
/// library keeps its own choice.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    robotsguard::cli::main()
}
