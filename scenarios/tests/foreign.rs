//! Foreign stores end to end: the Python reference store (foreign/python/sqlite_store.py)
//! passes rulvar's conformance checks, runs the store scenarios under the same seeds and
//! oracle as the Rust store, its v1.44.0 flaw is caught by the generic oracle, and every
//! fault of a child is a harness error (exit 2) naming the process and the call, with no
//! child and no database file left behind, after Ctrl-C and SIGTERM too. Skipped (with a
//! note) when python3 is missing.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sim::foreign::{with_store, ForeignSpec};
use sim::runner::execute;
use sim::world::Scenario;
use store::ProfileName;

const PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../foreign/python/sqlite_store.py");

fn python() -> bool {
    let ok = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("python3 is not installed: skipping the foreign-store tests");
    }
    ok
}

fn spec(extra: &str) -> ForeignSpec {
    ForeignSpec::parse(&format!("python3 {PY} {extra}"), Duration::from_secs(10)).unwrap()
}

fn scenario(name: &str) -> &'static dyn Scenario {
    scenarios::catalog().into_iter().find(|s| s.name() == name).unwrap()
}

fn fencesim(args: &[&str]) -> (Option<i32>, String, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fencesim");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text, pid)
}

/// Database files a fencesim process with this pid left in /dev/shm or the temp dir.
fn leftovers(pid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for dir in [Path::new("/dev/shm").to_path_buf(), std::env::temp_dir()] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with(&format!("fencesim-{pid}-"))
                || name.starts_with(&format!("fencesim-child-{pid}-"))
                || name.starts_with(&format!("fencesim-conformance-{pid}-"))
            {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn the_python_store_passes_every_conformance_check_and_its_flaw_fails_the_windows() {
    if !python() {
        return;
    }
    let cmd = format!("python3 {PY}");
    let (code, text, pid) = fencesim(&["conformance", "--store", &cmd]);
    assert_eq!(code, Some(0), "{text}");
    for id in store::conformance::ALL_CHECKS {
        assert!(text.contains(&format!("ok    {id}\n")), "{id} did not pass:\n{text}");
    }
    assert!(text.contains("python-sqlite-reference 0.1.0"), "{text}");
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    let flawed = format!("python3 {PY} --flaw v1_44_0");
    let (code, text, _) =
        fencesim(&["conformance", "--store", &flawed, "--check", "fenced-append-takeover-window"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("FAIL  fenced-append-takeover-window: B acquired epoch 2"), "{text}");
}

#[test]
fn the_same_seed_over_the_rust_and_the_python_store_ends_with_the_same_verdict() {
    if !python() {
        return;
    }
    for (name, seed) in [("soak", 1), ("tombstone", 2), ("boot-race", 3)] {
        let s = scenario(name);
        let rust = with_store(None, || execute(s, ProfileName::Current, seed, None, None)).unwrap();
        let py = with_store(Some(spec("")), || execute(s, ProfileName::Current, seed, None, None)).unwrap();
        assert!(rust.report.passed, "{name} seed {seed} over Rust: {:?}", rust.violations);
        assert_eq!(
            py.report.passed, rust.report.passed,
            "{name} seed {seed} over Python: {:?}",
            py.violations
        );
        // The reference store emits every hook point the Rust store has, in the same places:
        // its history is the Rust store's, byte for byte.
        let line = sim::cli::compare::compare_line(&rust, &py);
        assert!(
            line.contains("same verdict") && line.contains("histories identical"),
            "{name} seed {seed}: {line}"
        );
        // Twice over Python: the child's behaviour is deterministic.
        let again =
            with_store(Some(spec("")), || execute(s, ProfileName::Current, seed, None, None)).unwrap();
        assert_eq!(again.report.trace_hash, py.report.trace_hash, "{name} seed {seed}");
    }
}

#[test]
fn the_generic_oracle_catches_the_python_v1_44_0_flaw_at_append_release_and_renew() {
    if !python() {
        return;
    }
    let s = scenario("f3-check-then-mutate");
    let mut caught: Vec<&str> = Vec::new();
    with_store(Some(spec("--flaw v1_44_0")), || {
        for seed in 0..200 {
            let out = execute(s, ProfileName::Current, seed, None, None).unwrap();
            for v in &out.violations {
                if v.property == "no_stale_accept" || v.property == "expiry_set_only_by_holder" {
                    if let Some(op) = v.op.filter(|op| ["append", "release", "renew"].contains(op)) {
                        if !caught.contains(&op) {
                            caught.push(op);
                        }
                    }
                }
            }
            if caught.len() == 3 {
                break;
            }
        }
    });
    caught.sort();
    assert_eq!(caught, vec!["append", "release", "renew"]);
}

/// A fake store: a shell script speaking just enough of the protocol to fail in one way.
fn fake(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    format!("sh {}", path.display())
}

const HELLO: &str = r#"read l; echo '{"id":1,"ok":{"protocol":1,"store":"fake","version":"0","capabilities":{},"hooks":[]}}'"#;

#[test]
fn every_child_fault_is_a_harness_error_naming_the_process_and_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "version",
            r#"read l; echo '{"id":1,"ok":{"protocol":2,"store":"fake","version":"0"}}'; sleep 9.137"#
                .to_string(),
            "protocol version 2",
        ),
        ("garbage", format!("{HELLO}; read l; echo 'hello there'; sleep 9.137"), "not JSON"),
        (
            "wrong-id",
            format!("{HELLO}; read l; echo '{{\"id\":7,\"ok\":null}}'; sleep 9.137"),
            "call 2 was asked",
        ),
        (
            "unknown-error",
            format!("{HELLO}; read l; echo '{{\"id\":2,\"err\":{{\"code\":\"oops\"}}}}'; sleep 9.137"),
            "unknown error code",
        ),
        (
            "undeclared-hook",
            format!("{HELLO}; read l; echo '{{\"id\":2,\"hook\":\"sqlite.boot.open\"}}'; sleep 9.137"),
            "did not declare",
        ),
        ("exits", format!("{HELLO}; read l; echo dying >&2; exit 3"), "closed its stdout"),
        ("silent", format!("{HELLO}; read l; sleep 9.137"), "wall-clock guard"),
    ];
    for (name, body, expect) in cases {
        let cmd = fake(dir.path(), name, &body);
        let (code, text, pid) = fencesim(&[
            "run",
            "--scenario",
            "soak",
            "--seed",
            "1",
            "--quiet",
            "--store",
            &cmd,
            "--store-guard-ms",
            "500",
        ]);
        assert_eq!(code, Some(2), "{name}: {text}");
        assert!(text.contains("harness error") && text.contains(expect), "{name}: {text}");
        assert!(text.contains("node ") && text.contains("call "), "{name} names no process or call: {text}");
        if name == "exits" {
            assert!(text.contains("its stderr: dying"), "{text}");
        }
        assert!(leftovers(pid).is_empty(), "{name}: {:?}", leftovers(pid));
        assert_eq!(running_after_teardown("9.137"), Vec::<String>::new(), "{name}: orphans");
    }
}

/// [`running_with`], given the kernel up to two seconds to finish the kills fencesim sent
/// before it exited: a killed process on a loaded machine can still be listed for a moment
/// (CI met one such `sleep` once; a `python3` shim's interpreter dies with its process group
/// the same way). A store process that was never killed outlives this.
fn running_after_teardown(needle: &str) -> Vec<String> {
    let mut left = running_with(needle);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = running_with(needle);
    }
    left
}

/// Live processes whose command line mentions `needle` (orphaned fake stores).
fn running_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    // The store processes of this test are the only ones sleeping this odd number of seconds.
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(needle) {
            found.push(format!("{}: {text}", e.file_name().to_string_lossy()));
        }
    }
    found
}

#[test]
fn a_foreign_store_is_refused_for_engine_scenarios_and_an_empty_command() {
    let (code, text, _) = fencesim(&["run", "--scenario", "queue", "--seed", "1", "--store", "python3 x.py"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("cannot run over a foreign store"), "{text}");
    let (code, text, _) = fencesim(&["run", "--scenario", "soak", "--seed", "1", "--store", " "]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--store needs a command"), "{text}");
}

/// The pids of live processes whose parent is `parent` and whose command line mentions
/// `needle`.
fn children_of(parent: u32, needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: the comm may hold spaces, so read after its ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid != Some(parent.to_string().as_str()) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn ctrl_c_and_sigterm_kill_every_store_process_and_remove_every_database_file() {
    if !python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (signal, expect) in [("INT", 130), ("TERM", 143)] {
        // A copy of the reference store under a name no other process has: whatever is
        // left running with it in its command line was started by this fencesim.
        let name = format!("interrupted_store_{signal}_{}.py", std::process::id());
        let script = dir.path().join(&name);
        std::fs::copy(PY, &script).unwrap();
        let store = format!("python3 {}", script.display());
        // Ctrl-C a sweep; SIGTERM a conformance run (the two ways a run makes its database).
        let args: Vec<&str> = if signal == "INT" {
            vec!["sweep", "--scenario", "soak", "--seeds", "0..1000", "--jobs", "2", "--store", &store]
        } else {
            vec!["conformance", "--store", &store]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn fencesim");
        let pid = child.id();
        // Wait until its store processes and its database files exist.
        let mut seen = false;
        for _ in 0..3000 {
            if !children_of(pid, &name).is_empty() && !leftovers(pid).is_empty() {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(seen, "SIG{signal}: fencesim {pid} never had a store process and a database file");
        // The shell's own `kill` builtin: no procps needed.
        let sent = Command::new("sh").arg("-c").arg(format!("kill -{signal} {pid}")).status().unwrap();
        assert!(sent.success(), "kill -{signal} {pid}");
        let mut status = None;
        for _ in 0..1500 {
            if let Some(s) = child.try_wait().unwrap() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let Some(status) = status else {
            let _ = child.kill();
            panic!("SIG{signal}: fencesim {pid} did not exit within 30 s");
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(expect), "SIG{signal}: {err}");
        assert!(err.contains(&format!("fencesim: SIG{signal}: killed ")), "SIG{signal}: {err}");
        // Killed and reaped before the exit; a wrapper's own child (a `python3` shim's
        // interpreter) died with its process group: give the kernel a moment to clear it.
        let left = running_after_teardown(&name);
        assert_eq!(left, Vec::<String>::new(), "SIG{signal}: store processes left running");
        assert_eq!(leftovers(pid), Vec::<String>::new(), "SIG{signal}: database files left behind");
    }
}

#[test]
fn the_reports_of_run_sweep_merge_and_explore_name_the_foreign_store_once() {
    if !python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!("python3 {PY}");
    let py_json = dir.path().join("py.json");
    let rust_json = dir.path().join("rust.json");
    let sweep = |json: &Path, store: Option<&str>| {
        let json = json.display().to_string();
        let mut args = vec!["sweep", "--scenario", "tombstone", "--seeds", "0..2", "--jobs", "1"];
        args.extend(["--json", json.as_str()]);
        if let Some(store) = store {
            args.extend(["--store", store]);
        }
        fencesim(&args)
    };
    // Two seeds: clean, though short of the coverage goals' seed counts (exit 3).
    let (code, text, _) = sweep(&py_json, Some(&cmd));
    assert!(matches!(code, Some(0 | 3)), "{text}");
    assert_eq!(text.matches("store: python-sqlite-reference 0.1.0").count(), 1, "{text}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&py_json).unwrap()).unwrap();
    assert_eq!(
        report["store"],
        serde_json::json!({"command": cmd, "name": "python-sqlite-reference", "version": "0.1.0"})
    );
    let (code, text, _) = sweep(&rust_json, None);
    assert!(matches!(code, Some(0 | 3)), "{text}");
    assert!(!text.contains("store:"), "{text}");
    let rust: serde_json::Value = serde_json::from_slice(&std::fs::read(&rust_json).unwrap()).unwrap();
    assert!(rust.get("store").is_none(), "the Rust store's report has no store field");

    let (py, rs) = (py_json.display().to_string(), rust_json.display().to_string());
    let (code, text, _) = fencesim(&["merge", &py, &rs]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("cannot merge reports of different stores"), "{text}");
    let (code, text, _) = fencesim(&["merge", &py, &py]);
    assert!(matches!(code, Some(0 | 3)), "{text}");
    assert_eq!(text.matches("store: python-sqlite-reference 0.1.0").count(), 1, "{text}");

    let ex_json = dir.path().join("explore.json").display().to_string();
    let out_dir = dir.path().display().to_string();
    let (code, text, _) = fencesim(&[
        "explore",
        "--scenario",
        "tombstone",
        "--runs",
        "3",
        "--jobs",
        "1",
        "--out-dir",
        &out_dir,
        "--json",
        &ex_json,
        "--store",
        &cmd,
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text.matches("store: python-sqlite-reference 0.1.0").count(), 1, "{text}");
    let explored: serde_json::Value = serde_json::from_slice(&std::fs::read(&ex_json).unwrap()).unwrap();
    assert_eq!(explored["store"]["version"], "0.1.0");

    let (code, text, _) =
        fencesim(&["run", "--scenario", "tombstone", "--seed", "1", "--json", "--store", &cmd]);
    assert_eq!(code, Some(0), "{text}");
    let run: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(run["store"]["name"], "python-sqlite-reference");
    let (code, text, _) =
        fencesim(&["run", "--scenario", "tombstone", "--seed", "1", "--quiet", "--store", &cmd]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text.matches("store: python-sqlite-reference 0.1.0").count(), 1, "{text}");
}
