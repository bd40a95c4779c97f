//! The runner protocol's statements, in three dialects: lease, heartbeat (with steer delivery),
//! finish, and steer queueing; and the reads and writes of the queues' dispatchers (a queue's
//! backlog, the runs leasable for a while, the fenced release of an unacknowledged lease).
//!
//! **Leasable.** A run is leasable while it is `running` and no runner holds it (`held_by IS NULL`).
//! Every write that makes it so sets `updated_at = now`: the admission, a gate decision that resumes
//! it, the requeue of an unacknowledged lease, and [`release_lease`]. So an unheld running run's
//! `updated_at` is when it became leasable (or later: a cancel request on it also moves it).
//!
//! **Ordered reads with `held_by IS NULL`.** PostgreSQL does not treat `held_by IS NULL` as fixing
//! `held_by` when it matches an ORDER BY to an index, so `ORDER BY created_at` over an index
//! `(…, held_by, created_at)` would sort; its text orders by `held_by` first (the same order: every
//! row read has `held_by` NULL), exactly the index's. MariaDB sorts (filesort) when `held_by` is
//! named in that ORDER BY, and needs it left out; SQLite takes either. So these reads differ between
//! dialects in their ORDER BY only, and no engine sorts (the plan tests check all three).
//!
//! Every write by a lease holder is fenced by the lease and the holder's identity:
//! `lease_epoch = ? AND held_by = ? AND status = 'running'` sits in the WHERE clause of each statement
//! of its batch, so a stale epoch, an unleased run or another runner's id changes nothing at all (the
//! store refuses an epoch below 1 without a query: a lease makes it at least 1). Batches that derive
//! a sequence number from the run row (finish, steer) first write that row, which in PostgreSQL and
//! MySQL row-locks it for the rest of the transaction, so concurrent batches of the same run
//! serialise instead of colliding on a key (SQLite / D1 batches are serialised anyway).

use super::{Dialect, Stmt};
use crate::status::TerminalStatus;

/// The oldest `running` runs of `queue` no runner holds (lease candidates, a queue's backlog),
/// oldest first by `(created_at, task_id)`, at most `limit`: `task_id, queue, created_at`. Served by
/// `idx_task_run_lease (queue, status, held_by, created_at, task_id)`: no sort, no scan of held runs
/// or of other queues.
pub fn lease_candidates(d: Dialect, queue: &str, limit: i64) -> Stmt {
    Stmt::pick(
        d,
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE queue = ?1 AND status = 'running' AND held_by IS NULL \
         ORDER BY created_at, task_id LIMIT ?2",
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE queue = $1 AND status = 'running' AND held_by IS NULL \
         ORDER BY held_by, created_at, task_id LIMIT $2",
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE queue = ?1 AND status = 'running' AND held_by IS NULL \
         ORDER BY created_at, task_id LIMIT ?2",
        vec![queue.into(), limit.into()],
    )
}

/// The `running` runs of every queue no runner holds that became leasable before `before` (their
/// `updated_at`, see the module's note), oldest first by `(updated_at, task_id)`, at most `limit`:
/// `task_id, queue, created_at`. Served by `idx_task_run_leasable (status, held_by, updated_at,
/// task_id)`: no sort, no scan of held or ended runs.
pub fn leasable_since(d: Dialect, before: i64, limit: i64) -> Stmt {
    Stmt::pick(
        d,
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE status = 'running' AND held_by IS NULL AND updated_at < ?1 \
         ORDER BY updated_at, task_id LIMIT ?2",
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE status = 'running' AND held_by IS NULL AND updated_at < $1 \
         ORDER BY held_by, updated_at, task_id LIMIT $2",
        "SELECT task_id, queue, created_at FROM task_run \
         WHERE status = 'running' AND held_by IS NULL AND updated_at < ?1 \
         ORDER BY updated_at, task_id LIMIT ?2",
        vec![before.into(), limit.into()],
    )
}

/// The lease columns of the runs `task_ids` (1 to [`MAX_UNACKED_READ`] ids): `task_id, status,
/// held_by, lease_epoch, lease_acked`. Only primary-key lookups (no other predicate a planner could
/// prefer an index for); the caller keeps the rows still `running`, held by the lease's runner at its
/// epoch and unacknowledged. Read before releasing several leases, so that the acknowledged ones
/// (nearly all, by the time a dispatcher's follow-up is due) cost no write.
pub fn unacked_leases(d: Dialect, task_ids: &[&str]) -> Stmt {
    let mut b = super::Builder::new(
        d,
        "SELECT task_id, status, held_by, lease_epoch, lease_acked FROM task_run WHERE task_id IN ",
    );
    b.bind_list(task_ids);
    b.build()
}

/// Most ids one [`unacked_leases`] read names (D1 binds at most 100 parameters to a statement).
pub const MAX_UNACKED_READ: usize = 50;

/// The fenced release of an unacknowledged lease: the run becomes unheld again (`held_by = NULL`,
/// `lease_acked = 0`, leasable since `now`: `heartbeat_at` and `updated_at`), only while `runner_id`
/// holds it under `lease_epoch`, has not acknowledged it, and it is `running`. 1 row changed = this
/// call released it. The epoch stays as it is: the old holder is fenced out by `held_by` (NULL now)
/// and any later lease moves the epoch on. (The requeue reaper, [`super::claim_sql::requeue_unacked_leases`],
/// returns unacknowledged leases the same way, but also moves the epoch on; both fence the holder.)
pub fn release_lease(
    d: Dialect,
    task_id: &str,
    runner_id: &str,
    lease_epoch: i64,
    now: i64,
) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE task_run SET held_by = NULL, lease_acked = 0, heartbeat_at = ?4, updated_at = ?4 \
         WHERE task_id = ?1 AND held_by = ?2 AND lease_epoch = ?3 AND lease_acked = 0 \
         AND status = 'running'",
        vec![
            task_id.into(),
            runner_id.into(),
            lease_epoch.into(),
            now.into(),
        ],
    )
}

/// Index of the compare-and-set in [`try_lease`]'s batch: 1 row changed = this runner won the lease.
pub const LEASE_CAS: usize = 0;

/// Index of the lease's row in [`try_lease`]'s batch (a row only if this runner holds the lease):
/// the compare-and-set's own `RETURNING` in SQLite and PostgreSQL, a read-back in MySQL (whose
/// `UPDATE` returns no rows).
pub fn lease_read(d: Dialect) -> usize {
    match d.built() {
        Dialect::Mysql => 1,
        _ => LEASE_CAS,
    }
}

/// Index of the decision the lease resumes from (its latest resolved gate) in [`try_lease`]'s
/// batch, where it is a statement of its own (MySQL: `gate_kind`, `card`, `decision`, `reason`); in
/// SQLite and PostgreSQL it is the lease row's `resume` column, `[gate_kind, card, decision,
/// reason]` as JSON text (NULL when there is none).
pub fn lease_resume(d: Dialect) -> Option<usize> {
    match d.built() {
        Dialect::Mysql => Some(2),
        _ => None,
    }
}

/// The lease's compare-and-set returning its row, for the dialects with `UPDATE … RETURNING`:
/// placeholders `task`, `runner` and `now`, how `meta` is read as text, and `resume_array`: the
/// run's latest resolved gate as one JSON array `[gate_kind, card, decision, reason]` (the card as
/// its text), built by the dialect's JSON function.
///
/// The decision the lease resumes from is one scalar subquery (served by
/// `uq_gate_checkpoint_task_seq`, as `gate_sql::resume_of`), not one per column: the statement is
/// compiled on every lease, and four subqueries took twice the time to prepare and run of one
/// (native SQLite, no row matched: 58 µs against 34). It is looked up only for a run with events: a
/// park appends its event at `last_seq + 1` in the batch that inserts its checkpoint, so a run
/// whose `last_seq` is 0 (every run's first lease) never parked and has no decision to resume
/// from — NULL without a seek.
macro_rules! lease_returning {
    ($task:literal, $runner:literal, $now:literal, $meta:literal, $resume_array:literal) => {
        concat!(
            "UPDATE task_run SET held_by = ",
            $runner,
            ", lease_epoch = lease_epoch + 1, lease_acked = 0, heartbeat_at = ",
            $now,
            ", updated_at = ",
            $now,
            " WHERE task_id = ",
            $task,
            " AND status = 'running' AND held_by IS NULL \
             RETURNING task_id, session_id, lease_epoch, objective, ",
            $meta,
            ", last_seq, created_at, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ",
            $task,
            " AND delivered_at IS NULL) AS steer_pending, CASE WHEN last_seq > 0 THEN (SELECT ",
            $resume_array,
            " FROM gate_checkpoint WHERE task_id = ",
            $task,
            " AND status = 'resolved' ORDER BY park_seq DESC LIMIT 1) END AS resume"
        )
    };
}

/// Compare-and-set: an unheld running run becomes held by `runner_id` under a new epoch, not yet
/// acknowledged (`lease_acked = 0`; its holder's first heartbeat or append acknowledges it); the
/// lease comes back only if this runner won it, with what already waits for the new holder (as an
/// append reads it: a cancel, steer messages queued while the run waited for a runner) and the
/// decision it resumes from (if any). One statement in SQLite and PostgreSQL (`UPDATE …
/// RETURNING`, as the floor's one conditional update); three in MySQL (the update, the read-back,
/// the decision).
pub fn try_lease(d: Dialect, task_id: &str, runner_id: &str, now: i64) -> Vec<Stmt> {
    let params = || vec![task_id.into(), runner_id.into(), now.into()];
    match d.built() {
        Dialect::Sqlite => vec![Stmt::new(
            lease_returning!(
                "?1",
                "?2",
                "?3",
                "meta",
                "json_array(gate_kind, card, decision, reason)"
            ),
            params(),
        )],
        Dialect::Postgres => vec![Stmt::new(
            lease_returning!(
                "$1",
                "$2",
                "$3",
                "meta::text AS meta",
                "json_build_array(gate_kind, card::text, decision, reason)::text"
            ),
            params(),
        )],
        Dialect::Mysql => vec![
            Stmt::portable(
                d,
                "UPDATE task_run SET held_by = ?2, lease_epoch = lease_epoch + 1, lease_acked = 0, \
                 heartbeat_at = ?3, updated_at = ?3 WHERE task_id = ?1 AND status = 'running' AND held_by IS NULL",
                params(),
            ),
            Stmt::portable(
                d,
                "SELECT task_id, session_id, lease_epoch, objective, CAST(meta AS CHAR) AS meta, last_seq, \
                 created_at, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) \
                 AS steer_pending FROM task_run WHERE task_id = ?1 AND held_by = ?2",
                vec![task_id.into(), runner_id.into()],
            ),
            super::gate_sql::resume_of(d, task_id, runner_id),
        ],
    }
}

/// What a heartbeat carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    pub task_id: &'a str,
    pub lease_epoch: i64,
    /// The runner holding the lease (`held_by`).
    pub runner_id: &'a str,
    /// Fresh per heartbeat: names the steer messages this heartbeat takes.
    pub delivery_id: &'a str,
    /// Most steer messages this heartbeat takes (the oldest undelivered ones).
    pub steer_page: i64,
    pub now: i64,
}

/// Index of the fenced read in [`heartbeat`]'s batch: a row exactly when the lease is still held
/// (decided from a read, not a change count: a heartbeat in the same millisecond as the previous one
/// changes no value, which MySQL reports as 0 affected rows).
pub const HEARTBEAT_READ: usize = 2;
/// Index of the marking of the waiting steer messages in [`heartbeat`]'s batch.
pub const HEARTBEAT_MARK: usize = 1;
/// Index of the delivered steer messages in [`heartbeat`]'s batch.
pub const HEARTBEAT_STEER: usize = 3;

/// A heartbeat: refresh liveness and acknowledge the lease under the fence, mark the oldest
/// undelivered steer messages (at most `steer_page`) as taken by this heartbeat (`delivery_id`), and
/// read back the fenced cancel flag, how many messages still wait, and exactly the messages taken:
/// a message is marked delivered only in the batch that returns it. Undelivered messages are always
/// a suffix of the run's seqs (taken oldest first), so the page is `seq < first undelivered + page`.
/// Every read of `steer_message` here goes by `(task_id, delivered_at)` (`idx_steer_message_pending`):
/// the waiting messages, then the ones this heartbeat marked (its `now`, then its delivery id), never
/// the run's whole history.
pub fn heartbeat(d: Dialect, h: &Heartbeat<'_>) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET heartbeat_at = ?3, lease_acked = 1 WHERE task_id = ?1 \
             AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                h.task_id.into(),
                h.lease_epoch.into(),
                h.now.into(),
                h.runner_id.into(),
            ],
        ),
        Stmt::pick(
            d,
            "UPDATE steer_message SET delivered_at = ?3, delivery_id = ?4 WHERE task_id = ?1 \
             AND delivered_at IS NULL AND seq < (SELECT MIN(seq) FROM steer_message \
             WHERE task_id = ?1 AND delivered_at IS NULL) + ?6 \
             AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
             AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running')",
            "UPDATE steer_message SET delivered_at = $3, delivery_id = $4 WHERE task_id = $1 \
             AND delivered_at IS NULL AND seq < (SELECT MIN(seq) FROM steer_message \
             WHERE task_id = $1 AND delivered_at IS NULL) + $6::bigint \
             AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = $1 \
             AND lease_epoch = $2 AND held_by = $5 AND status = 'running')",
            // MySQL refuses a subquery on the table being updated unless it is materialised first.
            "UPDATE steer_message SET delivered_at = ?3, delivery_id = ?4 WHERE task_id = ?1 \
             AND delivered_at IS NULL AND seq < (SELECT page_end FROM (SELECT MIN(seq) + ?6 AS page_end \
             FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) AS first_undelivered) \
             AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
             AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running')",
            vec![
                h.task_id.into(),
                h.lease_epoch.into(),
                h.now.into(),
                h.delivery_id.into(),
                h.runner_id.into(),
                h.steer_page.into(),
            ],
        ),
        Stmt::portable(
            d,
            "SELECT cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 \
             AND delivered_at IS NULL) AS steer_pending FROM task_run WHERE task_id = ?1 \
             AND lease_epoch = ?2 AND held_by = ?3 AND status = 'running'",
            vec![h.task_id.into(), h.lease_epoch.into(), h.runner_id.into()],
        ),
        Stmt::portable(
            d,
            "SELECT seq, message FROM steer_message WHERE task_id = ?1 AND delivered_at = ?3 \
             AND delivery_id = ?2 ORDER BY seq",
            vec![h.task_id.into(), h.delivery_id.into(), h.now.into()],
        ),
    ]
}

/// A runner's finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish<'a> {
    pub task_id: &'a str,
    pub lease_epoch: i64,
    /// The runner holding the lease (`held_by`).
    pub runner_id: &'a str,
    pub status: TerminalStatus,
    /// JSON text.
    pub result_json: Option<&'a str>,
    pub error: Option<&'a str>,
    pub error_code: Option<&'a str>,
    /// The `done` event's data, JSON text.
    pub done_json: &'a str,
    pub now: i64,
}

/// Index of the fence in [`finish`]'s batch: advances `last_seq` by one (the `done` event's seq) and
/// locks the row; 0 rows = lease lost, and then no statement of the batch writes anything.
pub const FINISH_FENCE: usize = 0;
/// Index of the terminal write in [`finish`]'s batch.
pub const FINISH_WRITE: usize = 2;

/// The runner's finish, one batch fenced by the lease and its holder: advance `last_seq` (locking the
/// row), append the `done` event at the advanced `last_seq`, write the terminal status (write-once:
/// only from `running` under this lease), release this task's claim, and read the run back as the
/// batch left it (its `last_seq` is the `done` event's seq): the finish's answer, in the same round
/// trip.
pub fn finish(d: Dialect, f: &Finish<'_>) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET last_seq = last_seq + 1, updated_at = ?3 \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?4 AND status = 'running'",
            vec![
                f.task_id.into(),
                f.lease_epoch.into(),
                f.now.into(),
                f.runner_id.into(),
            ],
        ),
        Stmt::pick(
            d,
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq, 'done', ?3, NULL, ?4 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT $1::varchar, last_seq, 'done', $3::jsonb, NULL, $4::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND held_by = $5::varchar \
             AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq, 'done', ?3, NULL, ?4 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running'",
            vec![
                f.task_id.into(),
                f.lease_epoch.into(),
                f.done_json.into(),
                f.now.into(),
                f.runner_id.into(),
            ],
        ),
        Stmt::pick(
            d,
            "UPDATE task_run SET status = ?3, result = ?4, error = ?5, error_code = ?6, held_by = NULL, \
             updated_at = ?7 WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
            "UPDATE task_run SET status = $3, result = $4::jsonb, error = $5, error_code = $6, held_by = NULL, \
             updated_at = $7 WHERE task_id = $1 AND lease_epoch = $2 AND held_by = $8 AND status = 'running'",
            "UPDATE task_run SET status = ?3, result = ?4, error = ?5, error_code = ?6, held_by = NULL, \
             updated_at = ?7 WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
            vec![
                f.task_id.into(),
                f.lease_epoch.into(),
                f.status.as_str().into(),
                f.result_json.into(),
                f.error.into(),
                f.error_code.into(),
                f.now.into(),
                f.runner_id.into(),
            ],
        ),
        super::run_sql::release_claim_of(d, f.task_id),
        super::run_sql::select_run(d, f.task_id),
    ]
}

/// Index of the insert in [`add_steer`]'s batch: 1 row = queued, 0 = the run is not running or its
/// queue is full (the read at [`STEER_READ`] tells which).
pub const STEER_INSERT: usize = 1;
/// Index of the read in [`add_steer`]'s batch: the run's last steer seq and its status.
pub const STEER_READ: usize = 2;

/// Queues a steer message for a running run (seq = previous + 1) unless the run's undelivered
/// queue would then exceed `max_messages` messages or `max_bytes` bytes: lock the run row (a no-op
/// write, so concurrent steers of one run serialise in PostgreSQL and MySQL, and a heartbeat taking
/// messages waits or goes first), insert under both bounds, and read back the last seq and the run's
/// status. A refused steer writes nothing and drops nothing already queued. Lengths are bytes in
/// every dialect.
pub fn add_steer(d: Dialect, s: &NewSteer<'_>) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET updated_at = updated_at WHERE task_id = ?1 AND status = 'running'",
            vec![s.task_id.into()],
        ),
        Stmt::pick(
            d,
            "INSERT INTO steer_message (task_id, seq, message, created_at) \
             SELECT ?1, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = ?1), 0) + 1, ?2, ?3 \
             WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = ?1 AND status = 'running') \
             AND (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) < ?4 \
             AND (SELECT COALESCE(SUM(LENGTH(CAST(message AS BLOB))), 0) FROM steer_message \
             WHERE task_id = ?1 AND delivered_at IS NULL) + ?5 <= ?6",
            "INSERT INTO steer_message (task_id, seq, message, created_at) \
             SELECT $1::varchar, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = $1::varchar), 0) + 1, \
             $2::text, $3::bigint \
             WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = $1::varchar AND status = 'running') \
             AND (SELECT COUNT(*) FROM steer_message WHERE task_id = $1::varchar AND delivered_at IS NULL) < $4::bigint \
             AND (SELECT COALESCE(SUM(octet_length(message)), 0) FROM steer_message \
             WHERE task_id = $1::varchar AND delivered_at IS NULL) + $5::bigint <= $6::bigint",
            "INSERT INTO steer_message (task_id, seq, message, created_at) \
             SELECT ?1, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = ?1), 0) + 1, ?2, ?3 \
             FROM DUAL WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = ?1 AND status = 'running') \
             AND (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) < ?4 \
             AND (SELECT COALESCE(SUM(LENGTH(message)), 0) FROM steer_message \
             WHERE task_id = ?1 AND delivered_at IS NULL) + ?5 <= ?6",
            vec![
                s.task_id.into(),
                s.message.into(),
                s.now.into(),
                s.max_messages.into(),
                (s.message.len() as i64).into(),
                s.max_bytes.into(),
            ],
        ),
        Stmt::portable(
            d,
            "SELECT (SELECT MAX(seq) FROM steer_message WHERE task_id = ?1) AS seq, \
             (SELECT status FROM task_run WHERE task_id = ?1) AS status",
            vec![s.task_id.into()],
        ),
    ]
}

/// A steer message to queue, with the queue's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSteer<'a> {
    pub task_id: &'a str,
    pub message: &'a str,
    pub now: i64,
    /// Most undelivered messages the run may hold, this one included.
    pub max_messages: i64,
    /// Most undelivered bytes (sum of message lengths) the run may hold, this one included.
    pub max_bytes: i64,
}
