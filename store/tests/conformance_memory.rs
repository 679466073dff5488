//! The journal and leasable suites on `InMemoryStore`, plus the unleased passthroughs of
//! the fenced suites (FW4 and T1-T3 hold for any store). The in-memory stores declare no
//! `fenced_writes` and ignore leases on meta, delete and blobs by contract, so the other
//! fenced checks do not apply; `memory_store_is_not_fenced` pins that the markers are off
//! and the fenced checks indeed fail, so nobody mistakes them for passing.

use futures::executor::block_on;
use store::conformance::{self, MemoryOpener};

fn check(id: &str) {
    if let Err(failure) = block_on(conformance::run(id, &MemoryOpener::new())) {
        panic!("{failure}");
    }
}

macro_rules! checks {
    ($($name:ident => $id:literal,)*) => {
        $( #[test] fn $name() { check($id) } )*
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
    fenced_unleased_passthrough => "fenced-unleased-passthrough",
    fenced_transcripts_unleased_passthrough => "fenced-transcripts-unleased-passthrough",
}

#[test]
fn memory_store_is_not_fenced() {
    for id in [
        "fenced-marker-declared",
        "fenced-meta-stale-rejected",
        "fenced-delete-stale-rejected",
        "fenced-transcripts-marker-declared",
        "fenced-transcripts-stale-put-rejected",
    ] {
        let r = block_on(conformance::run(id, &MemoryOpener::new()));
        assert!(r.is_err(), "{id} passed on the unfenced in-memory store");
    }
}
