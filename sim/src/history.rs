//! The history recorder: every store call as an invocation and a return, with node,
//! virtual time, lease epoch and outcome (`Ok`, `Err(typed)`, or `Unknown` when the node
//! died with the call in flight), plus what the store itself APPLIED: at the fault hook
//! right after each commit the recorder notes the exact apply order and instant, the
//! store clock, and the lease row as it stands after the commit.
//!
//! Nothing here reads a task id, a wall clock or a hash map: the history of a seed is the
//! same in every process.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};
use store::{Epoch, Lease, StoreError};

thread_local! {
    /// The call whose future is being polled right now (set by [`WithCall`]).
    static CURRENT_CALL: Cell<Option<usize>> = const { Cell::new(None) };
    /// The grant (acquire call id) whose lease the actor being polled is using (set by
    /// [`UnderGrant`]).
    static CURRENT_GRANT: Cell<Option<usize>> = const { Cell::new(None) };
    /// The identity acting in the future being polled (set by [`UnderActor`]).
    static CURRENT_ACTOR: RefCell<Option<Rc<str>>> = const { RefCell::new(None) };
}

/// Runs a future as an identity: every call it makes records `args.actor = Some(actor)`, so
/// the oracle can tell which of a process's identities (its host, its worker) made an
/// unleased write.
pub struct UnderActor<F> {
    pub actor: Rc<str>,
    pub inner: Pin<Box<F>>,
}

impl<F: Future> Future for UnderActor<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let prev = CURRENT_ACTOR.with(|c| c.replace(Some(self.actor.clone())));
        let out = self.inner.as_mut().poll(cx);
        CURRENT_ACTOR.with(|c| *c.borrow_mut() = prev);
        out
    }
}

/// The identity acting in the future being polled, if it runs under [`under_actor`].
pub fn current_actor() -> Option<Rc<str>> {
    CURRENT_ACTOR.with(|c| c.borrow().clone())
}

/// `fut`, with its calls attributed to the identity `actor`.
pub fn under_actor<F: Future>(actor: &str, fut: F) -> UnderActor<F> {
    UnderActor { actor: Rc::from(actor), inner: Box::pin(fut) }
}

/// Runs a future with the provenance of the lease it uses: every lease-carrying call
/// invoked while it is polled records `lease_grant = Some(grant)`, the id of the acquire
/// call that granted the lease. Actors that keep old leases around (zombies) use it so the
/// oracle can tell two grants with equal `(run, owner, epoch)` apart.
pub struct UnderGrant<F> {
    pub grant: usize,
    pub inner: Pin<Box<F>>,
}

impl<F: Future> Future for UnderGrant<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let prev = CURRENT_GRANT.with(|c| c.replace(Some(self.grant)));
        let out = self.inner.as_mut().poll(cx);
        CURRENT_GRANT.with(|c| c.set(prev));
        out
    }
}

/// `fut`, with its lease-carrying calls attributed to the grant `grant` (an acquire call id).
pub fn under_grant<F: Future>(grant: usize, fut: F) -> UnderGrant<F> {
    UnderGrant { grant, inner: Box::pin(fut) }
}

/// The call currently being polled on this thread, if any.
pub fn current_call() -> Option<usize> {
    CURRENT_CALL.with(|c| c.get())
}

/// Runs a future with [`current_call`] set to `id` during each of its polls, so the fault
/// hook can attribute what it sees to the right call.
pub struct WithCall<F> {
    pub id: usize,
    pub inner: Pin<Box<F>>,
}

impl<F: Future> Future for WithCall<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let prev = CURRENT_CALL.with(|c| c.replace(Some(self.id)));
        let out = self.inner.as_mut().poll(cx);
        CURRENT_CALL.with(|c| c.set(prev));
        out
    }
}

/// A store operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Boot,
    Acquire,
    Renew,
    Release,
    Append,
    Load,
    PutMeta,
    GetMeta,
    ListRuns,
    Delete,
    BlobPut,
    BlobGet,
    BlobList,
    BlobDelete,
}

impl OpKind {
    /// The store operation a `sqlite.<op>.<step>` fault point stands in (`None` for an
    /// engine point).
    pub fn of_point(point: store::FaultPoint) -> Option<OpKind> {
        let op = point.name().strip_prefix("sqlite.")?.split('.').next()?;
        OpKind::ALL.into_iter().find(|o| o.as_str() == op)
    }

    /// Every operation, in declaration order.
    pub const ALL: [OpKind; 14] = [
        OpKind::Boot,
        OpKind::Acquire,
        OpKind::Renew,
        OpKind::Release,
        OpKind::Append,
        OpKind::Load,
        OpKind::PutMeta,
        OpKind::GetMeta,
        OpKind::ListRuns,
        OpKind::Delete,
        OpKind::BlobPut,
        OpKind::BlobGet,
        OpKind::BlobList,
        OpKind::BlobDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Boot => "boot",
            OpKind::Acquire => "acquire",
            OpKind::Renew => "renew",
            OpKind::Release => "release",
            OpKind::Append => "append",
            OpKind::Load => "load",
            OpKind::PutMeta => "put_meta",
            OpKind::GetMeta => "get_meta",
            OpKind::ListRuns => "list_runs",
            OpKind::Delete => "delete",
            OpKind::BlobPut => "blob_put",
            OpKind::BlobGet => "blob_get",
            OpKind::BlobList => "blob_list",
            OpKind::BlobDelete => "blob_delete",
        }
    }

    /// Whether the operation mutates the store.
    pub fn is_mutation(self) -> bool {
        matches!(
            self,
            OpKind::Acquire
                | OpKind::Renew
                | OpKind::Release
                | OpKind::Append
                | OpKind::PutMeta
                | OpKind::Delete
                | OpKind::BlobPut
                | OpKind::BlobDelete
        )
    }
}

/// The outcome of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Ok {
        detail: String,
    },
    Err {
        code: String,
        message: String,
    },
    /// The node died with the call in flight.
    Unknown,
}

impl Outcome {
    pub fn from_result<T>(r: &Result<T, StoreError>, detail: impl FnOnce(&T) -> String) -> Outcome {
        match r {
            Ok(v) => Outcome::Ok { detail: detail(v) },
            Err(e) => Outcome::Err { code: e.code().to_string(), message: e.to_string() },
        }
    }
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }
    /// The typed code the call was refused with; `None` when it returned or its node died.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Outcome::Err { code, .. } => Some(code),
            _ => None,
        }
    }
    /// The reason a `lease_held` refusal names (`stale_epoch`, `expired`, ...), read from its
    /// message (`lease held: <reason> (run <id>)`, the wording every store's refusal prints
    /// through); `None` for any other outcome or a message of another shape.
    pub fn lease_refusal_reason(&self) -> Option<&str> {
        match self {
            Outcome::Err { code, message } if code == "lease_held" => {
                let rest = message.strip_prefix("lease held: ")?;
                let reason = &rest[..rest.find(" (run ")?];
                (!reason.is_empty() && reason.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
                    .then_some(reason)
            }
            _ => None,
        }
    }
    /// Refused with Busy (a write lock held elsewhere).
    pub fn is_busy(&self) -> bool {
        matches!(self, Outcome::Err { code, .. } if code == "busy")
    }
    pub fn short(&self) -> String {
        match self {
            Outcome::Ok { detail } if detail.is_empty() => "ok".into(),
            Outcome::Ok { detail } => format!("ok {detail}"),
            Outcome::Err { code, .. } => format!("err {code}"),
            Outcome::Unknown => "unknown (node died in flight)".into(),
        }
    }
}

/// A lease row as observed right after a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRow {
    pub owner: String,
    pub epoch: u64,
    pub expires_at: i64,
}

/// The database state after the run.
#[derive(Clone, Debug, Default)]
pub struct FinalState {
    pub entries: BTreeMap<String, Vec<String>>,
    pub meta: BTreeMap<String, String>,
    pub leases: BTreeMap<String, LeaseRow>,
    pub epochs: BTreeMap<String, u64>,
    pub blobs: BTreeMap<String, Vec<u8>>,
    /// Set when the schema never came up (no boot succeeded).
    pub missing_schema: bool,
    /// The database file's page size and journal mode at the end, as a plain connection
    /// reads them (`PRAGMA page_size`, `PRAGMA journal_mode`); `None` where unread.
    pub page_size: Option<u32>,
    pub journal_mode: Option<String>,
}

/// What the store applied for a call, noted at its after-commit fault point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Applied {
    /// Position in the global order of applied mutations.
    pub order: usize,
    /// Virtual time in ns.
    pub at_ns: u64,
    /// The applying store's clock (ms).
    pub store_now_ms: i64,
    /// The run's lease row after the commit.
    pub lease_row: Option<LeaseRow>,
    /// The epoch the fault site reported (the granted epoch for an acquire).
    pub site_epoch: Option<u64>,
}

/// The arguments worth judging, per operation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Args {
    /// append: the entry's seq.
    pub seq: Option<u64>,
    /// append / put_meta: the stored JSON text.
    pub payload: Option<String>,
    /// blob ops: the ref.
    pub blob_ref: Option<String>,
    /// blob put: the bytes.
    pub bytes: Option<Vec<u8>>,
    /// acquire: the owner asking.
    pub owner: Option<String>,
    /// boot: the lease ttl (ms) the store was constructed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// The identity that made the call, when the actor said (see [`under_actor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// What a successful read returned (kept to judge it against the serial history).
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    Entries(Vec<store::JournalEntry>),
    Meta(Option<store::RunMeta>),
    Blob(Option<Vec<u8>>),
    Refs(Vec<String>),
    Runs { filter: store::RunFilter, metas: Vec<store::RunMeta> },
}

/// One call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Call {
    pub id: usize,
    pub node: u32,
    /// How many times the node had (re)started when it made the call (0 = first life).
    pub incarnation: u32,
    pub op: OpKind,
    /// The mutated or read run ("" for list_runs; a blob's ref run for blob ops).
    pub run_id: String,
    pub lease: Option<Lease>,
    pub args: Args,
    pub invoked_ns: u64,
    pub returned_ns: Option<u64>,
    pub outcome: Outcome,
    /// The granted lease (acquire only).
    pub granted: Option<Lease>,
    /// The store clock when the fence (or acquire's liveness) check passed.
    pub checked_now_ms: Option<i64>,
    pub applied: Option<Applied>,
    /// How many mutations had been applied when the call returned (a read saw exactly
    /// those: SQLite reads one committed snapshot, and every commit is noted at once).
    pub seen_at: Option<usize>,
    /// What a successful read returned.
    #[serde(skip)]
    pub read: Option<Read>,
    /// The store's last clock reading during the call, as the environment answered it (a
    /// refusal's check read it last).
    #[serde(skip)]
    pub store_clock: StoreClock,
    /// For a lease-carrying call made under [`under_grant`]: the id of the acquire call
    /// that granted the lease it carries. `None` when the actor did not say.
    pub lease_grant: Option<usize>,
}

impl Call {
    /// The epoch this call acts under: its lease's, or the one it was granted.
    pub fn epoch(&self) -> Option<Epoch> {
        self.lease.as_ref().map(|l| l.epoch).or(self.granted.as_ref().map(|g| g.epoch))
    }
}

/// A timeline event (one line each).
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub at_ns: u64,
    pub node: Option<u32>,
    pub epoch: Option<u64>,
    pub op: String,
    pub outcome: String,
    pub fault: String,
    /// The call this line reports, if any.
    pub call: Option<usize>,
}

/// Fault-point coverage of one run: how often each point was reached and fired.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PointStats {
    pub reached: u64,
    pub fired: u64,
    pub crashed: u64,
}

/// What the engine actors did outside the store: payments, side effects, submissions and
/// settled segments. Engine-level properties judge these against the store history.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum FactKind {
    /// A run was started by its host (a fresh `engine.run`), with its workflow's name.
    Submitted { run_id: String, workflow: String },
    /// The run its host is starting (the `Submitted` fact just before) was given this name
    /// and these tags (`engine.run(wf, {name, tags})`). Not shown in the timeline.
    Labelled { run_id: String, name: Option<String>, tags: Option<Vec<String>> },
    /// A host explicitly resumed a run it had seen terminal (a user's retry), passing
    /// `workflow` (by name): it may recreate a run deleted in the meantime.
    Resumed { run_id: String, workflow: String },
    /// One paid provider call of turn `turn` of the dispatch whose running entry is `dispatch`.
    Paid {
        run_id: String,
        op: String,
        dispatch: u64,
        turn: u32,
        /// The conversation the call was sent, as JSON (an array of messages).
        conversation: String,
    },
    /// One tool side effect.
    Tool { run_id: String, op: String, dispatch: u64, turn: u32 },
    /// A segment settled (its handle resolved) with this status and value.
    Settled { run_id: String, status: String, value: Option<String>, segment: u64 },
    /// A segment or host operation failed (not a crash).
    Failed { run_id: String, what: String, error: String },
    /// An operator (this fact's owner) is about to answer offline (`resolve_offline`) the
    /// suspension at seq `suspension` of run `run_id`, await `key`, which its own load of
    /// the journal showed open. Not shown in the timeline.
    Answering { run_id: String, key: String, suspension: u64 },
    /// An operator's offline answer (`resolve_offline`, this fact's owner) to run `run_id`,
    /// await `key`, returned ok: the engine said the answer was delivered. Not shown in the
    /// timeline.
    Answered { run_id: String, key: String },
    /// An operator's prune (`pruneRun`, this fact's owner) of run `run_id` returned, saying
    /// it deleted `deleted` checkpoints. Not shown in the timeline.
    Pruned { run_id: String, deleted: u64 },
    /// Every paid provider call of this world's engines costs `cents` against its run's
    /// recorded `budgetUsd` (a priced scenario; recorded once, at the start). Not shown in
    /// the timeline.
    Priced { cents: u64 },
    /// A store construction with a lease ttl of `ttl_ms` over a path of its own where no
    /// database existed (the boot call of this fact's process just before it) returned,
    /// and `database_left` says whether a database file was there after it (see
    /// `NodeCtx::boot_on_a_fresh_path`). Shown in the timeline only when one was.
    FreshBoot { ttl_ms: i64, database_left: bool },
    /// The operator's audit (`runs audit`, this fact's owner) reported run `run_id` as
    /// `verdict` (the reconciler's word: `consistent`, `meta-behind`, `stranded`, `suspect`),
    /// with the status a repair would write, and the counts the report prints beside them.
    /// Shown in the timeline unless consistent.
    Audited { run_id: String, verdict: String, repair_to: Option<String>, counts: AuditedCounts },
    /// The operator's whole-catalog audit (`auditRuns`, this fact's owner) returned, with
    /// one report per run (the `Audited` facts just before this one).
    Census { runs: u64 },
    /// The heal began: faults off, every node restarted.
    Healed,
    /// A queue worker (this fact's owner) was told to stop (`Worker::stop`) while it swept.
    WorkerStopped,
    /// The sweep that worker was in when it was told to stop returned.
    StoppedSweepReturned,
    /// A queue worker (this fact's owner) began a sweep. Not shown in the timeline.
    SweepBegan,
    /// A queue worker (this fact's owner) of this process registers only these workflows
    /// (a rolling deploy: its binary lacks one the others run). Recorded once per process
    /// life, before its first sweep, and only when the registry is partial; a worker with no
    /// such fact registers the whole catalog.
    Deployed { workflows: Vec<String> },
    /// That sweep returned (not by a crash). Not shown in the timeline.
    SweepEnded,
}

/// The counts an audit report prints beside its verdict (rulvar's `RunStateAudit`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AuditedCounts {
    pub journal_entries: u64,
    /// The last journaled `run_settle`'s status.
    pub journal_settle: Option<String>,
    pub entries_after_settle: u64,
    /// `running` entries no entry references (whole journal).
    pub dangling_dispatches: u64,
    /// `external`/`approval` suspensions with no resolution or abandon (whole journal).
    pub open_suspensions: u64,
}

/// One engine fact.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fact {
    pub at_ns: u64,
    /// How many mutations the store had applied when the fact happened: every mutation
    /// with `applied.order < applied_before` happened before it.
    pub applied_before: usize,
    pub node: u32,
    pub incarnation: u32,
    /// The acting identity (the engine's lease owner); empty for world-level facts.
    pub owner: String,
    /// How many store calls had been invoked when the fact happened: calls with a smaller
    /// id were invoked before it (calls and facts at one virtual instant keep their order).
    #[serde(skip)]
    pub invoked_before: usize,
    #[serde(flatten)]
    pub kind: FactKind,
}

/// What the environment saw of the store's clock during one call. The simulated
/// environment answers every clock read the store makes (`Env::now_ms`), so it knows the
/// value a check compared a lease's expiry with, even when the check refused and reached
/// no fault point after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreClock {
    /// The environment does not observe the store's clock reads (a real multi-process run).
    #[default]
    NotObserved,
    /// Observed, and the store read no clock during the call.
    NotRead,
    /// The last reading, in the store's ms.
    Read(i64),
}

/// The whole history of one run.
#[derive(Default)]
pub struct History {
    /// Whether the environment observes the store's clock reads (see [`StoreClock`]).
    pub observes_store_clock: bool,
    /// Set when the run hit the world's call or read budget (a livelock, or reads that grow
    /// without bound): the witness in words.
    pub exhausted: Option<String>,
    /// What the successful reads so far returned, in items: journal entries, metas, refs, and
    /// blob bytes in KiB (rounded up), one for an absent meta or blob (the world's read budget).
    pub read_items: usize,
    pub calls: Vec<Call>,
    pub events: Vec<Event>,
    pub applied_count: usize,
    pub points: std::collections::BTreeMap<&'static str, PointStats>,
    /// The same counts while the run is going, by `FaultPoint::index` (see
    /// [`History::fold_points`]).
    pub point_counts: Vec<PointStats>,
    pub facts: Vec<Fact>,
    /// Every engine-moment fault point reached, in order: where the engine stood, under
    /// which epoch, when (engine properties read the deletion cascades from these).
    pub marks: Vec<Mark>,
    /// Every fault the plan injected, in order, with the call in flight (state coverage
    /// reads these; the timeline shows the same as its `fault` column).
    pub faults: Vec<FaultRec>,
}

/// What the plan did at a fault point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Yield,
    Stall,
    StallToExpiry,
    /// A stall to moments before the lease expiry (the holder's last live instants).
    StallBeforeExpiry,
    /// The whole process paused (for a length, or until the run was taken over).
    Pause,
    Crash,
    /// Another writer held the write lock across the call ([`crate::plan::Action::Contend`]).
    Contend,
}

/// One injected fault.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRec {
    pub at_ns: u64,
    pub node: u32,
    pub point: store::FaultPoint,
    pub kind: FaultKind,
    /// The store call in flight on that node, if any.
    pub call: Option<usize>,
    /// The run the point was reached for, if it names one.
    pub run_id: Option<String>,
    /// When the delay it injected ends (virtual ns): the fault instant for a yield or a
    /// crash, the stall's end, the end of a timed pause; `None` for a pause until a takeover
    /// (its end depends on other processes).
    pub until_ns: Option<u64>,
}

/// An engine-moment fault point reached by a node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mark {
    pub point: &'static str,
    pub node: u32,
    pub incarnation: u32,
    pub run_id: String,
    pub epoch: Option<u64>,
    /// Mutations applied before the mark.
    pub applied_before: usize,
    /// Calls invoked before the mark (the mark follows every call with a smaller id).
    pub invoked_before: usize,
}

/// A hook called with each call as it returns.
pub type OnReturn = Rc<dyn Fn(&Call)>;

/// Shared handle to the history.
#[derive(Clone)]
pub struct Recorder {
    pub inner: Rc<RefCell<History>>,
    /// The timestamp source for invocations and returns: virtual time by default; a real
    /// process uses the machine-wide monotonic clock (`crate::machine`).
    clock: fn() -> u64,
    /// Called with each call as it returns (a real writer streams its history with it).
    on_return: Option<OnReturn>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            inner: Rc::new(RefCell::new(History::sized())),
            clock: crate::time::now_ns,
            on_return: None,
        }
    }
}

impl History {
    /// Move the per-index point counts into `points`, by name (the run's end does this).
    pub fn fold_points(&mut self) {
        for (i, st) in std::mem::take(&mut self.point_counts).into_iter().enumerate() {
            if st.reached == 0 {
                continue;
            }
            let Some(p) = store::FaultPoint::ALL.get(i) else { continue };
            let e = self.points.entry(p.name()).or_default();
            e.reached += st.reached;
            e.fired += st.fired;
            e.crashed += st.crashed;
        }
    }

    /// An empty history with room for a typical soak storm (about 400 calls and as many
    /// timeline lines), so recording does not keep re-growing its vectors.
    fn sized() -> History {
        History { calls: Vec::with_capacity(512), events: Vec::with_capacity(512), ..History::default() }
    }
}

impl Recorder {
    /// The simulated world's recorder: its environment answers, and notes on each call, the
    /// store's clock reads ([`StoreClock`]).
    pub fn observing_store_clock() -> Recorder {
        let r = Recorder::default();
        r.inner.borrow_mut().observes_store_clock = true;
        r
    }

    /// A recorder with its own clock and an optional hook per returned call.
    pub fn with_clock(clock: fn() -> u64, on_return: Option<OnReturn>) -> Recorder {
        Recorder { inner: Rc::default(), clock, on_return }
    }

    /// Now, by this recorder's clock (ns).
    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    #[allow(clippy::too_many_arguments)]
    pub fn invoke(
        &self,
        node: u32,
        incarnation: u32,
        op: OpKind,
        run_id: &str,
        lease: Option<&Lease>,
        args: Args,
        now_ns: u64,
    ) -> usize {
        let mut args = args;
        if args.actor.is_none() {
            args.actor = CURRENT_ACTOR.with(|c| c.borrow().as_deref().map(str::to_string));
        }
        let mut h = self.inner.borrow_mut();
        let id = h.calls.len();
        let store_clock = if h.observes_store_clock { StoreClock::NotRead } else { StoreClock::NotObserved };
        h.calls.push(Call {
            id,
            node,
            incarnation,
            op,
            run_id: run_id.to_string(),
            lease: lease.cloned(),
            args,
            invoked_ns: now_ns,
            returned_ns: None,
            outcome: Outcome::Unknown,
            granted: None,
            checked_now_ms: None,
            applied: None,
            seen_at: None,
            read: None,
            store_clock,
            lease_grant: if lease.is_some() { CURRENT_GRANT.with(|c| c.get()) } else { None },
        });
        id
    }

    /// The id of the latest successful acquire of `run_id` by this node and incarnation
    /// (what an actor passes to [`under_grant`] right after its acquire returned).
    pub fn latest_grant(&self, node: u32, incarnation: u32, run_id: &str) -> Option<usize> {
        let h = self.inner.borrow();
        h.calls
            .iter()
            .rev()
            .find(|c| {
                c.op == OpKind::Acquire
                    && c.node == node
                    && c.incarnation == incarnation
                    && c.run_id == run_id
                    && c.outcome.is_ok()
            })
            .map(|c| c.id)
    }

    pub fn ret(&self, id: usize, outcome: Outcome, granted: Option<Lease>, now_ns: u64) {
        let mut h = self.inner.borrow_mut();
        let seen_at = h.applied_count;
        let c = &mut h.calls[id];
        assert!(c.returned_ns.is_none(), "call {id} ({} of {}) returned twice", c.op.as_str(), c.run_id);
        c.returned_ns = Some(now_ns);
        c.outcome = outcome;
        c.granted = granted;
        c.seen_at = Some(seen_at);
        if let Some(line) = return_event(c) {
            h.events.push(line);
        }
        if let Some(hook) = &self.on_return {
            let call = h.calls[id].clone();
            drop(h);
            hook(&call);
        }
    }

    /// The plan injected a fault.
    pub fn fault(&self, rec: FaultRec) {
        self.inner.borrow_mut().faults.push(rec);
    }

    /// What a successful read returned.
    pub fn read(&self, id: usize, read: Read) {
        let items = match &read {
            Read::Entries(v) => v.len(),
            Read::Refs(v) => v.len(),
            Read::Runs { metas, .. } => metas.len(),
            Read::Meta(_) => 1,
            Read::Blob(b) => b.as_ref().map_or(1, |b| b.len().div_ceil(1024).max(1)),
        };
        let mut h = self.inner.borrow_mut();
        h.read_items += items;
        h.calls[id].read = Some(read);
    }

    /// The node died with the call in flight.
    pub fn unknown(&self, id: usize) {
        let mut h = self.inner.borrow_mut();
        let c = &mut h.calls[id];
        if c.returned_ns.is_none() {
            c.outcome = Outcome::Unknown;
        }
    }

    /// The store read its clock during call `id`.
    pub fn clock_read(&self, id: usize, now_ms: i64) {
        if let Some(c) = self.inner.borrow_mut().calls.get_mut(id) {
            c.store_clock = StoreClock::Read(now_ms);
        }
    }

    pub fn checked(&self, id: usize, now_ms: i64) {
        self.inner.borrow_mut().calls[id].checked_now_ms = Some(now_ms);
    }

    pub fn applied(
        &self,
        id: usize,
        at_ns: u64,
        store_now_ms: i64,
        lease_row: Option<LeaseRow>,
        site_epoch: Option<u64>,
    ) {
        let mut h = self.inner.borrow_mut();
        let order = h.applied_count;
        h.applied_count += 1;
        h.calls[id].applied = Some(Applied { order, at_ns, store_now_ms, lease_row, site_epoch });
    }

    /// The successor writes a process paused on `run_id` under `epoch` (on `node`) waits for:
    /// the first grant of the run under a later epoch (the takeover) counts as one, then
    /// every mutation of the run another process applied after it, with or without a lease
    /// (a flawed profile's unfenced writes are writes all the same).
    ///
    /// With `op`, only the successor's writes of that operation count (the takeover grant
    /// does not): the paused call's stale write then lands right after the successor's own
    /// write of the same kind (the overwrite hazard).
    pub fn successor_writes(&self, run_id: &str, epoch: u64, node: u32, op: Option<OpKind>) -> usize {
        let h = self.inner.borrow();
        let mut applied: Vec<(usize, &Call)> = h
            .calls
            .iter()
            .filter(|c| c.run_id == run_id)
            .filter_map(|c| c.applied.as_ref().map(|a| (a.order, c)))
            .collect();
        applied.sort_unstable_by_key(|(o, _)| *o);
        let takeover = applied.iter().position(|(_, c)| {
            c.op == OpKind::Acquire
                && c.epoch()
                    .map(|e| e.0)
                    .or(c.applied.as_ref().and_then(|a| a.site_epoch))
                    .is_some_and(|e| e > epoch)
        });
        let Some(t) = takeover else { return 0 };
        let after = applied[t + 1..].iter().filter(|(_, c)| c.node != node && c.op.is_mutation());
        match op {
            Some(op) => after.filter(|(_, c)| c.op == op).count(),
            None => 1 + after.count(),
        }
    }

    /// Whether the store looks held since `since_ns`: nothing applied since, and some call
    /// returned Busy since (a write lock held, its holder not committing).
    pub fn store_held_since(&self, since_ns: u64) -> bool {
        let h = self.inner.borrow();
        let applied = h.calls.iter().any(|c| c.applied.as_ref().is_some_and(|a| a.at_ns >= since_ns));
        let busy =
            h.calls.iter().any(|c| c.returned_ns.is_some_and(|r| r >= since_ns) && c.outcome.is_busy());
        !applied && busy
    }

    pub fn event(&self, e: Event) {
        self.inner.borrow_mut().events.push(e);
    }

    /// Record an engine fact (and its timeline line).
    pub fn fact(&self, node: u32, incarnation: u32, owner: &str, at_ns: u64, kind: FactKind) {
        let mut h = self.inner.borrow_mut();
        let (op, outcome) = match &kind {
            FactKind::Submitted { run_id, workflow } => (format!("SUBMIT {run_id}"), workflow.clone()),
            FactKind::Resumed { run_id, .. } => (format!("RESUME {run_id}"), String::new()),
            FactKind::Paid { run_id, op, dispatch, turn, .. } => {
                (format!("PAY {run_id} {op} dispatch={dispatch} turn={turn}"), String::new())
            }
            FactKind::Tool { run_id, op, dispatch, turn } => {
                (format!("TOOL {run_id} {op} dispatch={dispatch} turn={turn}"), String::new())
            }
            FactKind::Settled { run_id, status, segment, .. } => {
                (format!("SETTLED {run_id} segment={segment}"), status.clone())
            }
            FactKind::Failed { run_id, what, error } => (format!("FAILED {what} {run_id}"), error.clone()),
            FactKind::Audited { run_id, verdict, repair_to, .. } if verdict != "consistent" => (
                format!("AUDIT {run_id}"),
                match repair_to {
                    Some(to) => format!("{verdict}, repair to {to}"),
                    None => verdict.clone(),
                },
            ),
            FactKind::Audited { .. } => (String::new(), String::new()),
            FactKind::Census { runs } => ("AUDIT CENSUS".to_string(), format!("{runs} runs")),
            FactKind::FreshBoot { ttl_ms, database_left: true } => {
                (format!("FRESH BOOT ttl={ttl_ms}ms"), "left a database file".to_string())
            }
            FactKind::FreshBoot { .. } => (String::new(), String::new()),
            FactKind::Healed => ("HEAL".to_string(), "faults off, every node up".to_string()),
            FactKind::WorkerStopped => ("WORKER STOP".to_string(), String::new()),
            FactKind::StoppedSweepReturned => ("WORKER STOPPED SWEEP RETURNED".to_string(), String::new()),
            FactKind::Deployed { workflows } => {
                ("WORKER DEPLOYED".to_string(), format!("registers {}", workflows.join(", ")))
            }
            FactKind::SweepBegan
            | FactKind::SweepEnded
            | FactKind::Priced { .. }
            | FactKind::Labelled { .. }
            | FactKind::Answering { .. }
            | FactKind::Answered { .. }
            | FactKind::Pruned { .. } => (String::new(), String::new()),
        };
        if !op.is_empty() {
            let node_col = if matches!(kind, FactKind::Healed) { None } else { Some(node) };
            h.events.push(Event {
                at_ns,
                node: node_col,
                epoch: None,
                op,
                outcome,
                fault: String::new(),
                call: None,
            });
        }
        let applied_before = h.applied_count;
        let invoked_before = h.calls.len();
        h.facts.push(Fact {
            at_ns,
            applied_before,
            invoked_before,
            node,
            incarnation,
            owner: owner.to_string(),
            kind,
        });
    }

    /// Note an engine-moment point (see [`Mark`]).
    pub fn mark(&self, point: &'static str, node: u32, incarnation: u32, run_id: &str, epoch: Option<u64>) {
        let mut h = self.inner.borrow_mut();
        let applied_before = h.applied_count;
        let invoked_before = h.calls.len();
        h.marks.push(Mark {
            point,
            node,
            incarnation,
            run_id: run_id.to_string(),
            epoch,
            applied_before,
            invoked_before,
        });
    }

    pub fn point(&self, point: store::FaultPoint, fired: bool, crashed: bool) {
        let mut h = self.inner.borrow_mut();
        let i = point.index();
        if h.point_counts.len() <= i {
            h.point_counts.resize(store::FaultPoint::ALL.len().max(i + 1), PointStats::default());
        }
        let s = &mut h.point_counts[i];
        s.reached += 1;
        s.fired += u64::from(fired);
        s.crashed += u64::from(crashed);
    }
}

/// The timeline line of a returned call (successful reads are left out).
pub fn return_event(c: &Call) -> Option<Event> {
    let quiet_read = matches!(c.op, OpKind::Load | OpKind::ListRuns | OpKind::BlobList | OpKind::GetMeta);
    if quiet_read && c.outcome.is_ok() {
        return None;
    }
    Some(Event {
        at_ns: c.returned_ns?,
        node: Some(c.node),
        epoch: c.epoch().map(|e| e.0),
        op: describe_call(c),
        outcome: c.outcome.short(),
        fault: String::new(),
        call: Some(c.id),
    })
}

/// "append soak-run seq=4", "acquire soak-run by soak-w1", ...
pub fn describe_call(c: &Call) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(48);
    let _ = write!(s, "{} {}", c.op.as_str(), c.args.blob_ref.as_deref().unwrap_or(&c.run_id));
    if let (Some(seq), None) = (c.args.seq, &c.args.blob_ref) {
        let _ = write!(s, " seq={seq}");
    }
    if let Some(o) = &c.args.owner {
        let _ = write!(s, " by {o}");
    }
    if let Some(l) = &c.lease {
        if l.run_id != c.run_id {
            let _ = write!(s, " (lease of {})", l.run_id);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "returned twice")]
    fn a_call_returned_twice_is_a_harness_bug() {
        let rec = Recorder::default();
        let id = rec.invoke(0, 0, OpKind::Load, "r", None, Args::default(), 1);
        rec.ret(id, Outcome::Ok { detail: String::new() }, None, 2);
        rec.ret(id, Outcome::Ok { detail: String::new() }, None, 3);
    }
}
