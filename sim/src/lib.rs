//! `sim`: everything that makes a run deterministic and judged. Seeds and RNG streams, the
//! fault plan, the madsim world (nodes, kill, restart, per-node clocks, the database file),
//! the `Env` that consults the plan at each fault point, the history recorder, the oracle
//! and its named properties, the timeline and JSON trace, the failure report, sweeps, the
//! findings table, the plan shrinker, and the `fencesim` command-line logic. Foreign stores
//! (`foreign`): a store in another language, one child process per simulated process,
//! behind the same store SPI; child processes of every kind go through `child`.
//!
//! Layers, bottom up (each module names only modules below it; `tests/layers.rs` fails on
//! a circle): `seed`, `ledger`, `machine` (the real clocks), `record_text` / `plan`, `child` / `time` (the
//! virtual clock), `foreign` / `history` (with `FinalState`) / `verdict`, `recorded`,
//! `world_state` / `env`, `oracle` / `actors`, `report` / `world` / `runner`, `catalog` /
//! `sweep`, `real` / `findings` / `shrink`, `ci_report` / `explore`, `html` / `cli`.
//!
//! What is simulated: processes (madsim nodes) with their own clocks, scheduling (seeded),
//! time (virtual), process crashes and restarts, stalls. What is real: SQLite (bundled),
//! its file locking and SQLITE_BUSY, the store code under test. What is not modelled:
//! power loss, torn pages, lost fsyncs, crashes inside one SQLite call.

#[cfg(not(madsim))]
compile_error!(
    "the simulator needs `--cfg madsim` (set by .cargo/config.toml [build] rustflags; a RUSTFLAGS \
     environment variable replaces it: use RUSTFLAGS=\"--cfg madsim ...\")"
);

pub mod actors;
pub mod audit;
pub mod catalog;
pub mod child;
pub mod ci_report;
pub mod cli;
pub mod env;
pub mod explore;
pub mod findings;
pub mod foreign;
pub mod history;
pub mod html;
pub mod interrupt;
pub mod ledger;
pub mod machine;
pub mod oracle;
pub mod plan;
pub mod real;
pub mod record_text;
pub mod recorded;
pub mod report;
pub mod richness;
pub mod runner;
pub mod seed;
pub mod shrink;
pub mod sweep;
pub mod time;
pub mod verdict;
pub mod world;
pub mod world_state;
