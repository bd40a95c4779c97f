//! The store contract: every run-store and leader-run operation, once, over any SQL executor.
//!
//! [`Executor`] is what a platform provides: a dialect and an atomic `batch`. D1 implements it in the
//! Worker; SQLite, PostgreSQL and MySQL implement it in the native tests. [`SqlStore`] plans the
//! statements for the executor's dialect and decides from rows and change counts, so the SQL the
//! Worker runs on D1 is exactly the SQL the tests run on SQLite.

use crate::{
    idempotency::IdempotencyBinding,
    leader::{self, LeaderRunRecord},
    run::RunRow,
    sql::{
        claim_sql, event_sql, get_i64, get_opt_str, get_str, leader_sql, run_sql, runner_sql,
        DbError, Dialect, Outcome, Row, Stmt,
    },
    wire::objective_preview,
};

/// A SQL connection (or D1 binding) in one dialect.
#[allow(async_fn_in_trait)]
pub trait Executor {
    fn dialect(&self) -> Dialect;

    /// Runs `stmts` as one transaction: all of them commit, or none does and the first failure is
    /// returned. One [`Outcome`] per statement.
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

/// The holder of a session's claim as the database sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimHolder {
    pub task_id: String,
    /// `None`: the claim has no run row.
    pub status: Option<String>,
    pub owner: Option<String>,
    pub session_owner: Option<String>,
}

/// The outcome of [`RunStore::create_run`].
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

/// The outcome of [`RunStore::cancel`].
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

/// The outcome of [`RunStore::append_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    /// The seqs assigned, in order.
    Seqs(Vec<i64>),
    /// The lease epoch no longer matches (or the run is not running): nothing was written.
    LeaseLost,
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
}

/// What a heartbeat returns to the lease holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    pub cancel_requested: bool,
    /// Steer messages delivered by this heartbeat, `(seq, message)` in order; each is delivered once.
    pub steer: Vec<(i64, String)>,
}

/// A session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub session_id: String,
    pub owner: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What one reaper tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReapReport {
    pub reaped: u64,
    pub terminal_claims_released: u64,
    pub orphan_claims_released: u64,
}

/// Admission of a leader run: `created` is true for exactly one caller per idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderAdmission {
    pub created: bool,
    pub run: LeaderRunRecord,
}

/// The run store (SPEC-core §1.4, §3).
#[allow(async_fn_in_trait)]
pub trait RunStore {
    /// Creates the run row, the session's claim and the key binding as one unit (win or observe).
    async fn create_run(&self, new: &run_sql::NewRun<'_>) -> Result<CreateRun>;
    async fn get_run(&self, task_id: &str) -> Result<Option<RunRow>>;
    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRow>>;
    async fn claim_holder(&self, session_id: &str) -> Result<Option<ClaimHolder>>;
    /// The session whose claim names `task_id`, with the session's owner.
    async fn claim_by_task(&self, task_id: &str) -> Result<Option<(String, Option<String>)>>;
    async fn idempotency(&self, scoped_key: &str) -> Result<Option<IdempotencyBinding>>;
    /// Write-once terminal write; releases only this task's claim. True when this call wrote it.
    async fn set_terminal(
        &self,
        task_id: &str,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        error_code: Option<&str>,
        now: i64,
    ) -> Result<bool>;
    /// The user's cancel (see [`run_sql::cancel`]).
    async fn cancel(&self, task_id: &str, now: i64) -> Result<Cancelled>;
    /// Sets the cancel flag; false for a missing run or an owner mismatch (no existence oracle).
    async fn request_cancel(&self, task_id: &str, owner: Option<&str>, now: i64) -> Result<bool>;
    async fn is_cancel_requested(&self, task_id: &str, owner: Option<&str>) -> Result<bool>;
    /// Compare-and-set parked → running; the new lease epoch, or `None` if it was not parked.
    async fn mark_resuming(&self, task_id: &str, now: i64) -> Result<Option<i64>>;
    /// Parks a running run (`suspended` / `needs_review`). True when it was running.
    async fn park(&self, task_id: &str, status: &str, now: i64) -> Result<bool>;
    #[allow(clippy::too_many_arguments)]
    async fn add_checkpoint(
        &self,
        checkpoint_id: &str,
        session_id: &str,
        task_id: &str,
        owner: Option<&str>,
        gate_kind: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<()>;
    async fn append_events(
        &self,
        task_id: &str,
        lease_epoch: i64,
        events: &[event_sql::NewEvent<'_>],
        now: i64,
    ) -> Result<Appended>;
    async fn events_after(&self, task_id: &str, after: i64, limit: i64) -> Result<Vec<EventRow>>;
    async fn list_runs(
        &self,
        scope: &run_sql::ListScope<'_>,
        session_id: Option<&str>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<RunRow>>;
    async fn list_sessions(
        &self,
        scope: &run_sql::ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionRow>>;
    /// Deletes a session's runs, events, checkpoints, steer messages, claim and row together.
    /// Returns the number of runs deleted.
    async fn delete_by_session(&self, session_id: &str) -> Result<u64>;
    /// Releases claims of terminal runs and claims without a run row: `(terminal, orphan)`.
    async fn sweep_claims(&self) -> Result<(u64, u64)>;
    /// Releases `task_id`'s claim if its run is terminal or missing.
    async fn release_claim_of(&self, task_id: &str) -> Result<bool>;
    async fn reap_stale(&self, cutoff: i64, now: i64, limit: i64) -> Result<ReapReport>;
    async fn fail_parked_with_expired_checkpoint(&self, now: i64, limit: i64)
        -> Result<ReapReport>;
    async fn reap_parked_older_than(&self, cutoff: i64, now: i64, limit: i64)
        -> Result<ReapReport>;
    /// Leases the oldest unheld running run to `runner_id` (compare-and-set: two runners never win
    /// the same lease), trying at most `candidates` runs.
    async fn lease(&self, runner_id: &str, now: i64, candidates: i64) -> Result<Option<Lease>>;
    /// Refreshes liveness under the fence; `None` = lease lost (nothing written).
    async fn heartbeat(
        &self,
        task_id: &str,
        lease_epoch: i64,
        delivery_id: &str,
        now: i64,
    ) -> Result<Option<Beat>>;
    /// The runner's terminal write with its `done` event; the done event's seq, or `None` = lease lost.
    #[allow(clippy::too_many_arguments)]
    async fn finish_run(
        &self,
        task_id: &str,
        lease_epoch: i64,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        error_code: Option<&str>,
        done_json: &str,
        now: i64,
    ) -> Result<Option<i64>>;
    /// Queues a steer message; its seq, or `None` when the run is not running.
    async fn add_steer(&self, task_id: &str, message: &str, now: i64) -> Result<Option<i64>>;
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
    /// Terminal write only from `running`; false when it was already terminal (the caller reports it).
    async fn finish_leader_run(
        &self,
        id: &str,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> Result<bool>;
    /// Fails running leader runs started before `now - stale_ms` with [`leader::STALE_SWEEP_REASON`].
    async fn reap_stale_leader_runs(&self, stale_ms: i64, now: i64) -> Result<u64>;
    /// Test aid only.
    async fn backdate_leader_run_for_test(&self, id: &str, started_at_ms: i64) -> Result<()>;
}

/// The one implementation of both contracts, over any executor.
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

    async fn reaper(&self, batch: Vec<Stmt>) -> Result<ReapReport> {
        let out = self.exec.batch(&batch).await?;
        let changes = |i: usize| out.get(i).map_or(0, |o| o.changes);
        Ok(ReapReport {
            reaped: changes(claim_sql::REAP_ROWS),
            terminal_claims_released: changes(1),
            orphan_claims_released: changes(2),
        })
    }
}

fn claim_holder(row: &Row) -> Result<ClaimHolder> {
    Ok(ClaimHolder {
        task_id: get_str(row, "task_id").map_err(corrupt)?,
        status: get_opt_str(row, "status").map_err(corrupt)?,
        owner: get_opt_str(row, "owner").map_err(corrupt)?,
        session_owner: get_opt_str(row, "session_owner").map_err(corrupt)?,
    })
}

fn session_row(row: &Row) -> Result<SessionRow> {
    Ok(SessionRow {
        session_id: get_str(row, "session_id").map_err(corrupt)?,
        owner: get_opt_str(row, "owner").map_err(corrupt)?,
        created_at: get_i64(row, "created_at").map_err(corrupt)?,
        updated_at: get_i64(row, "updated_at").map_err(corrupt)?,
    })
}

fn binding(scoped_key: &str, row: &Row) -> Result<IdempotencyBinding> {
    Ok(IdempotencyBinding {
        scoped_key: scoped_key.to_owned(),
        fingerprint: get_str(row, "fingerprint").map_err(corrupt)?,
        task_id: get_str(row, "task_id").map_err(corrupt)?,
        response_status: get_i64(row, "response_status").map_err(corrupt)? as u16,
        response_body: get_str(row, "response_body").map_err(corrupt)?,
    })
}

impl<E: Executor> RunStore for SqlStore<E> {
    async fn create_run(&self, new: &run_sql::NewRun<'_>) -> Result<CreateRun> {
        match self.exec.batch(&run_sql::admit(self.d(), new)).await {
            Ok(out) => {
                if out
                    .get(run_sql::ADMIT_RUN_INSERT)
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

    async fn get_run(&self, task_id: &str) -> Result<Option<RunRow>> {
        self.first(run_sql::select_run(self.d(), task_id))
            .await?
            .map(|r| RunRow::from_row(&r).map_err(corrupt))
            .transpose()
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

    async fn set_terminal(
        &self,
        task_id: &str,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        error_code: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let batch = run_sql::set_terminal(
            self.d(),
            task_id,
            status,
            result_json,
            error,
            error_code,
            now,
        );
        let out = self.exec.batch(&batch).await?;
        Ok(out.first().is_some_and(|o| o.changes == 1))
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

    async fn mark_resuming(&self, task_id: &str, now: i64) -> Result<Option<i64>> {
        let out = self
            .exec
            .batch(&run_sql::mark_resuming(self.d(), task_id, now))
            .await?;
        if out.first().is_none_or(|o| o.changes != 1) {
            return Ok(None);
        }
        let row = out
            .get(1)
            .and_then(|o| o.rows.first())
            .ok_or_else(|| corrupt("resumed run vanished".into()))?;
        Ok(Some(get_i64(row, "lease_epoch").map_err(corrupt)?))
    }

    async fn park(&self, task_id: &str, status: &str, now: i64) -> Result<bool> {
        if !crate::status::is_parked(status) {
            return Err(corrupt(format!("{status:?} is not a park status")));
        }
        Ok(self
            .exec
            .run(&run_sql::park(self.d(), task_id, status, now))
            .await?
            .changes
            == 1)
    }

    async fn add_checkpoint(
        &self,
        checkpoint_id: &str,
        session_id: &str,
        task_id: &str,
        owner: Option<&str>,
        gate_kind: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<()> {
        let stmt = claim_sql::insert_checkpoint(
            self.d(),
            checkpoint_id,
            session_id,
            task_id,
            owner,
            gate_kind,
            expires_at,
            now,
        );
        self.exec.run(&stmt).await?;
        Ok(())
    }

    async fn append_events(
        &self,
        task_id: &str,
        lease_epoch: i64,
        events: &[event_sql::NewEvent<'_>],
        now: i64,
    ) -> Result<Appended> {
        if events.is_empty() {
            return Ok(Appended::Seqs(Vec::new()));
        }
        let batch = event_sql::append(self.d(), task_id, lease_epoch, events, now);
        let out = self.exec.batch(&batch).await?;
        if out
            .get(event_sql::APPEND_FENCE)
            .is_none_or(|o| o.changes != 1)
        {
            return Ok(Appended::LeaseLost);
        }
        let last = out
            .last()
            .and_then(|o| o.rows.first())
            .ok_or_else(|| corrupt("appended run vanished".into()))?;
        let last = get_i64(last, "last_seq").map_err(corrupt)?;
        let n = events.len() as i64;
        Ok(Appended::Seqs((last - n + 1..=last).collect()))
    }

    async fn events_after(&self, task_id: &str, after: i64, limit: i64) -> Result<Vec<EventRow>> {
        let out = self
            .exec
            .run(&event_sql::events_after(self.d(), task_id, after, limit))
            .await?;
        out.rows
            .iter()
            .map(|r| {
                Ok(EventRow {
                    seq: get_i64(r, "seq").map_err(corrupt)?,
                    kind: get_str(r, "type").map_err(corrupt)?,
                    data: get_str(r, "data").map_err(corrupt)?,
                    event_id: get_opt_str(r, "event_id").map_err(corrupt)?,
                    created_at: get_i64(r, "created_at").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn list_runs(
        &self,
        scope: &run_sql::ListScope<'_>,
        session_id: Option<&str>,
        status: Option<&str>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<RunRow>> {
        let stmt = run_sql::list_runs(self.d(), scope, session_id, status, cursor, limit);
        let out = self.exec.run(&stmt).await?;
        out.rows
            .iter()
            .map(|r| RunRow::from_row(r).map_err(corrupt))
            .collect()
    }

    async fn list_sessions(
        &self,
        scope: &run_sql::ListScope<'_>,
        cursor: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<SessionRow>> {
        let out = self
            .exec
            .run(&run_sql::list_sessions(self.d(), scope, cursor, limit))
            .await?;
        out.rows.iter().map(session_row).collect()
    }

    async fn delete_by_session(&self, session_id: &str) -> Result<u64> {
        let out = self
            .exec
            .batch(&run_sql::delete_by_session(self.d(), session_id))
            .await?;
        Ok(out.get(run_sql::DELETE_RUNS).map_or(0, |o| o.changes))
    }

    async fn sweep_claims(&self) -> Result<(u64, u64)> {
        let d = self.d();
        let out = self
            .exec
            .batch(&[
                claim_sql::release_terminal_claims(d),
                claim_sql::release_orphan_claims(d),
            ])
            .await?;
        Ok((out[0].changes, out[1].changes))
    }

    async fn release_claim_of(&self, task_id: &str) -> Result<bool> {
        Ok(self
            .exec
            .run(&run_sql::release_claim_of(self.d(), task_id))
            .await?
            .changes
            > 0)
    }

    async fn reap_stale(&self, cutoff: i64, now: i64, limit: i64) -> Result<ReapReport> {
        self.reaper(claim_sql::reap_stale(self.d(), cutoff, now, limit))
            .await
    }

    async fn fail_parked_with_expired_checkpoint(
        &self,
        now: i64,
        limit: i64,
    ) -> Result<ReapReport> {
        self.reaper(claim_sql::fail_parked_with_expired_checkpoint(
            self.d(),
            now,
            limit,
        ))
        .await
    }

    async fn reap_parked_older_than(
        &self,
        cutoff: i64,
        now: i64,
        limit: i64,
    ) -> Result<ReapReport> {
        self.reaper(claim_sql::reap_parked_older_than(
            self.d(),
            cutoff,
            now,
            limit,
        ))
        .await
    }

    async fn lease(&self, runner_id: &str, now: i64, candidates: i64) -> Result<Option<Lease>> {
        let d = self.d();
        let rows = self
            .exec
            .run(&runner_sql::lease_candidates(d, candidates))
            .await?
            .rows;
        for row in rows {
            let task_id = get_str(&row, "task_id").map_err(corrupt)?;
            let out = self
                .exec
                .batch(&runner_sql::try_lease(d, &task_id, runner_id, now))
                .await?;
            if out
                .get(runner_sql::LEASE_CAS)
                .is_none_or(|o| o.changes != 1)
            {
                continue; // another runner won this one
            }
            let r = out
                .get(1)
                .and_then(|o| o.rows.first())
                .ok_or_else(|| corrupt("leased run vanished".into()))?;
            return Ok(Some(Lease {
                task_id: get_str(r, "task_id").map_err(corrupt)?,
                session_id: get_str(r, "session_id").map_err(corrupt)?,
                lease_epoch: get_i64(r, "lease_epoch").map_err(corrupt)?,
                objective: get_str(r, "objective").map_err(corrupt)?,
                meta: get_str(r, "meta").map_err(corrupt)?,
                last_seq: get_i64(r, "last_seq").map_err(corrupt)?,
            }));
        }
        Ok(None)
    }

    async fn heartbeat(
        &self,
        task_id: &str,
        lease_epoch: i64,
        delivery_id: &str,
        now: i64,
    ) -> Result<Option<Beat>> {
        let batch = runner_sql::heartbeat(self.d(), task_id, lease_epoch, delivery_id, now);
        let out = self.exec.batch(&batch).await?;
        if out
            .get(runner_sql::HEARTBEAT_FENCE)
            .is_none_or(|o| o.changes != 1)
        {
            return Ok(None);
        }
        let cancel_requested = match out.get(2).and_then(|o| o.rows.first()) {
            Some(r) => get_i64(r, "cancel_requested").map_err(corrupt)? != 0,
            None => false,
        };
        let mut steer = vec![];
        for r in out.get(3).map(|o| o.rows.as_slice()).unwrap_or_default() {
            steer.push((
                get_i64(r, "seq").map_err(corrupt)?,
                get_str(r, "message").map_err(corrupt)?,
            ));
        }
        Ok(Some(Beat {
            cancel_requested,
            steer,
        }))
    }

    async fn finish_run(
        &self,
        task_id: &str,
        lease_epoch: i64,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        error_code: Option<&str>,
        done_json: &str,
        now: i64,
    ) -> Result<Option<i64>> {
        if crate::status::is_active(status) {
            return Err(corrupt(format!("{status:?} is not a terminal status")));
        }
        let batch = runner_sql::finish(
            self.d(),
            task_id,
            lease_epoch,
            status,
            result_json,
            error,
            error_code,
            done_json,
            now,
        );
        let out = self.exec.batch(&batch).await?;
        if out
            .get(runner_sql::FINISH_WRITE)
            .is_none_or(|o| o.changes != 1)
        {
            return Ok(None);
        }
        let row = out
            .last()
            .and_then(|o| o.rows.first())
            .ok_or_else(|| corrupt("finished run vanished".into()))?;
        Ok(Some(get_i64(row, "last_seq").map_err(corrupt)?))
    }

    async fn add_steer(&self, task_id: &str, message: &str, now: i64) -> Result<Option<i64>> {
        let out = self
            .exec
            .batch(&runner_sql::add_steer(self.d(), task_id, message, now))
            .await?;
        if out.first().is_none_or(|o| o.changes != 1) {
            return Ok(None);
        }
        let row = out
            .get(1)
            .and_then(|o| o.rows.first())
            .ok_or_else(|| corrupt("steer message vanished".into()))?;
        Ok(Some(get_i64(row, "seq").map_err(corrupt)?))
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
        if let Err(e) = self.exec.run(&insert).await {
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

    async fn finish_leader_run(
        &self,
        id: &str,
        status: &str,
        result_json: Option<&str>,
        error: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        if !leader::is_finish_status(status) {
            return Err(corrupt(format!(
                "{status:?} is not a leader terminal status"
            )));
        }
        let stmt = leader_sql::finish(self.d(), id, status, result_json, error, now);
        Ok(self.exec.run(&stmt).await?.changes > 0)
    }

    async fn reap_stale_leader_runs(&self, stale_ms: i64, now: i64) -> Result<u64> {
        let stmt =
            leader_sql::reap_stale_running(self.d(), leader::STALE_SWEEP_REASON, now, stale_ms);
        Ok(self.exec.run(&stmt).await?.changes)
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
