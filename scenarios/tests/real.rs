//! Real-process mode end to end: real writer processes of the `fencesim` binary over one
//! SQLite file, judged by the simulator's oracle; real kill-point children SIGKILLed at a
//! write; the CLI's bad input. Each real storm is short (3 writers to the quorum, a cap of
//! 30 s that a healthy storm never reaches); none of them asserts a timing.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sim::actors::soak::{Surfaces, DEFAULT_SOAK_QUORUM};
use sim::history::OpKind;
use sim::real::killpoints::{self, Row, ROWS};
use sim::real::soak::{run_real, Ended, RealSoakOptions};
use store::ProfileName;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fencesim"))
}

fn opts(dir: &std::path::Path, profile: ProfileName, boot_retry: bool) -> RealSoakOptions {
    RealSoakOptions {
        exe: exe(),
        dir: dir.to_path_buf(),
        writers: 3,
        ttl_ms: 250,
        profile,
        seed: 1,
        cap: Duration::from_secs(30),
        surfaces: Surfaces::All,
        boot_retry,
    }
}

#[test]
fn three_real_writer_processes_reach_the_quorum_with_no_violation_under_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_real(&opts(dir.path(), ProfileName::Current, false)).expect("harness");
    let r = &out.report;
    assert!(r.passed, "{}", r.text());
    assert_eq!(r.ended, Ended::Quorum, "{}", r.text());
    assert!(r.activity.is_some_and(|a| a.meets(&DEFAULT_SOAK_QUORUM)));
    assert_eq!(r.exit_codes, vec![Some(0); 3]);
    // Every writer process's history was merged (each booted its own store), with what
    // the store applied. (A writer may legitimately never win a lease in a short storm.)
    for node in 0..3 {
        let booted =
            out.history.calls.iter().any(|c| c.node == node && c.op == OpKind::Boot && c.outcome.is_ok());
        assert!(booted, "node {node}");
    }
    assert!(out.history.applied_count > 0);
    let mut orders: Vec<usize> =
        out.history.calls.iter().filter_map(|c| c.applied.as_ref().map(|a| a.order)).collect();
    orders.sort_unstable();
    assert!(orders.iter().enumerate().all(|(i, o)| i == *o), "apply order is a permutation");
}

#[test]
fn real_writers_catch_stale_writes_on_the_unfenced_surfaces_of_v1_44_1() {
    let dir = tempfile::tempdir().unwrap();
    // The bounded boot retry keeps the writers alive through their concurrent boot, so
    // what is found is the fencing flaw itself.
    let out = run_real(&opts(dir.path(), ProfileName::V1_44_1, true)).expect("harness");
    let r = &out.report;
    assert!(!r.passed, "{}", r.text());
    assert!(r.profile.ends_with("+boot-retry"));
    let stale: Vec<_> = r.violations.iter().filter(|v| v.property == "no_stale_accept").collect();
    assert!(!stale.is_empty(), "{}", r.text());
    assert!(
        r.violations.iter().any(|v| v.property == "soak_referee" && v.witness.contains("stale-accept")),
        "{}",
        r.text()
    );
}

#[test]
fn a_real_kill_point_child_is_sigkilled_at_its_write_and_the_referee_recovers_after_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let row = Row::find("limit-limit-terminal-after").unwrap();
    let r = killpoints::run_real(&row, &exe(), dir.path(), 300);
    assert!(r.passed, "{:?}", r.failures);
    assert_eq!((r.child, r.resume), ((3, 2), (3, 2)));
    // The referee could not resume before the dead child's lease lapsed.
    assert!(r.wall_us >= 300_000, "{} us", r.wall_us);
}

#[test]
fn the_in_process_kill_point_table_pins_rulvars_re_pay_counts() {
    let dir = tempfile::tempdir().unwrap();
    let t = killpoints::table(None, dir.path(), 0);
    for r in &t.rows {
        assert!(r.passed, "{}: {:?}", r.name, r.failures);
    }
    let repaid: Vec<u32> = t.rows.iter().map(|r| r.resume.0).collect();
    assert_eq!(repaid, [1, 1, 1, 0, 0, 0, 0, 0, 1, 3]);
    assert_eq!(t.rows.len(), ROWS.len());
}

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(exe()).args(args).output().expect("spawn fencesim")
}

#[test]
fn soak_and_its_children_refuse_bad_input_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["soak", "--real"],
        vec!["soak", "--real", "--dir", d, "--writers", "0"],
        vec!["soak", "--real", "--dir", d, "--ttl-ms", "0"],
        vec!["soak", "--real", "--dir", d, "--profile", "v9"],
        vec!["soak", "--real", "--dir", d, "--surfaces", "some"],
        vec!["soak", "--real", "--dir", d, "--faults"],
        vec![
            "soak-writer",
            "--dir",
            d,
            "--index",
            "0",
            "--ttl-ms",
            "250",
            "--profile",
            "current",
            "--seed",
            "1",
            "--surfaces",
            "x",
        ],
        vec!["kill-child", "--db", d, "--row", "no-such-row", "--ttl-ms", "100"],
        vec!["bench-real", "--storms", "0"],
    ] {
        let out = fencesim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("error"), "{args:?}");
    }
}

#[test]
fn the_simulated_twin_storm_passes_under_current_and_fails_under_v1_45_0() {
    let ok = fencesim(&["soak", "--writers", "3", "--ttl-ms", "250", "--seed", "2"]);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(text.starts_with("simulated soak profile=current writers=3"), "{text}");
    let bad = fencesim(&["soak", "--profile", "v1_45_0", "--seed", "2", "--json"]);
    assert_eq!(bad.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(report["passed"], false);
    assert!(report["violations"].as_array().is_some_and(|v| !v.is_empty()));
}
