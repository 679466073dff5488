//! The negative table: for every flaw profile, which conformance checks must FAIL and
//! which must PASS, derived from docs/store-contract.md 9 (what each release exposes),
//! 1.2-1.7 (which check defines which rule) and 4 (the F3 interleave checks, fencesim's ids). Both directions are asserted for every (profile, check) pair; the
//! observed table is printed (`cargo test -p store --test negative_table -- --nocapture`).

use futures::executor::block_on;
use store::conformance::{self, SqliteOpener, ALL_CHECKS};
use store::{Profile, ProfileName};

/// The checks that exercise the epoch tombstone (T): every profile before v1.63.0 fails them.
const TOMBSTONE: &[&str] = &["fencing-epoch-tombstone", "fenced-tombstone-zombie-rejected"];

/// Every transcript-fencing check (F2 and the blob half of F4): fail while blobs ignore the
/// lease (through v1.45.0). The blob-put window check needs a fence on the blob put to
/// exist at all, so it fails there too.
const TRANSCRIPTS: &[&str] = &[
    "fenced-transcripts-marker-declared",
    "fenced-transcripts-stale-put-rejected",
    "fenced-transcripts-stale-delete-rejected",
    "fenced-transcripts-run-match",
    "fenced-blob-put-takeover-window",
];

/// The journal-side fenced-writes checks that fail while `put_meta`/`delete` ignore the
/// lease and the run-match rule is off (F1, F4 journal half, cross-run append): through
/// v1.44.1.
const META_DELETE_RUN_MATCH: &[&str] = &[
    "fenced-marker-declared",
    "fenced-meta-stale-rejected",
    "fenced-delete-stale-rejected",
    "fenced-run-match",
];

/// F3: the fence check and the mutation are split (v1.44.0 only).
const F3_WINDOWS: &[&str] =
    &["fenced-append-takeover-window", "fenced-release-takeover-window", "fenced-renew-takeover-window"];

/// The checks that must fail under `profile`; every other check must pass.
fn must_fail(profile: ProfileName) -> Vec<&'static str> {
    let groups: &[&[&str]] = match profile {
        ProfileName::V1_44_0 => &[F3_WINDOWS, META_DELETE_RUN_MATCH, TOMBSTONE, TRANSCRIPTS],
        ProfileName::V1_44_1 => &[META_DELETE_RUN_MATCH, TOMBSTONE, TRANSCRIPTS],
        ProfileName::V1_45_0 => &[TOMBSTONE, TRANSCRIPTS],
        // The boot race itself is a simulation scenario (concurrent construction), not a
        // conformance check; the profile also predates the tombstone.
        ProfileName::BootRace => &[TOMBSTONE],
        ProfileName::PreTombstone => &[TOMBSTONE],
        ProfileName::Current => &[],
    };
    groups.iter().flat_map(|g| g.iter().copied()).collect()
}

/// For some expected failures, the reason the check must give (a substring of its
/// message), so a check failing for an unrelated reason does not count as the flaw.
fn expected_reason(profile: ProfileName, id: &str) -> Option<&'static str> {
    match id {
        "fenced-append-takeover-window"
        | "fenced-release-takeover-window"
        | "fenced-renew-takeover-window" => Some("between A's fence check"),
        "fenced-blob-put-takeover-window" if profile != ProfileName::Current => Some("never fired"),
        "fencing-epoch-tombstone" => Some("survive delete as a tombstone"),
        "fenced-tombstone-zombie-rejected" => Some("zombie"),
        "fenced-meta-stale-rejected" => Some("A's stale meta write"),
        // Through v1.44.1 the append checks the lease's own run: a cross-run append lands.
        "fenced-run-match" => Some("append of seq 1 returned Ok"),
        "fenced-delete-stale-rejected" => Some("A's stale delete"),
        "fenced-transcripts-stale-put-rejected" => Some("A's stale put"),
        _ => None,
    }
}

fn run_profile(profile: ProfileName) {
    let expected_fail = must_fail(profile);
    for id in &expected_fail {
        assert!(ALL_CHECKS.contains(id), "the table names an unknown check {id}");
    }
    let mut lines = Vec::new();
    let mut wrong = Vec::new();
    for id in ALL_CHECKS {
        let dir = tempfile::tempdir().expect("temp dir");
        let opener = SqliteOpener::new(dir.path().join("negative.db"), Profile::of(profile));
        let outcome = block_on(conformance::run(id, &opener));
        let should_fail = expected_fail.contains(id);
        let verdict = match (&outcome, should_fail) {
            (Err(f), true) => match expected_reason(profile, id) {
                Some(reason) if !f.message.contains(reason) => {
                    wrong.push(format!("{profile} {id}: failed, but not with {reason:?}: {f}"));
                    "FAIL (WRONG reason)"
                }
                _ => "FAIL (expected)",
            },
            (Ok(()), false) => "pass",
            (Ok(()), true) => {
                wrong.push(format!("{profile} {id}: expected FAIL, but the check passed"));
                "pass (WRONG: must fail)"
            }
            (Err(f), false) => {
                wrong.push(format!("{profile} {id}: expected pass, got {f}"));
                "FAIL (WRONG: must pass)"
            }
        };
        let why = match &outcome {
            Err(f) => format!("  -- {}", f.message),
            Ok(()) => String::new(),
        };
        lines.push(format!("  {id:<44} {verdict}{why}"));
    }
    println!("profile {profile}:\n{}", lines.join("\n"));
    assert!(wrong.is_empty(), "negative table disagrees with behaviour:\n{}", wrong.join("\n"));
}

#[test]
fn v1_44_0() {
    run_profile(ProfileName::V1_44_0);
}

#[test]
fn v1_44_1() {
    run_profile(ProfileName::V1_44_1);
}

#[test]
fn v1_45_0() {
    run_profile(ProfileName::V1_45_0);
}

#[test]
fn boot_race() {
    run_profile(ProfileName::BootRace);
}

#[test]
fn pre_tombstone() {
    run_profile(ProfileName::PreTombstone);
}

#[test]
fn current() {
    run_profile(ProfileName::Current);
}

#[test]
fn every_flawed_profile_fails_something_and_current_fails_nothing() {
    for name in ProfileName::ALL {
        assert_eq!(must_fail(name).is_empty(), name == ProfileName::Current, "{name}");
    }
}
