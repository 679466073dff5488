//! The body of one real soak writer process (`fencesim soak-writer`, hidden): build this
//! process's own `SqliteStore` over the shared file (concurrent boot included), run the
//! simulator's soak writer protocol ([`crate::actors::soak::Writer`]) under
//! `futures::executor::block_on` until the parent creates the stop file, and stream the
//! report events and store calls as JSON Lines (see `files.rs`).
//!
//! Nothing here touches madsim: the writer's clock and sleeps come from [`RealEnv`]
//! (store::SystemEnv: wall clock, `std::thread::sleep`), and the history's timestamps from
//! the machine-wide monotonic clock. Exit code 0 when the protocol ended normally, 1 when
//! it ended fatally (rulvar's writer rethrows and exits non-zero), 2 when the files could
//! not be opened.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use store::{Env, ProfileName, SqliteOptions};

use crate::actors::soak::{SoakEvent, SoakHost, Surfaces, Writer, WriterSpec};
use crate::history::{Call, Recorder};
use crate::machine::mono_ns;
use crate::real::env::RealEnv;
use crate::real::files;
use crate::recorded::{Caller, RecordedStore};

/// What one writer process runs.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub dir: PathBuf,
    pub index: u32,
    pub ttl_ms: u64,
    pub profile: ProfileName,
    pub seed: u64,
    pub surfaces: Surfaces,
    /// Override the profile's boot policy with the bounded retry (see `real::soak`).
    pub boot_retry: bool,
    /// Stop on its own after this long even without a stop file (an orphaned writer whose
    /// parent died must not storm forever).
    pub max_run: std::time::Duration,
}

/// The report file, the stop file and the writer's own deadline.
struct FileHost {
    report: RefCell<File>,
    stop: PathBuf,
    /// `mono_ns` after which the writer stops by itself.
    deadline_ns: u64,
}

impl SoakHost for FileHost {
    fn log(&self, event: SoakEvent) {
        let mut line =
            serde_json::to_string(&files::EventOut { at_ns: mono_ns(), event: &event }).unwrap_or_default();
        line.push('\n');
        // One write per line on an O_APPEND file: the parent never sees two lines mixed.
        let _ = self.report.borrow_mut().write_all(line.as_bytes());
    }
    fn stopped(&self) -> bool {
        self.stop.exists() || mono_ns() >= self.deadline_ns
    }
}

fn append_to(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Run one writer; returns the process exit code.
pub fn run(cfg: &WriterConfig) -> i32 {
    let (report, calls) = match (
        append_to(&files::report_path(&cfg.dir, cfg.index)),
        append_to(&files::calls_path(&cfg.dir, cfg.index)),
    ) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let calls = RefCell::new(calls);
    let on_return = Rc::new(move |c: &Call| {
        let mut line = serde_json::to_string(c).unwrap_or_default();
        line.push('\n');
        let _ = calls.borrow_mut().write_all(line.as_bytes());
    });
    let rec = Recorder::with_clock(mono_ns, Some(on_return));
    let env = Rc::new(RealEnv::new(rec.clone()));
    let deadline_ns = mono_ns().saturating_add(cfg.max_run.as_nanos().min(u128::from(u64::MAX)) as u64);
    let host =
        Rc::new(FileHost { report: RefCell::new(report), stop: files::stop_path(&cfg.dir), deadline_ns });
    let caller = Caller { rec, node: cfg.index, incarnation: 0 };
    let fatal = |message: String| {
        host.log(SoakEvent {
            w: cfg.index,
            kind: "fatal",
            surface: None,
            epoch: None,
            nonce: None,
            message: Some(message),
        });
        1
    };
    futures::executor::block_on(async {
        let mut profile = store::Profile::of(cfg.profile);
        if cfg.boot_retry {
            profile.boot_retry = store::Profile::current().boot_retry;
        }
        let options = SqliteOptions::new(files::db_path(&cfg.dir)).ttl_ms(cfg.ttl_ms as i64).profile(profile);
        let env_dyn: Rc<dyn Env> = env.clone();
        let store = match caller.boot(options, env_dyn).await {
            Ok(s) => s,
            Err(e) => return fatal(format!("boot: {e}")),
        };
        env.attach(store.clone());
        let spec = WriterSpec {
            w: cfg.index,
            incarnation: 0,
            seed: cfg.seed,
            ttl_ms: cfg.ttl_ms,
            surfaces: cfg.surfaces,
            small: false,
        };
        let writer =
            Writer::new(spec, RecordedStore { inner: store.into(), caller }, env.clone(), host.clone());
        let result = writer.run().await;
        drop(writer);
        env.detach();
        match result {
            Ok(()) => 0,
            Err(f) => fatal(f.0),
        }
    })
}
