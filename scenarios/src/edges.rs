//! `edges`: the contract's boundaries under faults. Each process works through rounds on
//! runs of its own; in each round it takes a lease and, in an order drawn from its seeded
//! stream, probes the edges of the input domain: appends at the largest seq a store accepts
//! (2^53-1) and one above it, a repeat of that seq (the A5 guard at the limit), loads of what
//! it wrote, a meta record with non-ASCII text and unknown fields (in plans of workload
//! revision 5 also empty ones: a name, a tag list, extra fields) read back and listed, an
//! empty and a large blob read back and listed, calls whose run id, blob ref or owner the
//! contract calls malformed (empty, `.`, `..`, a slash, a space, a non-ASCII byte), and a
//! meta and an entry that name one field twice (their `extra` repeats a named field). The
//! round ends with a release or a leased delete (in plans of workload revision 3, after an
//! unleased writer's appends, a repeated seq among them, on a run nobody leases, whose id
//! the round's run id begins: the round's lease is tried on it first). Before its first round each incarnation of
//! a process also builds two more stores over the same database and closes them unused: one
//! with a lease ttl outside the contract's domain (0, negative, or above 2^31-1 ms) and one
//! at its edge (1 or 2^31-1 ms), in a drawn order (L6).
//!
//! Nothing here judges an answer: the generic oracle does, from its own model
//! (`malformed_input_refused_and_only_it`, `failures_are_typed_answers`, the serial-history
//! and read properties). A store that mis-bounds its seq, reads back a value it cannot decode,
//! or validates a run id differently from the contract fails here, where the other
//! scenarios (whose seqs stay small and whose ids are always well formed) pass.
//!
//! Knobs: 2 or 3 processes, ttl 150 ms, `size` = rounds each process must finish (2 to 4),
//! cap 20 s of virtual time. Faults: swarm stalls (some past the ttl) and yields at every
//! store point, crashes after commits, so boundary writes meet busy, crashes and restarts.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde_json::json;
use store::{
    FaultPoint, JournalEntry, JournalStore, LeasableStore, Lease, LocalFuture, MetaLookup, Moment, RunFilter,
    RunMeta, RunStatus, StoreError, TranscriptStore,
};

use sim::history::{FactKind, FinalState, History};
use sim::oracle::Violation;
use sim::plan::{FaultProfile, Knobs, Plan};
use sim::recorded::{RecordedStore, RecordedTranscripts};
use sim::seed::{rng, Draw};
use sim::verdict::{required, Required};
use sim::world::{NodeCtx, Scenario, WorldState};

/// The largest seq the contract accepts (`Number.MAX_SAFE_INTEGER`).
const SEQ_LIMIT: u64 = (1 << 53) - 1;

/// Run ids (and a ref's segments) the contract calls malformed.
const MALFORMED_IDS: &[&str] = &["", ".", "..", "a/b", "a b", "caf\u{e9}", "x\u{0}y"];

/// Refs the contract calls malformed, as suffixes after a well-formed run id (`{run}{suffix}`)
/// or alone.
const MALFORMED_REF_SUFFIXES: &[&str] = &["/", "//x", "/../x", "/./x", "/a b"];

/// Named meta fields an `extra` map may repeat (the record then names the field twice).
const META_FIELDS: &[&str] =
    &["runId", "status", "segments", "genesis", "name", "tags", "workflowName", "updatedAt"];

/// Envelope fields of a journal entry an `extra` map may repeat.
const ENTRY_FIELDS: &[&str] = &["seq", "kind", "status", "key", "ref", "value"];

/// Lease ttls (ms) outside L6's domain of 1 to 2147483647: a store must refuse them as a
/// configuration error.
const TTLS_OUTSIDE: &[i64] = &[0, -1, -150, 2_147_483_648, i64::MAX];

/// Lease ttls (ms) at the edges of L6's domain: a store must accept them.
const TTLS_AT_THE_EDGE: &[i64] = &[1, 2_147_483_647];

/// The scenario.
pub struct Edges;

pub static EDGES: Edges = Edges;

/// What a sweep of `edges` must reach: malformed input refused, and busy (boundary writes
/// contending with the other processes' transactions). Crashes and restarts happen (about 4%
/// of seeds over the Rust store) but are not what the scenario exists for: a foreign store
/// whose processes restart more rarely is not short of coverage for it.
const COVERAGE: &[Required] = &[
    required("malformed_input_refused", 900),
    required("empty_values_read_back", 900),
    required("ttl_outside_the_domain_refused", 900),
    required("busy_met", 50),
];

/// State shared by the processes and the supervisor of one run.
pub struct EdgeShared {
    seed: u64,
    stop: Cell<bool>,
    done: RefCell<Vec<bool>>,
    /// Rounds each process finished (a restarted process adds to its own count).
    rounds: RefCell<Vec<u64>>,
}

fn shared(world: &WorldState) -> Rc<EdgeShared> {
    world.shared_as::<EdgeShared>()
}

/// One process.
struct Prober {
    node: u32,
    incarnation: u32,
    /// The owner this process presents on every acquire (`edge-n<node>`).
    owner: String,
    store: RecordedStore,
    blobs: RecordedTranscripts,
    shared: Rc<EdgeShared>,
    rng: RefCell<ChaCha8Rng>,
    /// Whether each round also writes a run of its own with no lease (workload revision 3).
    unleased: bool,
    /// Whether the meta probe also writes and lists empty values (workload revision 5).
    empties: bool,
    /// Whether the unleased writer's repeated seq may be 0, below its journal's first entry
    /// (workload revision 7): a seq that opens no journal here, which A5 refuses as any other.
    zero_again: bool,
}

/// The probes of a round, in the order drawn.
#[derive(Clone, Copy, Debug)]
enum Probe {
    SeqLimit,
    SeqOverLimit,
    Meta,
    Blobs,
    MalformedIds,
    MalformedRefs,
    RepeatedFields,
}

const PROBES: [Probe; 7] = [
    Probe::SeqLimit,
    Probe::SeqOverLimit,
    Probe::Meta,
    Probe::Blobs,
    Probe::MalformedIds,
    Probe::MalformedRefs,
    Probe::RepeatedFields,
];

impl Prober {
    fn pick(&self, n: usize) -> usize {
        self.rng.borrow_mut().between(0, n.saturating_sub(1) as u64) as usize
    }

    /// Retry busy for a while (an answer the probe does not need to see); return the rest.
    async fn patiently<T, F, Fut>(&self, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        for _ in 0..50 {
            match op().await {
                Err(StoreError::Busy { .. }) => {
                    madsim::time::sleep(Duration::from_millis(1 + self.pick(4) as u64)).await;
                }
                other => return other,
            }
        }
        op().await
    }

    /// Rounds until this process has finished `want` (across its restarts), a think time
    /// of 5 to 40 ms between them; then idle until the stop.
    async fn run(&self, want: u64) {
        let mut round = 0u64;
        while !self.shared.stop.get() {
            if self.shared.rounds.borrow()[self.node as usize] >= want {
                madsim::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            let run = format!("edge-n{}-i{}-r{round}", self.node, self.incarnation);
            round += 1;
            if self.round(&run).await {
                self.shared.rounds.borrow_mut()[self.node as usize] += 1;
            }
            madsim::time::sleep(Duration::from_millis(5 + self.pick(36) as u64)).await;
        }
    }

    /// One round on `run`: a lease, every probe once in a drawn order, then a release or a
    /// leased delete. Whether the round got its lease.
    async fn round(&self, run: &str) -> bool {
        let lease = match self.patiently(|| self.store.acquire(run, &self.owner)).await {
            Ok(l) => l,
            Err(_) => {
                madsim::time::sleep(Duration::from_millis(5)).await;
                return false;
            }
        };
        let mut order = PROBES.to_vec();
        for i in (1..order.len()).rev() {
            order.swap(i, self.pick(i + 1));
        }
        for probe in order {
            self.probe(probe, run, &lease).await;
        }
        if self.unleased {
            self.unleased_writer(&format!("{run}-solo"), &lease).await;
        }
        if self.pick(2) == 0 {
            let _ = self.patiently(|| self.store.release(&lease)).await;
        } else {
            let (big, empty) = (format!("{run}/big"), format!("{run}/empty"));
            let _ = self.patiently(|| self.blobs.delete(&big, Some(&lease))).await;
            let _ = self.patiently(|| self.blobs.delete(&empty, Some(&lease))).await;
            let _ = self.patiently(|| self.store.delete(run, Some(&lease))).await;
        }
        true
    }

    /// rulvar's single-process mode on run `run`, which nobody leases: appends with no lease
    /// (FW4 lets them through while no lease is live), then one at a seq already written (the
    /// last, or one before it) or, from workload revision 7, at seq 0 below them, which A5 refuses whether or not the write carries a lease,
    /// then a load; and half the time an unleased delete. First, a write to `run` under
    /// `other`, the round's lease of a run whose id is a prefix of `run`'s: the run-match rule
    /// refuses it (a lease names one run, not the runs its id begins).
    async fn unleased_writer(&self, run: &str, other: &Lease) {
        let entry = |seq: u64, tag: &str| JournalEntry::new(seq, "edge", "ok", json!({ "edge": tag }));
        let stray = entry(1, "other-lease");
        let _ = self.patiently(|| self.store.append(run, &stray, Some(other))).await;
        let meta = RunMeta::new(run, RunStatus::Running);
        let _ = self.patiently(|| self.store.put_meta(&meta, Some(other))).await;
        for seq in 1..=2 {
            let e = entry(seq, "solo");
            let _ = self.patiently(|| self.store.append(run, &e, None)).await;
        }
        let again = entry(2 - self.pick(if self.zero_again { 3 } else { 2 }) as u64, "solo-again");
        let _ = self.patiently(|| self.store.append(run, &again, None)).await;
        let _ = self.patiently(|| self.store.load(run)).await;
        if self.pick(2) == 0 {
            let _ = self.patiently(|| self.store.delete(run, None)).await;
        }
    }

    async fn probe(&self, probe: Probe, run: &str, lease: &Lease) {
        let entry = |seq: u64, tag: &str| JournalEntry::new(seq, "edge", "ok", json!({ "edge": tag }));
        match probe {
            Probe::SeqLimit => {
                // Only a run still below the limit can take it; a second round's probe meets
                // the A5 guard, which is an answer too.
                let first = entry(1, "first");
                let _ = self.patiently(|| self.store.append(run, &first, Some(lease))).await;
                let last = entry(SEQ_LIMIT, "limit");
                let _ = self.patiently(|| self.store.append(run, &last, Some(lease))).await;
                let again = entry(SEQ_LIMIT, "limit-again");
                let _ = self.patiently(|| self.store.append(run, &again, Some(lease))).await;
                let _ = self.patiently(|| self.store.load(run)).await;
            }
            Probe::SeqOverLimit => {
                let over = entry(SEQ_LIMIT + 1 + self.pick(3) as u64, "over");
                let _ = self.patiently(|| self.store.append(run, &over, Some(lease))).await;
                let _ = self.patiently(|| self.store.load(run)).await;
            }
            Probe::Meta => {
                let mut meta = RunMeta::new(run, RunStatus::Running);
                meta.extra.insert("label".into(), json!("caf\u{e9} \u{1f980} \"quoted\" \\ back"));
                meta.extra.insert("nested".into(), json!({ "deep": [1, 2.5, null, true, { "k": "" }] }));
                meta.extra.insert("big".into(), json!(SEQ_LIMIT));
                if self.empties {
                    // Empty is a value: each must read back as written, not as absent.
                    meta.name = Some(String::new());
                    meta.tags = Some(Vec::new());
                    meta.extra.insert("blank".into(), json!(""));
                    meta.extra.insert("none".into(), json!([]));
                    meta.extra.insert("nothing".into(), json!({}));
                }
                let _ = self.patiently(|| self.store.put_meta(&meta, Some(lease))).await;
                let _ = self.patiently(|| self.store.get_meta(run)).await;
                let filter = RunFilter::default();
                let _ = self.patiently(|| self.store.list_runs(&filter)).await;
                if self.empties {
                    // The empty name is a name (equality), and no tags is all-of nothing.
                    let filter = RunFilter {
                        name: Some(String::new()),
                        tags: Some(Vec::new()),
                        ..RunFilter::default()
                    };
                    let _ = self.patiently(|| self.store.list_runs(&filter)).await;
                }
            }
            Probe::Blobs => {
                let empty = format!("{run}/empty");
                let big = format!("{run}/big");
                let bytes: Vec<u8> = (0..48 * 1024).map(|i| (i % 251) as u8).collect();
                let _ = self.patiently(|| self.blobs.put(&empty, b"", Some(lease))).await;
                let _ = self.patiently(|| self.blobs.put(&big, &bytes, Some(lease))).await;
                let _ = self.patiently(|| self.blobs.get(&empty)).await;
                let _ = self.patiently(|| self.blobs.get(&big)).await;
                let _ = self.patiently(|| self.blobs.list(run)).await;
            }
            Probe::MalformedIds => {
                let bad = MALFORMED_IDS[self.pick(MALFORMED_IDS.len())];
                let _ = self.patiently(|| self.store.acquire(bad, &self.owner)).await;
                let _ = self.patiently(|| self.store.load(bad)).await;
                let _ = self.patiently(|| self.store.get_meta(bad)).await;
                let stray = entry(1, "stray");
                let _ = self.patiently(|| self.store.append(bad, &stray, None)).await;
                let _ = self.patiently(|| self.blobs.list(bad)).await;
                // A well-formed run with an empty owner.
                let _ = self.patiently(|| self.store.acquire(run, "")).await;
            }
            Probe::MalformedRefs => {
                let suffix = MALFORMED_REF_SUFFIXES[self.pick(MALFORMED_REF_SUFFIXES.len())];
                let bad = format!("{run}{suffix}");
                let _ = self.patiently(|| self.blobs.put(&bad, b"stray", Some(lease))).await;
                let _ = self.patiently(|| self.blobs.get(&bad)).await;
                let _ = self.patiently(|| self.blobs.delete(&bad, Some(lease))).await;
                let alone = MALFORMED_IDS[self.pick(MALFORMED_IDS.len())];
                let _ = self.patiently(|| self.blobs.get(alone)).await;
            }
            Probe::RepeatedFields => {
                // Records a caller of the Rust store can build and a JS caller cannot: each
                // names a field twice, so it has no one reading; then what was stored.
                let field = META_FIELDS[self.pick(META_FIELDS.len())];
                // Every named field is set, so the repeat is in the text (a field left unset is
                // not written, and its name in `extra` would be its only one).
                let mut meta = RunMeta::new(run, RunStatus::Running);
                meta.segments = Some(1);
                meta.genesis = Some("g".into());
                meta.name = Some("n".into());
                meta.tags = Some(vec!["t".into()]);
                meta.workflow_name = Some("w".into());
                meta.updated_at = Some("2026-01-01T00:00:00.000Z".into());
                meta.extra.insert(field.into(), json!("again"));
                let _ = self.patiently(|| self.store.put_meta(&meta, Some(lease))).await;
                let _ = self.patiently(|| self.store.get_meta(run)).await;
                let field = ENTRY_FIELDS[self.pick(ENTRY_FIELDS.len())];
                let mut twice = entry(SEQ_LIMIT - 1 - self.pick(1000) as u64, "twice");
                twice.key = "edge".into();
                twice.ref_seq = Some(store::Seq(1));
                twice.extra.insert(field.into(), json!("again"));
                let _ = self.patiently(|| self.store.append(run, &twice, Some(lease))).await;
                let _ = self.patiently(|| self.store.load(run)).await;
            }
        }
    }
}

impl Scenario for Edges {
    fn name(&self) -> &'static str {
        "edges"
    }

    fn describe(&self) -> &'static str {
        "boundary inputs under faults: seqs at and past 2^53-1, non-ASCII metas, empty and large blobs, malformed run ids, refs and owners"
    }

    fn coverage(&self) -> &'static [Required] {
        COVERAGE
    }

    fn knobs(&self, seed: u64) -> Knobs {
        let mut r = rng(seed, "knobs", 0);
        Knobs { nodes: r.between(2, 3) as u32, ttl_ms: 150, size: r.between(2, 4) as u32, cap_ms: 20_000 }
    }

    fn faults(&self, _knobs: &Knobs) -> FaultProfile {
        let points: Vec<FaultPoint> =
            FaultPoint::ALL.iter().copied().filter(|p| p.name().starts_with("sqlite.")).collect();
        let crash = points.iter().copied().filter(|p| p.moment() == Moment::AfterCommit).collect();
        FaultProfile::at(points)
            .active(200, 600)
            .fire(20, 100)
            .stalls((300, 700), (100, 400), 200)
            .crashes(0, 60, crash)
            .occurrences(40)
            .clocks(10, 200)
    }

    fn shared(&self, plan: &Plan) -> Rc<dyn Any> {
        let nodes = plan.knobs.nodes as usize;
        Rc::new(EdgeShared {
            seed: plan.seed,
            stop: Cell::new(false),
            done: RefCell::new(vec![false; nodes]),
            rounds: RefCell::new(vec![0; nodes]),
        })
    }

    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let shared = shared(&node.world);
            let stream = u64::from(node.index) * 1000 + u64::from(node.incarnation);
            // L6's boundary, from a stream of its own (the probes' draws stay as they were).
            let mut draw = rng(shared.seed, "edges-ttl", stream);
            let outside = TTLS_OUTSIDE[draw.between(0, TTLS_OUTSIDE.len() as u64 - 1) as usize];
            let edge = TTLS_AT_THE_EDGE[draw.between(0, TTLS_AT_THE_EDGE.len() as u64 - 1) as usize];
            let ttls = if draw.between(0, 1) == 0 { [outside, edge] } else { [edge, outside] };
            for ttl in ttls {
                let _ = node.boot_another(ttl).await;
            }
            if node.world.plan.swarm.workload >= 2 {
                // And one outside the domain over a path where no database exists: refused
                // before the database opens, it leaves no file there (its own stream).
                let mut fresh = rng(shared.seed, "edges-ttl-fresh", stream);
                let ttl = TTLS_OUTSIDE[fresh.between(0, TTLS_OUTSIDE.len() as u64 - 1) as usize];
                let database_left = node.boot_on_a_fresh_path(ttl).await;
                node.world.recorder.fact(
                    node.index,
                    node.incarnation,
                    &format!("edge-n{}", node.index),
                    sim::time::now_ns(),
                    FactKind::FreshBoot { ttl_ms: ttl, database_left },
                );
            }
            let prober = Prober {
                node: node.index,
                incarnation: node.incarnation,
                owner: format!("edge-n{}", node.index),
                blobs: node.store.transcripts(),
                store: node.store,
                rng: RefCell::new(rng(shared.seed, "edges", stream)),
                unleased: node.world.plan.swarm.workload >= 3,
                empties: node.world.plan.swarm.workload >= 5,
                zero_again: node.world.plan.swarm.workload >= 7,
                shared: shared.clone(),
            };
            prober.run(u64::from(node.world.plan.knobs.size)).await;
            shared.done.borrow_mut()[node.index as usize] = true;
        })
    }

    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let shared = shared(&world);
            let want = u64::from(world.plan.knobs.size);
            let cap = world.plan.knobs.cap_ms * 1_000_000;
            let start = sim::time::now_ns();
            loop {
                madsim::time::sleep(Duration::from_millis(50)).await;
                if shared.rounds.borrow().iter().all(|&r| r >= want) || sim::time::now_ns() - start >= cap {
                    break;
                }
            }
            shared.stop.set(true);
            world.wait_for_nodes(&shared.done).await;
        })
    }

    fn smaller_knobs(&self, knobs: &Knobs) -> Vec<Knobs> {
        knobs.fewer_nodes_then_smaller_size(2)
    }

    fn scenario_checks(&self, world: &WorldState, _history: &History, _fin: &FinalState) -> Vec<Violation> {
        let shared = shared(world);
        let want = u64::from(world.plan.knobs.size);
        let rounds = shared.rounds.borrow();
        if rounds.iter().all(|&r| r >= want) {
            return Vec::new();
        }
        vec![Violation::new(
            "edges_quorum_reached",
            format!(
                "rounds finished per process {:?} within {}ms of virtual time; the run asks for {want} each",
                *rounds, world.plan.knobs.cap_ms
            ),
        )]
    }
}
