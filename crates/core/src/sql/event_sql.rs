//! The per-run event ledger, in three dialects.
//!
//! An append is one batch fenced by the lease and its holder: first the run's `last_seq` advances by
//! the number of events (only while the run is `running` under that epoch, held by that runner; in
//! PostgreSQL and MySQL this also locks the row, serialising concurrent appends) and, as evidence of
//! life, `heartbeat_at` becomes `now` and the lease is acknowledged; then each event is inserted with
//! the seq computed from the advanced counter under the same fence. Zero rows changed by the first statement
//! means the lease was lost and nothing was written. Seqs are therefore gap-free and ordered per run.
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
    batch.push(Stmt::portable(
        d,
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
    // Read inside the same transaction, so it is this batch's counter (the row is still locked in
    // PostgreSQL and MySQL).
    batch.push(select_last_seq(d, a.task_id));
    batch
}

/// Events of a run with `seq > after`, in order, at most `limit`.
pub fn events_after(d: Dialect, task_id: &str, after: i64, limit: i64) -> Stmt {
    Stmt::pick(
        d,
        "SELECT seq, type, data, event_id, created_at FROM run_event \
         WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        "SELECT seq, type, data::text AS data, event_id, created_at FROM run_event \
         WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        "SELECT seq, type, CAST(data AS CHAR) AS data, event_id, created_at FROM run_event \
         WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        vec![task_id.into(), after.into(), limit.into()],
    )
}
