//! Human gates, in three dialects: parking a run on a gate, reading and listing pending gates, and
//! resolving a gate (resume or end the run), each state change one batch.
//!
//! **Invariant.** A gate is `pending` exactly while its run is parked: a park inserts the checkpoint
//! in the batch that parks the run; a decision resolves it in the batch that resumes or ends the run;
//! cancel, a terminal write and the parked-run reapers void or expire it in the batch that ends the
//! run. `pending_session` (UNIQUE, NULL once settled) makes "one pending gate per session" a
//! constraint of the database.
//!
//! **How concurrent writers meet.** A park is fenced like every runner write (`lease_epoch = ? AND
//! held_by = ? AND status = 'running'` in each statement's WHERE); its first statement advances the
//! run's `last_seq`, which row-locks the run in PostgreSQL and MySQL, so a second park (or a finish)
//! of the same lease waits and then matches nothing. A decision first locks the run row (a no-op
//! write), then compare-and-sets the checkpoint `pending → resolved` (only while unexpired and while
//! its run is parked), stamping it with the attempt's `resolution_id`; every later statement of the
//! batch writes only if that stamp is there. Of two deciders, the second waits on the run row, then
//! finds the checkpoint resolved and changes nothing. Every writer here takes the run row before the
//! checkpoint row, as the reapers and cancel do. SQLite / D1 batches are serialised anyway.

use super::{run_sql, Builder, Dialect, Stmt};
use crate::status::{ParkStatus, TerminalStatus};

/// Columns of a pending gate as [`crate::store::PendingGate`] reads them (never the checkpoint id).
macro_rules! gate_cols {
    (sqlite) => {
        "session_id, task_id, gate_kind, card, expires_at, created_at"
    };
    (postgres) => {
        "session_id, task_id, gate_kind, card::text AS card, expires_at, created_at"
    };
    (mysql) => {
        "session_id, task_id, gate_kind, CAST(card AS CHAR) AS card, expires_at, created_at"
    };
}

/// A runner's park.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Park<'a> {
    pub task_id: &'a str,
    pub lease_epoch: i64,
    /// The runner holding the lease (`held_by`).
    pub runner_id: &'a str,
    /// sha256 (hex) of a fresh token ([`crate::gate::checkpoint_id`]).
    pub checkpoint_id: &'a str,
    pub gate_kind: &'a str,
    /// The park word of the kind ([`crate::gate::park_status`]).
    pub status: ParkStatus,
    /// JSON object text.
    pub card_json: &'a str,
    /// The park event's data ([`crate::gate::park_event_data`]), JSON text.
    pub event_json: &'a str,
    /// `None`: never expires.
    pub expires_at: Option<i64>,
    pub now: i64,
}

/// Index of the fence in [`park`]'s batch: advances `last_seq` (the park event's seq) and locks the run.
pub const PARK_FENCE: usize = 0;
/// Index of the checkpoint insert in [`park`]'s batch (a duplicate on `gate_checkpoint`: the session
/// already has a pending gate, and the whole batch is refused).
pub const PARK_INSERT: usize = 1;
/// Index of the status write in [`park`]'s batch: 1 row = parked.
pub const PARK_WRITE: usize = 3;

/// The park, one batch fenced by the lease and its holder: advance `last_seq`, insert the checkpoint
/// (pending, `park_seq` = the advanced `last_seq`, session and owner copied from the run), append the
/// park event (type = the park word) at that seq, write the park status and end the lease
/// (`held_by = NULL`; the claim stays), read the counter back.
pub fn park(d: Dialect, p: &Park<'_>) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET last_seq = last_seq + 1, updated_at = ?3 \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                p.task_id.into(),
                p.lease_epoch.into(),
                p.now.into(),
                p.runner_id.into(),
            ],
        ),
        Stmt::pick(
            d,
            "INSERT INTO gate_checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, card, \
             status, pending_session, park_seq, expires_at, decision, reason, resolution_id, resolved_at, \
             created_at, updated_at) \
             SELECT ?5, session_id, task_id, owner, ?6, ?7, 'pending', session_id, last_seq, ?8, \
             NULL, NULL, NULL, NULL, ?3, ?3 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            "INSERT INTO gate_checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, card, \
             status, pending_session, park_seq, expires_at, decision, reason, resolution_id, resolved_at, \
             created_at, updated_at) \
             SELECT $5::varchar, session_id, task_id, owner, $6::varchar, $7::jsonb, 'pending', session_id, \
             last_seq, $8::bigint, NULL, NULL, NULL, NULL, $3::bigint, $3::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND held_by = $4::varchar \
             AND status = 'running'",
            "INSERT INTO gate_checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, card, \
             status, pending_session, park_seq, expires_at, decision, reason, resolution_id, resolved_at, \
             created_at, updated_at) \
             SELECT ?5, session_id, task_id, owner, ?6, ?7, 'pending', session_id, last_seq, ?8, \
             NULL, NULL, NULL, NULL, ?3, ?3 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                p.task_id.into(),
                p.lease_epoch.into(),
                p.now.into(),
                p.runner_id.into(),
                p.checkpoint_id.into(),
                p.gate_kind.into(),
                p.card_json.into(),
                p.expires_at.into(),
            ],
        ),
        Stmt::pick(
            d,
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq, ?5, ?6, NULL, ?3 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT $1::varchar, last_seq, $5::varchar, $6::jsonb, NULL, $3::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND held_by = $4::varchar \
             AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq, ?5, ?6, NULL, ?3 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                p.task_id.into(),
                p.lease_epoch.into(),
                p.now.into(),
                p.runner_id.into(),
                p.status.as_str().into(),
                p.event_json.into(),
            ],
        ),
        Stmt::portable(
            d,
            "UPDATE task_run SET status = ?5, held_by = NULL, updated_at = ?3 \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                p.task_id.into(),
                p.lease_epoch.into(),
                p.now.into(),
                p.runner_id.into(),
                p.status.as_str().into(),
            ],
        ),
        super::event_sql::select_last_seq(d, p.task_id),
    ]
}

/// The session's pending gate, if any (served by `uq_gate_checkpoint_pending`). Returned whether or
/// not its deadline has passed: the caller compares `expires_at` with its `now`.
pub fn pending_gate(d: Dialect, session_id: &str) -> Stmt {
    Stmt::pick(
        d,
        concat!(
            "SELECT ",
            gate_cols!(sqlite),
            " FROM gate_checkpoint WHERE pending_session = ?1"
        ),
        concat!(
            "SELECT ",
            gate_cols!(postgres),
            " FROM gate_checkpoint WHERE pending_session = $1"
        ),
        concat!(
            "SELECT ",
            gate_cols!(mysql),
            " FROM gate_checkpoint WHERE pending_session = ?1"
        ),
        vec![session_id.into()],
    )
}

/// A page of pending gates, oldest first by `(created_at, session_id)` (one pending gate per session,
/// so the pair is unique), strictly after `cursor`, at most `limit`; `scope` filters by the owner
/// the run had when it parked (operators: every gate), `session_id` narrows to one session. Served
/// by `idx_gate_checkpoint_owner_status`, `idx_gate_checkpoint_status_created` or the session's index.
pub fn list_pending(
    d: Dialect,
    scope: &run_sql::ListScope<'_>,
    session_id: Option<&str>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    let cols = match d.built() {
        Dialect::Sqlite => gate_cols!(sqlite),
        Dialect::Postgres => gate_cols!(postgres),
        Dialect::Mysql => gate_cols!(mysql),
    };
    let mut b = Builder::new(d, &format!("SELECT {cols} FROM gate_checkpoint WHERE "));
    scope.push(&mut b);
    b.push(" AND status = 'pending'");
    if let Some(s) = session_id {
        b.push(" AND session_id = ").bind(s);
    }
    if let Some((at, s)) = cursor {
        b.push(" AND (created_at, session_id) > (")
            .bind(at)
            .push(", ")
            .bind(s)
            .push(")");
    }
    b.push(" ORDER BY created_at, session_id LIMIT ")
        .bind(limit);
    b.build()
}

/// Where a decide attempt looks for its gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateScope<'a> {
    /// The session's latest gate (approvals, wake).
    Session(&'a str),
    /// The run's latest gate (plan review, resume).
    Task(&'a str),
}

/// The latest gate in scope with its run's status (`run_status` NULL: no row), one row or none.
/// A task's gates are ordered by `park_seq`; a session's by `created_at`, a pending gate first among
/// equal times, then the later task id (task ids are UUIDv7, so time-ordered). Also reads the
/// checkpoint id and card, which stay inside the store.
pub fn latest_gate(d: Dialect, scope: GateScope<'_>) -> Stmt {
    match scope {
        GateScope::Session(s) => Stmt::pick(
            d,
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, ck.card, ck.status, \
             ck.expires_at, ck.decision, tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.session_id = ?1 \
             ORDER BY ck.created_at DESC, CASE WHEN ck.status = 'pending' THEN 0 ELSE 1 END, \
             ck.task_id DESC, ck.park_seq DESC LIMIT 1",
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, ck.card::text AS card, \
             ck.status, ck.expires_at, ck.decision, tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.session_id = $1 \
             ORDER BY ck.created_at DESC, CASE WHEN ck.status = 'pending' THEN 0 ELSE 1 END, \
             ck.task_id DESC, ck.park_seq DESC LIMIT 1",
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, \
             CAST(ck.card AS CHAR) AS card, ck.status, ck.expires_at, ck.decision, \
             tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.session_id = ?1 \
             ORDER BY ck.created_at DESC, CASE WHEN ck.status = 'pending' THEN 0 ELSE 1 END, \
             ck.task_id DESC, ck.park_seq DESC LIMIT 1",
            vec![s.into()],
        ),
        GateScope::Task(t) => Stmt::pick(
            d,
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, ck.card, ck.status, \
             ck.expires_at, ck.decision, tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.task_id = ?1 \
             ORDER BY ck.park_seq DESC LIMIT 1",
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, ck.card::text AS card, \
             ck.status, ck.expires_at, ck.decision, tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.task_id = $1 \
             ORDER BY ck.park_seq DESC LIMIT 1",
            "SELECT ck.checkpoint_id, ck.session_id, ck.task_id, ck.gate_kind, \
             CAST(ck.card AS CHAR) AS card, ck.status, ck.expires_at, ck.decision, \
             tr.status AS run_status FROM gate_checkpoint ck \
             LEFT JOIN task_run tr ON tr.task_id = ck.task_id WHERE ck.task_id = ?1 \
             ORDER BY ck.park_seq DESC LIMIT 1",
            vec![t.into()],
        ),
    }
}

/// What a won decision does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect<'a> {
    /// Parked → `running`, unheld, `lease_epoch + 1`, `heartbeat_at = now` (queued again), and a
    /// `resumed` event with this data (JSON text).
    Resume { event_json: &'a str },
    /// Parked → terminal, `done` appended with `done_json`, the claim released.
    End {
        status: TerminalStatus,
        result_json: Option<&'a str>,
        error: Option<&'a str>,
        error_code: Option<&'a str>,
        done_json: &'a str,
    },
}

/// One decide attempt on a known checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolveWrite<'a> {
    /// The checkpoint the attempt read as pending.
    pub checkpoint_id: &'a str,
    /// Its run.
    pub task_id: &'a str,
    /// Fresh per attempt (e.g. a UUIDv7): stamps the checkpoint this attempt resolved.
    pub resolution_id: &'a str,
    pub decision: &'a str,
    /// A reason, or a plan review's feedback.
    pub reason: Option<&'a str>,
    pub effect: Effect<'a>,
    pub now: i64,
}

/// Index of the compare-and-set in [`resolve`]'s batch: 1 row = this attempt resolved the gate.
pub const RESOLVE_CAS: usize = 1;
/// Index of the run's read-back in [`resolve`]'s batch (a row only if this attempt won).
pub const RESOLVE_READ: usize = 5;

/// A decision, one batch: lock the run (a no-op write), compare-and-set the checkpoint
/// `pending → resolved` with the decision (only while unexpired at `now` and while its run is
/// parked), then, only if that stamp is there: resume the run with a `resumed` event, or end it with
/// a `done` event and release its claim; finally read the run back (only if stamped). The batch always
/// has [`RESOLVE_READ`]` + 1` statements.
pub fn resolve(d: Dialect, r: &ResolveWrite<'_>) -> Vec<Stmt> {
    let mut batch = vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET updated_at = updated_at \
             WHERE task_id = ?1 AND status IN ('suspended','needs_review')",
            vec![r.task_id.into()],
        ),
        Stmt::portable(
            d,
            "UPDATE gate_checkpoint SET status = 'resolved', pending_session = NULL, decision = ?3, \
             reason = ?4, resolution_id = ?5, resolved_at = ?6, updated_at = ?6 \
             WHERE checkpoint_id = ?1 AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?6) \
             AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?2 \
             AND task_run.task_id = gate_checkpoint.task_id AND task_run.status IN ('suspended','needs_review'))",
            vec![
                r.checkpoint_id.into(),
                r.task_id.into(),
                r.decision.into(),
                r.reason.into(),
                r.resolution_id.into(),
                r.now.into(),
            ],
        ),
    ];
    match r.effect {
        Effect::Resume { event_json } => {
            batch.push(Stmt::portable(
                d,
                "UPDATE task_run SET status = 'running', lease_epoch = lease_epoch + 1, held_by = NULL, \
                 lease_acked = 0, last_seq = last_seq + 1, heartbeat_at = ?2, updated_at = ?2 \
                 WHERE task_id = ?1 AND status IN ('suspended','needs_review') \
                 AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?3)",
                vec![r.task_id.into(), r.now.into(), r.resolution_id.into()],
            ));
            batch.push(stamped_event(d, r, "resumed", event_json));
            // Keeps the read at the same index for both effects.
            batch.push(Stmt::portable(
                d,
                "SELECT 1 AS one FROM gate_checkpoint WHERE resolution_id = ?1",
                vec![r.resolution_id.into()],
            ));
        }
        Effect::End {
            status,
            result_json,
            error,
            error_code,
            done_json,
        } => {
            batch.push(Stmt::pick(
                d,
                "UPDATE task_run SET status = ?4, result = ?5, error = ?6, error_code = ?7, held_by = NULL, \
                 last_seq = last_seq + 1, updated_at = ?2 \
                 WHERE task_id = ?1 AND status IN ('suspended','needs_review') \
                 AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?3)",
                "UPDATE task_run SET status = $4, result = $5::jsonb, error = $6, error_code = $7, \
                 held_by = NULL, last_seq = last_seq + 1, updated_at = $2 \
                 WHERE task_id = $1 AND status IN ('suspended','needs_review') \
                 AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = $3)",
                "UPDATE task_run SET status = ?4, result = ?5, error = ?6, error_code = ?7, held_by = NULL, \
                 last_seq = last_seq + 1, updated_at = ?2 \
                 WHERE task_id = ?1 AND status IN ('suspended','needs_review') \
                 AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?3)",
                vec![
                    r.task_id.into(),
                    r.now.into(),
                    r.resolution_id.into(),
                    status.as_str().into(),
                    result_json.into(),
                    error.into(),
                    error_code.into(),
                ],
            ));
            batch.push(stamped_event(d, r, "done", done_json));
            batch.push(run_sql::release_claim_of(d, r.task_id));
        }
    }
    batch.push(Stmt::portable(
        d,
        "SELECT lease_epoch, status, last_seq, queue FROM task_run WHERE task_id = ?1 \
         AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?2)",
        vec![r.task_id.into(), r.resolution_id.into()],
    ));
    debug_assert_eq!(batch.len(), RESOLVE_READ + 1);
    batch
}

/// An event at the run's (just advanced) `last_seq`, written only if this attempt's stamp is there.
fn stamped_event(d: Dialect, r: &ResolveWrite<'_>, kind: &'static str, data: &str) -> Stmt {
    Stmt::pick(
        d,
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT ?1, last_seq, ?4, ?5, NULL, ?2 FROM task_run WHERE task_id = ?1 \
         AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?3)",
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT $1::varchar, last_seq, $4::varchar, $5::jsonb, NULL, $2::bigint FROM task_run \
         WHERE task_id = $1::varchar \
         AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = $3::varchar)",
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT ?1, last_seq, ?4, ?5, NULL, ?2 FROM task_run WHERE task_id = ?1 \
         AND EXISTS (SELECT 1 FROM gate_checkpoint WHERE resolution_id = ?3)",
        vec![
            r.task_id.into(),
            r.now.into(),
            r.resolution_id.into(),
            kind.into(),
            data.to_owned().into(),
        ],
    )
}

/// Lives with the run statements whose batches void a gate (cancel, terminal writes), so the
/// two statement files do not import each other.
pub use super::run_sql::void_pending_of;

/// The decision the run's next lease carries: its latest resolved gate (kind, card, decision,
/// reason), read only if `runner_id` holds the run (served by `uq_gate_checkpoint_task_seq`).
pub fn resume_of(d: Dialect, task_id: &str, runner_id: &str) -> Stmt {
    Stmt::pick(
        d,
        "SELECT gate_kind, card, decision, reason FROM gate_checkpoint WHERE task_id = ?1 \
         AND status = 'resolved' AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
         AND held_by = ?2) ORDER BY park_seq DESC LIMIT 1",
        "SELECT gate_kind, card::text AS card, decision, reason FROM gate_checkpoint WHERE task_id = $1 \
         AND status = 'resolved' AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = $1 \
         AND held_by = $2) ORDER BY park_seq DESC LIMIT 1",
        "SELECT gate_kind, CAST(card AS CHAR) AS card, decision, reason FROM gate_checkpoint \
         WHERE task_id = ?1 AND status = 'resolved' AND EXISTS (SELECT 1 FROM task_run \
         WHERE task_run.task_id = ?1 AND held_by = ?2) ORDER BY park_seq DESC LIMIT 1",
        vec![task_id.into(), runner_id.into()],
    )
}
