//! The engine scenarios: queue workers, hosts and operators driving runs through the engine
//! model over the shared SQLite file, with swarm faults at every store and engine point.
//!
//! `queue` is a generic one: several nodes, each a host (starts its share of the runs and
//! now and then explicitly resumes one of its terminal runs, a user's retry), a queue
//! worker (sweep, drive under a renewed lease, retention of terminal `tmp-` runs by the rule
//! declared to the oracle) and an operator
//! (answers open suspensions offline, prunes spent checkpoints of `ok` runs). A safety phase with faults, then the heal: faults
//! off, every node restarted, every suspension answered, until every run is terminal.
//! `queue-solo` is the other generic one, rulvar's one-worker deployment: node 0 alone runs
//! a worker, never stopped (it keeps its cache of parked runs), with no audit repair, and
//! hosts that retry any run and now and then join another host's retry in flight.
//! The targeted variants (`f1-stale-settle`, `f2-stale-checkpoint`, `f4-stale-retention`)
//! keep the same actors and put their faults around one window, with swarm variation.
//!
//! In `queue` the hosts start their runs with a name (the workflow's) and tags (`queue`,
//! the host's `host-<n>`, `tmp` or `kept`), pick retry candidates by listing their own
//! terminal runs by tag, and the operator takes a census now and then with a drawn filter
//! (name, tags, `status` or `statuses`, alone or combined), so every filter dimension of
//! `list_runs` is exercised and judged by `reads_see_serial_history`.
//!
//! Nothing here judges: the generic oracle (store and engine properties) does.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use sim::actors::engine::{FactSink, LedgerEffects};
use sim::history::FinalState;
use sim::history::{under_actor, AuditedCounts, FactKind, History};
use sim::ledger::{catalog_workflows, resolution_value};
use sim::oracle::Violation;
use sim::plan::{FaultProfile, Knobs, Plan};
use sim::recorded::{RecordedStore, RecordedTranscripts};
use sim::seed::{rng, Draw};
use sim::verdict::{required, Required, RetentionRule};
use sim::world::{NodeCtx, Scenario, WorldState};
use store::engine::{
    audit_run, audit_runs, repair_run, Engine, RepairAction, RunAudit, RunOptions, Verdict, Worker, Workflow,
};
use store::{
    FaultPoint, JournalEntry, JournalStore, LeasableStore, LocalFuture, MetaLookup, Moment, RunFilter,
    RunMeta, RunStatus, StoreError,
};

type SimEngine = Engine<RecordedStore, RecordedTranscripts, LedgerEffects>;

/// Where an engine scenario puts its faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    /// Every store and engine point.
    Everywhere,
    /// Renew ticks stall past the ttl (the segment is superseded while its body runs on),
    /// and the settle's writes stall or crash.
    StaleSettle,
    /// Renew ticks and checkpoint saves stall past the ttl: two segments continue one attempt.
    StaleCheckpoint,
    /// The retention cascade stalls past the ttl while hosts retry terminal runs.
    StaleRetention,
    /// Host deletion cascades cut at every step (a crash after a blob delete or the deletion
    /// record commits, at the engine points around the blob deletes; a contended record put,
    /// blob delete or journal delete), over runs left terminal mid-agent (a contended or
    /// crashed checkpoint save), while other hosts' retries stall between their prepare and
    /// their acquire.
    CutCascade,
}

/// An engine scenario: its actors' mix and its fault focus.
pub struct EngineScenario {
    pub name: &'static str,
    pub describe: &'static str,
    pub nodes: (u64, u64),
    pub runs: (u64, u64),
    /// Workflow names drawn per run (from the worker registry).
    pub workflows: &'static [&'static str],
    /// Share of runs named `tmp-*` (deleted by retention once terminal), per mille.
    pub tmp_per_mille: u32,
    /// Chance per host tick (every 100-400 ms) to explicitly resume one terminal run.
    pub retry_per_mille: u32,
    pub focus: Focus,
    /// The points the targeted variant exists to exercise (`fencesim findings` checks they fired).
    pub key_points: &'static [FaultPoint],
    /// Runs carry a name and tags, hosts list their retry candidates by tag, and the operator
    /// takes censuses with drawn filters.
    pub labels: bool,
    /// Whether each process's operator identity runs the audit-repair probe (`runs audit
    /// --repair`) beside its worker. Off in the targeted variants, whose residue (a stranded
    /// run) is the finding they exist to leave behind.
    pub repairs: bool,
    /// Whether hosts now and then delete a run of theirs they saw terminal (`deleteRun`
    /// under a brief lease) instead of retrying it.
    pub host_deletes: bool,
    /// Whether workers stop gracefully now and then (rulvar's `stop()`: the drive in
    /// progress settles `cancelled` under the worker's live lease) and a fresh worker takes
    /// over the loop, as a restarted worker process would.
    pub stops: bool,
    /// Whether node 0 alone runs a queue worker: one long-lived worker process (it never
    /// stops, and remembers the runs it parked across its sweeps), the other nodes host and
    /// operate only.
    pub solo_worker: bool,
    /// The rule the retention workers apply (declared to the oracle, which judges every
    /// retention delete by it).
    pub retention: RetentionRule,
    /// Whether only the even nodes' workers apply retention: the odd nodes' run rulvar's
    /// default worker, which lists only `running` and `suspended` runs (`statuses`) and leaves
    /// terminal runs alone (in plans that carry `Swarm::default_workers`: every derived one).
    /// Off: every worker applies retention and lists every run.
    pub retention_on_even_nodes: bool,
    /// Whether a host's retry now and then passes another workflow than the run's (a user's
    /// stale script), which the resume must refuse before any write.
    pub wrong_workflows: bool,
    /// Whether a host retries any run of the workload, not only its own: two processes may
    /// retry one run at once (two users retrying one job).
    pub retry_any: bool,
    /// Whether the operator also delivers again the answer to every suspension of a suspended
    /// run that is already answered (a webhook delivered twice): the engine must refuse it as
    /// a config error and append nothing.
    pub redeliveries: bool,
    /// Whether a host now and then retries a run it deleted (a user retrying from a page
    /// that still lists it): the resume recreates the run with no genesis (docs/engine-model.md
    /// 5.3), a run whose own deletion record is then the empty string.
    pub retry_deleted: bool,
    /// Whether a host's retry tick now and then looks at the runs that failed first (rulvar's
    /// run list filtered to `error`, `cancelled` and `exhausted`, as a user's "retry failed"
    /// view) and retries one of those it may retry (the list was its read; it does not delete
    /// what it listed), else the run it drew if it drew one. A failed run whose
    /// every op completed (a cancel that landed on its last op's terminal append, a lost
    /// billing row that turned `ok` into `error`) then replays to another status over an
    /// unchanged journal: the settle's write-on-change rule must journal the change. In
    /// plans of workload revision 2 or later.
    pub retry_failed: bool,
    /// Whether paid calls have a price (`PAID_CALL_CENTS`) and runs a budget drawn for it
    /// (`draw_budget`): a run that spends its budget settles `exhausted`, with its value when
    /// the last paid call spent it, without when a paid call was refused. In plans of
    /// workload revision 3 or later; before, every run carries a budget of 1 to 5 dollars
    /// that nothing charges.
    pub priced: bool,
    /// Whether each process serves a status page: a reader that every 10-40 ms reads the
    /// meta and the journal of a run its process holds a lease on (else of any run), as
    /// rulvar's dashboard in a worker process does, through the process's own store (so its
    /// reads meet the process's own writes in flight: they must see committed state only).
    /// In plans that carry `Swarm::user_actors`: every derived one.
    pub status_page: bool,
    /// Whether a host's retry is now and then double-clicked: a second resume of the same run
    /// by the same host a few ms after the first, while the first's segment is live, which
    /// the engine must refuse before any side effect (docs/engine-model.md 1.1, O5). In plans
    /// that carry `Swarm::user_actors`.
    pub double_clicks: bool,
    /// Whether the operator also answers the open suspensions of runs listed `running`, as a
    /// run page that shows a pending approval from the journal does, whatever the meta says:
    /// a run whose segment appended its suspension and then died, or whose settle's meta
    /// write failed, is left `running` with nobody holding it, and an answer to it must land
    /// (docs/engine-model.md 5.5). A live holder's run refuses the answer as held. Some
    /// passes list every run, ended ones too, whose answers the engine must refuse. In plans
    /// that carry `Swarm::user_actors`.
    pub answers_running: bool,
    /// Whether hosts also start `approval` runs and now and then abandon one of theirs they
    /// see `suspended`: the user gives up on a pending approval and deletes the run with no
    /// lease (rulvar's `deleteRun` does not look at the status; docs/engine-model.md 6.1).
    /// A cascade cut there leaves a live run its deletion record names, which the next
    /// worker to drive it must finish deleting (5.3), the odd nodes' default workers (no
    /// retention) too: with it, only the even nodes' workers apply retention. In plans of
    /// workload revision 4 or later.
    pub abandons: bool,
    /// A rolling deploy, in a plan of workload revision 6 or later: the workers of odd
    /// nodes register every workflow of the scenario but one (drawn per seed), as a binary
    /// one release behind would; their sweeps must leave that workflow's runs alone, lease
    /// untouched, and the even nodes' workers drive them.
    pub rolling_deploy: bool,
    /// Contended billing receipts: at some of the moments right after a paid call
    /// (`engine.dispatch.after_provider`), another writer holds the lock as the receipt's
    /// append begins (`Action::ContendNextWrite`), so the append meets a real
    /// `SQLITE_BUSY` that the segment swallows and latches: a run that then spends its budget
    /// settles with a lost receipt behind it. The share per occurrence is drawn per seed,
    /// 0 to `RECEIPT_CONTENTION_MAX` per mille.
    pub receipt_contention: bool,
    /// The coverage goals a sweep must meet, each in a share of its seeds.
    pub coverage: &'static [Required],
}

/// Shares (per mille) of seeds in which a paying segment is told it lost its lease.
const PAYING_QUEUE: u32 = 250;
const PAYING_F1: u32 = 120;
const PAYING_F2: u32 = 150;

/// Share (per mille) of queue seeds in which a grant writes past one of its own failed
/// appends and then journals a run_settle: the window of the integrity latch (measured over
/// seeds 0..1000: 26 per mille; 20 per mille over 0..2000 once the census also ran before
/// the heal, with 1 in 0..200, hence a quarter of it).
const LOST_APPEND_QUEUE: u32 = 5;

/// Share (per mille) of queue seeds in which a whole-catalog census lists a run with no
/// journal entry yet (measured over seeds 0..2000: 29 per mille).
const EMPTY_CENSUS_QUEUE: u32 = 10;

/// Share (per mille) of queue seeds in which an operator's answer lands on a run left
/// `running` by a segment that suspended and then died or failed its meta write (measured
/// over seeds 0..1000: 22 per mille; 30 before some passes listed every run).
const ANSWER_RUNNING_QUEUE: u32 = 10;

/// Share (per mille) of queue seeds in which an operator's answer to an open suspension of a
/// run that has ended is refused (measured over seeds 0..1000: 109 per mille).
const ANSWER_ENDED_QUEUE: u32 = 40;

/// Share (per mille) of queue and queue-solo seeds in which an operator's prune deletes two
/// or more spent checkpoints of one run (a `survey` run; measured over seeds 0..1000: 258 and
/// 342 per mille).
const PRUNE_TWO_QUEUE: u32 = 150;
const PRUNE_TWO_SOLO: u32 = 200;

/// Share (per mille) of queue seeds in which an operator's repair was granted its brief lease
/// and found nothing to write (the run was settled or repaired since the audit). Measured over
/// seeds 0..300: 143 per mille with the operator's review pause (workload revision 3), about 10
/// before it.
const REPAIR_FOUND_NOTHING: u32 = 60;

/// Shares (per mille) of queue and queue-solo seeds in which a paid call was refused by
/// the run's budget (a run settled `exhausted` with no value), and in which a body completed
/// on the call that spent its budget (`exhausted` with its value). Measured over seeds
/// 0..300 of workload revision 3: 267 and 280, 97 and 120 per mille.
const BUDGET_REFUSED: u32 = 150;
const BUDGET_COMPLETED: u32 = 50;
/// Of `queue`'s and `queue-solo`'s seeds, the share that must settle a run on a zero budget
/// exhausted (about 150 per mille at 300 seeds: a tight budget drew 0 and the run reached
/// its first paid call).
const ZERO_BUDGET_EXHAUSTED: u32 = 60;

/// Share (per mille) of queue and queue-solo seeds in which a run that ended one way was
/// settled again another way over an unchanged journal (a failed run whose every op had
/// completed, retried from the hosts' failed-runs list; measured over seeds 0..3000: 21 and
/// 19 per mille, 4 and 7 per mille of 0..1000 before hosts looked at failed runs first). 6
/// needs 3 of a 500-seed sweep, where about 10 meet it.
const SETTLED_AGAIN: u32 = 6;

pub static QUEUE: EngineScenario = EngineScenario {
    name: "queue",
    describe: "queue workers, hosts and operators over many runs (both workflow kinds, suspensions, retention, retries, host deletes, pruning, audit repair, worker stops) with swarm faults, then a heal",
    nodes: (2, 4),
    runs: (3, 7),
    workflows: &["happy", "limit", "approval", "pipeline", "two-approvals", "survey"],
    tmp_per_mille: 300,
    retry_per_mille: 150,
    focus: Focus::Everywhere,
    // The engine entry points whose points fire in a few hundred seeds (README, "Engine
    // entry points under faults", lists every entry point with its 10,000-seed figures).
    key_points: &[
        FaultPoint::EngineBootBeforeMeta,
        FaultPoint::EngineDispatchAfterProvider,
        FaultPoint::EngineCheckpointBeforePut,
        FaultPoint::EngineSettleBeforeRunSettle,
        FaultPoint::EngineSettleAfterRunSettle,
        FaultPoint::EngineSettleAfterMeta,
        FaultPoint::EngineRenewBeforeRenew,
        FaultPoint::EngineResolveAfterAcquire,
        FaultPoint::EnginePruneBeforeDelete,
        FaultPoint::WorkerSweepAfterAcquire,
        FaultPoint::WorkerRetentionAfterAcquire,
    ],
    labels: true,
    repairs: true,
    host_deletes: true,
    stops: true,
    solo_worker: false,
    retention: BY_ID,
    retention_on_even_nodes: true,
    wrong_workflows: true,
    retry_any: false,
    redeliveries: false,
    retry_deleted: false,
    retry_failed: true,
    priced: true,
    status_page: false,
    double_clicks: false,
    answers_running: true,
    abandons: false,
    rolling_deploy: true,
    receipt_contention: false,
    coverage: &[
        required("busy_met", 200),
        required("crash_after_commit", 30),
        required("restarted_process_wrote", 100),
        required("run_resumed_by_a_later_segment", 900),
        required("run_settled_cancelled", 130),
        required("superseded_write_refused", 150),
        required("suspension_resolved", 700),
        required("takeover_of_a_silent_holder", 300),
        required("turn_paid_again_in_a_window", 120),
        required("paying_holder_told_superseded", PAYING_QUEUE),
        required("lost_append_then_settled", LOST_APPEND_QUEUE),
        required("stopped_sweep_returned", STOPPED_QUEUE),
        required("retention_deleted_a_run", 500),
        required("resume_under_another_workflow_refused", 80),
        required("census_listed_a_run_with_no_entry", EMPTY_CENSUS_QUEUE),
        required("answer_to_a_running_run_landed", ANSWER_RUNNING_QUEUE),
        required("answer_to_an_ended_run_refused", ANSWER_ENDED_QUEUE),
        required("prune_deleted_two_checkpoints", PRUNE_TWO_QUEUE),
        required("ended_run_settled_again_otherwise", SETTLED_AGAIN),
        required("repair_found_nothing_to_write", REPAIR_FOUND_NOTHING),
        required("paid_call_refused_by_the_budget", BUDGET_REFUSED),
        required("body_completed_over_its_budget", BUDGET_COMPLETED),
        required("zero_budget_run_exhausted", ZERO_BUDGET_EXHAUSTED),
        required("worker_listed_a_workflow_it_lacks", LACKING_WORKER),
        required("paid_call_overshot_the_budget", OVERSHOT),
    ],
};

/// Share (per mille) of `queue` seeds in which a worker one release behind (a rolling deploy,
/// workload revision 6) listed a live run of the workflow it lacks (measured over seeds
/// 0..1000: 568 per mille; the odd nodes' workers lack it, and a draw may pick a workflow no
/// host started).
const LACKING_WORKER: u32 = 400;

/// Share (per mille) of queue seeds in which a worker told to stop mid-sweep returned from
/// it (measured over seeds 0..1000: 669 per mille).
const STOPPED_QUEUE: u32 = 500;

/// Of `queue-solo`'s seeds, the share in which a segment that spent its budget had lost a
/// billing receipt and nothing else (measured over seeds 0..1000 under workload revision 7:
/// 41 per mille; 5 under revision 6, before receipts were contended).
const RECEIPT_LOST_SOLO: u32 = 20;

/// Shares (per mille) of seeds in which a worker drives a run past a resolution of the
/// suspension it parked, and in which two retries of one run overlap (measured over seeds
/// 0..2000: 725 and 56 per mille since survey runs, 810 and 73 before; 44 per mille of
/// 0..500 for the overlap, so 30 keeps a margin at 500-seed sweeps).
const PARKER_SOLO: u32 = 600;
const RACING_SOLO: u32 = 30;

/// Share (per mille) of queue-solo seeds in which an answer delivered again is refused
/// (measured over seeds 0..1000: 801 per mille).
const REDELIVERED_SOLO: u32 = 600;

/// Share (per mille) of queue-solo seeds in which the status page reads a run while its own
/// process's write of it stands stalled before its commit (measured over seeds 0..1000: 276
/// per mille).
const READ_BESIDE_SOLO: u32 = 150;

/// Share (per mille) of queue-solo seeds in which an engine refuses a double-clicked retry
/// while the first click's segment is live (measured over seeds 0..2000: 49 per mille).
const DOUBLE_CLICK_SOLO: u32 = 25;

/// Share (per mille) of queue-solo seeds in which an operator's answer lands on a run left
/// `running` with its suspension open (measured over seeds 0..1000: 54 per mille).
const ANSWER_RUNNING_SOLO: u32 = 15;

/// Share (per mille) of queue-solo seeds in which an operator's answer to an open suspension
/// of a run that has ended is refused (measured over seeds 0..1000: 9 per mille).
const ANSWER_ENDED_SOLO: u32 = 3;

/// rulvar's commonest queue deployment: one worker process, hosts elsewhere. The queue's
/// workload (nodes, runs, workflows, `tmp-` share, labels, host deletes, faults everywhere);
/// what differs is written out.
pub static QUEUE_SOLO: EngineScenario = EngineScenario {
    name: "queue-solo",
    describe: "one long-lived queue worker (it remembers the runs it parked) beside hosts that retry any run (two retries of one run race), operators that also redeliver answers already given, a status page in every process reading the runs it works on, and double-clicked retries, with swarm faults, then a heal",
    retry_per_mille: 250,
    key_points: &[],
    repairs: false,
    stops: false,
    solo_worker: true,
    retention: KEEP_RETRIED,
    retention_on_even_nodes: false,
    wrong_workflows: true,
    retry_any: true,
    redeliveries: true,
    retry_deleted: false,
    retry_failed: true,
    priced: true,
    status_page: true,
    double_clicks: true,
    answers_running: true,
    abandons: false,
    rolling_deploy: false,
    receipt_contention: true,
    coverage: &[
        required("run_resumed_by_a_later_segment", 500),
        required("suspension_resolved", 300),
        required("takeover_of_a_silent_holder", 150),
        required("parked_run_resumed_by_its_parker", PARKER_SOLO),
        required("retries_of_one_run_raced", RACING_SOLO),
        required("answer_redelivered_refused", REDELIVERED_SOLO),
        // Under its rule over the meta (a completed run of more than one segment is kept),
        // retention deletes a run in 526 per mille of seeds 0..500, down from 816 under the
        // id-only rule; 400 keeps a margin at 200-seed sweeps.
        required("retention_deleted_a_run", 400),
        required("resume_under_another_workflow_refused", 40),
        required("read_beside_own_uncommitted_write", READ_BESIDE_SOLO),
        required("second_start_of_a_live_run_refused", DOUBLE_CLICK_SOLO),
        required("answer_to_a_running_run_landed", ANSWER_RUNNING_SOLO),
        required("answer_to_an_ended_run_refused", ANSWER_ENDED_SOLO),
        required("prune_deleted_two_checkpoints", PRUNE_TWO_SOLO),
        required("ended_run_settled_again_otherwise", SETTLED_AGAIN),
        required("paid_call_refused_by_the_budget", BUDGET_REFUSED),
        required("body_completed_over_its_budget", BUDGET_COMPLETED),
        required("zero_budget_run_exhausted", ZERO_BUDGET_EXHAUSTED),
        required("receipt_lost_at_the_budget", RECEIPT_LOST_SOLO),
        required("paid_call_overshot_the_budget", OVERSHOT),
    ],
    ..QUEUE
};

pub static F1_STALE_SETTLE: EngineScenario = EngineScenario {
    name: "f1-stale-settle",
    describe: "a superseded segment settles after its successor took over (F1: stale terminal meta write)",
    nodes: (2, 3),
    runs: (1, 3),
    workflows: &["happy", "pipeline"],
    tmp_per_mille: 0,
    retry_per_mille: 0,
    focus: Focus::StaleSettle,
    key_points: &[FaultPoint::WorkerDriveBeforeRenew],
    labels: false,
    repairs: false,
    host_deletes: false,
    stops: false,
    solo_worker: false,
    retention: BY_ID,
    retention_on_even_nodes: false,
    wrong_workflows: false,
    retry_any: false,
    redeliveries: false,
    retry_deleted: false,
    retry_failed: false,
    priced: false,
    status_page: false,
    double_clicks: false,
    answers_running: false,
    abandons: false,
    rolling_deploy: false,
    receipt_contention: false,
    coverage: &[
        required("restarted_process_wrote", 40),
        required("run_resumed_by_a_later_segment", 150),
        required("superseded_write_refused", 100),
        required("takeover_of_a_silent_holder", 150),
        required("turn_paid_again_in_a_window", 120),
        required("paying_holder_told_superseded", PAYING_F1),
    ],
};

pub static F2_STALE_CHECKPOINT: EngineScenario = EngineScenario {
    name: "f2-stale-checkpoint",
    describe: "two segments continue one agent attempt; the superseded one saves its checkpoint late (F2)",
    nodes: (2, 3),
    runs: (1, 2),
    workflows: &["pipeline"],
    tmp_per_mille: 0,
    retry_per_mille: 0,
    focus: Focus::StaleCheckpoint,
    key_points: &[FaultPoint::WorkerDriveBeforeRenew],
    labels: false,
    repairs: false,
    host_deletes: false,
    stops: false,
    solo_worker: false,
    retention: BY_ID,
    retention_on_even_nodes: false,
    wrong_workflows: false,
    retry_any: false,
    redeliveries: false,
    retry_deleted: false,
    retry_failed: false,
    priced: false,
    status_page: false,
    double_clicks: false,
    answers_running: false,
    abandons: false,
    rolling_deploy: false,
    receipt_contention: false,
    coverage: &[
        required("run_resumed_by_a_later_segment", 150),
        required("superseded_write_refused", 120),
        required("takeover_of_a_silent_holder", 150),
        required("turn_paid_again_in_a_window", 120),
        required("paying_holder_told_superseded", PAYING_F2),
    ],
};

pub static F4_STALE_RETENTION: EngineScenario = EngineScenario {
    name: "f4-stale-retention",
    describe: "a retention worker's brief lease is superseded mid-cascade while a host retries the run (F4)",
    nodes: (2, 3),
    runs: (1, 3),
    workflows: &["happy", "pipeline"],
    tmp_per_mille: 1000,
    retry_per_mille: 700,
    focus: Focus::StaleRetention,
    key_points: &[FaultPoint::WorkerRetentionAfterAcquire],
    labels: false,
    repairs: false,
    host_deletes: false,
    stops: false,
    solo_worker: false,
    retention: BY_ID,
    retention_on_even_nodes: false,
    wrong_workflows: false,
    retry_any: false,
    redeliveries: false,
    retry_deleted: false,
    retry_failed: false,
    priced: false,
    status_page: false,
    double_clicks: false,
    answers_running: false,
    abandons: false,
    rolling_deploy: false,
    receipt_contention: false,
    coverage: &[
        required("run_resumed_by_a_later_segment", 60),
        required("superseded_write_refused", 80),
        required("takeover_of_a_silent_holder", 80),
        required("retention_deleted_a_run", 900),
    ],
};

/// Share (per mille) of `delete-cuts` seeds in which a resume is asked for a half-deleted
/// run (measured over seeds 0..2000: 146 per mille).
const CUT_RETRIED: u32 = 80;

/// Share (per mille) of `delete-cuts` seeds in which a worker finishes a deletion cascade a
/// host began and cut over a live run (workload revision 4, `EngineScenario::abandons`:
/// measured 30 per mille over seeds 0..2000 and 28 over 2000..6000; about 0.1 before).
const MARKED_FINISHED: u32 = 12;

/// Share (per mille) of `delete-cuts` seeds in which a worker finishes a deletion cascade a
/// host began and cut over a run it read stuck `running` (workload revision 6: measured 11
/// per mille over seeds 0..2000).
const MARKED_RUNNING_FINISHED: u32 = 4;

/// The deletion cascade's kill points and its retries (docs/engine-model.md 6.1): hosts delete
/// their terminal runs and retry them, any host any run, with faults at the cascade's writes.
/// Reaches, without a bug in mind, the windows stop 51's deletion record exists for: a retry
/// of a run whose cascade was cut after it deleted a checkpoint, and a retry that prepared
/// before a cascade began and acquires after it was cut.
pub static DELETE_CUTS: EngineScenario = EngineScenario {
    name: "delete-cuts",
    describe: "hosts delete and retry runs left terminal mid-agent (checkpoints saved), the deletion cascade cut by crashes and contended writes at every step, retries racing it",
    nodes: (2, 3),
    runs: (2, 4),
    workflows: &["pipeline", "limit"],
    tmp_per_mille: 0,
    retry_per_mille: 700,
    focus: Focus::CutCascade,
    key_points: &[FaultPoint::EngineDeleteBeforeBlobs, FaultPoint::EngineDeleteAfterBlobs],
    labels: false,
    repairs: false,
    host_deletes: true,
    stops: true,
    solo_worker: false,
    retention: BY_ID,
    retention_on_even_nodes: false,
    wrong_workflows: false,
    retry_any: true,
    redeliveries: false,
    retry_deleted: true,
    retry_failed: false,
    priced: false,
    status_page: false,
    double_clicks: false,
    answers_running: false,
    abandons: true,
    rolling_deploy: false,
    receipt_contention: false,
    coverage: &[
        required("busy_met", 300),
        required("crash_after_commit", 100),
        required("cut_cascade_then_retried", CUT_RETRIED),
        required("holder_finished_a_marked_deletion", MARKED_FINISHED),
        required("holder_finished_a_marked_running_deletion", MARKED_RUNNING_FINISHED),
    ],
};

/// One run of the workload.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub run_id: String,
    pub workflow: Workflow,
    /// Virtual ms after the start at which its host starts it.
    pub start_ms: u64,
    /// The name and tags its host starts it with (none unless the scenario has labels).
    pub options: RunOptions,
}

/// What the nodes and the supervisor of one run share.
pub struct QueueShared {
    pub seed: u64,
    pub runs: Vec<RunSpec>,
    pub registry: BTreeMap<String, Workflow>,
    pub stop: Cell<bool>,
    pub heal: Cell<bool>,
    pub retry_per_mille: u32,
    pub labels: bool,
    pub repairs: bool,
    pub stops: bool,
    pub host_deletes: bool,
    pub solo_worker: bool,
    pub retention: RetentionRule,
    pub retention_on_even_nodes: bool,
    pub wrong_workflows: bool,
    pub retry_any: bool,
    pub redeliveries: bool,
    pub retry_deleted: bool,
    pub retry_failed: bool,
    /// What one paid call costs, in cents (0: free, no run exhausts).
    pub paid_call_cents: u64,
    /// Whether an operator now and then pauses between an audit and its repair (a person
    /// reading the report before asking for the repair): the run may be settled, repaired
    /// or taken in between, so the repair finds nothing to write. In plans of workload
    /// revision 3 or later.
    pub review_repairs: bool,
    pub status_page: bool,
    pub double_clicks: bool,
    /// [`EngineScenario::answers_running`], in a plan that carries `Swarm::user_actors`.
    pub answers_running: bool,
    /// [`EngineScenario::abandons`], in a plan of workload revision 4 or later.
    pub abandons: bool,
    /// With `abandons`, in a plan of workload revision 5 or later: a host also deletes, now
    /// and then, a run of its own it reads `running` (the user gives up on a run that looks
    /// stuck), under a brief lease of its own: granted only once the holder's lease lapsed,
    /// so only a run whose holder is gone is deleted, and no live holder meets the cascade
    /// (an unleased delete is unfenced, FW4, and would cut a live holder's checkpoints).
    /// The share of such reads that delete, per mille (0: never): 250 in revision 5, every
    /// one from revision 6 (`STUCK_DELETE_PER_MILLE`).
    pub deletes_stuck: u32,
    /// With [`EngineScenario::rolling_deploy`]: the workflow the odd nodes' workers do not
    /// register.
    pub deploy_gap: Option<String>,
    /// The runs a host's delete took (its cascade finished): the runs a `retry_deleted` host
    /// may retry with no meta to read.
    pub deleted: RefCell<BTreeSet<String>>,
    /// The runs a host's explicit resume is in flight on, and that host's identity: a hint
    /// for `retry_any` hosts to join (a second resume of a run replaces its entry, the first
    /// to return removes it, and a host that died mid-resume leaves its entry behind, so a
    /// join may find no resume in flight; it is then a plain retry with no status check).
    pub retrying: RefCell<BTreeMap<String, String>>,
    /// Host operations (a submission's `run`, a retry's `resume`), worker sweeps and
    /// operator duties (offline resolutions, prunes, audit repairs) in flight, per process
    /// incarnation: the heal is not over while one may still write (a host stalled across
    /// the heal can create its run after every other run settled; a sweep stalled across it
    /// drives runs from a listing taken before it; a resolution stalled across it lands
    /// after a run's cancelled settle, and the audit repair then makes the run `running`).
    pub pending: RefCell<BTreeMap<(u32, u32), u32>>,
    /// Runs whose submission (`engine.run`) is still in flight, per process incarnation: the
    /// host retries or deletes only runs whose own handle has resolved (a user does not act
    /// on a run whose first segment is still running in their process).
    pub submitting: RefCell<BTreeSet<(u32, u32, String)>>,
}

impl QueueShared {
    /// One more (`+1`) or one fewer (`-1`) host operation of this incarnation in flight.
    fn host_op(&self, node: u32, incarnation: u32, delta: i32) {
        let mut p = self.pending.borrow_mut();
        let n = p.entry((node, incarnation)).or_default();
        *n = n.saturating_add_signed(delta);
    }

    /// `op` counted as an operation of this incarnation in flight while it runs.
    async fn in_flight<T>(&self, node: u32, incarnation: u32, op: impl std::future::Future<Output = T>) -> T {
        self.host_op(node, incarnation, 1);
        let out = op.await;
        self.host_op(node, incarnation, -1);
        out
    }

    /// A host submission of `run_id` by this incarnation began: counted in flight, and listed
    /// in `submitting` (a restarted host submits again what an earlier incarnation left there).
    fn submission_began(&self, node: u32, incarnation: u32, run_id: &str) {
        self.host_op(node, incarnation, 1);
        self.submitting.borrow_mut().insert((node, incarnation, run_id.to_string()));
    }

    /// That submission ended with the process alive.
    fn submission_ended(&self, node: u32, incarnation: u32, run_id: &str) {
        self.host_op(node, incarnation, -1);
        self.submitting.borrow_mut().remove(&(node, incarnation, run_id.to_string()));
    }

    /// A process started anew: the operations of its earlier incarnations died with them.
    fn restarted(&self, node: u32, incarnation: u32) {
        self.pending.borrow_mut().retain(|&(n, i), _| n != node || i == incarnation);
    }

    fn host_ops_in_flight(&self) -> u32 {
        self.pending.borrow().values().sum()
    }
}

fn shared(world: &WorldState) -> Rc<QueueShared> {
    world.shared_as::<QueueShared>()
}

/// Run-id suffixes chosen so that ids are prefixes of each other (`run-1`, `run-10`,
/// `run-100`) and carry SQL LIKE wildcards and dots (`run-1_`, `run-1.0`): a store that
/// matches a run's rows or blobs by prefix or by an unescaped pattern mixes runs up, and
/// the read and write properties see it.
const SUFFIXES: [&str; 10] = ["1", "10", "1_", "1x", "100", "1.0", "11", "1-0", "2", "1-1"];

fn run_id(kind: &str, i: usize) -> String {
    let suffix = SUFFIXES[i % SUFFIXES.len()];
    match i / SUFFIXES.len() {
        0 => format!("{kind}-{suffix}"),
        n => format!("{kind}-{suffix}-{n}"),
    }
}

/// `queue-solo`'s retention: `tmp-` runs once terminal, except one that completed in more
/// than one segment (a retry or a takeover), kept for inspection. A host may rerun a listed
/// `tmp-` run that settled `error` to completion before the worker's lease, so the worker
/// must apply its predicate again to the meta it reads under that lease. (`queue` keeps the
/// id-only rule: its stored explore findings replay windows that rule's timing opens.)
const KEEP_RETRIED: RetentionRule = RetentionRule { id_prefix: "tmp-", keep_completed_retried: true };

/// `queue`'s and the targeted scenarios' retention: every terminal `tmp-` run.
const BY_ID: RetentionRule = RetentionRule { id_prefix: "tmp-", keep_completed_retried: false };

fn delete_by_id(meta: &RunMeta) -> bool {
    meta.run_id.starts_with(BY_ID.id_prefix)
}

fn delete_unless_retried(meta: &RunMeta) -> bool {
    let retried = meta.status == RunStatus::Ok && meta.segments.unwrap_or(1) > 1;
    meta.run_id.starts_with(KEEP_RETRIED.id_prefix) && !retried
}

/// The worker predicate that applies `rule` (the two rules the catalog declares).
fn retention_predicate(rule: RetentionRule) -> fn(&RunMeta) -> bool {
    if rule.keep_completed_retried {
        delete_unless_retried
    } else {
        delete_by_id
    }
}

impl EngineScenario {
    fn points(&self) -> (Vec<FaultPoint>, Vec<FaultPoint>) {
        use FaultPoint::*;
        match self.focus {
            Focus::Everywhere => {
                let points: Vec<FaultPoint> = FaultPoint::ALL.to_vec();
                let crash = points
                    .iter()
                    .copied()
                    .filter(|p| !matches!(p.moment(), Moment::Before | Moment::Boot))
                    .collect();
                (points, crash)
            }
            Focus::StaleSettle => (
                vec![
                    WorkerDriveBeforeRenew,
                    EngineRenewBeforeRenew,
                    EngineDispatchAfterProvider,
                    EngineDispatchBeforeTerminal,
                    EngineSettleBeforeRunSettle,
                    EngineSettleAfterRunSettle,
                    SqlitePutMetaBeforeBegin,
                    SqliteAppendBeforeBegin,
                ],
                vec![EngineDispatchAfterProvider, EngineDispatchAfterRunning],
            ),
            Focus::StaleCheckpoint => (
                vec![
                    WorkerDriveBeforeRenew,
                    EngineRenewBeforeRenew,
                    EngineCheckpointBeforePut,
                    EngineDispatchAfterTool,
                    SqliteBlobPutBeforeBegin,
                ],
                vec![EngineDispatchAfterProvider, EngineCheckpointAfterPut],
            ),
            // Both halves of the retention race: the cascade's brief lease superseded while a
            // host retries the run (F4), and the retry's lease lapsing with the meta `running`
            // (its renew stalls past the ttl, or the host dies mid-dispatch) while the acquire
            // of a sweep that listed the run terminal stalls before it begins: the re-read
            // under that lease must then skip the run.
            Focus::StaleRetention => (
                vec![
                    WorkerRetentionAfterAcquire,
                    WorkerRetentionAfterBlobs,
                    SqliteBlobDeleteBeforeBegin,
                    SqliteDeleteBeforeBegin,
                    EngineRenewBeforeRenew,
                    EngineDispatchAfterRunning,
                    SqliteAcquireBeforeBegin,
                ],
                vec![EngineDispatchAfterRunning],
            ),
            Focus::CutCascade => (
                vec![
                    EngineDeleteBeforeBlobs,
                    EngineDeleteAfterBlobs,
                    SqliteBlobPutBeforeBegin,
                    SqliteBlobPutAfterCommit,
                    SqliteBlobDeleteBeforeBegin,
                    SqliteBlobDeleteAfterCommit,
                    SqliteDeleteBeforeBegin,
                    EngineCheckpointAfterPut,
                    EngineResumeBeforeAcquire,
                    SqliteAcquireBeforeBegin,
                    SqliteBlobGetBeforeRead,
                ],
                vec![
                    EngineDeleteBeforeBlobs,
                    EngineDeleteAfterBlobs,
                    SqliteBlobPutAfterCommit,
                    SqliteBlobDeleteAfterCommit,
                    EngineCheckpointAfterPut,
                ],
            ),
        }
    }
}

impl Scenario for EngineScenario {
    fn name(&self) -> &'static str {
        self.name
    }

    fn retention_rule(&self) -> Option<RetentionRule> {
        Some(self.retention)
    }

    fn describe(&self) -> &'static str {
        self.describe
    }

    fn knobs(&self, seed: u64) -> Knobs {
        let mut r = rng(seed, "knobs", 0);
        // The ttl is drawn from a stream of its own (the other knobs stay put), 240 to 360 ms:
        // most draws are no multiple of 3, so the renew cadence's rounding (floor(ttl/3))
        // is judged too.
        let ttl_ms = rng(seed, "knobs-ttl", 0).between(240, 360);
        Knobs {
            nodes: r.between(self.nodes.0, self.nodes.1) as u32,
            ttl_ms,
            size: r.between(self.runs.0, self.runs.1) as u32,
            cap_ms: 4000,
        }
    }

    fn faults(&self, _knobs: &Knobs) -> FaultProfile {
        let (points, crash_points) = self.points();
        let focused = self.focus != Focus::Everywhere;
        let profile = FaultProfile::at(points).occurrences(60).clocks(20, 200);
        // Stalls past the ttl run up to 3x it: long enough for a successor to take over and
        // get turns ahead.
        if self.focus == Focus::CutCascade {
            // Most firings before a write are a real `SQLITE_BUSY` (a cut at that write),
            // stalls are short or past the ttl (a retry held between its prepare and its
            // acquire while a cascade runs and is cut), crashes only at the cut points.
            profile
                .active(600, 1000)
                .fire(100, 400)
                .stalls((300, 700), (200, 600), 300)
                .crashes(50, 300, crash_points)
                .contends(300, 800)
        } else if focused {
            profile.active(500, 1000).fire(50, 300).stalls((500, 900), (400, 900), 300).crashes(
                0,
                200,
                crash_points,
            )
        } else {
            // Of the yields before a store write, up to 30% meet another writer's lock (a
            // focused scenario spends its faults on its window: a busy write fails the run
            // before it gets there).
            let profile = profile
                .active(200, 600)
                .fire(10, 60)
                .stalls((200, 600), (100, 500), 300)
                .crashes(0, 100, crash_points)
                .contends(0, 300);
            if self.receipt_contention {
                profile.contends_next(
                    vec![FaultPoint::EngineDispatchAfterProvider],
                    0,
                    RECEIPT_CONTENTION_MAX,
                )
            } else {
                profile
            }
        }
    }

    fn shared(&self, plan: &Plan) -> Rc<dyn Any> {
        let registry = catalog_workflows();
        let mut r = rng(plan.seed, "workload", 0);
        let priced = self.priced && plan.swarm.workload >= 3;
        let mut budgets = rng(plan.seed, "budget", 0);
        let zero_budgets = plan.swarm.workload >= 5;
        // A plan of workload revision 0 draws from the workflows of its time.
        let abandons = self.abandons && plan.swarm.workload >= 4;
        let mut workflows: Vec<&str> =
            self.workflows.iter().copied().filter(|w| plan.swarm.workload >= 1 || *w != "survey").collect();
        if abandons {
            // Half the runs wait on an approval, so a host finds one suspended now and then.
            workflows.extend(["approval", "approval"]);
        }
        let runs = (0..plan.knobs.size)
            .map(|i| {
                let name = workflows[r.between(0, workflows.len() as u64 - 1) as usize];
                let tmp = r.chance(self.tmp_per_mille);
                let options = if self.labels {
                    let host = format!("host-{}", i % plan.knobs.nodes.max(1));
                    let kind = if tmp { "tmp" } else { "kept" };
                    // A label of its own, not the workflow's name: a store that filters
                    // `name` on `workflowName` answers differently.
                    RunOptions {
                        name: Some(format!("{name}-{kind}")),
                        budget_usd: None,
                        tags: Some(vec!["queue".into(), host, kind.into()]),
                    }
                } else {
                    RunOptions::default()
                };
                // A recorded field every segment's meta must carry verbatim; with a price, the
                // budget the engine charges paid calls against.
                let budget = if priced { draw_budget(&mut budgets, zero_budgets) } else { 1 + i % 5 };
                let options = RunOptions { budget_usd: Some(budget), ..options };
                RunSpec {
                    run_id: run_id(if tmp { "tmp" } else { "run" }, i as usize),
                    workflow: registry.get(name).cloned().unwrap_or_else(Workflow::happy),
                    start_ms: r.between(0, plan.knobs.cap_ms * 3 / 4),
                    options,
                }
            })
            .collect();
        Rc::new(QueueShared {
            seed: plan.seed,
            runs,
            registry,
            stop: Cell::new(false),
            heal: Cell::new(false),
            retry_per_mille: self.retry_per_mille,
            labels: self.labels,
            repairs: self.repairs,
            stops: self.stops,
            host_deletes: self.host_deletes,
            solo_worker: self.solo_worker,
            retention: self.retention,
            // An abandoned run's cut cascade is finished by whichever worker drives it next:
            // rulvar's default worker (no retention) on the odd nodes as well.
            retention_on_even_nodes: self.retention_on_even_nodes || abandons,
            wrong_workflows: self.wrong_workflows,
            retry_any: self.retry_any,
            redeliveries: self.redeliveries,
            retry_deleted: self.retry_deleted,
            retry_failed: self.retry_failed && plan.swarm.workload >= 2,
            paid_call_cents: if priced { draw_price(plan.seed, plan.swarm.workload) } else { 0 },
            review_repairs: plan.swarm.workload >= 3,
            status_page: self.status_page,
            double_clicks: self.double_clicks,
            answers_running: self.answers_running && plan.swarm.user_actors,
            abandons,
            deploy_gap: (self.rolling_deploy && plan.swarm.workload >= 6).then(|| {
                // Its own stream: the other draws stay put.
                let mut d = rng(plan.seed, "deploy-gap", 0);
                self.workflows[d.between(0, self.workflows.len() as u64 - 1) as usize].to_string()
            }),
            deletes_stuck: match plan.swarm.workload {
                _ if !abandons => 0,
                0..=4 => 0,
                5 => 250,
                _ => STUCK_DELETE_PER_MILLE,
            },
            deleted: RefCell::new(BTreeSet::new()),
            retrying: RefCell::new(BTreeMap::new()),
            pending: RefCell::new(BTreeMap::new()),
            submitting: RefCell::new(BTreeSet::new()),
        })
    }

    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()> {
        Box::pin(node_body(node))
    }

    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let sh = shared(&world);
            if sh.paid_call_cents > 0 {
                let cents = sh.paid_call_cents;
                world.recorder.fact(0, 0, "", sim::time::now_ns(), FactKind::Priced { cents });
            }
            madsim::time::sleep(Duration::from_millis(world.plan.knobs.cap_ms)).await;
            // The heal: faults off, every node up, suspensions answered, until every run
            // that exists is terminal (bounded).
            world.faults_on.set(false);
            sh.heal.set(true);
            world.recorder.fact(0, 0, "", sim::time::now_ns(), FactKind::Healed);
            world.restart_all();
            let mut quiet = 0;
            for _ in 0..600 {
                madsim::time::sleep(Duration::from_millis(100)).await;
                world.restart_all();
                let statuses = world.observe_statuses();
                let settled = sh.host_ops_in_flight() == 0
                    && statuses.iter().all(|(_, s)| RunStatus::parse(s).is_some_and(|s| s.is_terminal()));
                quiet = if settled { quiet + 1 } else { 0 };
                if quiet >= 3 {
                    break;
                }
            }
            sh.stop.set(true);
            madsim::time::sleep(Duration::from_millis(50)).await;
        })
    }

    /// The engine quorum: a run in which no host submitted a run, no turn was paid or no
    /// segment settled gave the engine properties nothing to judge, and is not a pass.
    fn scenario_checks(&self, _world: &WorldState, history: &History, _fin: &FinalState) -> Vec<Violation> {
        let (mut submitted, mut paid, mut settled) = (0u64, 0u64, 0u64);
        for f in &history.facts {
            match f.kind {
                FactKind::Submitted { .. } => submitted += 1,
                FactKind::Paid { .. } => paid += 1,
                FactKind::Settled { .. } => settled += 1,
                _ => {}
            }
        }
        // A segment whose process died right after its terminal meta write settled without a
        // `Settled` fact: count the terminal meta writes the store applied too.
        let terminal_metas = history
            .calls
            .iter()
            .filter(|c| c.op == sim::history::OpKind::PutMeta && c.applied.is_some())
            .filter_map(|c| serde_json::from_str::<serde_json::Value>(c.args.payload.as_deref()?).ok())
            .filter(|v| {
                v.get("status")
                    .and_then(|s| s.as_str())
                    .is_some_and(|s| !matches!(s, "running" | "suspended"))
            })
            .count() as u64;
        if submitted > 0 && paid > 0 && (settled > 0 || terminal_metas > 0) {
            return Vec::new();
        }
        vec![Violation::new(
            "engine_quorum_reached",
            format!(
                "the engine did too little to judge: {submitted} runs submitted, {paid} turns paid, {settled} segments settled and {terminal_metas} terminal meta writes applied (at least one of each kind is needed, a settle or a terminal meta write)"
            ),
        )]
    }

    fn key_points(&self) -> &'static [FaultPoint] {
        self.key_points
    }

    fn coverage(&self) -> &'static [Required] {
        self.coverage
    }

    /// Two nodes, one run, the usual ttl and cap.
    fn small_knobs(&self) -> Option<Knobs> {
        Some(Knobs { nodes: 2, ttl_ms: 300, size: 1, cap_ms: 4000 })
    }

    fn smaller_knobs(&self, knobs: &Knobs) -> Vec<Knobs> {
        knobs.fewer_nodes_then_smaller_size(self.nodes.0 as u32)
    }
}

/// One node: a host for its share of the runs, a queue worker, an operator.
async fn node_body(node: NodeCtx) {
    let sh = shared(&node.world);
    sh.restarted(node.index, node.incarnation);
    let rec = node.world.recorder.clone();
    let env: Rc<dyn store::Env> = node.env.clone();
    // Two identities per process, as in rulvar: the host's engine owner and the worker's.
    let make = |role: &str| {
        let sink = FactSink {
            rec: rec.clone(),
            node: node.index,
            incarnation: node.incarnation,
            owner: format!("{role}-n{}-i{}", node.index, node.incarnation),
        };
        let world = LedgerEffects::new(&sink, sh.seed, (5, 80));
        let store = node.store.clone();
        let transcripts = store.transcripts();
        let engine: Rc<SimEngine> = Rc::new(
            Engine::new(store, transcripts, world, env.clone(), node.world.profile, sink.owner.clone())
                .with_paid_call_cents(sh.paid_call_cents),
        );
        (engine, sink)
    };
    let (engine, sink) = make("host");
    let (worker_engine, worker_sink) = make("worker");
    let nodes = node.world.plan.knobs.nodes;

    // Host: a fresh process starts its own runs; a restarted one leaves them to the workers,
    // except a submission that died before the run had a meta row (no worker can see it):
    // the restarted host submits it again (see `submit`).
    let ttl = node.world.plan.knobs.ttl_ms;
    let mine: Vec<(RunSpec, bool)> = if node.incarnation > 0 {
        let mut submitting = sh.submitting.borrow_mut();
        let lost: Vec<String> = submitting
            .iter()
            .filter(|(n, i, _)| *n == node.index && *i < node.incarnation)
            .map(|(_, _, r)| r.clone())
            .collect();
        submitting.retain(|(n, i, _)| *n != node.index || *i >= node.incarnation);
        sh.runs.iter().filter(|s| lost.contains(&s.run_id)).map(|s| (s.clone(), true)).collect()
    } else {
        sh.runs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as u32 % nodes == node.index)
            .map(|(_, s)| (s.clone(), false))
            .collect()
    };
    for (spec, redelivered) in mine {
        let (engine, sink, sh) = (engine.clone(), sink.clone(), sh.clone());
        let actor = sink.owner.clone();
        let (index, incarnation) = (node.index, node.incarnation);
        sh.submission_began(index, incarnation, &spec.run_id);
        madsim::task::spawn_local(under_actor(&actor, async move {
            if !redelivered {
                madsim::time::sleep(Duration::from_millis(spec.start_ms)).await;
            }
            if submit(&engine, &sink, &spec, ttl, redelivered).await {
                sh.submission_ended(index, incarnation, &spec.run_id);
            }
        }));
    }
    if sh.retry_per_mille > 0 {
        let (engine, sink, sh) = (engine.clone(), sink.clone(), sh.clone());
        let user_actors = node.world.plan.swarm.user_actors;
        let index = node.index;
        let incarnation = node.incarnation;
        let actor = sink.owner.clone();
        madsim::task::spawn_local(under_actor(&actor, async move {
            let mut r = rng(sh.seed, "host-retry", u64::from(index) << 32 | u64::from(incarnation));
            // A stream of its own, so labels leave the retry draws as they were.
            let mut lr = rng(sh.seed, "host-list", u64::from(index) << 32 | u64::from(incarnation));
            let mut dr = rng(sh.seed, "host-delete", u64::from(index) << 32 | u64::from(incarnation));
            // Whether a host delete takes a lease: a stream of its own (the delete draws stay).
            let mut ur =
                rng(sh.seed, "host-delete-unleased", u64::from(index) << 32 | u64::from(incarnation));
            // Whether the host submits a run it deleted again: a stream of its own too.
            let mut rr = rng(sh.seed, "host-resubmit", u64::from(index) << 32 | u64::from(incarnation));
            // Whether a retry passes another workflow than the run's: a stream of its own too.
            let mut wwr =
                rng(sh.seed, "host-wrong-workflow", u64::from(index) << 32 | u64::from(incarnation));
            // Whether a host retries a run it deleted: a stream of its own too.
            let mut gr = rng(sh.seed, "host-retry-deleted", u64::from(index) << 32 | u64::from(incarnation));
            // Whether the user double-clicks a retry, and the second click's delay: its own too.
            let mut dcr = rng(sh.seed, "host-double-click", u64::from(index) << 32 | u64::from(incarnation));
            // Whether a tick looks at the failed runs first, and which of them: its own too.
            let mut fr = rng(sh.seed, "host-retry-failed", u64::from(index) << 32 | u64::from(incarnation));
            // Whether the user abandons a suspended run of theirs: its own too.
            let mut ar = rng(sh.seed, "host-abandon", u64::from(index) << 32 | u64::from(incarnation));
            // A host retries its own runs, or any run (`retry_any`); it deletes only its own.
            let mine: Vec<(RunSpec, bool)> = sh
                .runs
                .iter()
                .enumerate()
                .map(|(i, s)| (s.clone(), i as u32 % nodes == index))
                .filter(|(_, own)| *own || sh.retry_any)
                .collect();
            // With `retry_any`, a stream of its own: how often this host looks for another
            // host's retry in flight, and whether it joins it.
            let mut jr = rng(sh.seed, "host-join", u64::from(index) << 32 | u64::from(incarnation));
            let owner = sink.owner.clone();
            while !sh.stop.get() && !sh.heal.get() && !mine.is_empty() {
                // Another host's retry in flight, joined as a user retrying from a stale
                // page would: no status check, the two resumes race.
                let joined = if sh.retry_any {
                    madsim::time::sleep(Duration::from_millis(jr.between(10, 60))).await;
                    let other =
                        sh.retrying.borrow().iter().find(|(_, o)| **o != owner).map(|(r, _)| r.clone());
                    other
                        .filter(|_| jr.chance(500))
                        .and_then(|run| mine.iter().find(|(s, _)| s.run_id == run))
                } else {
                    None
                };
                // Whether the run was picked from the failed runs' list (which read its status).
                let mut listed_failed = false;
                // Whether the user gives up on the run, which it saw waiting on an approval
                // (deleted with no lease) or stuck running (deleted under a brief lease).
                let mut abandoning: Option<Deleting> = None;
                let (spec, own) = match joined {
                    Some(j) => j,
                    None => {
                        if sh.retry_any && !jr.chance(250) {
                            continue;
                        }
                        madsim::time::sleep(Duration::from_millis(r.between(100, 400))).await;
                        // The tick's own draw (as before failed runs were looked at first),
                        // then, on a stream of its own, whether it looks at them first.
                        let drawn = r
                            .chance(sh.retry_per_mille)
                            .then(|| &mine[r.between(0, mine.len() as u64 - 1) as usize]);
                        let failed = if sh.retry_failed && fr.chance(RETRY_FAILED_PER_MILLE) {
                            match failed_first(&engine, &mine, &mut fr).await {
                                Err(StoreError::Crashed { .. }) => return,
                                Ok(failed) => failed,
                                Err(_) => None,
                            }
                        } else {
                            None
                        };
                        listed_failed = failed.is_some();
                        match failed.or(drawn) {
                            Some(picked) => picked,
                            None => continue,
                        }
                    }
                };
                if joined.is_some() {
                    // A joined retry reads nothing first.
                } else if listed_failed {
                    // The failed runs' list was its read: the user retries what it showed.
                } else if sh.labels && *own && lr.chance(500) {
                    // By listing: this host's terminal runs that still carry its tag (a
                    // resumed run dropped its tags, and is retried only by the lookup below).
                    let filter = RunFilter {
                        statuses: Some(TERMINAL.to_vec()),
                        tags: Some(vec![format!("host-{index}")]),
                        ..RunFilter::default()
                    };
                    match engine.journal().list_runs(&filter).await {
                        Err(StoreError::Crashed { .. }) => return,
                        // `statuses` may over-match (the contract allows it): check the status.
                        Ok(metas)
                            if metas.iter().any(|m| m.run_id == spec.run_id && m.status.is_terminal()) => {}
                        _ => continue,
                    }
                } else {
                    match engine.journal().get_meta(&spec.run_id).await {
                        Ok(Some(meta)) if meta.status.is_terminal() => {}
                        Ok(Some(meta))
                            if sh.abandons
                                && *own
                                && meta.status == RunStatus::Suspended
                                && ar.chance(ABANDON_PER_MILLE) =>
                        {
                            abandoning = Some(Deleting::Abandoned);
                        }
                        Ok(Some(meta))
                            if sh.deletes_stuck > 0
                                && *own
                                && meta.status == RunStatus::Running
                                && ar.chance(sh.deletes_stuck) =>
                        {
                            abandoning = Some(Deleting::Stuck);
                        }
                        // A run its delete took, retried from a stale page.
                        Ok(None)
                            if sh.retry_deleted
                                && sh.deleted.borrow().contains(&spec.run_id)
                                && gr.chance(RETRY_DELETED_PER_MILLE) => {}
                        _ => continue,
                    }
                }
                if sh.heal.get() {
                    continue;
                }
                if sh.host_deletes
                    && sh.submitting.borrow().iter().any(|(n, i, run)| {
                        *run == spec.run_id && ((*n, *i) == (index, incarnation) || sh.retry_any)
                    })
                {
                    // Its first segment is still running here (the meta went terminal under
                    // a worker that took the run over): the host acts once its handle
                    // resolves (with `retry_any`, once its submitting host's handle has).
                    continue;
                }
                if let Some(how) = abandoning {
                    let alive = sh
                        .in_flight(index, incarnation, host_delete(&engine, &sink, &sh, &spec.run_id, how))
                        .await;
                    if !alive {
                        return;
                    }
                    continue;
                }
                if sh.host_deletes
                    && *own
                    && joined.is_none()
                    && !listed_failed
                    && dr.chance(HOST_DELETE_PER_MILLE)
                {
                    // The user deletes the finished run instead (it may be retried later,
                    // which recreates it).
                    let how = if ur.chance(UNLEASED_DELETE_PER_MILLE) {
                        Deleting::Unleased
                    } else {
                        Deleting::Leased
                    };
                    let alive = sh
                        .in_flight(index, incarnation, host_delete(&engine, &sink, &sh, &spec.run_id, how))
                        .await;
                    if !alive {
                        return;
                    }
                    if rr.chance(RESUBMIT_PER_MILLE) {
                        // And submits it again under its explicit id: a fresh start with a
                        // genesis of its own (docs/engine-model.md 5.3: what the genesis is
                        // for), where a retry's resume brings a deleted run back without one.
                        // Submitted only if the delete took (the meta is gone); a restarted
                        // host redelivers it as it does its first submissions.
                        sh.submission_began(index, incarnation, &spec.run_id);
                        if !submit(&engine, &sink, spec, ttl, true).await {
                            return;
                        }
                        sh.submission_ended(index, incarnation, &spec.run_id);
                    }
                    continue;
                }
                // Now and then the user passes another workflow than the one the run was
                // started with (a stale script): the resume's binding check must refuse it
                // before any write (docs/engine-model.md 1.2). Only on a run of its own that
                // only this host deletes (not `tmp-`, which retention deletes), whose terminal
                // meta it has just read, so the resume finds that meta. Its own stream.
                let wrong = (sh.wrong_workflows
                    && joined.is_none()
                    && *own
                    && !spec.run_id.starts_with("tmp-")
                    && wwr.chance(WRONG_WORKFLOW_PER_MILLE))
                .then(|| sh.registry.values().find(|w| w.name != spec.workflow.name).cloned())
                .flatten();
                let workflow = wrong.as_ref().unwrap_or(&spec.workflow);
                if sh.double_clicks && user_actors && dcr.chance(DOUBLE_CLICK_PER_MILLE) {
                    // The user clicks retry twice: a second resume of the run a few ms after
                    // the first, in the same process (the engine must refuse it while the
                    // first's segment is live, before any side effect).
                    let (engine, sink, sh) = (engine.clone(), sink.clone(), sh.clone());
                    let (run_id, workflow) = (spec.run_id.clone(), workflow.clone());
                    let after = dcr.between(1, 10);
                    sh.host_op(index, incarnation, 1);
                    madsim::task::spawn_local(under_actor(&owner.clone(), async move {
                        madsim::time::sleep(Duration::from_millis(after)).await;
                        sink.fact(FactKind::Resumed {
                            run_id: run_id.clone(),
                            workflow: workflow.name.clone(),
                        });
                        let r = engine.resume(&run_id, &workflow, None).await;
                        sh.host_op(index, incarnation, -1);
                        sink.settled(&run_id, "retry", &r);
                    }));
                }
                sink.fact(FactKind::Resumed { run_id: spec.run_id.clone(), workflow: workflow.name.clone() });
                sh.host_op(index, incarnation, 1);
                sh.retrying.borrow_mut().insert(spec.run_id.clone(), owner.clone());
                let r = engine.resume(&spec.run_id, workflow, None).await;
                sh.retrying.borrow_mut().remove(&spec.run_id);
                sh.host_op(index, incarnation, -1);
                if !sink.settled(&spec.run_id, "retry", &r) {
                    return;
                }
            }
        }));
    }

    if sh.status_page && node.world.plan.swarm.user_actors {
        let (engine, sh, world) = (engine.clone(), sh.clone(), node.world.clone());
        let (index, incarnation) = (node.index, node.incarnation);
        let actor = format!("page-n{index}-i{incarnation}");
        let mine = [format!("host-n{index}-i{incarnation}"), format!("worker-n{index}-i{incarnation}")];
        madsim::task::spawn_local(under_actor(&actor, async move {
            let mut r = rng(sh.seed, "status-page", u64::from(index) << 32 | u64::from(incarnation));
            while !sh.stop.get() && !sh.heal.get() && !sh.runs.is_empty() {
                madsim::time::sleep(Duration::from_millis(r.between(10, 40))).await;
                // The page shows the runs its own process works on (those whose lease one of
                // its identities holds), else any run of the workload.
                let working: Vec<&str> = sh
                    .runs
                    .iter()
                    .map(|s| s.run_id.as_str())
                    .filter(|run| world.observe_lease(run).is_some_and(|row| mine.contains(&row.owner)))
                    .collect();
                let run = if working.is_empty() {
                    sh.runs[r.between(0, sh.runs.len() as u64 - 1) as usize].run_id.as_str()
                } else {
                    working[r.between(0, working.len() as u64 - 1) as usize]
                };
                // The run's status and its transcript, in either order (two panels of the
                // page load independently). Whatever they return is judged against the
                // committed history (`reads_see_serial_history`).
                let transcript_first = r.chance(500);
                for read in 0..2 {
                    let crashed = if (read == 0) == transcript_first {
                        matches!(engine.journal().load(run).await, Err(StoreError::Crashed { .. }))
                    } else {
                        matches!(engine.journal().get_meta(run).await, Err(StoreError::Crashed { .. }))
                    };
                    if crashed {
                        return;
                    }
                }
            }
        }));
    }

    // Worker and operator.
    let default_worker =
        sh.retention_on_even_nodes && node.world.plan.swarm.default_workers && node.index % 2 == 1;
    let keeps = (!default_worker).then_some(retention_predicate(sh.retention));
    // A rolling deploy: an odd node's worker is one release behind and lacks a workflow.
    let mut registry = sh.registry.clone();
    if let Some(gap) = sh.deploy_gap.as_ref().filter(|_| node.index % 2 == 1) {
        registry.remove(gap);
        worker_sink.fact(FactKind::Deployed { workflows: registry.keys().cloned().collect() });
    }
    let new_worker =
        || Worker::new(worker_engine.clone(), worker_sink.owner.clone(), registry.clone(), keeps);
    let sink = &worker_sink;
    let engine = &worker_engine;
    let actor = sink.owner.clone();
    under_actor(&actor, worker_loop(&new_worker, engine, sink, &sh, &node)).await;
}

type SimWorker = Worker<RecordedStore, RecordedTranscripts, LedgerEffects>;

/// Chance per host retry that the user clicks it twice (with `double_clicks`), per mille.
const DOUBLE_CLICK_PER_MILLE: u32 = 300;

/// Chance per host retry (of a run of its own, not `tmp-`) that the user passes another
/// workflow than the run's, per mille.
const WRONG_WORKFLOW_PER_MILLE: u32 = 300;

/// Chance per sweep that the worker is stopped while it sweeps (when the scenario stops
/// workers), per mille.
const STOP_PER_MILLE: u32 = 300;

/// When a sweep's worker is stopped.
#[derive(Clone, Copy, Debug)]
enum StopAt {
    /// This long into the sweep.
    After { ms: u64 },
    /// At a leased write point of the worker on this node, past `skip` of them (each write
    /// has two: before it begins and right after it commits); the write stalls `stall_ms`
    /// there.
    NextWrite { node: u32, skip: u32, stall_ms: u64 },
}

/// One sweep of `worker`; when `stop` is set, the worker is stopped as it says (the drive in
/// progress, if any, settles `cancelled`).
/// The stop and the return of the sweep it interrupted are recorded as facts
/// (`a_stopped_worker_takes_no_run` judges what the worker did in between).
async fn sweep_maybe_stopped(
    worker: &SimWorker,
    sink: &FactSink,
    world: &WorldState,
    stop: Option<StopAt>,
) -> Result<store::engine::SweepReport, store::engine::EngineError> {
    let Some(stop) = stop else { return worker.sweep().await };
    // Armed before the sweep starts, so its first leased write can already take the stop.
    let wait: LocalFuture<'_, ()> = match stop {
        StopAt::After { ms } => Box::pin(async move { madsim::time::sleep(Duration::from_millis(ms)).await }),
        StopAt::NextWrite { node, skip, stall_ms } => {
            let interrupt = world.arm_interrupt(node, &sink.owner, skip, stall_ms);
            Box::pin(async move {
                if interrupt.await.is_err() {
                    std::future::pending::<()>().await;
                }
            })
        }
    };
    let stopper = async move {
        wait.await;
        worker.stop();
        sink.fact(FactKind::WorkerStopped);
        std::future::pending::<()>().await
    };
    // The stopper never completes: the sweep's return ends the select.
    let swept = match futures::future::select(Box::pin(worker.sweep()), Box::pin(stopper)).await {
        futures::future::Either::Left((swept, _)) => swept,
        futures::future::Either::Right(((), swept)) => swept.await,
    };
    if worker.stopped() && !matches!(swept, Err(ref e) if e.is_crash()) {
        sink.fact(FactKind::StoppedSweepReturned);
    }
    swept
}

/// A host's submission of `spec`, until the run has a meta row. A submission that failed
/// before the run was persisted (SQLITE_BUSY at its acquire, a lease that expired inside a
/// stalled acquire) or, `redelivered`, one an earlier process of this host died in, leaves a
/// run no worker can list: the host makes it again after a ttl (re-reading meta first; up to
/// four attempts), as a job source redelivers an unacknowledged job. `false`: the process died.
async fn submit(engine: &SimEngine, sink: &FactSink, spec: &RunSpec, ttl: u64, redelivered: bool) -> bool {
    for attempt in 0..4u32 {
        if redelivered || attempt > 0 {
            match engine.journal().get_meta(&spec.run_id).await {
                Ok(None) => {}
                Ok(Some(_)) => return true, // persisted: the workers and retries have it
                Err(StoreError::Crashed { .. }) => return false,
                Err(_) => {
                    madsim::time::sleep(Duration::from_millis(ttl)).await;
                    continue;
                }
            }
        }
        sink.submitted(&spec.run_id, &spec.workflow);
        if spec.options.name.is_some() || spec.options.tags.is_some() {
            sink.fact(FactKind::Labelled {
                run_id: spec.run_id.clone(),
                name: spec.options.name.clone(),
                tags: spec.options.tags.clone(),
            });
        }
        let r = engine.run_with(&spec.run_id, &spec.workflow, &spec.options).await;
        sink.settled(&spec.run_id, "run", &r);
        match r {
            Ok(_) => return true,
            Err(e) if e.is_crash() => return false,
            Err(_) => madsim::time::sleep(Duration::from_millis(ttl)).await,
        }
    }
    true
}

/// The worker and operator identity's loop: sweep and drive, answer suspensions, prune.
async fn worker_loop(
    new_worker: &dyn Fn() -> SimWorker,
    engine: &SimEngine,
    sink: &FactSink,
    sh: &QueueShared,
    node: &NodeCtx,
) {
    let (index, incarnation, world) = (node.index, node.incarnation, &*node.world);
    let nodes = world.plan.knobs.nodes;
    let mut r = rng(sh.seed, "worker", u64::from(index) << 32 | u64::from(incarnation));
    let mut cr = rng(sh.seed, "census", u64::from(index) << 32 | u64::from(incarnation));
    let mut review = rng(sh.seed, "operator-review", u64::from(index) << 32 | u64::from(incarnation));
    let mut sr = rng(sh.seed, "worker-stop", u64::from(index) << 32 | u64::from(incarnation));
    // Its own stream, so the stops drawn (and every other draw) stay as they were.
    let mut wr = rng(sh.seed, "worker-stop-at-write", u64::from(index) << 32 | u64::from(incarnation));
    let mut worker = new_worker();
    // The audit probes alternate between the per-run audit and the whole-catalog census
    // (`auditRuns`), during the heal and before it (where a census can meet a run booted
    // with no entry yet, or one whose first dispatch crashed); a counter, not a draw, so
    // every other stream stays as it was.
    let mut probes = 0u32;
    // With a solo worker, only node 0 sweeps; the others keep their operator duties.
    let sweeps = !sh.solo_worker || index == 0;
    while !sh.stop.get() {
        let stop = (sh.stops && !sh.heal.get() && sr.chance(STOP_PER_MILLE)).then(|| {
            let ms = sr.between(5, 150);
            // Of the stops drawn, the plan's share is delivered at one of the worker's leased
            // writes instead of at a time, that write then stalling a few ms, so the stop lands
            // with the write in flight (the cancel must let a journal append that committed be
            // recorded, and the drain and settle follow it). A stop timed blind lands inside a
            // write only when the plan happens to stall that write.
            if wr.chance(world.plan.swarm.interrupt_per_mille) {
                StopAt::NextWrite { node: index, skip: wr.between(0, 11) as u32, stall_ms: wr.between(1, 20) }
            } else {
                StopAt::After { ms }
            }
        });
        let swept = if sweeps {
            let recorded = async {
                sink.fact(FactKind::SweepBegan);
                let swept = sweep_maybe_stopped(&worker, sink, world, stop).await;
                if !matches!(swept, Err(ref e) if e.is_crash()) {
                    sink.fact(FactKind::SweepEnded);
                }
                swept
            };
            sh.in_flight(index, incarnation, recorded).await
        } else {
            Ok(store::engine::SweepReport::default())
        };
        match swept {
            Ok(report) => {
                for (run_id, outcome) in &report.driven {
                    sink.settled(run_id, "drive", &Ok(outcome.clone()));
                }
                for (run_id, e) in &report.errors {
                    sink.settled(run_id, "drive", &Err(e.clone()));
                }
            }
            Err(e) if e.is_crash() => return,
            Err(e) => {
                sink.settled("", "sweep", &Err(e));
            }
        }
        if worker.stopped() {
            // A stopped worker stays stopped: a fresh one (a restarted worker process, with
            // no memory of the runs it parked) carries on under the same identity.
            worker = new_worker();
        }
        // The operator duties write too (a resolution, a pruned checkpoint, a repaired meta
        // row), so each counts as in flight while it runs: one stalled across the heal can
        // revive a run after every run looked settled.
        if sh.heal.get() || r.chance(500) {
            let inbox = if !sh.answers_running {
                Inbox::Suspended
            } else if r.chance(EVERY_RUN_INBOX_PER_MILLE) {
                Inbox::EveryRun
            } else {
                Inbox::Resumable
            };
            if !sh.in_flight(index, incarnation, resolve_open(engine, sink, sh.redeliveries, inbox)).await {
                return;
            }
        }
        if r.chance(200) && !sh.in_flight(index, incarnation, prune_one(engine, sink, &mut r)).await {
            return;
        }
        if sh.repairs && (sh.heal.get() || r.chance(150)) {
            let census = probes % 2 == 1;
            probes += 1;
            let review = sh.review_repairs.then_some(&mut review);
            let probe = audit_repair(engine, sink, index, incarnation, census, review);
            if !sh.in_flight(index, incarnation, probe).await {
                return;
            }
        }
        if sh.labels && cr.chance(300) {
            let filter = census_filter(&mut cr, sh, nodes);
            if let Err(StoreError::Crashed { .. }) = engine.journal().list_runs(&filter).await {
                return;
            }
        }
        madsim::time::sleep(Duration::from_millis(r.between(30, 150))).await;
    }
}

/// The operator probe of `runs audit --repair`, as its own identity: audit every listed
/// run and repair the meta-behind and stranded ones under a brief lease each (a live
/// owner is skipped, never raced). With `census` the audit is the whole-catalog
/// `audit_runs` (one listing, each run's journal, the listed status); otherwise a listing,
/// then each run's own meta and journal. Each audit's report is a fact, and a census ends
/// with a `Census` fact. With `review`, the operator now and then pauses before a repair
/// (`REVIEW_PER_MILLE`). `false`: the process died.
async fn audit_repair(
    engine: &SimEngine,
    sink: &FactSink,
    index: u32,
    incarnation: u32,
    census: bool,
    mut review: Option<&mut ChaCha8Rng>,
) -> bool {
    let operator = format!("operator-n{index}-i{incarnation}");
    let journal = engine.journal();
    let env = engine.env().clone();
    let report = |a: &RunAudit| {
        sink.rec.fact(
            index,
            incarnation,
            &operator,
            sim::time::now_ns(),
            FactKind::Audited {
                run_id: a.run_id.clone(),
                verdict: verdict_word(a.verdict).to_string(),
                repair_to: a.repair_to.map(|s| s.to_string()),
                counts: AuditedCounts {
                    journal_entries: a.journal_entries as u64,
                    journal_settle: a.journal_settle.map(|s| s.to_string()),
                    entries_after_settle: a.entries_after_settle as u64,
                    dangling_dispatches: a.dangling_dispatches as u64,
                    open_suspensions: a.open_suspensions as u64,
                },
            },
        )
    };
    let probe = async {
        if census {
            let audits = match audit_runs(journal).await {
                Ok(audits) => audits,
                Err(StoreError::Crashed { .. }) => return false,
                Err(_) => return true,
            };
            for a in &audits {
                report(a);
            }
            let runs = audits.len() as u64;
            sink.rec.fact(index, incarnation, &operator, sim::time::now_ns(), FactKind::Census { runs });
            for a in audits.iter().filter(|a| a.repair_to.is_some()) {
                pause_to_review(review.as_deref_mut()).await;
                if !repair_one(journal, &env, sink, &a.run_id, &operator).await {
                    return false;
                }
            }
            return true;
        }
        let Ok(metas) = journal.list_runs(&RunFilter::default()).await else { return true };
        for meta in metas {
            match audit_run(journal, &meta.run_id).await {
                Ok(a) => {
                    report(&a);
                    if a.repair_to.is_none() {
                        continue;
                    }
                }
                Err(StoreError::Crashed { .. }) => return false,
                Err(_) => continue,
            }
            pause_to_review(review.as_deref_mut()).await;
            if !repair_one(journal, &env, sink, &meta.run_id, &operator).await {
                return false;
            }
        }
        true
    };
    under_actor(&operator, probe).await
}

/// Of an operator's repairs in a reviewing plan, the share that waits 20 to 400 ms after the
/// audit (per mille).
const REVIEW_PER_MILLE: u32 = 500;

/// An operator reading the audit's report before asking for its repair (see
/// `QueueShared::review_repairs`).
async fn pause_to_review(review: Option<&mut ChaCha8Rng>) {
    if let Some(r) = review {
        if r.chance(REVIEW_PER_MILLE) {
            madsim::time::sleep(Duration::from_millis(r.between(20, 400))).await;
        }
    }
}

/// One run's repair under the operator's brief lease; a failure other than a crash is a
/// `Failed` fact. `false`: the process died.
async fn repair_one(
    journal: &RecordedStore,
    env: &Rc<dyn store::Env>,
    sink: &FactSink,
    run_id: &str,
    operator: &str,
) -> bool {
    let failed = |error: String| {
        sink.fact(FactKind::Failed { run_id: run_id.to_string(), what: "repair".into(), error })
    };
    match repair_run(journal, env, run_id, operator).await {
        Ok(RepairAction::Failed(e)) => failed(e),
        Ok(_) => {}
        Err(StoreError::Crashed { .. }) => return false,
        Err(e) => failed(e.to_string()),
    }
    true
}

/// The reconciler's word for a verdict (as `runs audit` prints it).
fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Consistent => "consistent",
        Verdict::MetaBehind => "meta-behind",
        Verdict::Stranded => "stranded",
        Verdict::Suspect => "suspect",
    }
}

/// The four terminal statuses.
const TERMINAL: [RunStatus; 4] =
    [RunStatus::Ok, RunStatus::Error, RunStatus::Cancelled, RunStatus::Exhausted];

/// An operator's census filter: a name (a run's label or a workflow's), tags, a `status` and `statuses`, alone or combined,
/// drawn so that each excludes some runs and matches others (names and tags no run carries
/// included).
fn census_filter(r: &mut impl Draw, sh: &QueueShared, nodes: u32) -> RunFilter {
    // The runs' labels, and their workflows' names (which no label equals).
    let mut names: Vec<String> = sh.runs.iter().filter_map(|s| s.options.name.clone()).collect();
    names.extend(sh.runs.iter().map(|s| s.workflow.name.clone()));
    names.sort();
    names.dedup();
    names.push("nobody".into());
    let mut pool: Vec<String> = ["queue", "tmp", "kept", "missing"].map(String::from).to_vec();
    pool.extend((0..nodes.max(1)).map(|n| format!("host-{n}")));
    let name = names[r.between(0, names.len() as u64 - 1) as usize].clone();
    let mut tags = vec![pool[r.between(0, pool.len() as u64 - 1) as usize].clone()];
    if r.chance(500) {
        tags.push(pool[r.between(0, pool.len() as u64 - 1) as usize].clone());
    }
    let status = RunStatus::ALL[r.between(0, RunStatus::ALL.len() as u64 - 1) as usize];
    let statuses: Vec<RunStatus> = RunStatus::ALL.into_iter().filter(|_| r.chance(333)).collect();
    match r.between(0, 5) {
        0 => RunFilter { name: Some(name), ..RunFilter::default() },
        1 => RunFilter { tags: Some(tags), ..RunFilter::default() },
        2 => RunFilter { statuses: Some(statuses), ..RunFilter::default() },
        3 => RunFilter { status: Some(status), tags: Some(tags), ..RunFilter::default() },
        // `status` beside `statuses`: the two combine as either-matches, and `statuses` widens
        // the single status without replacing it.
        4 => RunFilter { status: Some(status), statuses: Some(statuses), ..RunFilter::default() },
        _ => RunFilter { name: Some(name), status: Some(status), statuses: Some(statuses), tags: Some(tags) },
    }
}

/// Prune one `ok` run's spent checkpoints under a brief lease (rulvar's `pruneRun` as an
/// operator would run it). `false`: the process died.
async fn prune_one(engine: &SimEngine, sink: &FactSink, r: &mut impl Draw) -> bool {
    // The singular `status` form, as an operator's script would write it (the worker's
    // sweep uses `statuses`): a store must honour it exactly.
    let filter = RunFilter { status: Some(RunStatus::Ok), ..RunFilter::default() };
    let Ok(metas) = engine.journal().list_runs(&filter).await else { return true };
    if metas.is_empty() {
        return true;
    }
    let run_id = metas[r.between(0, metas.len() as u64 - 1) as usize].run_id.clone();
    let lease = match engine.journal().acquire(&run_id, engine.owner()).await {
        Ok(l) => l,
        Err(StoreError::Crashed { .. }) => return false,
        Err(_) => return true,
    };
    match engine.prune_run(&run_id, Some(&lease)).await {
        Ok(deleted) => sink.fact(FactKind::Pruned { run_id: run_id.clone(), deleted: deleted as u64 }),
        Err(e) if e.is_crash() => return false,
        Err(e) => {
            sink.fact(FactKind::Failed { run_id: run_id.clone(), what: "prune".into(), error: e.to_string() })
        }
    }
    !matches!(engine.journal().release(&lease).await, Err(StoreError::Crashed { .. }))
}

/// Of the host's terminal-run ticks, the share that deletes the run instead of retrying it,
/// per mille.
const HOST_DELETE_PER_MILLE: u32 = 500;

/// Of the host deletes, the share made without a lease (rulvar's `deleteRun` with no lease:
/// unfenced, a host-owned decision; docs/engine-model.md 6.1), per mille.
const UNLEASED_DELETE_PER_MILLE: u32 = 300;

/// The most of a `receipt_contention` scenario's paid calls whose receipt meets another
/// writer's lock, per mille (drawn per seed from 0 up).
const RECEIPT_CONTENTION_MAX: u32 = 150;

/// What a paid call costs in a priced scenario, in cents: four calls to the dollar (half
/// the seeds of workload revision 7 draw another price, see [`draw_price`]).
const PAID_CALL_CENTS: u64 = 25;

/// What a paid call costs in a priced scenario's seed, in cents. Before workload revision 7,
/// always [`PAID_CALL_CENTS`]; from 7, half the seeds (a stream of their own, so every other
/// draw stays put) draw one of [`UNEVEN_PRICES`], none of which divides a dollar: the
/// call that reaches the budget overshoots it, where a gate that refuses a call the budget
/// cannot cover and one that refuses only once the spend reached the budget disagree.
fn draw_price(seed: u64, workload: u32) -> u64 {
    let mut r = rng(seed, "price", 0);
    if workload < 7 || r.chance(500) {
        PAID_CALL_CENTS
    } else {
        UNEVEN_PRICES[r.between(0, UNEVEN_PRICES.len() as u64 - 1) as usize]
    }
}

/// Of `queue`'s and `queue-solo`'s seeds, the share in which a paid call took its segment's
/// spend past its budget (measured over seeds 0..1000 under workload revision 7: 107 and
/// 114 per mille; none before, when every price divided every budget).
const OVERSHOT: u32 = 70;

/// The prices a seed may draw besides [`PAID_CALL_CENTS`], in cents: near 25 on both sides,
/// so a budget covers about as many calls as at 25 (the runs that complete, and the prunes of
/// their checkpoints, stay about as common), and none divides a dollar.
const UNEVEN_PRICES: [u64; 8] = [15, 18, 22, 24, 27, 28, 30, 35];

/// Of a priced scenario's runs, the share given a tight budget (1 to 3 dollars), per mille.
const TIGHT_BUDGET_PER_MILLE: u32 = 150;

/// A run's budget in a priced scenario, in dollars. A tight one (1 to 3) is spent mid-run by
/// `pipeline` and `two_approvals` (5 paid calls: refused at the fifth on 1 dollar) and by
/// `survey` (20 paid calls: refused at its 5th, 9th or 13th); a loose one (5 to 9) only by
/// `survey`'s twentieth call on 5 dollars, which completes the body (it settles `exhausted`
/// with its value). A retry of a run refused mid-run seeds its spend from the receipts and
/// is refused again, unless a receipt was lost (then it pays once more). From workload
/// revision 5 (`zero`) a tight budget may be 0 dollars, the boundary: the run is refused at
/// its first paid call (a zero budget is a budget, not "unlimited"). The draws are the same
/// two either way, so only the budgets move.
fn draw_budget(r: &mut impl Draw, zero: bool) -> u32 {
    if r.chance(TIGHT_BUDGET_PER_MILLE) {
        r.between(u64::from(!zero), 3) as u32
    } else {
        r.between(5, 9) as u32
    }
}

/// Of a `retry_failed` host's retry ticks (one every 100 to 400 ms), the share that looks at
/// the failed runs first, per mille: a failed run is retried whether or not the tick drew a
/// retry of its own.
const RETRY_FAILED_PER_MILLE: u32 = 250;

/// The statuses a user's "retry failed" view lists.
const FAILED: [RunStatus; 3] = [RunStatus::Error, RunStatus::Cancelled, RunStatus::Exhausted];

/// One of `mine` that the store lists as failed (`FAILED`), drawn from `r`; `None` when the
/// list holds none of them. `statuses` may over-match (the contract allows it): each listed
/// status is checked.
async fn failed_first<'m>(
    engine: &SimEngine,
    mine: &'m [(RunSpec, bool)],
    r: &mut impl Draw,
) -> Result<Option<&'m (RunSpec, bool)>, StoreError> {
    let filter = RunFilter { statuses: Some(FAILED.to_vec()), ..RunFilter::default() };
    let metas = engine.journal().list_runs(&filter).await?;
    let failed: Vec<&(RunSpec, bool)> = mine
        .iter()
        .filter(|(s, _)| metas.iter().any(|m| m.run_id == s.run_id && FAILED.contains(&m.status)))
        .collect();
    if failed.is_empty() {
        return Ok(None);
    }
    Ok(Some(failed[r.between(0, failed.len() as u64 - 1) as usize]))
}

/// Of an `abandons` host's ticks on a run of its own it reads `suspended`, the share that
/// deletes it, per mille.
const ABANDON_PER_MILLE: u32 = 750;

/// Of a `retry_deleted` host's ticks on a run its delete took, the share that retries it,
/// per mille.
const RETRY_DELETED_PER_MILLE: u32 = 500;

/// Chance that a host submits a run it just deleted again under the same id (a fresh
/// start: a new genesis), per mille.
const RESUBMIT_PER_MILLE: u32 = 400;

/// Of a `deletes_stuck` host's ticks on a run of its own it reads `running`, the share that
/// deletes it, per mille, from workload revision 6 (revision 5: 250). The delete goes ahead
/// only when its brief lease is granted, so a run whose holder is live is left alone either
/// way; at 250 a stuck run was mostly taken over by a worker first, and a running generation's
/// cut cascade a drive had to finish (`holder_finished_a_marked_running_deletion`) came 3 per
/// mille of seeds (seeds 0..2000), 11 at every read.
const STUCK_DELETE_PER_MILLE: u32 = 1000;

/// Which of a host's deletes, and what its meta re-read lets it delete.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deleting {
    /// A run the user saw terminal, under a brief lease of the host's own (a held run is
    /// left alone): deleted if still terminal.
    Leased,
    /// The same without the lease, so the store's unleased delete path (and its single
    /// transaction) meets the other writers.
    Unleased,
    /// A run the user saw suspended and gave up on, with no lease (the user's page has none to
    /// pass): deleted if still terminal or suspended.
    Abandoned,
    /// A run the user saw stuck `running`, under a brief lease (granted only once its holder's
    /// lease lapsed): deleted if still terminal or running. A cut cascade leaves a running
    /// meta its deletion record names, which a worker's drive must finish deleting.
    Stuck,
}

/// A host's `deleteRun` of one of its runs (see [`Deleting`]): the meta re-read, then the
/// engine's cascade, the lease passed when there is one. `false`: the process died.
async fn host_delete(
    engine: &SimEngine,
    sink: &FactSink,
    sh: &QueueShared,
    run_id: &str,
    how: Deleting,
) -> bool {
    let journal = engine.journal();
    let lease = if matches!(how, Deleting::Leased | Deleting::Stuck) {
        match journal.acquire(run_id, engine.owner()).await {
            Ok(l) => Some(l),
            Err(StoreError::Crashed { .. }) => return false,
            Err(_) => return true,
        }
    } else {
        None
    };
    // Give the brief lease back (if any); `false`: the process died doing so.
    let release = || async {
        match &lease {
            Some(l) => !matches!(journal.release(l).await, Err(StoreError::Crashed { .. })),
            None => true,
        }
    };
    match journal.get_meta(run_id).await {
        Ok(Some(m))
            if m.status.is_terminal()
                || (how == Deleting::Abandoned && m.status == RunStatus::Suspended)
                || (how == Deleting::Stuck && m.status == RunStatus::Running) => {}
        Err(StoreError::Crashed { .. }) => return false,
        _ => return release().await,
    }
    match engine.delete_run(run_id, lease.as_ref()).await {
        Ok(()) => {
            sh.deleted.borrow_mut().insert(run_id.to_string());
            true
        }
        Err(e) if e.is_crash() => false,
        Err(e) => {
            sink.fact(FactKind::Failed {
                run_id: run_id.to_string(),
                what: "delete".into(),
                error: e.to_string(),
            });
            release().await
        }
    }
}

/// Which runs an operator's pass over pending answers lists.
#[derive(Clone, Copy)]
enum Inbox {
    /// The runs listed `suspended`.
    Suspended,
    /// The runs not ended (`running` or `suspended`): a run page shows a pending approval
    /// from the journal whatever the meta says.
    Resumable,
    /// Every run, ended ones too: an inbox of pending approvals built from journals, or a
    /// page opened before the run ended. The engine must refuse an answer to an ended run
    /// (engine-model 5.5, the terminal re-check P).
    EveryRun,
}

/// Of an operator's passes in scenarios that answer running runs, the share that lists every
/// run, per mille.
const EVERY_RUN_INBOX_PER_MILLE: u32 = 300;

/// Answer every open suspension of every run the `inbox` lists, offline. `false`: the
/// process died.
async fn resolve_open(engine: &SimEngine, sink: &FactSink, redeliver: bool, inbox: Inbox) -> bool {
    let filter = match inbox {
        Inbox::Suspended => RunFilter { status: Some(RunStatus::Suspended), ..RunFilter::default() },
        Inbox::Resumable => RunFilter::resumable(),
        Inbox::EveryRun => RunFilter::default(),
    };
    let Ok(metas) = engine.journal().list_runs(&filter).await else { return true };
    // Redeliveries wait until every open suspension listed has had its answer, so they never
    // widen the gap between the listing and an answer.
    let mut again: Vec<(String, String)> = Vec::new();
    for meta in metas {
        let Ok(entries) = engine.journal().load(&meta.run_id).await else { continue };
        let answered = |e: &JournalEntry| entries.iter().any(|r| r.ref_seq == Some(e.seq));
        let suspensions = || {
            entries
                .iter()
                .filter(|e| e.status == "suspended" && matches!(e.kind.as_str(), "external" | "approval"))
        };
        let key_of = |e: &JournalEntry| e.value.get("key").and_then(|k| k.as_str()).map(str::to_string);
        let open: Vec<(String, u64)> =
            suspensions().filter(|e| !answered(e)).filter_map(|e| Some((key_of(e)?, e.seq.0))).collect();
        if redeliver {
            // The answer again, to a key whose every suspension is answered.
            let mut keys: Vec<String> = suspensions()
                .filter(|e| answered(e))
                .filter_map(key_of)
                .filter(|k| !open.iter().any(|(o, _)| o == k))
                .collect();
            keys.sort();
            keys.dedup();
            again.extend(keys.into_iter().map(|k| (meta.run_id.clone(), k)));
        }
        for (key, seq) in open {
            sink.fact(FactKind::Answering { run_id: meta.run_id.clone(), key: key.clone(), suspension: seq });
            match engine.resolve_offline(&meta.run_id, &key, resolution_value(&key)).await {
                Err(e) if e.is_crash() => return false,
                Err(e) => sink.fact(FactKind::Failed {
                    run_id: meta.run_id.clone(),
                    what: "resolve".into(),
                    error: e.to_string(),
                }),
                Ok(()) => sink.fact(FactKind::Answered { run_id: meta.run_id.clone(), key }),
            }
        }
    }
    for (run_id, key) in again {
        match engine.resolve_offline(&run_id, &key, resolution_value(&key)).await {
            Err(e) if e.is_crash() => return false,
            // The typed refusal the engine owes a second answer, told apart for the coverage goal.
            Err(e) => {
                let what = match e {
                    store::engine::EngineError::Config(_) => "redelivered answer refused",
                    _ => "redelivered answer",
                };
                sink.fact(FactKind::Failed { run_id, what: what.into(), error: e.to_string() })
            }
            Ok(()) => sink.fact(FactKind::Answered { run_id, key }),
        }
    }
    true
}
