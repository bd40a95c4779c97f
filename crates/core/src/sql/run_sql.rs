//! Statements over `session`, `task_run`, `task_active` and `idempotency_key` (SQLite / D1 dialect).
//!
//! Multi-statement invariants are planned as one batch (D1 runs a batch as one transaction): the run
//! row, its claim and its idempotency binding commit together or not at all.

use super::{SqlValue, Stmt};
use crate::status::CANCELLED_BY_USER;

/// Columns of a run as read by [`crate::run::RunRow::from_row`].
macro_rules! run_cols {
    () => {
        "task_id, session_id, owner, instance_id, status, objective_preview, result, error, error_code, held_by, lease_epoch, cancel_requested, heartbeat_at, created_at, updated_at"
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
    pub now: i64,
    /// `(scoped_key, fingerprint, response_status, response_body)` when the submit carried a key.
    pub idempotency: Option<(&'a str, &'a str, i64, &'a str)>,
}

/// Index of the `task_run` insert in [`admit`]'s batch; it changes 0 rows when the session belongs
/// to another principal (and then nothing else is written either).
pub const ADMIT_RUN_INSERT: usize = 1;

/// Admission as one batch: upsert the session (owner fixed at creation), insert the run row, the claim
/// and the idempotency binding, each conditional on the session being the submitter's.
/// A held claim fails the batch on `task_active.session_id`; a taken task id on `task_run.task_id`;
/// a key bound concurrently on `idempotency_key.scoped_key`.
pub fn admit(r: &NewRun<'_>) -> Vec<Stmt> {
    let owner = SqlValue::from(r.owner);
    let mut batch = vec![
        Stmt::new(
            "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
             ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at \
             WHERE session.owner IS excluded.owner",
            vec![r.session_id.into(), owner.clone(), r.now.into()],
        ),
        Stmt::new(
            "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, \
             objective_preview, meta, created_at, updated_at) \
             SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?2 AND owner IS ?3)",
            vec![
                r.task_id.into(),
                r.session_id.into(),
                owner.clone(),
                r.instance_id.into(),
                r.objective.into(),
                r.objective_preview.into(),
                r.meta_json.into(),
                r.now.into(),
            ],
        ),
        Stmt::new(
            "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner IS ?4)",
            vec![r.session_id.into(), r.task_id.into(), r.now.into(), owner.clone()],
        ),
    ];
    if let Some((key, fingerprint, status, body)) = r.idempotency {
        batch.push(Stmt::new(
            "INSERT INTO idempotency_key (scoped_key, owner, fingerprint, task_id, response_status, \
             response_body, created_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?8 AND owner IS ?2)",
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
pub fn select_idempotency(scoped_key: &str) -> Stmt {
    Stmt::new(
        "SELECT fingerprint, task_id, response_status, response_body FROM idempotency_key \
         WHERE scoped_key = ?1",
        vec![scoped_key.into()],
    )
}

/// The session's owner: `owner` (one row, or none when the session does not exist).
pub fn select_session(session_id: &str) -> Stmt {
    Stmt::new(
        "SELECT owner FROM session WHERE session_id = ?1",
        vec![session_id.into()],
    )
}

/// The claim holder of a session with its row's status and owner (NULL status: no row) and the
/// session's owner.
pub fn select_claim_holder(session_id: &str) -> Stmt {
    Stmt::new(
        "SELECT ta.task_id AS task_id, tr.status AS status, tr.owner AS owner, s.owner AS session_owner \
         FROM task_active ta LEFT JOIN task_run tr ON tr.task_id = ta.task_id \
         LEFT JOIN session s ON s.session_id = ta.session_id WHERE ta.session_id = ?1",
        vec![session_id.into()],
    )
}

/// One run by id.
pub fn select_run(task_id: &str) -> Stmt {
    Stmt::new(
        concat!("SELECT ", run_cols!(), " FROM task_run WHERE task_id = ?1"),
        vec![task_id.into()],
    )
}

/// Index of the statements in [`cancel`]'s batch.
pub const CANCEL_NOW: usize = 0;
pub const CANCEL_REQUEST: usize = 1;
pub const CANCEL_RELEASE: usize = 2;
pub const CANCEL_READ: usize = 3;

/// Cancel as one batch:
/// 1. a parked run, or a running run no runner holds, becomes `cancelled` now (write-once: only from a
///    non-terminal status);
/// 2. a running run held by a runner gets `cancel_requested = 1` (the runner finishes it);
/// 3. the claim is released if, and only if, this task holds it and its row is terminal or missing
///    (cancel is the self-rescue path, so it also frees an orphan claim);
/// 4. the row is read back.
pub fn cancel(task_id: &str, now: i64) -> Vec<Stmt> {
    vec![
        Stmt::new(
            "UPDATE task_run SET status = 'cancelled', error = ?3, cancel_requested = 1, \
             held_by = NULL, updated_at = ?2 \
             WHERE task_id = ?1 AND (status IN ('suspended','needs_review') \
             OR (status = 'running' AND held_by IS NULL))",
            vec![task_id.into(), now.into(), CANCELLED_BY_USER.into()],
        ),
        Stmt::new(
            "UPDATE task_run SET cancel_requested = 1, updated_at = ?2 \
             WHERE task_id = ?1 AND status = 'running' AND held_by IS NOT NULL AND cancel_requested = 0",
            vec![task_id.into(), now.into()],
        ),
        Stmt::new(
            "DELETE FROM task_active WHERE task_id = ?1 AND NOT EXISTS (SELECT 1 FROM task_run \
             WHERE task_run.task_id = ?1 AND status IN ('running','suspended','needs_review'))",
            vec![task_id.into()],
        ),
        select_run(task_id),
    ]
}

/// Who may see which runs in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope<'a> {
    /// Runs owned by this principal (NULL-safe: `None` is the anonymous principal).
    Owner(Option<&'a str>),
    /// Every run (operators).
    All,
}

/// A page of runs, newest first by `(created_at, task_id)`, strictly after `cursor` in that order.
/// Fetch `limit + 1` to learn whether another page follows.
/// Each variant is served by an index whose prefix is the filter and whose tail is the sort key.
pub fn list_runs(
    scope: &ListScope<'_>,
    session_id: Option<&str>,
    status: Option<&str>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    // Without a cursor, start above every real key so one statement text serves both cases and the
    // row-value comparison always seeks in the index.
    let (at, id) = cursor.unwrap_or((super::JS_SAFE_INT, ""));
    let (c_at, c_id) = (SqlValue::Int(at), SqlValue::from(id));
    let status = SqlValue::from(status);
    match (scope, session_id) {
        (ListScope::Owner(owner), Some(session)) => Stmt::new(
            concat!(
                "SELECT ",
                run_cols!(),
                " FROM task_run \
                 WHERE session_id = ?1 AND owner IS ?2 AND (?3 IS NULL OR status = ?3) \
                 AND (created_at, task_id) < (?4, ?5) \
                 ORDER BY created_at DESC, task_id DESC LIMIT ?6"
            ),
            vec![
                session.into(),
                (*owner).into(),
                status,
                c_at,
                c_id,
                limit.into(),
            ],
        ),
        (ListScope::Owner(owner), None) => Stmt::new(
            concat!(
                "SELECT ",
                run_cols!(),
                " FROM task_run \
                 WHERE owner IS ?1 AND (?2 IS NULL OR status = ?2) \
                 AND (created_at, task_id) < (?3, ?4) \
                 ORDER BY created_at DESC, task_id DESC LIMIT ?5"
            ),
            vec![(*owner).into(), status, c_at, c_id, limit.into()],
        ),
        (ListScope::All, Some(session)) => Stmt::new(
            concat!(
                "SELECT ",
                run_cols!(),
                " FROM task_run \
                 WHERE session_id = ?1 AND (?2 IS NULL OR status = ?2) \
                 AND (created_at, task_id) < (?3, ?4) \
                 ORDER BY created_at DESC, task_id DESC LIMIT ?5"
            ),
            vec![session.into(), status, c_at, c_id, limit.into()],
        ),
        (ListScope::All, None) => Stmt::new(
            concat!(
                "SELECT ",
                run_cols!(),
                " FROM task_run \
                 WHERE (?1 IS NULL OR status = ?1) \
                 AND (created_at, task_id) < (?2, ?3) \
                 ORDER BY created_at DESC, task_id DESC LIMIT ?4"
            ),
            vec![status, c_at, c_id, limit.into()],
        ),
    }
}

/// The session a claim naming `task_id` belongs to, with the session's owner (for cancels of a run
/// whose row is gone).
pub fn select_claim_by_task(task_id: &str) -> Stmt {
    Stmt::new(
        "SELECT ta.session_id AS session_id, s.owner AS owner FROM task_active ta \
         LEFT JOIN session s ON s.session_id = ta.session_id WHERE ta.task_id = ?1",
        vec![task_id.into()],
    )
}

/// Releases `task_id`'s claim on `session_id` if its row is terminal or missing (positive proof that
/// nothing can drive it); a live holder's claim is never touched.
pub fn release_dead_claim(session_id: &str, task_id: &str) -> Stmt {
    Stmt::new(
        "DELETE FROM task_active WHERE session_id = ?1 AND task_id = ?2 AND NOT EXISTS \
         (SELECT 1 FROM task_run WHERE task_run.task_id = ?2 AND status IN ('running','suspended','needs_review'))",
        vec![session_id.into(), task_id.into()],
    )
}
