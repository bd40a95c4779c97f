//! The runner protocol's statements, in three dialects: lease, heartbeat (with steer delivery),
//! finish, and steer queueing.
//!
//! Every write by a lease holder is fenced: `lease_epoch = ?` and `status = 'running'` sit in the WHERE
//! clause of each statement of its batch, so a stale epoch changes nothing at all.

use super::{Dialect, Stmt};

/// The oldest `running` runs no runner holds (lease candidates), oldest first.
pub fn lease_candidates(d: Dialect, limit: i64) -> Stmt {
    Stmt::pick(
        d,
        "SELECT task_id FROM task_run WHERE status = 'running' AND held_by IS NULL \
         ORDER BY created_at, task_id LIMIT ?1",
        "SELECT task_id FROM task_run WHERE status = 'running' AND held_by IS NULL \
         ORDER BY created_at, task_id LIMIT $1",
        (
            "SELECT task_id FROM task_run WHERE status = 'running' AND held_by IS NULL \
             ORDER BY created_at, task_id LIMIT ?",
            &[1],
        ),
        vec![limit.into()],
    )
}

/// Index of the compare-and-set in [`try_lease`]'s batch: 1 row changed = this runner won the lease.
pub const LEASE_CAS: usize = 0;

/// Compare-and-set: an unheld running run becomes held by `runner_id` under a new epoch; then the
/// lease is read back (only if this runner holds it).
pub fn try_lease(d: Dialect, task_id: &str, runner_id: &str, now: i64) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET held_by = ?2, lease_epoch = lease_epoch + 1, heartbeat_at = ?3, updated_at = ?3 \
             WHERE task_id = ?1 AND status = 'running' AND held_by IS NULL",
            "UPDATE task_run SET held_by = $2, lease_epoch = lease_epoch + 1, heartbeat_at = $3, updated_at = $3 \
             WHERE task_id = $1 AND status = 'running' AND held_by IS NULL",
            (
                "UPDATE task_run SET held_by = ?, lease_epoch = lease_epoch + 1, heartbeat_at = ?, updated_at = ? \
                 WHERE task_id = ? AND status = 'running' AND held_by IS NULL",
                &[2, 3, 3, 1],
            ),
            vec![task_id.into(), runner_id.into(), now.into()],
        ),
        Stmt::pick(
            d,
            "SELECT task_id, session_id, lease_epoch, objective, meta, last_seq FROM task_run \
             WHERE task_id = ?1 AND held_by = ?2",
            "SELECT task_id, session_id, lease_epoch, objective, meta::text AS meta, last_seq FROM task_run \
             WHERE task_id = $1 AND held_by = $2",
            (
                "SELECT task_id, session_id, lease_epoch, objective, CAST(meta AS CHAR) AS meta, last_seq \
                 FROM task_run WHERE task_id = ? AND held_by = ?",
                &[1, 2],
            ),
            vec![task_id.into(), runner_id.into()],
        ),
    ]
}

/// Index of the fenced liveness refresh in [`heartbeat`]'s batch.
pub const HEARTBEAT_FENCE: usize = 0;

/// A heartbeat: refresh liveness under the fence, mark the undelivered steer messages as taken by
/// this heartbeat (`delivery_id`), and read back the cancel flag and exactly those messages.
pub fn heartbeat(
    d: Dialect,
    task_id: &str,
    lease_epoch: i64,
    delivery_id: &str,
    now: i64,
) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "UPDATE task_run SET heartbeat_at = ?3 WHERE task_id = ?1 AND lease_epoch = ?2 \
             AND status = 'running' AND held_by IS NOT NULL",
            "UPDATE task_run SET heartbeat_at = $3 WHERE task_id = $1 AND lease_epoch = $2 \
             AND status = 'running' AND held_by IS NOT NULL",
            (
                "UPDATE task_run SET heartbeat_at = ? WHERE task_id = ? AND lease_epoch = ? \
                 AND status = 'running' AND held_by IS NOT NULL",
                &[3, 1, 2],
            ),
            vec![task_id.into(), lease_epoch.into(), now.into()],
        ),
        Stmt::pick(
            d,
            "UPDATE steer_message SET delivered_at = ?3, delivery_id = ?4 WHERE task_id = ?1 \
             AND delivered_at IS NULL AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
             AND lease_epoch = ?2 AND status = 'running' AND held_by IS NOT NULL)",
            "UPDATE steer_message SET delivered_at = $3, delivery_id = $4 WHERE task_id = $1 \
             AND delivered_at IS NULL AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = $1 \
             AND lease_epoch = $2 AND status = 'running' AND held_by IS NOT NULL)",
            (
                "UPDATE steer_message SET delivered_at = ?, delivery_id = ? WHERE task_id = ? \
                 AND delivered_at IS NULL AND EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ? \
                 AND lease_epoch = ? AND status = 'running' AND held_by IS NOT NULL)",
                &[3, 4, 1, 1, 2],
            ),
            vec![task_id.into(), lease_epoch.into(), now.into(), delivery_id.into()],
        ),
        Stmt::pick(
            d,
            "SELECT cancel_requested FROM task_run WHERE task_id = ?1",
            "SELECT cancel_requested FROM task_run WHERE task_id = $1",
            ("SELECT cancel_requested FROM task_run WHERE task_id = ?", &[1]),
            vec![task_id.into()],
        ),
        Stmt::pick(
            d,
            "SELECT seq, message FROM steer_message WHERE task_id = ?1 AND delivery_id = ?2 ORDER BY seq",
            "SELECT seq, message FROM steer_message WHERE task_id = $1 AND delivery_id = $2 ORDER BY seq",
            (
                "SELECT seq, message FROM steer_message WHERE task_id = ? AND delivery_id = ? ORDER BY seq",
                &[1, 2],
            ),
            vec![task_id.into(), delivery_id.into()],
        ),
    ]
}

/// Index of the fenced terminal write in [`finish`]'s batch.
pub const FINISH_WRITE: usize = 1;

/// The runner's finish, one fenced batch: append the `done` event at `last_seq + 1`, write the
/// terminal status (write-once: only from `running` under this epoch) advancing `last_seq`, release
/// this task's claim, and read the counter back. Both writes test the same pre-update fence.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    d: Dialect,
    task_id: &str,
    lease_epoch: i64,
    status: &str,
    result_json: Option<&str>,
    error: Option<&str>,
    error_code: Option<&str>,
    done_json: &str,
    now: i64,
) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq + 1, 'done', ?3, NULL, ?4 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT $1::varchar, last_seq + 1, 'done', $3::jsonb, NULL, $4::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND status = 'running'",
            (
                "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
                 SELECT ?, last_seq + 1, 'done', ?, NULL, ? FROM task_run \
                 WHERE task_id = ? AND lease_epoch = ? AND status = 'running'",
                &[1, 3, 4, 1, 2],
            ),
            vec![task_id.into(), lease_epoch.into(), done_json.into(), now.into()],
        ),
        Stmt::pick(
            d,
            "UPDATE task_run SET status = ?3, result = ?4, error = ?5, error_code = ?6, held_by = NULL, \
             last_seq = last_seq + 1, updated_at = ?7 WHERE task_id = ?1 AND lease_epoch = ?2 AND status = 'running'",
            "UPDATE task_run SET status = $3, result = $4::jsonb, error = $5, error_code = $6, held_by = NULL, \
             last_seq = last_seq + 1, updated_at = $7 WHERE task_id = $1 AND lease_epoch = $2 AND status = 'running'",
            (
                "UPDATE task_run SET status = ?, result = ?, error = ?, error_code = ?, held_by = NULL, \
                 last_seq = last_seq + 1, updated_at = ? WHERE task_id = ? AND lease_epoch = ? AND status = 'running'",
                &[3, 4, 5, 6, 7, 1, 2],
            ),
            vec![
                task_id.into(),
                lease_epoch.into(),
                status.into(),
                result_json.into(),
                error.into(),
                error_code.into(),
                now.into(),
            ],
        ),
        super::run_sql::release_claim_of(d, task_id),
        Stmt::pick(
            d,
            "SELECT last_seq FROM task_run WHERE task_id = ?1",
            "SELECT last_seq FROM task_run WHERE task_id = $1",
            ("SELECT last_seq FROM task_run WHERE task_id = ?", &[1]),
            vec![task_id.into()],
        ),
    ]
}

/// Queues a steer message for a running run (seq = previous + 1); 0 rows when the run is not running.
pub fn add_steer(d: Dialect, task_id: &str, message: &str, now: i64) -> Vec<Stmt> {
    vec![
        Stmt::pick(
            d,
            "INSERT INTO steer_message (task_id, seq, message, created_at) \
             SELECT ?1, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = ?1), 0) + 1, ?2, ?3 \
             WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = ?1 AND status = 'running')",
            "INSERT INTO steer_message (task_id, seq, message, created_at) \
             SELECT $1::varchar, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = $1::varchar), 0) + 1, \
             $2::text, $3::bigint \
             WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = $1::varchar AND status = 'running')",
            (
                "INSERT INTO steer_message (task_id, seq, message, created_at) \
                 SELECT ?, COALESCE((SELECT MAX(seq) FROM steer_message WHERE task_id = ?), 0) + 1, ?, ? FROM DUAL \
                 WHERE EXISTS (SELECT 1 FROM task_run WHERE task_id = ? AND status = 'running')",
                &[1, 1, 2, 3, 1],
            ),
            vec![task_id.into(), message.into(), now.into()],
        ),
        Stmt::pick(
            d,
            "SELECT MAX(seq) AS seq FROM steer_message WHERE task_id = ?1",
            "SELECT MAX(seq) AS seq FROM steer_message WHERE task_id = $1",
            ("SELECT MAX(seq) AS seq FROM steer_message WHERE task_id = ?", &[1]),
            vec![task_id.into()],
        ),
    ]
}
