//! Real processes: the same store code and the same soak writer the simulator runs, on the
//! real OS instead of madsim, judged by the same oracle; and the side-by-side benchmark.
//!
//! Same code, different runtime. The workspace is always built with `--cfg madsim`, so
//! the `fencesim` binary contains madsim. A real writer process (`fencesim soak-writer`)
//! never creates a madsim `Runtime` and never calls madsim's API: the writer protocol
//! (`crate::actors::soak::Writer`) takes its clock and sleeps from the store's `Env`
//! trait, and here that is [`env::RealEnv`] over `store::SystemEnv` (the wall clock and
//! `std::thread::sleep`); it is driven by `futures::executor::block_on`, a plain blocking
//! executor. madsim's libc overrides (`clock_gettime`, `getrandom`, `sysconf`, ...) find
//! no runtime on the calling thread and pass straight through to libc, so `Instant`,
//! `SystemTime` and SQLite's own clock read the real machine; `std::thread::sleep` and
//! SQLite's locking are never intercepted. In the simulator the identical writer runs on a
//! madsim node with `crate::env::SimEnv` (virtual clock, virtual sleeps, the fault plan).
//! The store (`store::SqliteStore`) is the same code in both; it never names a runtime.
//!
//! Modules: `env` (the recording environment of a real writer), `files` (the soak
//! directory's files and formats), `writer` (one writer process), `soak` (the real storm's
//! parent and referee, and the simulated twin storm), `killpoints` (rulvar's kill-point
//! table in process and with real SIGKILLs), `bench` (`fencesim bench-real`), `cli` (the
//! subcommands' arguments). The machine's monotonic clock and CPU accounting are
//! `crate::machine`, the one place that reads them. Writers and kill-point children are
//! spawned, killed and reaped through `crate::child`, the module the foreign-store driver
//! uses too.

pub mod bench;
pub mod cli;
pub mod env;
pub mod files;
pub mod killpoints;
pub mod soak;
pub mod writer;
