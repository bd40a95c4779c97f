//! Statements over `session`, `task_run`, `task_active` and `idempotency_key`, in three dialects.
//!
//! Multi-statement invariants are planned as one batch, which every executor runs as one
//! transaction (D1: `batch()`; PostgreSQL / MySQL: BEGIN … COMMIT on one connection): the run row,
//! its claim and its idempotency binding commit together or not at all.

use super::{Dialect, SqlValue, Stmt};
use crate::{
    run::RunSnapshot,
    status::{TerminalStatus, CANCELLED_BY_USER},
};

/// Columns of a run as read by [`crate::run::RunRow::from_row`] (PostgreSQL renders JSONB as text).
macro_rules! run_cols {
    (sqlite) => {
        "task_id, session_id, owner, instance_id, status, objective_preview, result, error, error_code, held_by, lease_epoch, lease_acked, cancel_requested, heartbeat_at, last_seq, created_at, updated_at, queue"
    };
    (postgres) => {
        "task_id, session_id, owner, instance_id, status, objective_preview, result::text AS result, error, error_code, held_by, lease_epoch, lease_acked, cancel_requested, heartbeat_at, last_seq, created_at, updated_at, queue"
    };
    (mysql) => {
        "task_id, session_id, owner, instance_id, status, objective_preview, CAST(result AS CHAR) AS result, error, error_code, held_by, lease_epoch, lease_acked, cancel_requested, heartbeat_at, last_seq, created_at, updated_at, queue"
    };
}

/// Everything an admission writes.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun<'a> {
    pub task_id: &'a str,
    pub session_id: &'a str,
    pub owner: Option<&'a str>,
    pub instance_id: &'a str,
    pub objective: &'a str,
    pub objective_preview: &'a str,
    pub meta_json: &'a str,
    /// The named task queue the run is leased from (a safe id; [`crate::queue::DEFAULT_QUEUE`] when
    /// the submit named none).
    pub queue: &'a str,
    /// Admission time: `created_at`, `heartbeat_at` and `updated_at` (the run is leasable from now).
    pub now: i64,
    /// `(scoped_key, fingerprint, response_status, response_body)` when the submit carried a key.
    pub idempotency: Option<(&'a str, &'a str, i64, &'a str)>,
}

/// Index of the `task_run` insert in [`admit`]'s batch; it changes 0 rows when the session belongs
/// to another principal (and then nothing else is written either).
pub const ADMIT_RUN_INSERT: usize = 1;

/// Admission as one batch: upsert the session (owner fixed at creation), insert the run row, the claim
/// and the idempotency binding, each conditional on the session being the submitter's.
/// A held claim fails the batch on `task_active`; a taken task id on `task_run`; a key bound
/// concurrently on `idempotency_key`.
pub fn admit(d: Dialect, r: &NewRun<'_>) -> Vec<Stmt> {
    admit_guarded(d, r, None)
}

/// An extra condition on an admission: every statement of [`admit_guarded`]'s batch also requires
/// that a row of `table` names the new run in its `task_id` column. A batch that first writes that
/// row with a compare-and-set (and the new, never used task id) thus admits exactly when the CAS won:
/// a loser's admission writes nothing, not even the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskGuard {
    pub table: &'static str,
}

impl TaskGuard {
    /// The condition, its task id bound at `?{at}` (`$at` for PostgreSQL).
    fn fragment(&self, d: Dialect, at: usize) -> String {
        let mark = if d.built() == Dialect::Postgres {
            '$'
        } else {
            '?'
        };
        format!(
            " AND EXISTS (SELECT 1 FROM {} WHERE task_id = {mark}{at})",
            self.table
        )
    }

    /// `text` (this dialect's) with the condition appended, their task id bound at `?{at}`.
    fn append(&self, d: Dialect, text: &str, at: usize, params: Vec<SqlValue>) -> Stmt {
        Stmt::composed(d, |d| format!("{text}{}", self.fragment(d, at)), params)
    }
}

/// [`admit`], optionally under a [`TaskGuard`]: the same statements, in the same order (so
/// [`ADMIT_RUN_INSERT`] holds), the session upsert then written as an `INSERT … SELECT` so that it,
/// too, is conditional.
pub fn admit_guarded(d: Dialect, r: &NewRun<'_>, guard: Option<TaskGuard>) -> Vec<Stmt> {
    let owner = SqlValue::from(r.owner);
    // A statement under the guard (when there is one), its task id bound at `?{at}`.
    let stmt = |text: &'static str, at: usize, params: Vec<SqlValue>| match guard {
        None => Stmt::chosen(d, text, params),
        Some(g) => g.append(d, text, at, params),
    };
    let session = match guard {
        None => Stmt::pick(
            d,
            "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
             ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at \
             WHERE session.owner IS excluded.owner",
            "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (session_id) DO UPDATE SET updated_at = EXCLUDED.updated_at \
             WHERE session.owner IS NOT DISTINCT FROM EXCLUDED.owner",
            "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
             ON DUPLICATE KEY UPDATE updated_at = IF(owner <=> VALUES(owner), VALUES(updated_at), updated_at)",
            vec![r.session_id.into(), owner.clone(), r.now.into()],
        ),
        Some(g) => Stmt::composed(
            d,
            |d| {
                // The upsert's head and tail, the guard between them.
                let [head, tail] = d.of([
                    [
                        "INSERT INTO session (session_id, owner, created_at, updated_at) \
                         SELECT ?1, ?2, ?3, ?3 WHERE 1 = 1",
                        " ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at \
                         WHERE session.owner IS excluded.owner",
                    ],
                    [
                        "INSERT INTO session (session_id, owner, created_at, updated_at) \
                         SELECT $1::varchar, $2::varchar, $3::bigint, $3::bigint WHERE 1 = 1",
                        " ON CONFLICT (session_id) DO UPDATE SET updated_at = EXCLUDED.updated_at \
                         WHERE session.owner IS NOT DISTINCT FROM EXCLUDED.owner",
                    ],
                    [
                        "INSERT INTO session (session_id, owner, created_at, updated_at) \
                         SELECT ?1, ?2, ?3, ?3 FROM DUAL WHERE 1 = 1",
                        " ON DUPLICATE KEY UPDATE updated_at = \
                         IF(owner <=> VALUES(owner), VALUES(updated_at), updated_at)",
                    ],
                ]);
                format!("{head}{}{tail}", g.fragment(d, 4))
            },
            vec![
                r.session_id.into(),
                owner.clone(),
                r.now.into(),
                r.task_id.into(),
            ],
        ),
    };
    let mut batch = vec![
        session,
        stmt(
            d.of(["INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, \
             objective_preview, meta, heartbeat_at, created_at, updated_at, queue) \
             SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8, ?8, ?9 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?2 AND owner IS ?3)",
            "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, \
             objective_preview, meta, heartbeat_at, created_at, updated_at, queue) \
             SELECT $1::varchar, $2::varchar, $3::varchar, $4::varchar, 'running', $5::text, $6::varchar, \
             $7::jsonb, $8::bigint, $8::bigint, $8::bigint, $9::varchar \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = $2::varchar AND owner IS NOT DISTINCT FROM $3::varchar)",
            "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, \
             objective_preview, meta, heartbeat_at, created_at, updated_at, queue) \
             SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8, ?8, ?9 FROM DUAL \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?2 AND owner <=> ?3)"]),
            1,
            vec![
                r.task_id.into(),
                r.session_id.into(),
                owner.clone(),
                r.instance_id.into(),
                r.objective.into(),
                r.objective_preview.into(),
                r.meta_json.into(),
                r.now.into(),
                r.queue.into(),
            ],
        ),
        stmt(
            d.of(["INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner IS ?4)",
            "INSERT INTO task_active (session_id, task_id, created_at) \
             SELECT $1::varchar, $2::varchar, $3::bigint \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = $1::varchar AND owner IS NOT DISTINCT FROM $4::varchar)",
            "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 FROM DUAL \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner <=> ?4)"]),
            2,
            vec![r.session_id.into(), r.task_id.into(), r.now.into(), owner.clone()],
        ),
    ];
    if let Some((key, fingerprint, status, body)) = r.idempotency {
        batch.push(stmt(
            d.of(["INSERT INTO idempotency_key (scoped_key, owner, fingerprint, task_id, response_status, \
             response_body, created_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?8 AND owner IS ?2)",
            "INSERT INTO idempotency_key (scoped_key, owner, fingerprint, task_id, response_status, \
             response_body, created_at) SELECT $1::varchar, $2::varchar, $3::varchar, $4::varchar, \
             $5::smallint, $6::text, $7::bigint \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = $8::varchar AND owner IS NOT DISTINCT FROM $2::varchar)",
            "INSERT INTO idempotency_key (scoped_key, owner, fingerprint, task_id, response_status, \
             response_body, created_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 FROM DUAL \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?8 AND owner <=> ?2)"]),
            4,
            vec![
                key.into(),
                owner,
                fingerprint.into(),
                r.task_id.into(),
                status.into(),
                body.into(),
                r.now.into(),
                r.session_id.into(),
            ],
        ));
    }
    batch
}

/// The binding of a scoped idempotency key: `fingerprint, task_id, response_status, response_body`.
pub fn select_idempotency(d: Dialect, scoped_key: &str) -> Stmt {
    Stmt::portable(
            d,
            "SELECT fingerprint, task_id, response_status, response_body FROM idempotency_key WHERE scoped_key = ?1",
        vec![scoped_key.into()],
    )
}

/// The session's owner: `owner` (one row, or none when the session does not exist).
pub fn select_session(d: Dialect, session_id: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT session_id, owner, created_at, updated_at FROM session WHERE session_id = ?1",
        vec![session_id.into()],
    )
}

/// The claim holder of a session with its row's status and owner (NULL status: no row) and the
/// session's owner.
pub fn select_claim_holder(d: Dialect, session_id: &str) -> Stmt {
    Stmt::portable(
            d,
            "SELECT ta.task_id AS task_id, tr.status AS status, tr.owner AS owner, s.owner AS session_owner \
         FROM task_active ta LEFT JOIN task_run tr ON tr.task_id = ta.task_id \
         LEFT JOIN session s ON s.session_id = ta.session_id WHERE ta.session_id = ?1",
        vec![session_id.into()],
    )
}

/// The session a claim naming `task_id` belongs to, with the session's owner (for cancels of a run
/// whose row is gone).
pub fn select_claim_by_task(d: Dialect, task_id: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT ta.session_id AS session_id, s.owner AS owner FROM task_active ta \
         LEFT JOIN session s ON s.session_id = ta.session_id WHERE ta.task_id = ?1",
        vec![task_id.into()],
    )
}

/// One run by id.
pub fn select_run(d: Dialect, task_id: &str) -> Stmt {
    Stmt::pick(
        d,
        concat!(
            "SELECT ",
            run_cols!(sqlite),
            " FROM task_run WHERE task_id = ?1"
        ),
        concat!(
            "SELECT ",
            run_cols!(postgres),
            " FROM task_run WHERE task_id = $1"
        ),
        concat!(
            "SELECT ",
            run_cols!(mysql),
            " FROM task_run WHERE task_id = ?1"
        ),
        vec![task_id.into()],
    )
}

/// Releases `task_id`'s claim if, and only if, its row is terminal or missing (positive proof that
/// nothing can drive it); a live holder's claim is never touched, and no other task's claim is.
pub fn release_claim_of(d: Dialect, task_id: &str) -> Stmt {
    Stmt::portable(
        d,
        "DELETE FROM task_active WHERE task_id = ?1 AND NOT EXISTS (SELECT 1 FROM task_run \
         WHERE task_run.task_id = ?1 AND status IN ('running','suspended','needs_review'))",
        vec![task_id.into()],
    )
}

/// Index of the statements in [`cancel`]'s batch.
pub const CANCEL_NOW: usize = 0;
pub const CANCEL_REQUEST: usize = 1;
pub const CANCEL_RELEASE: usize = 2;
pub const CANCEL_VOID: usize = 3;
pub const CANCEL_READ: usize = 4;

/// Cancel as one batch:
/// 1. a parked run, or a running run no runner holds, becomes `cancelled` now (write-once: only from a
///    non-terminal status);
/// 2. a running run held by a runner gets `cancel_requested = 1` (the runner finishes it);
/// 3. the claim is released if this task holds it and its row is terminal or missing (cancel is the
///    self-rescue path, so it also frees an orphan claim);
/// 4. a parked run's pending gate is voided (abandoned), so it can never answer for a later park;
/// 5. the row is read back.
pub fn cancel(d: Dialect, task_id: &str, now: i64) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET status = 'cancelled', error = ?3, cancel_requested = 1, \
             held_by = NULL, updated_at = ?2 WHERE task_id = ?1 AND (status IN ('suspended','needs_review') \
             OR (status = 'running' AND held_by IS NULL))",
            vec![task_id.into(), now.into(), CANCELLED_BY_USER.into()],
        ),
        Stmt::portable(
            d,
            "UPDATE task_run SET cancel_requested = 1, updated_at = ?2 \
             WHERE task_id = ?1 AND status = 'running' AND held_by IS NOT NULL AND cancel_requested = 0",
            vec![task_id.into(), now.into()],
        ),
        release_claim_of(d, task_id),
        void_pending_of(d, task_id, now),
        select_run(d, task_id),
    ]
}

/// A terminal write that is not a runner's finish (the control plane settling a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal<'a> {
    pub task_id: &'a str,
    pub status: TerminalStatus,
    /// JSON text.
    pub result_json: Option<&'a str>,
    pub error: Option<&'a str>,
    pub error_code: Option<&'a str>,
    pub now: i64,
}

/// Write-once terminal write, then release of this task's claim (never another task's) and the void
/// of its pending gate if it was parked, one batch. The first statement changes 1 row exactly when
/// the run was non-terminal.
pub fn set_terminal(d: Dialect, t: &Terminal<'_>) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET status = ?2, result = ?3, error = ?4, error_code = ?5, held_by = NULL, \
             updated_at = ?6 WHERE task_id = ?1 AND status IN ('running','suspended','needs_review')",
            "UPDATE task_run SET status = $2, result = $3::jsonb, error = $4, error_code = $5, held_by = NULL, \
             updated_at = $6 WHERE task_id = $1 AND status IN ('running','suspended','needs_review')",
            "UPDATE task_run SET status = ?2, result = ?3, error = ?4, error_code = ?5, held_by = NULL, \
             updated_at = ?6 WHERE task_id = ?1 AND status IN ('running','suspended','needs_review')",
            vec![
                t.task_id.into(),
                t.status.as_str().into(),
                t.result_json.into(),
                t.error.into(),
                t.error_code.into(),
                t.now.into(),
            ],
        ),
        release_claim_of(d, t.task_id),
        void_pending_of(d, t.task_id, t.now),
    ]
}

/// A guarded fail: fail a running run only if its lease and evidence of life are still exactly those
/// of `snapshot` (a session object's alarm, a takeover).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardedFail<'a> {
    pub snapshot: &'a RunSnapshot,
    pub error: &'a str,
    pub error_code: Option<&'a str>,
    pub now: i64,
}

/// Index of the guarded write in [`fail_if_unchanged`]'s and [`take_over`]'s batches: 1 row changed =
/// this call failed the run.
pub const GUARDED_FAIL: usize = 0;

/// The guarded fail, one batch: `running` → `failed` exactly when `lease_epoch`, `heartbeat_at` and
/// `held_by` (NULL-safe) still equal the snapshot's, then release of that task's claim (only if its
/// run is now terminal or missing). A heartbeat, append, lease or requeue since the snapshot changes
/// one of them, and then nothing is written.
pub fn fail_if_unchanged(d: Dialect, g: &GuardedFail<'_>) -> Vec<Stmt> {
    let s = g.snapshot;
    vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET status = 'failed', error = ?5, error_code = ?6, held_by = NULL, \
             updated_at = ?7 WHERE task_id = ?1 AND status = 'running' AND lease_epoch = ?2 \
             AND heartbeat_at IS ?3 AND held_by IS ?4",
            "UPDATE task_run SET status = 'failed', error = $5, error_code = $6, held_by = NULL, \
             updated_at = $7 WHERE task_id = $1 AND status = 'running' AND lease_epoch = $2 \
             AND heartbeat_at IS NOT DISTINCT FROM $3 AND held_by IS NOT DISTINCT FROM $4",
            "UPDATE task_run SET status = 'failed', error = ?5, error_code = ?6, held_by = NULL, \
             updated_at = ?7 WHERE task_id = ?1 AND status = 'running' AND lease_epoch = ?2 \
             AND heartbeat_at <=> ?3 AND held_by <=> ?4",
            vec![
                s.task_id.as_str().into(),
                s.lease_epoch.into(),
                s.heartbeat_at.into(),
                s.held_by.as_deref().into(),
                g.error.into(),
                g.error_code.into(),
                g.now.into(),
            ],
        ),
        release_claim_of(d, &s.task_id),
    ]
}

/// A takeover admission: fail the session's silent holder (guarded by its snapshot) with `reason`
/// and admit `new` in its place, as one unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Takeover<'a> {
    pub snapshot: &'a RunSnapshot,
    /// The old run's `error`; a takeover writes no `error_code` (SPEC).
    pub reason: &'a str,
    pub new: &'a NewRun<'a>,
}

/// Index in [`take_over`]'s batch where [`admit`]'s statements start.
pub const TAKEOVER_ADMIT: usize = 2;

/// Takeover as one batch: the guarded fail of the old holder (error = reason, no error code; its
/// status, epoch, heartbeat and holder as in the snapshot: a running run gone silent, or a parked run
/// nothing can resume, SPEC-core §2.4 rule 6), also
/// conditional on the old run belonging to `new`'s session and that session being the submitter's
/// (so a foreign submitter writes nothing); release of the old run's claim (only if now terminal);
/// then exactly [`admit`]'s statements. When the guard fails (a heartbeat landed since the
/// snapshot) the old run keeps its claim, the admission's claim insert fails on `task_active` and the
/// whole batch rolls back.
pub fn take_over(d: Dialect, t: &Takeover<'_>) -> Vec<Stmt> {
    let s = t.snapshot;
    let mut batch = vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET status = 'failed', error = ?5, error_code = NULL, held_by = NULL, \
             updated_at = ?6 WHERE task_id = ?1 AND status = ?9 AND lease_epoch = ?2 \
             AND heartbeat_at IS ?3 AND held_by IS ?4 AND session_id = ?7 \
             AND EXISTS (SELECT 1 FROM session WHERE session_id = ?7 AND owner IS ?8)",
            "UPDATE task_run SET status = 'failed', error = $5, error_code = NULL, held_by = NULL, \
             updated_at = $6 WHERE task_id = $1 AND status = $9 AND lease_epoch = $2 \
             AND heartbeat_at IS NOT DISTINCT FROM $3 AND held_by IS NOT DISTINCT FROM $4 AND session_id = $7 \
             AND EXISTS (SELECT 1 FROM session WHERE session_id = $7 AND owner IS NOT DISTINCT FROM $8)",
            "UPDATE task_run SET status = 'failed', error = ?5, error_code = NULL, held_by = NULL, \
             updated_at = ?6 WHERE task_id = ?1 AND status = ?9 AND lease_epoch = ?2 \
             AND heartbeat_at <=> ?3 AND held_by <=> ?4 AND session_id = ?7 \
             AND EXISTS (SELECT 1 FROM session WHERE session_id = ?7 AND owner <=> ?8)",
            vec![
                s.task_id.as_str().into(),
                s.lease_epoch.into(),
                s.heartbeat_at.into(),
                s.held_by.as_deref().into(),
                t.reason.into(),
                t.new.now.into(),
                t.new.session_id.into(),
                t.new.owner.into(),
                s.status.as_str().into(),
            ],
        ),
        release_claim_of(d, &s.task_id),
    ];
    batch.extend(admit(d, t.new));
    batch
}

/// Sets the cancel flag of a non-terminal run the owner (NULL-safe) owns, then reads the flag back:
/// the read returns a row exactly when the run exists and the owner matches.
pub fn request_cancel(d: Dialect, task_id: &str, owner: Option<&str>, now: i64) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET cancel_requested = 1, updated_at = ?3 WHERE task_id = ?1 AND owner IS ?2 \
             AND status IN ('running','suspended','needs_review')",
            "UPDATE task_run SET cancel_requested = 1, updated_at = $3 WHERE task_id = $1 \
             AND owner IS NOT DISTINCT FROM $2 AND status IN ('running','suspended','needs_review')",
            "UPDATE task_run SET cancel_requested = 1, updated_at = ?3 WHERE task_id = ?1 AND owner <=> ?2 \
             AND status IN ('running','suspended','needs_review')",
            vec![task_id.into(), owner.into(), now.into()],
        ),
        select_cancel_requested(d, task_id, owner),
    ]
}

/// `cancel_requested` of the run, if it exists and the owner matches (NULL-safe).
pub fn select_cancel_requested(d: Dialect, task_id: &str, owner: Option<&str>) -> Stmt {
    Stmt::pick(
        d,
        "SELECT cancel_requested FROM task_run WHERE task_id = ?1 AND owner IS ?2",
        "SELECT cancel_requested FROM task_run WHERE task_id = $1 AND owner IS NOT DISTINCT FROM $2",
        "SELECT cancel_requested FROM task_run WHERE task_id = ?1 AND owner <=> ?2",
        vec![task_id.into(), owner.into()],
    )
}

/// Removes a session entirely: its runs' events and steer messages, its checkpoints, its claim, its
/// runs and the session row, in one batch (no orphan claim can remain).
pub fn delete_by_session(d: Dialect, session_id: &str) -> Vec<Stmt> {
    let p = |sql: &'static str| Stmt::portable(d, sql, vec![session_id.into()]);
    vec![
        p("DELETE FROM run_event WHERE task_id IN (SELECT task_id FROM task_run WHERE session_id = ?1)"),
        p("DELETE FROM steer_message WHERE task_id IN (SELECT task_id FROM task_run WHERE session_id = ?1)"),
        p("DELETE FROM gate_checkpoint WHERE session_id = ?1"),
        p("DELETE FROM task_active WHERE session_id = ?1"),
        p("DELETE FROM task_run WHERE session_id = ?1"),
        p("DELETE FROM session WHERE session_id = ?1"),
    ]
}

/// Index of the `task_run` delete in [`delete_by_session`]'s batch.
pub const DELETE_RUNS: usize = 4;

/// Who may see which runs or sessions in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope<'a> {
    /// Rows owned by this principal (`None` is the anonymous principal, stored as NULL).
    Owner(Option<&'a str>),
    /// Every row (operators).
    All,
}

impl<'a> ListScope<'a> {
    /// What `principal` may list: operators every row, anyone else its own.
    pub fn of(principal: &'a crate::auth::Principal) -> Self {
        match principal.role {
            crate::auth::Role::Operator => Self::All,
            _ => Self::Owner(principal.id.as_deref()),
        }
    }

    /// The owner predicate as an equality or `IS NULL`, so every dialect can use an index on it.
    pub(crate) fn push(&self, b: &mut super::Builder) {
        match self {
            ListScope::Owner(Some(owner)) => {
                b.push("owner = ").bind(*owner);
            }
            ListScope::Owner(None) => {
                b.push("owner IS NULL");
            }
            ListScope::All => {
                b.push("1 = 1");
            }
        }
    }
}

/// A page of runs, newest first by `(created_at, task_id)`, strictly after `cursor` in that order.
/// Fetch `limit + 1` to learn whether another page follows. Served by the index whose prefix is the
/// filter (`session_id` or `owner`, else none) and whose tail is the sort key.
pub fn list_runs(
    d: Dialect,
    scope: &ListScope<'_>,
    session_id: Option<&str>,
    status: Option<&str>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    let cols = match d.built() {
        Dialect::Sqlite => run_cols!(sqlite),
        Dialect::Postgres => run_cols!(postgres),
        Dialect::Mysql => run_cols!(mysql),
    };
    // One session's runs are read through the session's index. Without statistics (D1 keeps none
    // unless told to) SQLite weighs the owner's index the same, and may walk every run of the
    // owner to find one session's: found by the bench's scale phase (1,000,000 runs, 100 tenants).
    let from = match (d, session_id) {
        (Dialect::Sqlite, Some(_)) => "task_run INDEXED BY idx_task_run_session_created",
        _ => "task_run",
    };
    let mut b = super::Builder::new(d, &format!("SELECT {cols} FROM {from} WHERE "));
    scope.push(&mut b);
    if let Some(session) = session_id {
        b.push(" AND session_id = ").bind(session);
    }
    if let Some(status) = status {
        b.push(" AND status = ").bind(status);
    }
    if let Some((at, id)) = cursor {
        b.push(" AND (created_at, task_id) < (")
            .bind(at)
            .push(", ")
            .bind(id)
            .push(")");
    }
    b.push(" ORDER BY created_at DESC, task_id DESC LIMIT ")
        .bind(limit);
    b.build()
}

/// A page of sessions, most recently active first by `(updated_at, session_id)`.
pub fn list_sessions(
    d: Dialect,
    scope: &ListScope<'_>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    let mut b = super::Builder::new(
        d,
        "SELECT session_id, owner, created_at, updated_at FROM session WHERE ",
    );
    scope.push(&mut b);
    if let Some((at, id)) = cursor {
        b.push(" AND (updated_at, session_id) < (")
            .bind(at)
            .push(", ")
            .bind(id)
            .push(")");
    }
    b.push(" ORDER BY updated_at DESC, session_id DESC LIMIT ")
        .bind(limit);
    b.build()
}

/// Voids the pending gate of `task_id` once its run is terminal or gone (cancel, a terminal write):
/// `voided`, `pending_session = NULL`, so it can never answer for, or block, a later park.
pub fn void_pending_of(d: Dialect, task_id: &str, now: i64) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE gate_checkpoint SET status = 'voided', pending_session = NULL, updated_at = ?2 \
         WHERE task_id = ?1 AND status = 'pending' AND NOT EXISTS (SELECT 1 FROM task_run \
         WHERE task_run.task_id = ?1 AND task_run.status IN ('running','suspended','needs_review'))",
        vec![task_id.into(), now.into()],
    )
}
