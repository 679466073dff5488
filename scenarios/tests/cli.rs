//! The `fencesim` program end to end: byte-identical traces across processes, shard reports
//! that merge to the unsharded report, and exit code 2 with a clear message on bad input.

use std::process::Command;

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("spawn fencesim")
}

#[test]
fn same_seed_gives_a_byte_identical_trace_in_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for i in 0..2 {
        let path = dir.path().join(format!("t{i}.jsonl"));
        let out = fencesim(&[
            "run",
            "--scenario",
            "soak",
            "--profile",
            "v1_44_0",
            "--seed",
            "7",
            "--quiet",
            "--trace",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        traces.push(std::fs::read(&path).unwrap());
    }
    assert!(!traces[0].is_empty());
    assert_eq!(traces[0], traces[1]);
}

#[test]
fn merged_shards_equal_the_unsharded_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.json");
    let out = fencesim(&[
        "sweep",
        "--scenario",
        "soak",
        "--profile",
        "boot_race",
        "--seeds",
        "0..12",
        "--jobs",
        "2",
        "--json",
        whole.to_str().unwrap(),
    ]);
    assert!(out.status.code().is_some());
    let mut parts = Vec::new();
    for k in 1..=3 {
        let p = dir.path().join(format!("s{k}.json"));
        let shard = format!("{k}/3");
        fencesim(&[
            "sweep",
            "--scenario",
            "soak",
            "--profile",
            "boot_race",
            "--seeds",
            "0..12",
            "--shard",
            &shard,
            "--json",
            p.to_str().unwrap(),
        ]);
        parts.push(p);
    }
    let merged = dir.path().join("merged.json");
    let mut args = vec!["merge".to_string()];
    args.extend(parts.iter().map(|p| p.display().to_string()));
    args.extend(["--json".to_string(), merged.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    fencesim(&refs);
    let a: sim::sweep::SweepReport = serde_json::from_str(&std::fs::read_to_string(&whole).unwrap()).unwrap();
    let b: sim::sweep::SweepReport =
        serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(a.seeds_run, 12);
    assert_eq!(a.without_timing(), b.without_timing());
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--scenario", "nope", "--seed", "1"], "unknown scenario"),
        (&["run", "--scenario", "soak", "--profile", "v9", "--seed", "1"], "unknown profile"),
        (&["sweep", "--scenario", "soak", "--seeds", "5..2"], "empty or reversed"),
        (&["sweep", "--scenario", "soak", "--seeds", "0..4", "--shard", "0/3"], "1 <= K <= N"),
        (&["sweep", "--scenario", "soak", "--seeds", "0..4", "--shard", "4/3"], "1 <= K <= N"),
        (
            &["run", "--scenario", "soak", "--seed", "1", "--plan", "/nonexistent/plan.json"],
            "cannot read plan",
        ),
    ];
    for (args, needle) in cases {
        let out = fencesim(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_saved_plan_replays_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let a = fencesim(&[
        "run",
        "--scenario",
        "soak",
        "--seed",
        "3",
        "--quiet",
        "--plan-out",
        plan.to_str().unwrap(),
    ]);
    let b =
        fencesim(&["run", "--scenario", "soak", "--seed", "3", "--quiet", "--plan", plan.to_str().unwrap()]);
    let hash = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("trace hash")).map(str::to_string)
    };
    assert!(hash(&a).is_some());
    assert_eq!(hash(&a), hash(&b));
}

#[test]
fn a_plan_whose_knobs_no_world_can_run_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let out = fencesim(&[
        "run",
        "--scenario",
        "edges",
        "--seed",
        "3",
        "--quiet",
        "--plan-out",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    for (knob, value, says) in
        [("ttl_ms", 1u64, "1 ms ttl"), ("nodes", 0, "0 nodes"), ("cap_ms", 0, "0 ms cap")]
    {
        let mut bad = v.clone();
        bad["knobs"][knob] = value.into();
        let path = dir.path().join(format!("{knob}.json"));
        std::fs::write(&path, bad.to_string()).unwrap();
        let out = fencesim(&[
            "run",
            "--scenario",
            "edges",
            "--seed",
            "3",
            "--quiet",
            "--plan",
            path.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{knob}: {err}");
        assert!(err.contains(says), "{knob}: {err}");
    }
    v["knobs"]["ttl_ms"] = 20.into();
    std::fs::write(&plan, v.to_string()).unwrap();
    let out =
        fencesim(&["run", "--scenario", "edges", "--seed", "3", "--quiet", "--plan", plan.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(2), "the shortest ttl runs: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn findings_prints_the_table_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("findings.json");
    let out = fencesim(&["findings", "--rows", "F3c,B,T", "--seeds", "20", "--json", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("id   scenario"), "{stdout}");
    assert!(stdout.contains("verdict: PASS"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["findings"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        for field in [
            "id",
            "scenario",
            "profile",
            "caught",
            "first_failing_seed",
            "seeds_needed",
            "property",
            "wall_ms",
            "generic_seeds_needed",
        ] {
            assert!(r.get(field).is_some(), "missing {field} in {r}");
        }
        assert_eq!(r["caught"], true, "{r}");
    }
    assert_eq!(v["current_clean"]["seeds"], 20);
    assert_eq!(v["current_clean"]["failures"], 0);
}

#[test]
fn findings_and_shrink_reject_bad_input_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["findings", "--rows", "F9", "--seeds", "1"], "unknown finding"),
        (&["findings", "--seeds", "0"], "at least 1"),
        (&["shrink", "--seed", "1"], "needs --scenario"),
        (&["shrink", "--finding", "F9", "--seed", "1"], "unknown finding"),
        (&["shrink", "--scenario", "nope", "--seed", "1"], "unknown scenario"),
        (&["shrink", "--scenario", "soak", "--profile", "current", "--seed", "3"], "nothing to shrink"),
    ];
    for (args, needle) in cases {
        let out = fencesim(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn shrink_writes_a_plan_that_reproduces_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/plans/F3c.json");
    let plan: sim::plan::Plan = serde_json::from_str(&std::fs::read_to_string(committed).unwrap()).unwrap();
    let seed = plan.seed.to_string();
    let out_plan = dir.path().join("min.json");
    let out = fencesim(&[
        "shrink",
        "--finding",
        "F3c",
        "--seed",
        &seed,
        "--plan",
        committed,
        "--out",
        out_plan.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("before: 1 decisions"), "{stdout}");
    assert!(stdout.contains("after: 1 decisions"), "{stdout}");
    assert!(stdout.contains("--plan"), "{stdout}");
    let replay = fencesim(&[
        "run",
        "--scenario",
        "f3-check-then-mutate",
        "--profile",
        "v1_44_0",
        "--seed",
        &seed,
        "--plan",
        out_plan.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(replay.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&replay.stdout).contains("renew"));
}

#[test]
fn sweep_reports_coverage_per_fault_point() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let out =
        fencesim(&["sweep", "--scenario", "tombstone", "--seeds", "0..10", "--json", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Ten seeds pass; whether they also meet every declared goal's share is the coverage
    // gate's business (exit 3 with the report saying which goal fell short).
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let unmet = v["goals_unmet"].as_array().expect("goals_unmet").len();
    assert_eq!(out.status.code(), Some(if unmet == 0 { 0 } else { 3 }), "{stdout}");
    assert_eq!(stdout.contains("COVERAGE SHORTFALL"), unmet > 0, "{stdout}");
    for (name, g) in v["goals"].as_object().expect("declared goals") {
        let (req, met) = (g["required"].as_u64().unwrap(), g["met_seeds"].as_u64().unwrap());
        let listed = v["goals_unmet"].as_array().unwrap().iter().any(|x| x == name);
        assert_eq!(listed, met < req, "{name}: {met}/{req}");
    }
    assert!(stdout.contains("fault point") && stdout.contains("survived"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = v["fault_points_hit"].as_object().unwrap();
    assert!(points.values().any(|p| p["fired"].as_u64().unwrap_or(0) > 0));
    for p in points.values() {
        for field in ["fired_runs", "fired_and_passed_runs", "crashed_runs", "crashed_and_passed_runs"] {
            assert!(p.get(field).is_some(), "missing {field}");
        }
    }
}

#[test]
fn a_plan_with_fewer_clocks_than_nodes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/plans/F3c.json");
    let mut plan: sim::plan::Plan =
        serde_json::from_str(&std::fs::read_to_string(committed).unwrap()).unwrap();
    plan.clocks.truncate(1);
    let path = dir.path().join("bad.json");
    std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let seed = plan.seed.to_string();
    let out = fencesim(&[
        "run",
        "--scenario",
        "f3-check-then-mutate",
        "--seed",
        &seed,
        "--plan",
        path.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("clocks"), "{err}");
}
