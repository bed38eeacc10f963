//! robotsguard: robots.txt enforcement for reverse proxies built on
//! [pingora](https://github.com/cloudflare/pingora).
//!
//! The `robotsguard` binary is an edge proxy built on this library. The same enforcement goes
//! into your own pingora proxy through [`guard::Guard`]: build it from a config file or in code,
//! add its background services to your server, and call it from your `ProxyHttp` hooks
//! (`examples/embed.rs` is a complete proxy in about forty lines).
//!
//! ```
//! use robotsguard::enforce::Outcome;
//! use robotsguard::guard::{Guard, OriginSpec};
//!
//! let guard = Guard::builder()
//!     .origin(
//!         OriginSpec::new("shop", ["shop.example"], "127.0.0.1:8081")
//!             .robots_inline("User-agent: *\nDisallow: /checkout\n"),
//!     )
//!     .build()?;
//! let bot = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
//! let decision = guard.decide(b"shop.example", bot, b"/%63heckout/basket", None)?;
//! assert_eq!(decision.outcome, Outcome::Blocked); // `/%63heckout` is `/checkout`
//! assert_eq!(decision.rule.map(|rule| rule.line), Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The engine and identification also stand alone: [`robots`] parses and matches robots.txt
//! exactly as Google's reference library does (it is the `robotsguard-robots` crate, which
//! depends on no part of the proxy and can be used on its own), and [`crawlers`] tells which
//! crawler sent a User-Agent (the `robotsguard-crawlers` crate, likewise alone).
//!
//! # Layers
//!
//! Bottom to top; a module uses only those of its own layer or below, and no two import each
//! other (`python3 scripts/module-cycles.py` checks both against this list, which names every
//! module; ARCHITECTURE.md has the whole map, the request path and the reload path).
//!
//! 1. [`robots`]: the robots.txt engine, a crate of its own (`crates/robotsguard-robots`), so
//!    the compiler keeps it from using anything above it. Pure: bytes in, verdicts out.
//! 2. [`crawlers`]: the crawler catalogue and User-Agent identification, a crate of its own
//!    (`crates/robotsguard-crawlers`). Pure.
//! 3. [`config`]: the YAML config, checked, with `file:line:column` errors; [`outcome`]: the
//!    outcome table (each decision word with its status, log text and report column);
//!    `allocator`: the allocator the binary installs (jemalloc), which uses nothing else.
//! 4. [`metrics`]: the Prometheus metrics, registered once, in a registry of your choice, and
//!    `metrics_reference`, the page generated from them; [`load`]: requests in flight, and
//!    upstream connections opened narrow under load; `client_address`: who the client is.
//! 5. [`events`]: the events webhooks tell of, on one bounded queue; [`tables`]: this process's
//!    tables with expiry (the coarse clock, Crawl-delay budgets, who read robots.txt, strikes
//!    and bans); [`traps`] and [`purpose_controls`]: the lines robotsguard adds to robots.txt.
//! 6. [`snapshot`]: the snapshot requests read (origins, robots.txt copies and their history,
//!    the identifier), with `upstream`, an origin's upstreams as requests see them.
//! 7. [`enforce`]: the pure robots.txt and policy verdict, over a snapshot.
//! 8. [`logs`], [`reports`] and [`evidence`], which describe decisions (evidence: signed
//!    records of them).
//! 9. [`store`]: where the tables live (memory or a shared Redis/Valkey).
//! 10. Plumbing: `net` (HTTP exchanges, URL fetches, capped file reads, file watching) and
//!     `tasks` (one background task per key).
//! 11. Background work that replaces what the snapshot holds: `fetch` (robots.txt), [`feeds`]
//!     (catalogue feeds), `upstream_keeper` (upstream health and DNS), [`reload`] (the config
//!     file), [`listener_tls`] (TLS listeners' certificates, chosen by SNI and re-read on
//!     change); and [`webhooks`], which delivers the events.
//! 12. [`verify`]: crawler verification (IP range lists, reverse DNS, Web Bot Auth keys).
//! 13. [`judge`]: the whole judgment of one request, as named phases (verdict, robots.txt, ban,
//!     signals, verification, Crawl-delay, strike, answer), with no HTTP in it: the proxy
//!     applies it, `/explain` and [`guard::Guard::judge`] preview it.
//! 14. [`preview`]: the reports' sample of recent crawler traffic judged again with a candidate
//!     robots.txt or policy in force; [`crowdsec`]: the bans as the decisions a CrowdSec
//!     bouncer reads.
//! 15. [`guard`], [`admin`] and [`console`]: the pingora-facing shells (per-request hooks,
//!     services, the admin endpoint, the operator's pages); [`preflight`]: what a config needs
//!     from the machine, checked alike by `validate`, `serve` and a reload; [`decision`]: the
//!     decision listener, the same judgment answered to a front proxy's auth subrequest
//!     (nginx `auth_request`, forward auth, Envoy `ext_authz`), built on [`guard`].
//!
//! `listener_tls`, `preflight` and `reload` are public for the binary and hidden from these docs:
//! [`guard::Guard`] runs what an embedder needs of them.
//!
//! The binary adds the command line, the demo, the server assembly and the connection layer
//! (connection cap, request-head deadline, PROXY protocol) on top of [`guard`].

#![deny(missing_docs)]
// `unsafe` only where the allocator needs it (`allocator.rs`) and for the one CPU prefetch hint
// of the deadline table, each allowed where it stands with a `SAFETY:` comment.
#![deny(unsafe_code)]

/// A typed error that is its one-line message: for functions whose callers only say what went
/// wrong, so that each kind of failure still has a type of its own.
macro_rules! message_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::error::Error for $name {}
    };
}

pub mod admin;
#[cfg(feature = "jemalloc")]
pub mod allocator;
mod client_address;
pub mod config;
pub mod console;
pub mod crowdsec;
pub mod decision;
/// The crawler catalogue and User-Agent identification: the `robotsguard-crawlers` crate, at the
/// path the proxy's modules and embedders use (`robotsguard::crawlers`).
#[doc(inline)]
pub use robotsguard_crawlers as crawlers;
pub mod enforce;
pub mod events;
pub mod evidence;
pub mod feeds;
mod fetch;
pub mod guard;
pub mod judge;
#[doc(hidden)]
pub mod listener_tls;
pub mod load;
pub mod logs;
pub mod metrics;
// Public for the binary (`robotsguard metrics`), not an API of its own.
#[doc(hidden)]
pub mod metrics_reference;
mod net;
pub mod outcome;
#[doc(hidden)]
pub mod preflight;
pub mod preview;
pub mod purpose_controls;
#[doc(hidden)]
pub mod reload;
pub mod reports;
/// The robots.txt engine: the `robotsguard-robots` crate, at the path the proxy's modules and
/// embedders use (`robotsguard::robots`).
#[doc(inline)]
pub use robotsguard_robots as robots;
pub mod snapshot;
pub mod store;
pub mod tables;
mod tasks;
pub mod traps;
mod upstream;
mod upstream_keeper;
pub mod verify;
pub mod webhooks;
