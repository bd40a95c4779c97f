//! The store contract: every run-store and leader-run operation, once, over any SQL executor.
//!
//! [`Executor`] is what a platform provides: a dialect and an atomic `batch`. D1 implements it in the
//! Worker; SQLite, PostgreSQL and MySQL implement it in the native tests. [`SqlStore`] plans the
//! statements for the executor's dialect and decides from rows and change counts, so the SQL the
//! Worker runs on D1 is exactly the SQL the tests run on SQLite.
//!
//! The contract is split by capability, so each caller's part is visible in its bounds:
//!
//! | trait | who calls it | methods |
//! |---|---|---|
//! | [`AdmissionStore`] | the session object admitting a run | `create_run`, `take_over_and_create`, `get_session`, `claim_holder`, `claim_by_task`, `idempotency`, `release_claim_of` |
//! | [`RunReadStore`] | HTTP reads, stream replay | `get_run`, `list_runs`, `list_sessions`, `events_after` |
//! | [`LedgerStore`] | the session object writing a run's ledger and end | `append_events`, `finish_run`, `add_steer`, `cancel`, `set_terminal`, `fail_if_unchanged` |
//! | [`RunnerStore`] | the stateless runner routes, the queues' dispatchers | `lease`, `lease_run`, `heartbeat`, `queue_backlog`, `unleased_since`, `release_leases` (and `release_lease`, one of them) |
//! | [`GateStore`] | human gates: the runner's park, decisions, reads of pending gates | `park`, `resolve_gate`, `pending_gate`, `list_pending_gates`, `request_cancel`, `is_cancel_requested` |
//! | [`ReaperStore`] | the cron handler | `reap_stale`, `requeue_unacked_leases`, `fail_parked_with_expired_checkpoint`, `reap_parked_older_than`, `sweep_claims`, `delete_by_session`, `record_tick`, `recent_ticks` |
//! | [`LeaderRunStore`] | leader runs (SPEC-core §5.5) | `create_leader_run`, `get_leader_run`, `get_leader_run_by_idem`, `list_leader_runs`, `running_leader_ids`, `finish_leader_run`, `reap_stale_leader_runs`, `backdate_leader_run_for_test` |
//! | [`SessionStore`] | the session routes, the session's object deleting it, the cron's retention pass | `list_session_views`, `session_view`, `delete_session`, `purge_terminal_runs` |
//! | [`LeaderDriveStore`] | driving a leader run's children ([`crate::leader_drive`]) | `create_leader_with_plan`, `leader_view`, `leader_drive`, `leader_children`, `start_child`, `skip_child`, `request_leader_cancel` |
//!
//! [`SqlStore`] implements all of them; [`prelude`] imports all of them. Statuses a caller writes
//! are typed ([`TerminalStatus`], [`ParkStatus`], [`LeaderFinish`]), so a caller's mistake cannot
//! reach the database and is never reported as corruption; statuses read back stay text
//! ([`RunRow::status`]), so a word this build does not know stays readable (and counts as terminal).
//! Reapers report which `(session, task)` pairs they changed ([`ReapReport`]).
//!
//! **Fencing.** Every runner write (heartbeat, append, finish) requires the current lease and the
//! holder's identity (`lease_epoch`, `held_by = runner_id`, `status = 'running'`); an epoch below 1
//! is refused without a query (a lease makes it at least 1). A heartbeat or append also
//! acknowledges the lease (`lease_acked = 1`) and refreshes `heartbeat_at`, the run's evidence of life.

use crate::{
    gate::{self, CheckpointStatus, DecidePath, Decided, Decision, GateSeen},
    idempotency::IdempotencyBinding,
    json::Quoted,
    leader::{self, LeaderFinish, LeaderRunRecord},
    leader_drive::{ChildState, Drive, ReportStatus},
    run::RunRow,
    sql::{
        claim_sql, event_sql, gate_sql, get_i64, get_opt_i64, get_opt_str, get_str, leader_sql,
        run_sql, runner_sql, session_sql, Cols, DbError, Dialect, Outcome, Row, Stmt,
    },
    wire::objective_preview,
};

pub use crate::run::RunSnapshot;
pub use crate::sessions::{Purged, SessionDeleted, SessionView};
pub use crate::sql::session_sql::SessionDelete;
pub use crate::sql::{
    claim_sql::{StaleCutoffs, SweepWindow, Tick, TickRecord},
    event_sql::{Append, NewEvent},
    gate_sql::{GateScope, Park},
    run_sql::{GuardedFail, ListScope, NewRun, Takeover, Terminal},
    runner_sql::{Finish, Heartbeat, NewSteer},
};
pub use crate::status::{ParkStatus, TerminalStatus};

/// Every store trait, for callers that use several: `use sema_core::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        AdmissionStore, GateStore, LeaderDriveStore, LeaderRunStore, LedgerStore, ReaperStore,
        RunReadStore, RunnerStore, SessionStore,
    };
}

/// A SQL connection (or D1 binding) in one dialect.
#[allow(async_fn_in_trait)]
pub trait Executor {
    fn dialect(&self) -> Dialect;

    /// Runs `stmts` as one transaction: all of them commit, or none does and the first failure is
    /// returned. One [`Outcome`] per statement: rows for a query, else the number of rows the
    /// statement wrote. That number may count matched rows (SQLite, PostgreSQL) or changed rows
    /// (MySQL's default): the store only decides from writes that always change a value it matches
    /// (a status, an epoch, a counter, an insert or a delete), never from a write that may leave a
    /// row as it was (a heartbeat in the same millisecond is decided from a fenced read).
    async fn batch(&self, stmts: &[Stmt]) -> std::result::Result<Vec<Outcome>, DbError>;

    /// Runs one statement.
    async fn run(&self, stmt: &Stmt) -> std::result::Result<Outcome, DbError> {
        let mut out = self.batch(std::slice::from_ref(stmt)).await?;
        out.pop()
            .ok_or_else(|| DbError::Other("executor returned no outcome".into()))
    }
}

/// Why a store operation failed: the database refused or failed, or a row could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    Db(DbError),
    Corrupt(String),
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> Self {
        Self::Db(e)
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Db(e) => write!(f, "{e}"),
            Self::Corrupt(m) => write!(f, "corrupt row: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

type Result<T> = std::result::Result<T, StoreError>;

fn corrupt(e: String) -> StoreError {
    StoreError::Corrupt(e)
}

/// Each of `rows` read by `read`, in order; the first that does not read answers. A loop over a
/// function rather than an iterator `collect`ed into a `Result`, which compiled three functions
/// per reading closure into the Worker.
fn each_row<T>(rows: &[Row], read: fn(&Row) -> Result<T>) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(read(row)?);
    }
    Ok(out)
}

/// The holder of a session's claim as the database sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimHolder {
    pub task_id: String,
    /// `None`: the claim has no run row.
    pub status: Option<String>,
    pub owner: Option<String>,
    pub session_owner: Option<String>,
}

/// The outcome of [`AdmissionStore::create_run`].
// One value per admission, never stored or collected: the run row in `TaskIdTaken` stays unboxed so
// callers match it as `Option<RunRow>`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum CreateRun {
    /// Run row, claim and key binding committed together.
    Created,
    /// The session is held; the holder as read right after the refusal (`None`: released since).
    Held(Option<ClaimHolder>),
    /// The session belongs to another principal; nothing was written.
    ForeignSession { owner: Option<String> },
    /// The task id names an existing run (returned when readable).
    TaskIdTaken(Option<RunRow>),
    /// The idempotency key was bound by a concurrent admission.
    KeyBound(IdempotencyBinding),
}

/// As logged, in a few words.
impl std::fmt::Display for CreateRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Created => f.write_str("created"),
            Self::Held(Some(h)) => write!(f, "the session is held by run {}", h.task_id),
            Self::Held(None) => f.write_str("the session was held, and is free since"),
            Self::ForeignSession { .. } => f.write_str("the session is another principal's"),
            Self::TaskIdTaken(_) => f.write_str("the task id names an existing run"),
            Self::KeyBound(b) => write!(f, "the key is bound to run {}", b.task_id),
        }
    }
}

/// The outcome of [`LedgerStore::cancel`].
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// The run after the cancel (`None`: no row).
    pub run: Option<RunRow>,
    /// Whether a claim naming this task was released.
    pub claim_released: bool,
}

/// An event of a run's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub seq: i64,
    pub kind: String,
    /// JSON text.
    pub data: String,
    pub event_id: Option<String>,
    pub created_at: i64,
}

/// The outcome of [`LedgerStore::append_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    /// The seqs assigned, in order, and what waits for the holder as the same batch left the run.
    Seqs(Vec<i64>, Waiting),
    /// The lease epoch no longer matches (or the run is not running): nothing was written.
    LeaseLost,
}

/// What waits for a run's lease holder, as its lease or a write of it read the run: a cancel
/// request, and steer messages its next heartbeat takes. A holder told nothing waits needs no
/// heartbeat to learn it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub cancel_requested: bool,
    /// Undelivered steer messages.
    pub steer_pending: i64,
}

impl Waiting {
    /// Nothing waits.
    pub const NOTHING: Waiting = Waiting {
        cancel_requested: false,
        steer_pending: 0,
    };
}

/// One runner's lease of one run, as a releaser names it: the run, its holder and the epoch it won.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease<'a> {
    pub task_id: &'a str,
    pub runner_id: &'a str,
    pub lease_epoch: i64,
}

/// A lease a runner won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub task_id: String,
    pub session_id: String,
    pub lease_epoch: i64,
    pub objective: String,
    /// JSON object text.
    pub meta: String,
    pub last_seq: i64,
    /// When the run was admitted: how long it may have waited for a runner, at most (a requeued
    /// run waited less), which says whether its session's object must be told of the lease
    /// (`liveness::Staleness::lease_told`).
    pub created_at: i64,
    /// The decision this run resumes from (its latest resolved gate), `None` for a run never parked.
    /// Every lease of the run carries it until the run parks again.
    pub resume: Option<Resume>,
    /// What already waits for the new holder: a cancel, steer messages queued before the lease.
    pub waiting: Waiting,
}

/// A leasable run (`running`, no holder) as a queue's dispatcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leasable {
    pub task_id: String,
    pub queue: String,
    pub created_at: i64,
}

/// The decision a resumed run's lease carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub kind: String,
    /// The gate's card, JSON object text.
    pub card: String,
    pub decision: String,
    /// The reason, or a plan review's feedback.
    pub reason: Option<String>,
}

/// A pending gate as clients may see it: never its checkpoint id or token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingGate {
    pub session_id: String,
    pub task_id: String,
    pub kind: String,
    /// JSON object text.
    pub card: String,
    /// `None`: never expires. A gate past its deadline stays pending until the reaper fails its run;
    /// compare with `now`.
    pub expires_at: Option<i64>,
    pub created_at: i64,
}

/// The outcome of [`GateStore::park`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parked {
    /// Parked; the park event's seq.
    Parked { seq: i64 },
    /// The lease epoch or holder no longer matches (or the run is not running): nothing written.
    LeaseLost,
    /// The session already has a pending gate (the one read after the refusal, when still there):
    /// nothing written.
    GatePending(Option<PendingGate>),
}

/// A decide attempt ([`GateStore::resolve_gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolve<'a> {
    pub path: DecidePath,
    /// The session (approvals, wake) or the run (plan review, resume) the path names.
    pub scope: GateScope<'a>,
    /// One of `path.decisions()` (the caller validated the body with [`gate::DecideBody`]).
    pub decision: Decision,
    /// A reason, or a plan review's feedback.
    pub reason: Option<&'a str>,
    /// Fresh per attempt (e.g. a UUIDv7): names the checkpoint this attempt resolves.
    pub resolution_id: &'a str,
    pub now: i64,
}

/// What a heartbeat returns to the lease holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    pub cancel_requested: bool,
    /// Steer messages delivered by this heartbeat, `(seq, message)` in order; each is delivered once.
    pub steer: Vec<(i64, String)>,
    /// Undelivered steer messages left for later heartbeats.
    pub steer_pending: i64,
}

/// What became of a steer message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered {
    /// Queued with this seq.
    Queued(i64),
    /// The run is not running (or does not exist); nothing was queued.
    NotRunning,
    /// The run's undelivered queue is at its bound; nothing was queued or dropped.
    QueueFull,
}

/// A session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub session_id: String,
    pub owner: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A claim or run named by its session and task: what a reaper changed, so the session's object
/// can be told (its claim of `task_id` was released, or its run ended).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionTask {
    pub session_id: String,
    pub task_id: String,
}

impl SessionTask {
    pub fn new(session_id: impl Into<String>, task_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            task_id: task_id.into(),
        }
    }
}

/// What one reaper tick (or claim sweep) changed, each list sorted.
///
/// Exact on every dialect: each tick stamps the rows it changes with its [`Tick::id`] inside its
/// one transaction and reads back exactly the stamped rows (see [`claim_sql`]), so overlapping ticks
/// never report a row twice and never report a row they did not change. Were an operator to reuse a
/// tick id, a tick could also report runs an earlier tick with that id failed (never a claim: a
/// stamped claim is deleted in the same transaction); that superset is harmless, because a session
/// object told "forget the claim of task T" re-checks what it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Runs this tick failed. Their claims are in `terminal_claims_released` (same batch).
    pub reaped: Vec<SessionTask>,
    /// Claims released because their run is terminal.
    pub terminal_claims_released: Vec<SessionTask>,
    /// Claims released because no run row exists for them.
    pub orphan_claims_released: Vec<SessionTask>,
}

impl ReapReport {
    /// `(reaped, terminal claims released, orphan claims released)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.reaped.len(),
            self.terminal_claims_released.len(),
            self.orphan_claims_released.len(),
        )
    }

    /// Every claim released, terminal then orphan: the sessions whose object must forget its claim.
    pub fn released_claims(&self) -> impl Iterator<Item = &SessionTask> {
        self.terminal_claims_released
            .iter()
            .chain(&self.orphan_claims_released)
    }

    pub fn is_empty(&self) -> bool {
        self.counts() == (0, 0, 0)
    }
}

/// One window of the claim sweep ([`ReaperStore::sweep_claims`]): what it released and where the
/// next window starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Claims released within the window: terminal and orphan (`reaped` stays empty).
    pub report: ReapReport,
    /// The last `session_id` the window examined when it was full (pass it as the next window's
    /// `after`); `None` when the window reached the end of the table (the next walk starts over
    /// from `""`).
    pub next: Option<String>,
}

/// A recorded reaper tick, as [`ReaperStore::recent_ticks`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedTick {
    pub tick_id: String,
    pub started_at: i64,
    pub finished_at: i64,
    /// JSON text, as recorded.
    pub report_json: String,
}

/// Admission of a leader run: `created` is true for exactly one caller per idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderAdmission {
    pub created: bool,
    pub run: LeaderRunRecord,
}

/// Admission, as the session's object runs it: the run row, the claim and the key binding, and the
/// reads that explain a refusal (SPEC-core §1.4).
#[allow(async_fn_in_trait)]
pub trait AdmissionStore {
    /// Creates the run row, the session's claim and the key binding as one unit (win or observe).
    async fn create_run(&self, new: &NewRun<'_>) -> Result<CreateRun>;
    /// Takeover admission, one batch: fails the session's silent holder if it is still exactly as
    /// `t.snapshot` saw it (error = `t.reason`, no error code), releases its claim and admits `t.new`
    /// exactly as [`AdmissionStore::create_run`] does. When the guard fails (a heartbeat or append
    /// landed since the snapshot) nothing is written and the outcome is `Held` with the holder as
    /// read after the refusal; the other outcomes are those of `create_run` (and then, too, nothing
    /// is written unless `Created`).
    async fn take_over_and_create(&self, t: &Takeover<'_>) -> Result<CreateRun>;
    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRow>>;
    async fn claim_holder(&self, session_id: &str) -> Result<Option<ClaimHolder>>;
    /// The session whose claim names `task_id`, with the session's owner.
    async fn claim_by_task(&self, task_id: &str) -> Result<Option<(String, Option<String>)>>;
    async fn idempotency(&self, scoped_key: &str) -> Result<Option<IdempotencyBinding>>;
    /// Releases `task_id`'s claim if its run is terminal or missing (an admission finding a dead
    /// holder frees the session). True when a claim was released.
    async fn release_claim_of(&self, task_id: &str) -> Result<bool>;
}

/// Reads: a run, listings, the event ledger (HTTP reads and stream replay).
#[allow(async_fn_in_trait)]
pub trait RunReadStore {
    async fn get_run(&self, task_id: &str) -> Result<Option<RunRow>>;
    async fn list_runs(
        &self,
        scope: &ListScope<'_>,
        session_id: Option<&str>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<RunRow>>;
    async fn list_sessions(
        &self,
        scope: &ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionRow>>;
    /// Events with `seq > after` in order: at most `limit`, cut after the event whose running sum of
    /// data bytes reaches `max_bytes` (see [`event_sql::events_after`]).
    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        limit: i64,
        max_bytes: i64,
    ) -> Result<Vec<EventRow>>;
}

/// Writes to a run's ledger and terminal state, as the session's object makes them: fenced event
/// appends, the runner's finish, steer queueing, the user's cancel, and a terminal write.
#[allow(async_fn_in_trait)]
pub trait LedgerStore {
    /// Appends under the lease fence (epoch and holder); also refreshes `heartbeat_at` and
    /// acknowledges the lease. A duplicate `event_id` refuses the whole batch
    /// (`DbError::Duplicate { table: "run_event" }`). No events: `Seqs([], Waiting::NOTHING)` without a query (unread, not the run's).
    async fn append_events(&self, a: &Append<'_>) -> Result<Appended>;
    /// The runner's terminal write with its `done` event, fenced by epoch and holder, one round
    /// trip: the run as the write left it (its `last_seq` is the `done` event's seq), or `None` =
    /// lease lost (nothing written).
    async fn finish_run(&self, f: &Finish<'_>) -> Result<Option<RunRow>>;
    /// Fails a running run only if its lease and evidence of life are still those of `g.snapshot`
    /// (`lease_epoch`, `heartbeat_at`, `held_by` NULL-safe), and releases its claim, one batch. True
    /// when this call failed it; false (nothing written) when anything changed since the snapshot.
    async fn fail_if_unchanged(&self, g: &GuardedFail<'_>) -> Result<bool>;
    /// Queues a steer message; its seq, or `None` when the run is not running.
    /// Queues a steer message within the run's queue bounds (see [`runner_sql::add_steer`]).
    async fn add_steer(&self, s: &NewSteer<'_>) -> Result<Steered>;
    /// The user's cancel (see [`run_sql::cancel`]).
    async fn cancel(&self, task_id: &str, now: i64) -> Result<Cancelled>;
    /// Write-once terminal write; releases only this task's claim. True when this call wrote it.
    async fn set_terminal(&self, t: &Terminal<'_>) -> Result<bool>;
}

/// The runner protocol's stateless calls (winning a lease and keeping it), and what the queues'
/// dispatchers read and write: a queue's backlog, the runs leasable for a while, a lease on one named
/// run, and the release of a lease its runner never received.
///
/// A run is leasable while it is `running` with no holder; an unheld running run's `updated_at` is
/// when it became leasable (see [`runner_sql`]).
#[allow(async_fn_in_trait)]
pub trait RunnerStore {
    /// Leases the oldest unheld running run of `queue` to `runner_id` (compare-and-set: two runners
    /// never win the same lease), trying at most `candidates` runs; never a run of another queue.
    async fn lease(
        &self,
        runner_id: &str,
        queue: &str,
        now: i64,
        candidates: i64,
    ) -> Result<Option<Lease>>;
    /// Leases the run `task_id` (whatever its queue) to `runner_id` by the same compare-and-set as
    /// [`RunnerStore::lease`]: of concurrent callers at most one wins. `None` when it lost: the run is
    /// held, parked or ended, or there is no such run (nothing written).
    async fn lease_run(&self, task_id: &str, runner_id: &str, now: i64) -> Result<Option<Lease>>;
    /// Refreshes liveness and acknowledges the lease under the fence (epoch and holder), and takes
    /// the undelivered steer messages; `None` = lease lost (nothing written).
    async fn heartbeat(&self, h: &Heartbeat<'_>) -> Result<Option<Beat>>;
    /// The leasable runs of `queue`, oldest first by `(created_at, task_id)` (the order
    /// [`RunnerStore::lease`] takes them in), at most `limit`. One indexed read.
    async fn queue_backlog(&self, queue: &str, limit: i64) -> Result<Vec<Leasable>>;
    /// The leasable runs of every queue that have been leasable since before `before`
    /// (`updated_at < before`: admitted, resumed, requeued or released before it), oldest first by
    /// that time (then `task_id`), at most `limit`: the cron's sweep hands them back to their
    /// queues' dispatchers. One indexed read.
    async fn unleased_since(&self, before: i64, limit: i64) -> Result<Vec<Leasable>>;
    /// Releases leases their holders never acknowledged (the dispatcher's runner was gone before it
    /// received the lease, or never said so): `held_by = NULL`, `lease_acked = 0`, leasable again
    /// from `now`, each only while its `runner_id` holds the run under its `lease_epoch`,
    /// unacknowledged, and it is `running` (a statement fenced on its own; all of them in one
    /// batch). Of several, those still unacknowledged are first found by one read per 50, so the
    /// acknowledged ones (nearly all, when a dispatcher's follow-up falls due) cost no write. The
    /// epoch stays, so the old holder's heartbeat, append, park and finish are fenced out (no holder
    /// now; any later lease moves the epoch on). Whether each was released by this call, in order;
    /// a lease with an epoch below 1 is false without a statement, and an empty list sends nothing.
    async fn release_leases(&self, leases: &[HeldLease<'_>], now: i64) -> Result<Vec<bool>>;

    /// [`RunnerStore::release_leases`] of one lease (a socket that closed while its lease was
    /// written): whether this call released it.
    async fn release_lease(
        &self,
        task_id: &str,
        runner_id: &str,
        lease_epoch: i64,
        now: i64,
    ) -> Result<bool> {
        let lease = HeldLease {
            task_id,
            runner_id,
            lease_epoch,
        };
        Ok(self.release_leases(&[lease], now).await? == [true])
    }
}

/// Human gates (SPEC-api §5.3–§5.6): the runner's park, a client's decision, reads of pending gates,
/// and the owner-checked cancel flag. A gate is pending exactly while its run is parked (see
/// [`gate_sql`]); every method that changes state is one batch.
#[allow(async_fn_in_trait)]
pub trait GateStore {
    /// Parks a running run on a gate, one batch fenced by the lease epoch and its holder: the run
    /// becomes `p.status` with no holder (the claim stays), the checkpoint is recorded pending, and a
    /// park event (type = the park word) is appended at `last_seq + 1`. Refused, writing nothing,
    /// when the lease no longer holds (`LeaseLost`; an epoch below 1 without a query) or the session
    /// already has a pending gate (`GatePending`, a UNIQUE key is the judge).
    async fn park(&self, p: &Park<'_>) -> Result<Parked>;
    /// Resolves the gate in `r.scope` by compare-and-set: the first attempt wins; the run resumes
    /// (`running`, unheld, epoch + 1, a `resumed` event; its next lease carries the decision) or, on
    /// `deny` / `stop` / `wake`, ends (terminal, `done` appended, claim released), one batch. A refused
    /// attempt writes nothing and says why: nothing pending, a pending gate of another kind (with its
    /// path), expired, or already decided (a lost race). One read before the batch; a lost
    /// compare-and-set reads once more to say why.
    async fn resolve_gate(&self, r: &Resolve<'_>) -> Result<Decided>;
    /// The session's pending gate (kind, task, card, deadline; never the token or its digest),
    /// whether or not its deadline has passed.
    async fn pending_gate(&self, session_id: &str) -> Result<Option<PendingGate>>;
    /// A page of pending gates, oldest first, strictly after `cursor` = `(created_at, session_id)`;
    /// `scope` filters by owner (operators: [`ListScope::All`]), `session_id` narrows to one session.
    async fn list_pending_gates(
        &self,
        scope: &ListScope<'_>,
        session_id: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<PendingGate>>;
    /// Sets the cancel flag; false for a missing run or an owner mismatch (no existence oracle).
    async fn request_cancel(&self, task_id: &str, owner: Option<&str>, now: i64) -> Result<bool>;
    async fn is_cancel_requested(&self, task_id: &str, owner: Option<&str>) -> Result<bool>;
}

/// Maintenance, as the cron handler runs it (SPEC-core §3.3): reapers, the claim sweep, and
/// deletion of a session. Every reaper releases exactly the claims of the runs it failed, in the
/// same batch; other debris claims (a run ended out of band, no run row) are released by the claim
/// sweep, one bounded window per call, which the cron runs every tick whatever the reapers found
/// (claim maintenance never depends on a probe, SPEC-core §2.7). Each reports exactly what it
/// changed ([`ReapReport`]), so the caller can tell each affected session's object.
#[allow(async_fn_in_trait)]
pub trait ReaperStore {
    /// Fails running runs whose `heartbeat_at` is older than their cutoff (held by a runner:
    /// `cutoffs.held`; queued: `cutoffs.queued`) with `run.stalled`, oldest first, at most
    /// `tick.limit`, and releases their claims (`orphan_claims_released` stays empty, as for every
    /// reaper).
    async fn reap_stale(&self, tick: &Tick<'_>, cutoffs: &StaleCutoffs) -> Result<ReapReport>;
    /// Requeues held running runs whose lease was never acknowledged and whose lease time
    /// (`heartbeat_at`) is before `ack_cutoff`: `held_by = NULL`, epoch + 1, `heartbeat_at = now`.
    /// At most `tick.limit`; returns exactly the runs this tick requeued (sorted).
    async fn requeue_unacked_leases(
        &self,
        tick: &Tick<'_>,
        ack_cutoff: i64,
    ) -> Result<Vec<SessionTask>>;
    /// Fails parked runs whose pending gate's deadline passed (`approval.expired`): each run's
    /// `done` event is appended, its claim released and its gate marked expired, in the same batch.
    async fn fail_parked_with_expired_checkpoint(&self, tick: &Tick<'_>) -> Result<ReapReport>;
    /// Fails parked runs not updated since before `cutoff` (`approval.timeout`), as above.
    async fn reap_parked_older_than(&self, tick: &Tick<'_>, cutoff: i64) -> Result<ReapReport>;
    /// One window of the claim sweep, one batch: examines at most `window.limit` claims in
    /// `session_id` order after `window.after`, releases those whose run is terminal or has no row,
    /// and returns where the next window starts. `tick` is fresh per call.
    async fn sweep_claims(&self, tick: &str, window: &SweepWindow<'_>) -> Result<Swept>;
    /// Deletes a session's runs, events, checkpoints, steer messages, claim and row together.
    /// Returns the number of runs deleted.
    async fn delete_by_session(&self, session_id: &str) -> Result<u64>;
    /// Records a reaper tick and deletes all but the newest `keep` (one batch).
    async fn record_tick(&self, t: &TickRecord<'_>, keep: i64) -> Result<()>;
    /// The newest `limit` recorded ticks, newest first.
    async fn recent_ticks(&self, limit: i64) -> Result<Vec<RecordedTick>>;
}

/// The leader-run store (SPEC-core §5.5).
#[allow(async_fn_in_trait)]
pub trait LeaderRunStore {
    /// Admits once per `idem_key` (UNIQUE key; win or observe). `id` is a fresh UUIDv7.
    async fn create_leader_run(
        &self,
        id: &str,
        objective: &str,
        owner: Option<&str>,
        idem_key: Option<&str>,
        now: i64,
    ) -> Result<LeaderAdmission>;
    async fn get_leader_run(&self, id: &str) -> Result<Option<LeaderRunRecord>>;
    async fn get_leader_run_by_idem(&self, idem_key: &str) -> Result<Option<LeaderRunRecord>>;
    /// A page of leader runs, newest first by `(started_at_ms, leader_run_id)`, strictly after
    /// `cursor` = that pair of the previous page's last row; `scope` filters by owner as
    /// [`RunReadStore::list_runs`] does (operators: [`ListScope::All`]), `status` by status word.
    /// One statement, served by an index in every dialect (no sort outside it).
    async fn list_leader_runs(
        &self,
        scope: &ListScope<'_>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<LeaderRunRecord>>;
    /// The ids of `running` leader runs greater than `after`, ascending, at most `limit`: one window
    /// of the cron's driving pass (pass the last id as the next `after`; `""` starts over). Indexed.
    async fn running_leader_ids(&self, after: &str, limit: i64) -> Result<Vec<String>>;
    /// Terminal write only from `running`; false when it was already terminal (the caller reports it).
    async fn finish_leader_run(
        &self,
        id: &str,
        status: LeaderFinish,
        result_json: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> Result<bool>;
    /// Fails running leader runs started before `now - stale_ms` with [`leader::STALE_SWEEP_REASON`];
    /// returns exactly the ids this tick failed (sorted). `tick` is fresh per tick.
    async fn reap_stale_leader_runs(
        &self,
        tick: &str,
        stale_ms: i64,
        now: i64,
    ) -> Result<Vec<String>>;
    /// Test aid only.
    async fn backdate_leader_run_for_test(&self, id: &str, started_at_ms: i64) -> Result<()>;
}

/// A leader run to admit with its driving plan ([`LeaderDriveStore::create_leader_with_plan`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewLeader<'a> {
    /// A fresh UUIDv7.
    pub id: &'a str,
    pub objective: &'a str,
    pub owner: Option<&'a str>,
    pub idem_key: Option<&'a str>,
    pub now: i64,
    /// At least 1.
    pub max_concurrency: i64,
    pub deadline_at: Option<i64>,
    /// The request fingerprint of a keyed admission (sha256 hex, 64 characters), stored with the plan
    /// so a key reused with another body can be answered 422; `None` for an unkeyed admission.
    pub fingerprint: Option<&'a str>,
    /// The subtasks, in child order.
    pub children: &'a [NewChild<'a>],
}

/// One subtask of a [`NewLeader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewChild<'a> {
    pub objective: &'a str,
    /// JSON text, handed to the child run as its meta.
    pub meta_json: &'a str,
}

/// A child as stored, with the driver's view of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderChild {
    pub index: usize,
    pub session_id: String,
    /// Its run, once started.
    pub task_id: Option<String>,
    pub objective: String,
    pub meta_json: String,
    pub state: ChildState,
}

/// A leader run with everything its driver and its readers need ([`LeaderDriveStore::leader_view`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderView {
    pub record: LeaderRunRecord,
    /// Its driving settings; `None` when it has no plan (admitted by `create_leader_run`).
    pub drive: Option<Drive>,
    /// The plan's request fingerprint; `None` without a plan or for an unkeyed admission.
    pub fingerprint: Option<String>,
    /// Every child in index order, as [`LeaderDriveStore::leader_children`] reads them.
    pub children: Vec<LeaderChild>,
}

/// The outcome of [`LeaderDriveStore::start_child`].
#[derive(Debug, Clone, PartialEq)]
pub enum StartChild {
    /// This call moved the child to `started` and admitted its run (row, session, claim).
    Started,
    /// The compare-and-set lost: the child was already started or skipped, the leader is no longer
    /// `running`, is cancelled, past its deadline, or owned by someone else, or the concurrency bound
    /// is full (`max_concurrency` children already started with a non-terminal run). Nothing was
    /// written.
    Lost,
    /// The admission refused (as [`AdmissionStore::create_run`] would); nothing was written.
    Refused(Box<CreateRun>),
}

/// Driving a leader run's children: the durable input of [`crate::leader_drive::plan`] and the
/// compare-and-set writes that apply a plan. Every write is conditional on the state it was planned
/// from, so concurrent drivers (two children ending at once, a cron tick) cannot start a child twice.
#[allow(async_fn_in_trait)]
pub trait LeaderDriveStore {
    /// [`LeaderRunStore::create_leader_run`] with the plan and every child (`not_started`) in the same
    /// batch: the plan and child inserts are conditional on the leader row this batch inserted, and a
    /// duplicate key rolls the whole batch back, so exactly one caller per key writes a plan and one
    /// set of children; the others observe the winner (`created: false`) and write nothing.
    async fn create_leader_with_plan(&self, new: &NewLeader<'_>) -> Result<LeaderAdmission>;
    /// The leader record, its plan (settings and fingerprint) and its children with their runs'
    /// states, in one round trip (one batch of reads: one snapshot on D1 and MySQL; on PostgreSQL,
    /// READ COMMITTED, each read has its own). `None` when no leader row has this id.
    async fn leader_view(&self, id: &str) -> Result<Option<LeaderView>>;
    /// The leader's driving settings (`None`: no plan, e.g. admitted by `create_leader_run`).
    async fn leader_drive(&self, id: &str) -> Result<Option<Drive>>;
    /// Every child in index order, its state read with its run's status and error in one statement.
    async fn leader_children(&self, id: &str) -> Result<Vec<LeaderChild>>;
    /// Starts child `idx` as `run` (its session must be the child's; owner the leader's), one batch:
    /// the compare-and-set `not_started` → `started` naming `run.task_id`, and the admission of `run`
    /// conditional on that CAS having won. Of concurrent starters of one child exactly one gets
    /// `Started`.
    ///
    /// The bound is kept by the database: the CAS also requires that fewer than the plan's
    /// `max_concurrency` children are `started` with a non-terminal run (`running`, `suspended`,
    /// `needs_review`), else `Lost`. Concurrent starters of one leader are serialised on its plan
    /// row, which the batch locks first (see [`leader_sql::start_child`]): D1 / SQLite runs one writer
    /// at a time; PostgreSQL (READ COMMITTED) counts in the CAS's fresh statement snapshot, taken
    /// after the lock was granted; MySQL counts with locking reads after the lock. So however many
    /// drivers start children at once, at most `max_concurrency` runs of the leader are non-terminal.
    async fn start_child(&self, id: &str, idx: usize, run: &NewRun<'_>) -> Result<StartChild>;
    /// Compare-and-set `not_started` → `skipped` with `report`; true when this call skipped it.
    async fn skip_child(&self, id: &str, idx: usize, report: ReportStatus) -> Result<bool>;
    /// Every `not_started` child → `skipped` with `report`, one conditional statement (a child a
    /// concurrent driver started first stays started); how many this call skipped.
    async fn skip_unstarted(&self, id: &str, report: ReportStatus) -> Result<u64>;
    /// Sets the plan's cancel flag (after which no child starts); true when this call set it.
    async fn request_leader_cancel(&self, id: &str) -> Result<bool>;
}

/// The one implementation of every contract, over any executor.
#[derive(Debug, Clone)]
pub struct SqlStore<E> {
    pub exec: E,
}

impl<E: Executor> SqlStore<E> {
    pub fn new(exec: E) -> Self {
        Self { exec }
    }

    fn d(&self) -> Dialect {
        self.exec.dialect()
    }

    async fn first(&self, stmt: Stmt) -> Result<Option<Row>> {
        Ok(self.exec.run(&stmt).await?.rows.into_iter().next())
    }

    /// Runs a reaper batch: the reaped runs and their released claims.
    async fn reaper(&self, batch: Vec<Stmt>) -> Result<ReapReport> {
        let out = self.exec.batch(&batch).await?;
        Ok(ReapReport {
            reaped: pairs(&out, claim_sql::REAP_READ)?,
            terminal_claims_released: pairs(&out, claim_sql::REAP_CLAIM_READ)?,
            orphan_claims_released: vec![],
        })
    }
}

/// The `(session_id, task_id)` rows statement `i` read, sorted.
fn pairs(out: &[Outcome], i: usize) -> Result<Vec<SessionTask>> {
    let rows = out.get(i).map(|o| o.rows.as_slice()).unwrap_or_default();
    let mut v = each_row(rows, session_task)?;
    v.sort();
    Ok(v)
}

fn session_task(row: &Row) -> Result<SessionTask> {
    read_row(row, |c| SessionTask {
        session_id: c.str("session_id"),
        task_id: c.str("task_id"),
    })
}

/// The outcome of a batch guarded by a fence or compare-and-set: statement `write` had to change
/// exactly one row. `None` when it did not (the batch wrote nothing); otherwise the row that
/// statement `read` read back (`None` for `read`: the batch's last statement).
fn won<'o>(
    out: &'o [Outcome],
    write: usize,
    read: Option<usize>,
    what: &str,
) -> Result<Option<&'o Row>> {
    if out.get(write).is_none_or(|o| o.changes != 1) {
        return Ok(None);
    }
    let read = match read {
        Some(i) => out.get(i),
        None => out.last(),
    };
    read.and_then(|o| o.rows.first())
        .map(Some)
        .ok_or_else(|| corrupt(format!("{what} vanished")))
}

/// The decision a lease resumes from, from a row with `gate_kind`, `card`, `decision` and `reason`
/// (`None` when `gate_kind` is NULL: the run resumes from no gate).
fn resume_in(c: &mut Cols<'_>) -> Option<Resume> {
    Some(Resume {
        kind: c.opt_str("gate_kind")?,
        card: c.str("card"),
        decision: c.str("decision"),
        reason: c.opt_str("reason"),
    })
}

/// A lease's decision to resume from, read from its row's `resume` column:
/// `[gate_kind, card, decision, reason]` as JSON text (the card as its own text, `reason` null when
/// none was given).
fn resume_of_array(text: &str) -> Result<Resume> {
    let v = crate::json::parse(text).map_err(|e| corrupt(format!("a lease's resume: {e}")))?;
    let field = |i: usize| v.as_array().and_then(|a| a.get(i));
    let text_at = |i: usize| field(i).and_then(|f| f.as_str()).map(str::to_owned);
    match (text_at(0), text_at(1), text_at(2)) {
        (Some(kind), Some(card), Some(decision)) => Ok(Resume {
            kind,
            card,
            decision,
            reason: text_at(3),
        }),
        // Not the text itself: it holds the card, up to 64 KiB.
        _ => Err(corrupt(
            "a lease's resume is not [kind, card, decision, reason]".to_owned(),
        )),
    }
}

/// What waits for a run's holder, from a row with `cancel_requested` and `steer_pending` (the
/// heartbeat's, an append's and a lease's reads).
fn waiting(row: &Row) -> Result<Waiting> {
    read_row(row, waiting_in)
}

/// [`waiting`], as part of a larger row's reads.
fn waiting_in(c: &mut Cols<'_>) -> Waiting {
    Waiting {
        cancel_requested: c.i64("cancel_requested") != 0,
        steer_pending: c.i64("steer_pending"),
    }
}

fn claim_holder(row: &Row) -> Result<ClaimHolder> {
    read_row(row, |c| ClaimHolder {
        task_id: c.str("task_id"),
        status: c.opt_str("status"),
        owner: c.opt_str("owner"),
        session_owner: c.opt_str("session_owner"),
    })
}

fn session_row(row: &Row) -> Result<SessionRow> {
    read_row(row, |c| SessionRow {
        session_id: c.str("session_id"),
        owner: c.opt_str("owner"),
        created_at: c.i64("created_at"),
        updated_at: c.i64("updated_at"),
    })
}

fn pending_gate_row(row: &Row) -> Result<PendingGate> {
    read_row(row, |c| PendingGate {
        session_id: c.str("session_id"),
        task_id: c.str("task_id"),
        kind: c.str("gate_kind"),
        card: c.str("card"),
        expires_at: c.opt_i64("expires_at"),
        created_at: c.i64("created_at"),
    })
}

/// What `f` reads from `row` through one [`Cols`] (`Cols::read`), a misfit as [`StoreError::Corrupt`].
fn read_row<'r, T>(row: &'r Row, f: impl FnOnce(&mut Cols<'r>) -> T) -> Result<T> {
    Cols::read(row, f).map_err(corrupt)
}

/// Each of `rows` read column by column by `read` ([`read_row`]), in order.
fn read_rows<T>(rows: &[Row], read: for<'r> fn(&mut Cols<'r>) -> T) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(read_row(row, read)?);
    }
    Ok(out)
}

/// The latest gate in a decide attempt's scope, with what stays inside the store.
struct SeenGate {
    seen: GateSeen,
    checkpoint_id: String,
    card: String,
}

fn seen_gate(row: &Row) -> Result<SeenGate> {
    let mut c = Cols::new(row);
    let status = c.str("status");
    let parsed = CheckpointStatus::parse(&status);
    let v = SeenGate {
        seen: GateSeen {
            session_id: c.str("session_id"),
            task_id: c.str("task_id"),
            kind: c.str("gate_kind"),
            status: parsed.unwrap_or(CheckpointStatus::Pending),
            expires_at: c.opt_i64("expires_at"),
            decision: c.opt_str("decision"),
            run_status: c.opt_str("run_status"),
        },
        checkpoint_id: c.str("checkpoint_id"),
        card: c.str("card"),
    };
    c.done().map_err(corrupt)?;
    if parsed.is_none() {
        return Err(corrupt(format!("checkpoint status {}", Quoted(&status))));
    }
    Ok(v)
}

fn binding(scoped_key: &str, row: &Row) -> Result<IdempotencyBinding> {
    read_row(row, |c| IdempotencyBinding {
        scoped_key: scoped_key.to_owned(),
        fingerprint: c.str("fingerprint"),
        task_id: c.str("task_id"),
        response_status: c.i64("response_status") as u16,
        response_body: c.str("response_body"),
    })
}

impl<E: Executor> SqlStore<E> {
    /// Decides an admission batch's outcome (`create_run`, `take_over_and_create`): `admit_at` is
    /// where [`run_sql::admit`]'s statements start in the batch.
    async fn admission(
        &self,
        new: &NewRun<'_>,
        out: std::result::Result<Vec<Outcome>, DbError>,
        admit_at: usize,
    ) -> Result<CreateRun> {
        match out {
            Ok(out) => {
                if out
                    .get(admit_at + run_sql::ADMIT_RUN_INSERT)
                    .is_some_and(|o| o.changes == 1)
                {
                    return Ok(CreateRun::Created);
                }
                let owner = self
                    .get_session(new.session_id)
                    .await?
                    .and_then(|s| s.owner);
                Ok(CreateRun::ForeignSession { owner })
            }
            Err(DbError::Duplicate { table }) => match table.as_str() {
                "task_active" => Ok(CreateRun::Held(self.claim_holder(new.session_id).await?)),
                "task_run" => Ok(CreateRun::TaskIdTaken(self.get_run(new.task_id).await?)),
                "idempotency_key" => {
                    let (key, ..) = new
                        .idempotency
                        .ok_or_else(|| corrupt("key conflict without a key".into()))?;
                    let bound = self
                        .idempotency(key)
                        .await?
                        .ok_or_else(|| corrupt(format!("idempotency key {key} vanished")))?;
                    Ok(CreateRun::KeyBound(bound))
                }
                _ => Err(DbError::Duplicate { table }.into()),
            },
            Err(e) => Err(e.into()),
        }
    }
}

impl<E: Executor> AdmissionStore for SqlStore<E> {
    async fn create_run(&self, new: &NewRun<'_>) -> Result<CreateRun> {
        let out = self.exec.batch(&run_sql::admit(self.d(), new)).await;
        self.admission(new, out, 0).await
    }

    async fn take_over_and_create(&self, t: &Takeover<'_>) -> Result<CreateRun> {
        let out = self.exec.batch(&run_sql::take_over(self.d(), t)).await;
        self.admission(t.new, out, run_sql::TAKEOVER_ADMIT).await
    }

    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRow>> {
        self.first(run_sql::select_session(self.d(), session_id))
            .await?
            .map(|r| session_row(&r))
            .transpose()
    }

    async fn claim_holder(&self, session_id: &str) -> Result<Option<ClaimHolder>> {
        self.first(run_sql::select_claim_holder(self.d(), session_id))
            .await?
            .map(|r| claim_holder(&r))
            .transpose()
    }

    async fn claim_by_task(&self, task_id: &str) -> Result<Option<(String, Option<String>)>> {
        match self
            .first(run_sql::select_claim_by_task(self.d(), task_id))
            .await?
        {
            Some(row) => Ok(Some((
                get_str(&row, "session_id").map_err(corrupt)?,
                get_opt_str(&row, "owner").map_err(corrupt)?,
            ))),
            None => Ok(None),
        }
    }

    async fn idempotency(&self, scoped_key: &str) -> Result<Option<IdempotencyBinding>> {
        self.first(run_sql::select_idempotency(self.d(), scoped_key))
            .await?
            .map(|r| binding(scoped_key, &r))
            .transpose()
    }

    async fn release_claim_of(&self, task_id: &str) -> Result<bool> {
        Ok(self
            .exec
            .run(&run_sql::release_claim_of(self.d(), task_id))
            .await?
            .changes
            > 0)
    }
}

impl<E: Executor> RunReadStore for SqlStore<E> {
    async fn get_run(&self, task_id: &str) -> Result<Option<RunRow>> {
        self.first(run_sql::select_run(self.d(), task_id))
            .await?
            .map(|r| RunRow::from_row(&r).map_err(corrupt))
            .transpose()
    }

    async fn list_runs(
        &self,
        scope: &ListScope<'_>,
        session_id: Option<&str>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<RunRow>> {
        let stmt = run_sql::list_runs(self.d(), scope, session_id, status, cursor, limit);
        let out = self.exec.run(&stmt).await?;
        each_row(&out.rows, |r| RunRow::from_row(r).map_err(corrupt))
    }

    async fn list_sessions(
        &self,
        scope: &ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionRow>> {
        let out = self
            .exec
            .run(&run_sql::list_sessions(self.d(), scope, cursor, limit))
            .await?;
        each_row(&out.rows, session_row)
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        limit: i64,
        max_bytes: i64,
    ) -> Result<Vec<EventRow>> {
        let out = self
            .exec
            .run(&event_sql::events_after(
                self.d(),
                task_id,
                after,
                limit,
                max_bytes,
            ))
            .await?;
        read_rows(&out.rows, |c| EventRow {
            seq: c.i64("seq"),
            kind: c.str("type"),
            data: c.str("data"),
            event_id: c.opt_str("event_id"),
            created_at: c.i64("created_at"),
        })
    }
}

impl<E: Executor> LedgerStore for SqlStore<E> {
    async fn append_events(&self, a: &Append<'_>) -> Result<Appended> {
        if a.lease_epoch < 1 {
            return Ok(Appended::LeaseLost);
        }
        if a.events.is_empty() {
            // Nothing written and nothing read: `Waiting::NOTHING` here is unread, not the run's.
            return Ok(Appended::Seqs(Vec::new(), Waiting::NOTHING));
        }
        let d = self.d();
        let out = self.exec.batch(&event_sql::append(d, a)).await?;
        let read = event_sql::append_read(d);
        let Some(row) = won(&out, event_sql::APPEND_FENCE, read, "appended run")? else {
            return Ok(Appended::LeaseLost);
        };
        let last = get_i64(row, "last_seq").map_err(corrupt)?;
        let n = a.events.len() as i64;
        Ok(Appended::Seqs(
            (last - n + 1..=last).collect(),
            waiting(row)?,
        ))
    }

    async fn finish_run(&self, f: &Finish<'_>) -> Result<Option<RunRow>> {
        if f.lease_epoch < 1 {
            return Ok(None);
        }
        let out = self.exec.batch(&runner_sql::finish(self.d(), f)).await?;
        won(&out, runner_sql::FINISH_WRITE, None, "finished run")?
            .map(|row| RunRow::from_row(row).map_err(corrupt))
            .transpose()
    }

    async fn add_steer(&self, m: &NewSteer<'_>) -> Result<Steered> {
        let out = self.exec.batch(&runner_sql::add_steer(self.d(), m)).await?;
        let read = out
            .get(runner_sql::STEER_READ)
            .and_then(|o| o.rows.first())
            .ok_or_else(|| corrupt("steer read vanished".to_owned()))?;
        if out
            .get(runner_sql::STEER_INSERT)
            .is_some_and(|o| o.changes == 1)
        {
            return Ok(Steered::Queued(get_i64(read, "seq").map_err(corrupt)?));
        }
        Ok(
            match get_opt_str(read, "status").map_err(corrupt)?.as_deref() {
                Some("running") => Steered::QueueFull,
                _ => Steered::NotRunning,
            },
        )
    }

    async fn cancel(&self, task_id: &str, now: i64) -> Result<Cancelled> {
        let out = self
            .exec
            .batch(&run_sql::cancel(self.d(), task_id, now))
            .await?;
        let run = out
            .get(run_sql::CANCEL_READ)
            .and_then(|o| o.rows.first())
            .map(|r| RunRow::from_row(r).map_err(corrupt))
            .transpose()?;
        Ok(Cancelled {
            run,
            claim_released: out
                .get(run_sql::CANCEL_RELEASE)
                .is_some_and(|o| o.changes > 0),
        })
    }

    async fn set_terminal(&self, t: &Terminal<'_>) -> Result<bool> {
        let out = self.exec.batch(&run_sql::set_terminal(self.d(), t)).await?;
        Ok(out.first().is_some_and(|o| o.changes == 1))
    }

    async fn fail_if_unchanged(&self, g: &GuardedFail<'_>) -> Result<bool> {
        let out = self
            .exec
            .batch(&run_sql::fail_if_unchanged(self.d(), g))
            .await?;
        Ok(out
            .get(run_sql::GUARDED_FAIL)
            .is_some_and(|o| o.changes == 1))
    }
}

impl<E: Executor> SqlStore<E> {
    /// The leasable runs a read of [`runner_sql`] returned.
    async fn leasables(&self, stmt: Stmt) -> Result<Vec<Leasable>> {
        read_rows(&self.exec.run(&stmt).await?.rows, |c| Leasable {
            task_id: c.str("task_id"),
            queue: c.str("queue"),
            created_at: c.i64("created_at"),
        })
    }
}

impl<E: Executor> RunnerStore for SqlStore<E> {
    async fn lease(
        &self,
        runner_id: &str,
        queue: &str,
        now: i64,
        candidates: i64,
    ) -> Result<Option<Lease>> {
        let d = self.d();
        for run in self
            .leasables(runner_sql::lease_candidates(d, queue, candidates))
            .await?
        {
            if let Some(lease) = self.lease_run(&run.task_id, runner_id, now).await? {
                return Ok(Some(lease));
            } // else another runner won this one
        }
        Ok(None)
    }

    async fn lease_run(&self, task_id: &str, runner_id: &str, now: i64) -> Result<Option<Lease>> {
        let d = self.d();
        let out = self
            .exec
            .batch(&runner_sql::try_lease(d, task_id, runner_id, now))
            .await?;
        let Some(r) = won(
            &out,
            runner_sql::LEASE_CAS,
            Some(runner_sql::lease_read(d)),
            "leased run",
        )?
        else {
            return Ok(None);
        };
        // The decision is a statement of its own (MySQL) or one JSON column of the lease's row,
        // NULL when the run resumes from none.
        let resume = match runner_sql::lease_resume(d) {
            Some(i) => out
                .get(i)
                .and_then(|o| o.rows.first())
                .map(|g| read_row(g, resume_in))
                .transpose()?
                .flatten(),
            None => read_row(r, |c| c.opt_str("resume"))?
                .map(|text| resume_of_array(&text))
                .transpose()?,
        };
        read_row(r, |c| Lease {
            task_id: c.str("task_id"),
            session_id: c.str("session_id"),
            lease_epoch: c.i64("lease_epoch"),
            objective: c.str("objective"),
            meta: c.str("meta"),
            last_seq: c.i64("last_seq"),
            created_at: c.i64("created_at"),
            resume,
            waiting: waiting_in(c),
        })
        .map(Some)
    }

    async fn queue_backlog(&self, queue: &str, limit: i64) -> Result<Vec<Leasable>> {
        self.leasables(runner_sql::lease_candidates(self.d(), queue, limit))
            .await
    }

    async fn unleased_since(&self, before: i64, limit: i64) -> Result<Vec<Leasable>> {
        self.leasables(runner_sql::leasable_since(self.d(), before, limit))
            .await
    }

    async fn release_leases(&self, leases: &[HeldLease<'_>], now: i64) -> Result<Vec<bool>> {
        let d = self.d();
        let mut wanted: Vec<bool> = leases.iter().map(|l| l.lease_epoch >= 1).collect();
        let ids: Vec<&str> = leases
            .iter()
            .zip(&wanted)
            .filter(|(_, w)| **w)
            .map(|(l, _)| l.task_id)
            .collect();
        if ids.len() > 1 {
            // Nearly all are acknowledged by now: one read finds the few that are not.
            let mut still = Vec::new();
            for chunk in ids.chunks(runner_sql::MAX_UNACKED_READ) {
                let rows = self
                    .exec
                    .run(&runner_sql::unacked_leases(d, chunk))
                    .await?
                    .rows;
                still.extend(read_rows(&rows, |c| {
                    let unacked = c.str("status") == "running"
                        && c.opt_i64("lease_acked").is_some_and(|v| v == 0);
                    let holder = c.opt_str("held_by").filter(|_| unacked);
                    (c.str("task_id"), holder, c.i64("lease_epoch"))
                })?);
            }
            for (w, l) in wanted.iter_mut().zip(leases) {
                *w = *w
                    && still.iter().any(|(t, r, e)| {
                        t == l.task_id && r.as_deref() == Some(l.runner_id) && *e == l.lease_epoch
                    });
            }
        }
        let mut stmts = Vec::new();
        for (l, _) in leases.iter().zip(&wanted).filter(|(_, w)| **w) {
            stmts.push(runner_sql::release_lease(
                d,
                l.task_id,
                l.runner_id,
                l.lease_epoch,
                now,
            ));
        }
        let out = if stmts.is_empty() {
            vec![]
        } else {
            self.exec.batch(&stmts).await?
        };
        let mut changes = out.iter();
        Ok(wanted
            .into_iter()
            .map(|w| w && changes.next().is_some_and(|o| o.changes == 1))
            .collect())
    }

    async fn heartbeat(&self, h: &Heartbeat<'_>) -> Result<Option<Beat>> {
        if h.lease_epoch < 1 {
            return Ok(None);
        }
        let out = self.exec.batch(&runner_sql::heartbeat(self.d(), h)).await?;
        let Some(fenced) = out
            .get(runner_sql::HEARTBEAT_READ)
            .and_then(|o| o.rows.first())
        else {
            return Ok(None);
        };
        let Waiting {
            cancel_requested,
            steer_pending,
        } = waiting(fenced)?;
        let mut steer = vec![];
        for r in out
            .get(runner_sql::HEARTBEAT_STEER)
            .map(|o| o.rows.as_slice())
            .unwrap_or_default()
        {
            steer.push((
                get_i64(r, "seq").map_err(corrupt)?,
                get_str(r, "message").map_err(corrupt)?,
            ));
        }
        Ok(Some(Beat {
            cancel_requested,
            steer,
            steer_pending,
        }))
    }
}

impl<E: Executor> GateStore for SqlStore<E> {
    async fn park(&self, p: &Park<'_>) -> Result<Parked> {
        if p.lease_epoch < 1 {
            return Ok(Parked::LeaseLost);
        }
        match self.exec.batch(&gate_sql::park(self.d(), p)).await {
            Ok(out) => Ok(match won(&out, gate_sql::PARK_WRITE, None, "parked run")? {
                Some(row) => Parked::Parked {
                    seq: get_i64(row, "last_seq").map_err(corrupt)?,
                },
                None => Parked::LeaseLost,
            }),
            // The only key a park can collide on: the session's one pending gate (the checkpoint id
            // is a fresh digest, `(task_id, park_seq)` follows the advanced counter).
            Err(DbError::Duplicate { table }) if table == "gate_checkpoint" => {
                let session = self
                    .first(run_sql::select_run(self.d(), p.task_id))
                    .await?
                    .map(|r| get_str(&r, "session_id").map_err(corrupt))
                    .transpose()?;
                Ok(Parked::GatePending(match session {
                    Some(s) => self.pending_gate(&s).await?,
                    None => None,
                }))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn resolve_gate(&self, r: &Resolve<'_>) -> Result<Decided> {
        debug_assert!(r.path.decisions().contains(&r.decision));
        let d = self.d();
        let seen = self
            .first(gate_sql::latest_gate(d, r.scope))
            .await?
            .map(|row| seen_gate(&row))
            .transpose()?;
        if let Err(refusal) = gate::judge(r.path, seen.as_ref().map(|s| &s.seen), r.now) {
            return Ok(Decided::Refused(refusal));
        }
        let Some(seen) = seen else {
            return Ok(Decided::Refused(gate::Refusal::NothingPending));
        };
        let kind = seen.seen.kind.clone();
        let resumed_json;
        let end;
        let effect = match r.decision.ending() {
            None => {
                resumed_json = gate::resumed_event_data(&kind, r.decision, r.reason);
                gate_sql::Effect::Resume {
                    event_json: &resumed_json,
                }
            }
            Some(ending) => {
                end = gate::end_run(ending, &kind, r.decision, r.reason, &seen.card);
                gate_sql::Effect::End {
                    status: end.status,
                    result_json: end.result_json.as_deref(),
                    error: end.error,
                    error_code: end.error_code,
                    done_json: &end.done_json,
                }
            }
        };
        let write = gate_sql::ResolveWrite {
            checkpoint_id: &seen.checkpoint_id,
            task_id: &seen.seen.task_id,
            resolution_id: r.resolution_id,
            decision: r.decision.as_str(),
            reason: r.reason,
            effect,
            now: r.now,
        };
        let out = self.exec.batch(&gate_sql::resolve(d, &write)).await?;
        let Some(row) = won(
            &out,
            gate_sql::RESOLVE_CAS,
            Some(gate_sql::RESOLVE_READ),
            "resolved run",
        )?
        else {
            // Lost the compare-and-set: say why from a fresh read; a gate that still looks
            // resolvable was taken by a concurrent attempt a moment ago.
            let again = self
                .first(gate_sql::latest_gate(d, r.scope))
                .await?
                .map(|row| seen_gate(&row))
                .transpose()?;
            let refusal = gate::judge(r.path, again.as_ref().map(|s| &s.seen), r.now)
                .err()
                .unwrap_or(gate::Refusal::LostRace);
            return Ok(Decided::Refused(refusal));
        };
        let (session_id, task_id) = (seen.seen.session_id, seen.seen.task_id);
        Ok(match r.decision.ending() {
            None => Decided::Resumed {
                session_id,
                task_id,
                kind,
                lease_epoch: get_i64(row, "lease_epoch").map_err(corrupt)?,
                queue: get_str(row, "queue").map_err(corrupt)?,
            },
            Some(ending) => Decided::Ended {
                session_id,
                task_id,
                kind,
                status: ending.status,
                done_seq: get_i64(row, "last_seq").map_err(corrupt)?,
                queue: get_str(row, "queue").map_err(corrupt)?,
            },
        })
    }

    async fn pending_gate(&self, session_id: &str) -> Result<Option<PendingGate>> {
        self.first(gate_sql::pending_gate(self.d(), session_id))
            .await?
            .map(|r| pending_gate_row(&r))
            .transpose()
    }

    async fn list_pending_gates(
        &self,
        scope: &ListScope<'_>,
        session_id: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<PendingGate>> {
        let stmt = gate_sql::list_pending(self.d(), scope, session_id, cursor, limit);
        each_row(&self.exec.run(&stmt).await?.rows, pending_gate_row)
    }

    async fn request_cancel(&self, task_id: &str, owner: Option<&str>, now: i64) -> Result<bool> {
        let out = self
            .exec
            .batch(&run_sql::request_cancel(self.d(), task_id, owner, now))
            .await?;
        let flag = out.get(1).and_then(|o| o.rows.first());
        Ok(match flag {
            Some(row) => get_i64(row, "cancel_requested").map_err(corrupt)? != 0,
            None => false,
        })
    }

    async fn is_cancel_requested(&self, task_id: &str, owner: Option<&str>) -> Result<bool> {
        Ok(
            match self
                .first(run_sql::select_cancel_requested(self.d(), task_id, owner))
                .await?
            {
                Some(row) => get_i64(&row, "cancel_requested").map_err(corrupt)? != 0,
                None => false,
            },
        )
    }
}

impl<E: Executor> ReaperStore for SqlStore<E> {
    async fn reap_stale(&self, tick: &Tick<'_>, cutoffs: &StaleCutoffs) -> Result<ReapReport> {
        self.reaper(claim_sql::reap_stale(self.d(), tick, cutoffs))
            .await
    }

    async fn requeue_unacked_leases(
        &self,
        tick: &Tick<'_>,
        ack_cutoff: i64,
    ) -> Result<Vec<SessionTask>> {
        let out = self
            .exec
            .batch(&claim_sql::requeue_unacked_leases(
                self.d(),
                tick,
                ack_cutoff,
            ))
            .await?;
        pairs(&out, claim_sql::REQUEUE_READ)
    }

    async fn fail_parked_with_expired_checkpoint(&self, tick: &Tick<'_>) -> Result<ReapReport> {
        self.reaper(claim_sql::fail_parked_with_expired_checkpoint(
            self.d(),
            tick,
        ))
        .await
    }

    async fn reap_parked_older_than(&self, tick: &Tick<'_>, cutoff: i64) -> Result<ReapReport> {
        self.reaper(claim_sql::reap_parked_older_than(self.d(), tick, cutoff))
            .await
    }

    async fn sweep_claims(&self, tick: &str, window: &SweepWindow<'_>) -> Result<Swept> {
        let out = self
            .exec
            .batch(&claim_sql::sweep_claims(self.d(), tick, window))
            .await?;
        let next = out
            .get(claim_sql::SWEEP_CURSOR)
            .and_then(|o| o.rows.first())
            .map(|r| get_str(r, "session_id").map_err(corrupt))
            .transpose()?;
        Ok(Swept {
            report: ReapReport {
                reaped: vec![],
                terminal_claims_released: pairs(&out, claim_sql::SWEEP_TERMINAL_READ)?,
                orphan_claims_released: pairs(&out, claim_sql::SWEEP_ORPHAN_READ)?,
            },
            next,
        })
    }

    async fn delete_by_session(&self, session_id: &str) -> Result<u64> {
        let out = self
            .exec
            .batch(&run_sql::delete_by_session(self.d(), session_id))
            .await?;
        Ok(out.get(run_sql::DELETE_RUNS).map_or(0, |o| o.changes))
    }

    async fn record_tick(&self, t: &TickRecord<'_>, keep: i64) -> Result<()> {
        self.exec
            .batch(&claim_sql::record_tick(self.d(), t, keep))
            .await?;
        Ok(())
    }

    async fn recent_ticks(&self, limit: i64) -> Result<Vec<RecordedTick>> {
        let out = self
            .exec
            .run(&claim_sql::recent_ticks(self.d(), limit))
            .await?;
        read_rows(&out.rows, |c| RecordedTick {
            tick_id: c.str("tick_id"),
            started_at: c.i64("started_at"),
            finished_at: c.i64("finished_at"),
            report_json: c.str("report"),
        })
    }
}

impl<E: Executor> SqlStore<E> {
    /// Decides a leader admission batch: created, or (keyed duplicate) the winner observed.
    async fn leader_admission(
        &self,
        id: &str,
        idem_key: Option<&str>,
        out: std::result::Result<Vec<Outcome>, DbError>,
    ) -> Result<LeaderAdmission> {
        if let Err(e) = out {
            // Observe the winner only for a keyed duplicate; if the winner's row is gone (an external
            // DELETE), rethrow rather than insert again.
            if let (DbError::Duplicate { .. }, Some(key)) = (&e, idem_key) {
                if let Some(run) = self.get_leader_run_by_idem(key).await? {
                    return Ok(LeaderAdmission {
                        created: false,
                        run,
                    });
                }
            }
            return Err(e.into());
        }
        let run = self.get_leader_run(id).await?.ok_or_else(|| {
            corrupt(format!(
                "createRun: leader_run {id} vanished right after insert"
            ))
        })?;
        Ok(LeaderAdmission { created: true, run })
    }
}

/// The driver's view of a child row (with its run's status and error).
fn leader_child(row: &Row) -> Result<LeaderChild> {
    let index = get_i64(row, "idx").map_err(corrupt)?;
    let state = get_str(row, "state").map_err(corrupt)?;
    let run_status = get_opt_str(row, "run_status").map_err(corrupt)?;
    let state = match (state.as_str(), run_status.as_deref()) {
        ("not_started", _) => ChildState::NotStarted,
        ("started", Some("running")) => ChildState::Running,
        ("started", Some("suspended" | "needs_review")) => ChildState::Parked,
        ("started", Some(status)) => ChildState::Ended {
            status: status.to_owned(),
            error: get_opt_str(row, "run_error").map_err(corrupt)?,
        },
        // Its run was deleted (an operator's delete of the session): it ended, nobody knows how.
        ("started", None) => ChildState::Ended {
            status: "failed".to_owned(),
            error: Some("the child run no longer exists".to_owned()),
        },
        ("skipped", _) => {
            let report = get_opt_str(row, "skip_report").map_err(corrupt)?;
            ChildState::Skipped {
                report: ReportStatus::ALL
                    .into_iter()
                    .find(|r| Some(r.as_str()) == report.as_deref())
                    .ok_or_else(|| {
                        let report = report
                            .as_deref()
                            .map_or("null".into(), |r| Quoted(r).to_string());
                        corrupt(format!("leader_child skip_report {report}"))
                    })?,
            }
        }
        (other, _) => return Err(corrupt(format!("leader_child state {}", Quoted(other)))),
    };
    Ok(LeaderChild {
        index: usize::try_from(index).map_err(|_| corrupt(format!("leader_child idx {index}")))?,
        session_id: get_str(row, "session_id").map_err(corrupt)?,
        task_id: get_opt_str(row, "task_id").map_err(corrupt)?,
        objective: get_str(row, "objective").map_err(corrupt)?,
        meta_json: get_str(row, "meta").map_err(corrupt)?,
        state,
    })
}

/// The reads of [`LeaderDriveStore::leader_view`]'s batch.
const VIEW_RECORD: usize = 0;
const VIEW_PLAN: usize = 1;
const VIEW_CHILDREN: usize = 2;

/// A plan row: the driving settings and the request fingerprint.
fn plan_row(row: &Row) -> Result<(Drive, Option<String>)> {
    let max = get_i64(row, "max_concurrency").map_err(corrupt)?;
    let drive = Drive {
        max_concurrency: usize::try_from(max)
            .map_err(|_| corrupt(format!("leader_plan max_concurrency {max}")))?,
        deadline_at: get_opt_i64(row, "deadline_at").map_err(corrupt)?,
        cancel_requested: get_i64(row, "cancel_requested").map_err(corrupt)? != 0,
    };
    Ok((drive, get_opt_str(row, "fingerprint").map_err(corrupt)?))
}

impl<E: Executor> LeaderDriveStore for SqlStore<E> {
    async fn create_leader_with_plan(&self, new: &NewLeader<'_>) -> Result<LeaderAdmission> {
        let d = self.d();
        let preview = objective_preview(new.objective);
        let mut batch = vec![
            leader_sql::insert(d, new.id, new.idem_key, new.owner, &preview, new.now),
            leader_sql::insert_plan(
                d,
                new.id,
                new.max_concurrency,
                new.deadline_at,
                new.fingerprint,
                new.now,
            ),
        ];
        for (i, child) in new.children.iter().enumerate() {
            batch.push(leader_sql::insert_child(
                d,
                new.id,
                i as i64,
                &leader::child_session_id(new.id, i),
                child.objective,
                child.meta_json,
                new.now,
            ));
        }
        let out = self.exec.batch(&batch).await;
        self.leader_admission(new.id, new.idem_key, out).await
    }

    async fn leader_view(&self, id: &str) -> Result<Option<LeaderView>> {
        let d = self.d();
        let batch = [
            leader_sql::select_by_id(d, id),
            leader_sql::select_plan(d, id),
            leader_sql::select_children(d, id),
        ];
        let out = self.exec.batch(&batch).await?;
        let rows = |i: usize| out.get(i).map(|o| o.rows.as_slice()).unwrap_or_default();
        let Some(record) = rows(VIEW_RECORD).first() else {
            return Ok(None);
        };
        let record = LeaderRunRecord::from_row(record).map_err(corrupt)?;
        let (drive, fingerprint) = match rows(VIEW_PLAN).first() {
            Some(row) => {
                let (drive, fingerprint) = plan_row(row)?;
                (Some(drive), fingerprint)
            }
            None => (None, None),
        };
        let children = each_row(rows(VIEW_CHILDREN), leader_child)?;
        Ok(Some(LeaderView {
            record,
            drive,
            fingerprint,
            children,
        }))
    }

    async fn leader_drive(&self, id: &str) -> Result<Option<Drive>> {
        self.first(leader_sql::select_plan(self.d(), id))
            .await?
            .map(|row| plan_row(&row).map(|(drive, _)| drive))
            .transpose()
    }

    async fn leader_children(&self, id: &str) -> Result<Vec<LeaderChild>> {
        each_row(
            &self
                .exec
                .run(&leader_sql::select_children(self.d(), id))
                .await?
                .rows,
            leader_child,
        )
    }

    async fn start_child(&self, id: &str, idx: usize, run: &NewRun<'_>) -> Result<StartChild> {
        let batch = leader_sql::start_child(self.d(), id, idx as i64, run);
        let out = self.exec.batch(&batch).await;
        if let Ok(out) = &out {
            if out
                .get(leader_sql::START_CAS)
                .is_none_or(|o| o.changes != 1)
            {
                return Ok(StartChild::Lost);
            }
        }
        // A failed batch wrote nothing. A committed one whose CAS won admitted the run: the CAS
        // requires the child's session to be absent or the owner's, which is all the admission's
        // conditions ask of a fresh task id in a session only this child ever uses.
        match self.admission(run, out, leader_sql::START_ADMIT).await? {
            CreateRun::Created => Ok(StartChild::Started),
            refused => Ok(StartChild::Refused(Box::new(refused))),
        }
    }

    async fn skip_child(&self, id: &str, idx: usize, report: ReportStatus) -> Result<bool> {
        let stmt = leader_sql::skip_child(self.d(), id, idx as i64, report.as_str());
        Ok(self.exec.run(&stmt).await?.changes == 1)
    }

    async fn skip_unstarted(&self, id: &str, report: ReportStatus) -> Result<u64> {
        let stmt = leader_sql::skip_unstarted(self.d(), id, report.as_str());
        Ok(self.exec.run(&stmt).await?.changes)
    }

    async fn request_leader_cancel(&self, id: &str) -> Result<bool> {
        let stmt = leader_sql::request_cancel(self.d(), id);
        Ok(self.exec.run(&stmt).await?.changes == 1)
    }
}

impl<E: Executor> LeaderRunStore for SqlStore<E> {
    async fn create_leader_run(
        &self,
        id: &str,
        objective: &str,
        owner: Option<&str>,
        idem_key: Option<&str>,
        now: i64,
    ) -> Result<LeaderAdmission> {
        let preview = objective_preview(objective);
        let insert = leader_sql::insert(self.d(), id, idem_key, owner, &preview, now);
        let out = self.exec.run(&insert).await.map(|o| vec![o]);
        self.leader_admission(id, idem_key, out).await
    }

    async fn get_leader_run(&self, id: &str) -> Result<Option<LeaderRunRecord>> {
        self.first(leader_sql::select_by_id(self.d(), id))
            .await?
            .map(|r| LeaderRunRecord::from_row(&r).map_err(corrupt))
            .transpose()
    }

    async fn get_leader_run_by_idem(&self, idem_key: &str) -> Result<Option<LeaderRunRecord>> {
        self.first(leader_sql::select_by_idem(self.d(), idem_key))
            .await?
            .map(|r| LeaderRunRecord::from_row(&r).map_err(corrupt))
            .transpose()
    }

    async fn list_leader_runs(
        &self,
        scope: &ListScope<'_>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<LeaderRunRecord>> {
        let stmt = leader_sql::list(self.d(), scope, status, cursor, limit);
        each_row(&self.exec.run(&stmt).await?.rows, |r| {
            LeaderRunRecord::from_row(r).map_err(corrupt)
        })
    }

    async fn running_leader_ids(&self, after: &str, limit: i64) -> Result<Vec<String>> {
        each_row(
            &self
                .exec
                .run(&leader_sql::running_ids(self.d(), after, limit))
                .await?
                .rows,
            |r| get_str(r, "leader_run_id").map_err(corrupt),
        )
    }

    async fn finish_leader_run(
        &self,
        id: &str,
        status: LeaderFinish,
        result_json: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let stmt = leader_sql::finish(self.d(), id, status, result_json, error, now);
        Ok(self.exec.run(&stmt).await?.changes > 0)
    }

    async fn reap_stale_leader_runs(
        &self,
        tick: &str,
        stale_ms: i64,
        now: i64,
    ) -> Result<Vec<String>> {
        let batch = leader_sql::reap_stale_running(
            self.d(),
            tick,
            leader::STALE_SWEEP_REASON,
            now,
            stale_ms,
        );
        let out = self.exec.batch(&batch).await?;
        let rows = out
            .get(leader_sql::REAP_READ)
            .map(|o| o.rows.as_slice())
            .unwrap_or_default();
        let mut ids = each_row(rows, |r| get_str(r, "leader_run_id").map_err(corrupt))?;
        ids.sort();
        Ok(ids)
    }

    async fn backdate_leader_run_for_test(&self, id: &str, started_at_ms: i64) -> Result<()> {
        self.exec
            .run(&leader_sql::backdate_started_at(
                self.d(),
                id,
                started_at_ms,
            ))
            .await?;
        Ok(())
    }
}

/// Sessions as a whole: their faces (row, active run, pending gate), their deletion, and the
/// retention purge of old terminal runs.
#[allow(async_fn_in_trait)]
pub trait SessionStore {
    /// A page of session faces visible in `scope`, most recently admitted into first, strictly after
    /// `cursor` (`(updated_at, session_id)`); gate cards cut to previews.
    async fn list_session_views(
        &self,
        scope: &ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionView>>;
    /// One session's face, its pending gate's card whole.
    async fn session_view(&self, session_id: &str) -> Result<Option<SessionView>>;
    /// Deletes the session whole (runs, events, steer messages, idempotency bindings, gates, a dead
    /// claim, the row) in one transaction, unless a run of it is running or parked, it is a child of
    /// a running leader run, or it is gone or no longer `d.owner`'s; then nothing is deleted and the
    /// outcome says why (see [`crate::sql::session_sql`]).
    async fn delete_session(&self, d: &SessionDelete<'_>) -> Result<SessionDeleted>;
    /// One retention page: deletes at most `limit` terminal runs last written before `before` that
    /// hold no claim and are no child of a running leader run, with their events, steer messages,
    /// idempotency bindings and gates (one read, then one batch).
    async fn purge_terminal_runs(&self, before: i64, limit: i64) -> Result<Purged>;
}

fn session_view_row(row: &Row) -> Result<SessionView> {
    read_row(row, |c| {
        let active = c
            .opt_str("active_task_id")
            .map(|task_id| crate::sessions::ActiveRun {
                task_id,
                status: c.str("active_status"),
                heartbeat_at: c.i64("active_heartbeat_at"),
                updated_at: c.i64("active_updated_at"),
            });
        let gate = c
            .opt_str("gate_task_id")
            .map(|task_id| crate::sessions::ViewGate {
                task_id,
                kind: c.str("gate_kind"),
                card: c.str("gate_card"),
                expires_at: c.opt_i64("gate_expires_at"),
                created_at: c.i64("gate_created_at"),
            });
        SessionView {
            session_id: c.str("session_id"),
            owner: c.opt_str("owner"),
            created_at: c.i64("created_at"),
            updated_at: c.i64("updated_at"),
            active,
            last_run_updated_at: c.opt_i64("last_run_updated_at"),
            gate,
        }
    })
}

impl<E: Executor> SessionStore for SqlStore<E> {
    async fn list_session_views(
        &self,
        scope: &ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionView>> {
        let out = self
            .exec
            .run(&session_sql::list_views(self.d(), scope, cursor, limit))
            .await?;
        each_row(&out.rows, session_view_row)
    }

    async fn session_view(&self, session_id: &str) -> Result<Option<SessionView>> {
        self.first(session_sql::select_view(self.d(), session_id))
            .await?
            .map(|r| session_view_row(&r))
            .transpose()
    }

    async fn delete_session(&self, d: &SessionDelete<'_>) -> Result<SessionDeleted> {
        let out = match self
            .exec
            .batch(&session_sql::delete_session(self.d(), d))
            .await
        {
            Ok(out) => out,
            // The marker met a claim: a run holds the session (a dead claim was released first).
            Err(DbError::Duplicate { table }) if table == "task_active" => {
                return Ok(match self.claim_holder(d.session_id).await? {
                    Some(ClaimHolder {
                        task_id,
                        status: Some(status),
                        ..
                    }) => SessionDeleted::Active { task_id, status },
                    // Released meanwhile (PostgreSQL / MySQL): the caller may try again.
                    Some(ClaimHolder { task_id, .. }) => SessionDeleted::Active {
                        task_id,
                        status: crate::status::RUNNING.to_owned(),
                    },
                    None => SessionDeleted::Active {
                        task_id: String::new(),
                        status: crate::status::RUNNING.to_owned(),
                    },
                });
            }
            Err(e) => return Err(e.into()),
        };
        if out
            .get(session_sql::DELETE_UNMARK)
            .is_some_and(|o| o.changes == 1)
        {
            return Ok(SessionDeleted::Deleted {
                runs: out.get(session_sql::DELETE_RUNS).map_or(0, |o| o.changes),
            });
        }
        let first = |i: usize| out.get(i).and_then(|o| o.rows.first());
        if let Some(row) = first(session_sql::DELETE_BLOCKER) {
            return Ok(SessionDeleted::Active {
                task_id: get_str(row, "task_id").map_err(corrupt)?,
                status: get_str(row, "status").map_err(corrupt)?,
            });
        }
        if let Some(row) = first(session_sql::DELETE_LEADER) {
            return Ok(SessionDeleted::LeaderRunning {
                leader_run_id: get_str(row, "leader_run_id").map_err(corrupt)?,
            });
        }
        Ok(SessionDeleted::Missing)
    }

    async fn purge_terminal_runs(&self, before: i64, limit: i64) -> Result<Purged> {
        let candidates = self
            .exec
            .run(&session_sql::purge_candidates(self.d(), before, limit))
            .await?;
        let candidates = each_row(&candidates.rows, |r| {
            Ok((
                get_str(r, "task_id").map_err(corrupt)?,
                get_i64(r, "last_seq").map_err(corrupt)?,
            ))
        })?;
        let ids =
            crate::sessions::retention_page(candidates, crate::sessions::RETENTION_EVENTS_PER_TICK);
        if ids.is_empty() {
            return Ok(Purged::default());
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let out = self
            .exec
            .batch(&session_sql::purge_runs(self.d(), &ids, before))
            .await?;
        Ok(Purged {
            runs: out.get(session_sql::PURGE_RUNS).map_or(0, |o| o.changes),
            events: out.get(session_sql::PURGE_EVENTS).map_or(0, |o| o.changes),
        })
    }
}
