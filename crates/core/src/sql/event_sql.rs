//! The per-run event ledger, in three dialects.
//!
//! An append is one batch fenced by the lease and its holder: first the run's `last_seq` advances by
//! the number of events (only while the run is `running` under that epoch, held by that runner; in
//! PostgreSQL and MySQL this also locks the row, serialising concurrent appends) and, as evidence of
//! life, `heartbeat_at` becomes `now` and the lease is acknowledged; then each event is inserted with
//! the seq computed from the advanced counter under the same fence. Zero rows changed by the first statement
//! means the lease was lost and nothing was written. Seqs are therefore gap-free and ordered per run.
//! The counter comes back with what waits for the holder (cancel, steer): from the update itself
//! (`RETURNING`, SQLite and PostgreSQL) or from a read that ends the batch (MySQL).
//! A duplicate `event_id` (unique per run) fails the whole batch on `run_event`.

use super::{Dialect, Stmt};

/// One event to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewEvent<'a> {
    pub kind: &'a str,
    /// JSON text.
    pub data: &'a str,
    pub event_id: Option<&'a str>,
}

/// Index of the fencing counter update in [`append`]'s batch.
pub const APPEND_FENCE: usize = 0;

/// The run's event counter.
pub fn select_last_seq(d: Dialect, task_id: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT last_seq FROM task_run WHERE task_id = ?1",
        vec![task_id.into()],
    )
}

/// An append by a lease holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Append<'a> {
    pub task_id: &'a str,
    pub lease_epoch: i64,
    /// The runner holding the lease (`held_by`).
    pub runner_id: &'a str,
    pub events: &'a [NewEvent<'a>],
    pub now: i64,
}

/// The fenced append batch for `a.events` (at least one).
pub fn append(d: Dialect, a: &Append<'_>) -> Vec<Stmt> {
    let n = a.events.len() as i64;
    let mut batch = Vec::with_capacity(a.events.len() + 2);
    // In SQLite and PostgreSQL the fenced update returns the advanced counter with what waits for
    // the holder (as the heartbeat reads it: the cancel flag, the count of undelivered steer
    // messages); MySQL's update returns no rows, so its batch ends with that read instead. Either
    // way it is read inside the batch's transaction: this batch's counter (the row is still locked
    // in PostgreSQL and MySQL). A runner that is told nothing waits needs no heartbeat to learn it
    // (an append is already proof of life).
    batch.push(Stmt::pick(
        d,
        "UPDATE task_run SET last_seq = last_seq + ?3, updated_at = ?4, heartbeat_at = ?4, lease_acked = 1 \
         WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running' \
         RETURNING last_seq, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 \
         AND delivered_at IS NULL) AS steer_pending",
        "UPDATE task_run SET last_seq = last_seq + $3, updated_at = $4, heartbeat_at = $4, lease_acked = 1 \
         WHERE task_id = $1 AND lease_epoch = $2 AND held_by = $5 AND status = 'running' \
         RETURNING last_seq, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = $1 \
         AND delivered_at IS NULL) AS steer_pending",
        "UPDATE task_run SET last_seq = last_seq + ?3, updated_at = ?4, heartbeat_at = ?4, lease_acked = 1 \
         WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running'",
        vec![
            a.task_id.into(),
            a.lease_epoch.into(),
            n.into(),
            a.now.into(),
            a.runner_id.into(),
        ],
    ));
    for (i, e) in a.events.iter().enumerate() {
        // seq = last_seq (already advanced by n) - n + (i + 1)
        let back = n - 1 - i as i64;
        batch.push(Stmt::pick(
            d,
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT $1::varchar, last_seq - $3::bigint, $4::varchar, $5::jsonb, $6::varchar, $7::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND held_by = $8::varchar \
             AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
            vec![
                a.task_id.into(),
                a.lease_epoch.into(),
                back.into(),
                e.kind.into(),
                e.data.into(),
                e.event_id.into(),
                a.now.into(),
                a.runner_id.into(),
            ],
        ));
    }
    if d.built() == Dialect::Mysql {
        batch.push(Stmt::portable(
            d,
            "SELECT last_seq, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 \
             AND delivered_at IS NULL) AS steer_pending FROM task_run WHERE task_id = ?1",
            vec![a.task_id.into()],
        ));
    }
    batch
}

/// Index of the counter and what waits in [`append`]'s batch: the fenced update's own `RETURNING`
/// in SQLite and PostgreSQL; `None` in MySQL, where it is the batch's last statement.
pub fn append_read(d: Dialect) -> Option<usize> {
    match d.built() {
        Dialect::Mysql => None,
        _ => Some(APPEND_FENCE),
    }
}

/// Most event data one page of events carries, in bytes (the sum of the `data` texts): a page
/// stops after the event that reaches it, so it holds at least one event and at most this plus one
/// event (≤ 1 MiB, the body limit of an append).
pub const EVENT_PAGE_MAX_BYTES: i64 = 1024 * 1024;

/// Events of a run with `seq > after`, in order: at most `limit` of them, and no event after the
/// one where the running sum of `data` bytes reaches `max_bytes` (the first event always comes).
/// The count bound is applied first (an index range read of at most `limit` rows), the byte bound
/// over that page by a running sum, so the database never reads past `limit` rows and the caller
/// never receives much more than `max_bytes`.
pub fn events_after(d: Dialect, task_id: &str, after: i64, limit: i64, max_bytes: i64) -> Stmt {
    Stmt::pick(
        d,
        "SELECT seq, type, data, event_id, created_at FROM (\
         SELECT seq, type, data, event_id, created_at, size, \
         SUM(size) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto FROM (\
         SELECT seq, type, data, event_id, created_at, LENGTH(CAST(data AS BLOB)) AS size FROM run_event \
         WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) AS page) AS sized \
         WHERE upto - size < ?4 ORDER BY seq",
        "SELECT seq, type, data, event_id, created_at FROM (\
         SELECT seq, type, data, event_id, created_at, octet_length(data) AS size, \
         SUM(octet_length(data)) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto \
         FROM (SELECT seq, type, data::text AS data, event_id, created_at FROM run_event \
         WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) AS page) AS sized \
         WHERE upto - size < $4 ORDER BY seq",
        "SELECT seq, type, data, event_id, created_at FROM (\
         SELECT seq, type, data, event_id, created_at, LENGTH(data) AS size, \
         SUM(LENGTH(data)) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto \
         FROM (SELECT seq, type, CAST(data AS CHAR) AS data, event_id, created_at FROM run_event \
         WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) AS page) AS sized \
         WHERE upto - size < ?4 ORDER BY seq",
        vec![
            task_id.into(),
            after.into(),
            limit.into(),
            max_bytes.into(),
        ],
    )
}
