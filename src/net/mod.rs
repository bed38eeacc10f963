//! Plumbing that background work shares: HTTP exchanges through pingora's connector (the
//! upstream peer builder, robots.txt GETs, health checks), GETs of absolute URLs that belong to no
//! origin (range lists, key directories, feeds), reading local files under a cap, and watching
//! files for changes (config, robots.txt files, certificates, key files).

pub(crate) mod file;
pub mod http;
pub mod url;
pub mod watch;
