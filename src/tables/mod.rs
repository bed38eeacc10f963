//! This process's tables of bookkeeping with expiry, bounded by construction: the coarse clock
//! they read, the expiring and deadline tables they are built on, and what they hold —
//! Crawl-delay budgets, who read robots.txt, strikes and bans, disguised crawlers' strikes. With
//! the shared state store they are the fallback (and the mirror of its bans): see
//! [`crate::store`].

pub mod clock;
pub mod compliance;
pub mod crawl_delay;
pub(crate) mod deadline_table;
pub mod disguised;
pub(crate) mod expiring;
pub mod nonces;
pub mod offenders;
pub mod rates;
