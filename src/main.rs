/// mimalloc instead of the system allocator: pingora allocates some seventy times per proxied
/// request, and glibc's malloc spends more per call as a long-running proxy's heap fragments
/// (measured in docs/BENCHMARKS.md, "Whole proxy"). Set here, not in the library, so that code
/// embedding the library keeps its own choice.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    robotsguard::cli::main()
}
