//! The leader-run store's statements (SPEC-core §5.5), in three dialects.

use super::{Dialect, Stmt};
use crate::leader::LeaderFinish;

macro_rules! leader_cols {
    (sqlite) => {
        "leader_run_id, owner, objective_preview, status, result, error, started_at_ms, finished_at_ms"
    };
    (postgres) => {
        "leader_run_id, owner, objective_preview, status, result::text AS result, error, started_at_ms, finished_at_ms"
    };
    (mysql) => {
        "leader_run_id, owner, objective_preview, status, CAST(result AS CHAR) AS result, error, started_at_ms, finished_at_ms"
    };
}

/// Admission: a duplicate `idem_key` fails this insert (the UNIQUE key is the only cross-process
/// judge; there is no check-then-insert).
pub fn insert(
    d: Dialect,
    id: &str,
    idem_key: Option<&str>,
    owner: Option<&str>,
    preview: &str,
    now: i64,
) -> Stmt {
    Stmt::portable(
        d,
        "INSERT INTO leader_run (leader_run_id, idem_key, owner, objective_preview, status, started_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        vec![
            id.into(),
            idem_key.into(),
            owner.into(),
            preview.into(),
            "running".into(),
            now.into(),
        ],
    )
}

pub fn select_by_id(d: Dialect, id: &str) -> Stmt {
    Stmt::pick(
        d,
        concat!(
            "SELECT ",
            leader_cols!(sqlite),
            " FROM leader_run WHERE leader_run_id = ?1"
        ),
        concat!(
            "SELECT ",
            leader_cols!(postgres),
            " FROM leader_run WHERE leader_run_id = $1"
        ),
        concat!(
            "SELECT ",
            leader_cols!(mysql),
            " FROM leader_run WHERE leader_run_id = ?1"
        ),
        vec![id.into()],
    )
}

pub fn select_by_idem(d: Dialect, idem_key: &str) -> Stmt {
    Stmt::pick(
        d,
        concat!(
            "SELECT ",
            leader_cols!(sqlite),
            " FROM leader_run WHERE idem_key = ?1"
        ),
        concat!(
            "SELECT ",
            leader_cols!(postgres),
            " FROM leader_run WHERE idem_key = $1"
        ),
        concat!(
            "SELECT ",
            leader_cols!(mysql),
            " FROM leader_run WHERE idem_key = ?1"
        ),
        vec![idem_key.into()],
    )
}

/// Terminal write, only from `running` (write-once); 1 row changed = this call settled the run.
pub fn finish(
    d: Dialect,
    id: &str,
    status: LeaderFinish,
    result_json: Option<&str>,
    error: Option<&str>,
    now: i64,
) -> Stmt {
    Stmt::pick(
        d,
        "UPDATE leader_run SET status = ?1, result = ?2, error = ?3, finished_at_ms = ?4 \
         WHERE leader_run_id = ?5 AND status = 'running'",
        "UPDATE leader_run SET status = $1, result = $2::jsonb, error = $3, finished_at_ms = $4 \
         WHERE leader_run_id = $5 AND status = 'running'",
        "UPDATE leader_run SET status = ?1, result = ?2, error = ?3, finished_at_ms = ?4 \
         WHERE leader_run_id = ?5 AND status = 'running'",
        vec![
            status.as_str().into(),
            result_json.into(),
            error.into(),
            now.into(),
            id.into(),
        ],
    )
}

/// Index of the read-back of the reaped ids in [`reap_stale_running`]'s batch.
pub const REAP_READ: usize = 1;

/// Fails `running` leader runs started strictly before `now - stale_ms` with `reason`, stamping them
/// with `tick` (fresh per reaper tick), then reads back exactly the ids this batch stamped. The
/// UPDATE re-checks `status = 'running'`, so an overlapping tick never re-stamps a reaped run.
pub fn reap_stale_running(
    d: Dialect,
    tick: &str,
    reason: &str,
    now: i64,
    stale_ms: i64,
) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE leader_run SET status = 'failed', error = ?1, finished_at_ms = ?2, reap_tick = ?4 \
             WHERE status = 'running' AND started_at_ms < ?3",
            vec![
                reason.into(),
                now.into(),
                (now - stale_ms).into(),
                tick.into(),
            ],
        ),
        Stmt::portable(
            d,
            "SELECT leader_run_id FROM leader_run WHERE reap_tick = ?1",
            vec![tick.into()],
        ),
    ]
}

/// Test aid: moves a run's start time (never called in production).
pub fn backdate_started_at(d: Dialect, id: &str, started_at_ms: i64) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE leader_run SET started_at_ms = ?1 WHERE leader_run_id = ?2",
        vec![started_at_ms.into(), id.into()],
    )
}

/// Test aid: writes a raw status word (to check that unknown words are refused on read).
pub fn force_status(d: Dialect, id: &str, status: &str) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE leader_run SET status = ?1 WHERE leader_run_id = ?2",
        vec![status.into(), id.into()],
    )
}
