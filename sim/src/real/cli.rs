//! The subcommands of real-process mode (wired into `crate::cli`): `soak` (real with
//! `--real`, else the simulated twin storm), `bench-real`, and the hidden child-process
//! entry points `soak-writer` and `kill-child`. Exit codes as everywhere: 0 pass, 1 a
//! violation found, 2 bad input or a harness failure.

use std::path::PathBuf;
use std::time::Duration;

use store::ProfileName;

use crate::actors::soak::Surfaces;
use crate::catalog::{find_scenario, parse_profile, usage};
use crate::real::bench::{self, BenchOptions};
use crate::real::killpoints;
use crate::real::soak::{run_real, run_sim, RealSoakOptions, SimStorm};
use crate::real::writer::{self, WriterConfig};
use crate::report::timeline;
use crate::world::Scenario;

/// `fencesim soak`.
#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    /// Run N real OS processes over one SQLite file (otherwise: the same storm simulated).
    #[arg(long)]
    pub real: bool,
    #[arg(long, default_value_t = 3)]
    pub writers: u32,
    #[arg(long, default_value_t = 250)]
    pub ttl_ms: u64,
    /// Directory for the database and the writers' reports (required with --real; the
    /// files of an earlier soak there are replaced).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value = "current")]
    pub profile: String,
    /// Stop the storm after this many seconds (wall with --real, virtual otherwise).
    #[arg(long, default_value_t = 60)]
    pub cap_secs: u64,
    /// Seeds each writer's dice (real runs are not reproducible beyond that).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `all` (rulvar's op mix) or `lease-core` (append, renew, release only).
    #[arg(long, default_value = "all")]
    pub surfaces: String,
    /// Simulated only: inject the scenario's swarm faults for this seed.
    #[arg(long)]
    pub faults: bool,
    /// Real only: give every writer the bounded boot retry whatever the profile (isolates
    /// the fencing flaws from the v1_44_x boot race).
    #[arg(long)]
    pub boot_retry: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the merged timeline of store calls.
    #[arg(long)]
    pub timeline: bool,
}

/// `fencesim soak-writer` (hidden): one real writer process.
#[derive(clap::Args, Debug)]
pub struct WriterArgs {
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub index: u32,
    #[arg(long)]
    pub ttl_ms: u64,
    #[arg(long)]
    pub profile: String,
    #[arg(long)]
    pub seed: u64,
    #[arg(long, default_value = "all")]
    pub surfaces: String,
    #[arg(long)]
    pub boot_retry: bool,
    /// Stop by itself after this many seconds (the parent normally stops it long before).
    #[arg(long, default_value_t = 600)]
    pub max_secs: u64,
}

/// `fencesim kill-child` (hidden): one kill-point child process.
#[derive(clap::Args, Debug)]
pub struct KillChildArgs {
    #[arg(long)]
    pub db: PathBuf,
    #[arg(long)]
    pub row: String,
    #[arg(long)]
    pub ttl_ms: u64,
}

/// `fencesim bench-real`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Real storms for the rate figure.
    #[arg(long, default_value_t = 10)]
    pub storms: u32,
    /// Simulated storms for the rate figure.
    #[arg(long, default_value_t = 4000)]
    pub sim_storms: u64,
    /// Simulator threads (default: available cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Real detection budget per profile, in seconds.
    #[arg(long, default_value_t = 120)]
    pub cap_secs: u64,
    /// The real kill-point child's lease ttl.
    #[arg(long, default_value_t = 2000)]
    pub kill_ttl_ms: u64,
    /// Where real databases and reports go (default: a fresh temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long)]
    pub no_killpoints: bool,
    #[arg(long)]
    pub no_detection: bool,
}

fn check_knobs(writers: u32, ttl_ms: u64) -> Result<(), String> {
    if !(1..=64).contains(&writers) {
        return Err(format!("--writers must be in 1..=64, got {writers}"));
    }
    if !(1..=2_147_483_647).contains(&ttl_ms) {
        return Err(format!("--ttl-ms must be in 1..=2147483647, got {ttl_ms}"));
    }
    Ok(())
}

fn this_exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))
}

/// `fencesim soak`.
pub fn soak(a: SoakArgs, catalog: &[&'static dyn Scenario]) -> i32 {
    let parsed = (|| -> Result<(ProfileName, Surfaces), String> {
        check_knobs(a.writers, a.ttl_ms)?;
        if a.cap_secs == 0 {
            return Err("--cap-secs must be at least 1".into());
        }
        Ok((parse_profile(&a.profile)?, Surfaces::parse(&a.surfaces)?))
    })();
    let (profile, surfaces) = match parsed {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let (report, history) = if a.real {
        let Some(dir) = a.dir.clone() else { return usage("--real needs --dir DIR".into()) };
        if a.faults {
            return usage("--faults applies to the simulated storm only".into());
        }
        let exe = match this_exe() {
            Ok(e) => e,
            Err(e) => return usage(e),
        };
        let opts = RealSoakOptions {
            exe,
            dir,
            writers: a.writers,
            ttl_ms: a.ttl_ms,
            profile,
            seed: a.seed,
            cap: Duration::from_secs(a.cap_secs),
            surfaces,
            boot_retry: a.boot_retry,
        };
        match run_real(&opts) {
            Ok(out) => (out.report, out.history),
            Err(e) => return usage(e),
        }
    } else {
        let name = match surfaces {
            Surfaces::All => "soak",
            Surfaces::LeaseCore => "f3-check-then-mutate",
        };
        let scenario = match find_scenario(catalog, name) {
            Ok(s) => s,
            Err(e) => return usage(e),
        };
        let storm = SimStorm {
            writers: a.writers,
            ttl_ms: a.ttl_ms,
            cap_ms: a.cap_secs * 1000,
            profile,
            seed: a.seed,
            faults: a.faults,
        };
        match run_sim(scenario, &storm) {
            Ok(r) => r,
            Err(e) => return usage(e),
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        if a.timeline {
            print!("{}", timeline(&history));
            println!();
        }
        print!("{}", report.text());
    }
    i32::from(!report.passed)
}

/// `fencesim soak-writer`.
pub fn soak_writer(a: WriterArgs) -> i32 {
    let cfg = (|| -> Result<WriterConfig, String> {
        check_knobs(a.index + 1, a.ttl_ms)?;
        Ok(WriterConfig {
            dir: a.dir.clone(),
            index: a.index,
            ttl_ms: a.ttl_ms,
            profile: parse_profile(&a.profile)?,
            seed: a.seed,
            surfaces: Surfaces::parse(&a.surfaces)?,
            boot_retry: a.boot_retry,
            max_run: Duration::from_secs(a.max_secs),
        })
    })();
    match cfg {
        Ok(cfg) => writer::run(&cfg),
        Err(e) => usage(e),
    }
}

/// `fencesim kill-child`.
pub fn kill_child(a: KillChildArgs) -> i32 {
    if let Err(e) = check_knobs(1, a.ttl_ms) {
        return usage(e);
    }
    killpoints::child_main(&a.db, &a.row, a.ttl_ms)
}

/// `fencesim bench-real`.
pub fn bench_real(a: BenchArgs, catalog: &[&'static dyn Scenario]) -> i32 {
    if a.storms == 0 || a.sim_storms == 0 || a.cap_secs == 0 {
        return usage("--storms, --sim-storms and --cap-secs must be at least 1".into());
    }
    if let Err(e) = check_knobs(1, a.kill_ttl_ms) {
        return usage(e);
    }
    let exe = match this_exe() {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    // Keep the temp dir alive for the whole run.
    let (dir, _guard) = match a.dir {
        Some(d) => (d, None),
        None => match bench::default_dir() {
            Ok(t) => (t.path().to_path_buf(), Some(t)),
            Err(e) => return usage(e),
        },
    };
    let opts = BenchOptions {
        exe,
        dir,
        real_storms: a.storms,
        sim_storms: a.sim_storms,
        jobs: a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1),
        writers: 3,
        ttl_ms: 250,
        detect_cap: Duration::from_secs(a.cap_secs),
        kill_ttl_ms: a.kill_ttl_ms,
        killpoints: !a.no_killpoints,
        detection: !a.no_detection,
    };
    bench::run(catalog, &opts)
}
