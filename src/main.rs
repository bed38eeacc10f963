fn main() -> std::process::ExitCode {
    robotsguard::cli::main()
}
