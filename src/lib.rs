//! robotsguard: an edge reverse proxy that makes crawlers obey the site's live robots.txt.
//!
//! Layers, bottom to top (a module uses only those below it): [`robots`] (the robots.txt engine),
//! [`crawlers`] (who is a crawler), [`config`] (the YAML file), [`fetch`] (getting robots.txt),
//! [`state`] and [`enforce`] (the snapshot the hot path reads and the one decision function), then
//! the shells: [`metrics`], [`logs`], [`proxy`], [`admin`], [`reload`], [`server`], [`demo`] and
//! [`cli`].

pub mod admin;
pub mod cli;
pub mod client;
pub mod config;
pub mod crawlers;
pub mod demo;
pub mod edge;
pub mod enforce;
pub mod fetch;
pub mod logs;
pub mod metrics;
pub mod proxy;
pub mod proxy_protocol;
pub mod reload;
pub mod robots;
pub mod server;
pub mod state;
pub mod tls;
pub mod upstream;
pub mod upstream_keeper;
