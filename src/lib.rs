//! robotsguard: robots.txt enforcement for reverse proxies built on pingora.
//!
//! The `robotsguard` binary is an edge proxy built on this library; the same enforcement goes
//! into your own pingora proxy through [`guard::Guard`].

pub mod admin;
mod client;
pub mod config;
pub mod crawlers;
pub mod enforce;
mod fetch;
pub mod guard;
pub mod logs;
pub mod metrics;
pub mod reload;
pub mod robots;
pub mod state;
mod upstream;
mod upstream_keeper;
