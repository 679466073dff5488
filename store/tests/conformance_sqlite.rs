//! The whole conformance suite (journal, leasable, fenced writes, fenced transcripts and
//! the F3 interleave checks) must pass on `SqliteStore` under `Profile::current()`, each
//! check over a fresh temp-file database. One test per check id.

use futures::executor::block_on;
use store::conformance::{self, SqliteOpener, ALL_CHECKS};
use store::Profile;

fn check(id: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let opener = SqliteOpener::new(dir.path().join("conformance.db"), Profile::current());
    if let Err(failure) = block_on(conformance::run(id, &opener)) {
        panic!("{failure}");
    }
}

macro_rules! checks {
    ($($name:ident => $id:literal,)*) => {
        $( #[test] fn $name() { check($id) } )*

        #[test]
        fn every_check_id_has_a_test() {
            let tested: Vec<&str> = vec![$($id),*];
            assert_eq!(tested, ALL_CHECKS.to_vec());
        }
    };
}

checks! {
    a1_append_atomicity => "a1-append-atomicity",
    a2_total_order => "a2-total-order",
    a3_read_your_writes => "a3-read-your-writes",
    a4_opaque_payload => "a4-opaque-payload",
    a5_monotonic_seq => "a5-monotonic-seq",
    a5_stale_tail_race => "a5-stale-tail-race",
    meta_separation => "meta-separation",
    lease_exclusive_acquire => "lease-exclusive-acquire",
    fencing_stale_epoch => "fencing-stale-epoch",
    fencing_epoch_tombstone => "fencing-epoch-tombstone",
    lease_release_fences => "lease-release-fences",
    lease_ttl_and_renew_cadence => "lease-ttl-and-renew-cadence",
    fenced_marker_declared => "fenced-marker-declared",
    fenced_meta_stale_rejected => "fenced-meta-stale-rejected",
    fenced_delete_stale_rejected => "fenced-delete-stale-rejected",
    fenced_tombstone_zombie_rejected => "fenced-tombstone-zombie-rejected",
    fenced_run_match => "fenced-run-match",
    fenced_unleased_passthrough => "fenced-unleased-passthrough",
    fenced_transcripts_marker_declared => "fenced-transcripts-marker-declared",
    fenced_transcripts_stale_put_rejected => "fenced-transcripts-stale-put-rejected",
    fenced_transcripts_stale_delete_rejected => "fenced-transcripts-stale-delete-rejected",
    fenced_transcripts_run_match => "fenced-transcripts-run-match",
    fenced_transcripts_unleased_passthrough => "fenced-transcripts-unleased-passthrough",
    fenced_append_takeover_window => "fenced-append-takeover-window",
    fenced_release_takeover_window => "fenced-release-takeover-window",
    fenced_renew_takeover_window => "fenced-renew-takeover-window",
    fenced_blob_put_takeover_window => "fenced-blob-put-takeover-window",
}

#[test]
fn unknown_check_id_is_a_failure_not_a_pass() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opener = SqliteOpener::new(dir.path().join("conformance.db"), Profile::current());
    assert!(block_on(conformance::run("no-such-check", &opener)).is_err());
}
