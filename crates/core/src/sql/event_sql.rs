//! The per-run event ledger, in three dialects.
//!
//! An append is one batch fenced by the lease epoch: first the run's `last_seq` advances by the
//! number of events (only while the run is `running` under that epoch; in PostgreSQL and MySQL this
//! also locks the row, serialising concurrent appends), then each event is inserted with the seq
//! computed from the advanced counter under the same fence. Zero rows changed by the first statement
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

/// The fenced append batch for `events` (at least one).
pub fn append(
    d: Dialect,
    task_id: &str,
    lease_epoch: i64,
    events: &[NewEvent<'_>],
    now: i64,
) -> Vec<Stmt> {
    let n = events.len() as i64;
    let mut batch = Vec::with_capacity(events.len() + 2);
    batch.push(Stmt::portable(
        d,
        "UPDATE task_run SET last_seq = last_seq + ?3, updated_at = ?4 \
         WHERE task_id = ?1 AND lease_epoch = ?2 AND status = 'running'",
        vec![task_id.into(), lease_epoch.into(), n.into(), now.into()],
    ));
    for (i, e) in events.iter().enumerate() {
        // seq = last_seq (already advanced by n) - n + (i + 1)
        let back = n - 1 - i as i64;
        batch.push(Stmt::pick(
            d,
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT $1::varchar, last_seq - $3::bigint, $4::varchar, $5::jsonb, $6::varchar, $7::bigint FROM task_run \
             WHERE task_id = $1::varchar AND lease_epoch = $2::bigint AND status = 'running'",
            "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
             SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run \
             WHERE task_id = ?1 AND lease_epoch = ?2 AND status = 'running'",
            vec![
                task_id.into(),
                lease_epoch.into(),
                back.into(),
                e.kind.into(),
                e.data.into(),
                e.event_id.into(),
                now.into(),
            ],
        ));
    }
    // Read inside the same transaction, so it is this batch's counter (the row is still locked in
    // PostgreSQL and MySQL).
    batch.push(select_last_seq(d, task_id));
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
