//! robotsguard's integration tests, in one binary: each module starts real processes (the
//! `robotsguard` binary, origins, Redis, nginx) on loopback and checks their behaviour. One binary
//! links pingora once instead of once per file.

mod support;

mod ai_era;
mod attack_findings;
mod ban_scope;
mod cli_check;
mod cli_validate_identify;
mod console;
mod crawl_delay;
mod crawler_knowledge;
mod dashboard;
mod disguised;
mod docs_generated;
mod edge_readiness;
mod embed;
mod evasion;
mod examples_config;
mod fail_fast;
mod fleet;
mod fuzz_regressions;
mod guard_api;
mod hardening_round2;
mod hardening_round3_bans;
mod hostile_input;
mod live_logs;
mod live_metrics;
mod live_reload;
mod live_shutdown;
mod log_envelope;
mod offenders;
mod one_judgment;
mod origins_selftest;
mod policy;
mod proxy_admin;
mod proxy_enforcement;
mod proxy_robots_sources;
mod proxy_routing;
mod proxy_tls;
mod robots_acquisition;
mod robots_refresh;
mod shared_state;
mod shared_state_tls;
mod tls_listeners;
mod upstream_tls;
mod validate_serve;
mod verification;
mod verify_dns;
mod verify_egress;
mod verify_signature;
mod web_bot_auth;
mod web_bot_auth_draft;
