//! Claim maintenance and the run reapers (SPEC-core §3.3), in three dialects.
//!
//! Each reaper is one batch: it writes the rows it reaps terminal first, then releases claims whose
//! run is terminal, then claims without any run row, so a crash between ticks leaves only shapes the
//! next tick heals. Reapers re-check their predicate in the writing statement, so overlapping or
//! repeated ticks are idempotent, and they bound their work with a LIMIT (through a derived table,
//! the one form MySQL accepts for a LIMITed subquery on the table being updated).

use super::{Dialect, SqlValue, Stmt};

pub const STALLED_ERROR: &str = "run stalled (instance lost?)";
pub const STALLED_CODE: &str = "run.stalled";
pub const APPROVAL_EXPIRED_ERROR: &str =
    "approval expired: the pending decision expired before anyone resolved it";
pub const APPROVAL_EXPIRED_CODE: &str = "approval.expired";
pub const APPROVAL_TIMEOUT_ERROR: &str =
    "approval timed out: the run stayed parked longer than APPROVAL_TIMEOUT_SEC";
pub const APPROVAL_TIMEOUT_CODE: &str = "approval.timeout";

/// Releases every claim whose run is terminal (neither running nor parked).
pub fn release_terminal_claims(d: Dialect) -> Stmt {
    Stmt::pick(
        d,
        "DELETE FROM task_active WHERE EXISTS (SELECT 1 FROM task_run tr \
         WHERE tr.task_id = task_active.task_id AND tr.status NOT IN ('running','suspended','needs_review'))",
        "DELETE FROM task_active ta USING task_run tr WHERE ta.task_id = tr.task_id \
         AND tr.status NOT IN ('running','suspended','needs_review')",
        (
            "DELETE ta FROM task_active ta JOIN task_run tr ON ta.task_id = tr.task_id \
             WHERE tr.status NOT IN ('running','suspended','needs_review')",
            &[],
        ),
        vec![],
    )
}

/// Releases every claim that has no run row at all (out-of-band debris). The text is the same in
/// every dialect.
pub fn release_orphan_claims(d: Dialect) -> Stmt {
    const SQL: &str = "DELETE FROM task_active WHERE NOT EXISTS \
                       (SELECT 1 FROM task_run tr WHERE tr.task_id = task_active.task_id)";
    Stmt::pick(d, SQL, SQL, (SQL, &[]), vec![])
}

/// Index of the reaping statement in each reaper batch; its change count is the number reaped.
pub const REAP_ROWS: usize = 0;

/// The claim sweep that closes every reaper batch.
fn sweeps(d: Dialect) -> [Stmt; 2] {
    [release_terminal_claims(d), release_orphan_claims(d)]
}

/// Fails `running` runs whose driver has been silent since before `cutoff` (at most `limit`), with
/// `run.stalled`; parked runs and their claims are untouched.
pub fn reap_stale(d: Dialect, cutoff: i64, now: i64, limit: i64) -> Vec<Stmt> {
    let mut batch = vec![Stmt::pick(
        d,
        "UPDATE task_run SET status = 'failed', error = ?3, error_code = ?4, held_by = NULL, updated_at = ?2 \
         WHERE status = 'running' AND heartbeat_at < ?1 AND task_id IN (SELECT task_id FROM \
         (SELECT task_id FROM task_run WHERE status = 'running' AND heartbeat_at < ?1 ORDER BY heartbeat_at LIMIT ?5) AS pick)",
        "UPDATE task_run SET status = 'failed', error = $3, error_code = $4, held_by = NULL, updated_at = $2 \
         WHERE status = 'running' AND heartbeat_at < $1 AND task_id IN (SELECT task_id FROM \
         (SELECT task_id FROM task_run WHERE status = 'running' AND heartbeat_at < $1 ORDER BY heartbeat_at LIMIT $5) AS pick)",
        (
            "UPDATE task_run SET status = 'failed', error = ?, error_code = ?, held_by = NULL, updated_at = ? \
             WHERE status = 'running' AND heartbeat_at < ? AND task_id IN (SELECT task_id FROM \
             (SELECT task_id FROM task_run WHERE status = 'running' AND heartbeat_at < ? ORDER BY heartbeat_at LIMIT ?) AS pick)",
            &[3, 4, 2, 1, 1, 5],
        ),
        vec![
            cutoff.into(),
            now.into(),
            STALLED_ERROR.into(),
            STALLED_CODE.into(),
            limit.into(),
        ],
    )];
    batch.extend(sweeps(d));
    batch
}

/// Fails parked runs whose session has an expired checkpoint and no pending one (at most `limit`),
/// with `approval.expired`. A checkpoint is expired once `expires_at <= now`.
pub fn fail_parked_with_expired_checkpoint(d: Dialect, now: i64, limit: i64) -> Vec<Stmt> {
    let mut batch = vec![Stmt::pick(
        d,
        "UPDATE task_run SET status = 'failed', error = ?2, error_code = ?3, held_by = NULL, updated_at = ?1 \
         WHERE status IN ('suspended','needs_review') AND task_id IN (SELECT task_id FROM \
         (SELECT tr.task_id FROM task_run tr WHERE tr.status IN ('suspended','needs_review') \
         AND EXISTS (SELECT 1 FROM checkpoint ck WHERE ck.session_id = tr.session_id \
         AND ck.status IN ('pending','expired') AND ck.expires_at <= ?1) \
         AND NOT EXISTS (SELECT 1 FROM checkpoint pending WHERE pending.session_id = tr.session_id \
         AND pending.status = 'pending' AND pending.expires_at > ?1) LIMIT ?4) AS pick)",
        "UPDATE task_run SET status = 'failed', error = $2, error_code = $3, held_by = NULL, updated_at = $1 \
         WHERE status IN ('suspended','needs_review') AND task_id IN (SELECT task_id FROM \
         (SELECT tr.task_id FROM task_run tr WHERE tr.status IN ('suspended','needs_review') \
         AND EXISTS (SELECT 1 FROM checkpoint ck WHERE ck.session_id = tr.session_id \
         AND ck.status IN ('pending','expired') AND ck.expires_at <= $1) \
         AND NOT EXISTS (SELECT 1 FROM checkpoint pending WHERE pending.session_id = tr.session_id \
         AND pending.status = 'pending' AND pending.expires_at > $1) LIMIT $4) AS pick)",
        (
            "UPDATE task_run SET status = 'failed', error = ?, error_code = ?, held_by = NULL, updated_at = ? \
             WHERE status IN ('suspended','needs_review') AND task_id IN (SELECT task_id FROM \
             (SELECT tr.task_id FROM task_run tr WHERE tr.status IN ('suspended','needs_review') \
             AND EXISTS (SELECT 1 FROM checkpoint ck WHERE ck.session_id = tr.session_id \
             AND ck.status IN ('pending','expired') AND ck.expires_at <= ?) \
             AND NOT EXISTS (SELECT 1 FROM checkpoint pending WHERE pending.session_id = tr.session_id \
             AND pending.status = 'pending' AND pending.expires_at > ?) LIMIT ?) AS pick)",
            &[2, 3, 1, 1, 1, 4],
        ),
        vec![
            now.into(),
            APPROVAL_EXPIRED_ERROR.into(),
            APPROVAL_EXPIRED_CODE.into(),
            limit.into(),
        ],
    )];
    batch.extend(sweeps(d));
    batch
}

/// Fails parked runs not updated since before `cutoff` (the APPROVAL_TIMEOUT_SEC leg; only
/// scheduled when that is > 0), at most `limit`, with `approval.timeout`.
pub fn reap_parked_older_than(d: Dialect, cutoff: i64, now: i64, limit: i64) -> Vec<Stmt> {
    let mut batch = vec![Stmt::pick(
        d,
        "UPDATE task_run SET status = 'failed', error = ?3, error_code = ?4, held_by = NULL, updated_at = ?2 \
         WHERE status IN ('suspended','needs_review') AND updated_at < ?1 AND task_id IN (SELECT task_id FROM \
         (SELECT task_id FROM task_run WHERE status IN ('suspended','needs_review') AND updated_at < ?1 LIMIT ?5) AS pick)",
        "UPDATE task_run SET status = 'failed', error = $3, error_code = $4, held_by = NULL, updated_at = $2 \
         WHERE status IN ('suspended','needs_review') AND updated_at < $1 AND task_id IN (SELECT task_id FROM \
         (SELECT task_id FROM task_run WHERE status IN ('suspended','needs_review') AND updated_at < $1 LIMIT $5) AS pick)",
        (
            "UPDATE task_run SET status = 'failed', error = ?, error_code = ?, held_by = NULL, updated_at = ? \
             WHERE status IN ('suspended','needs_review') AND updated_at < ? AND task_id IN (SELECT task_id FROM \
             (SELECT task_id FROM task_run WHERE status IN ('suspended','needs_review') AND updated_at < ? LIMIT ?) AS pick)",
            &[3, 4, 2, 1, 1, 5],
        ),
        vec![
            cutoff.into(),
            now.into(),
            APPROVAL_TIMEOUT_ERROR.into(),
            APPROVAL_TIMEOUT_CODE.into(),
            limit.into(),
        ],
    )];
    batch.extend(sweeps(d));
    batch
}

/// Records a checkpoint (a parked run's pending gate); `checkpoint_id` is the sha256 of its token.
#[allow(clippy::too_many_arguments)]
pub fn insert_checkpoint(
    d: Dialect,
    checkpoint_id: &str,
    session_id: &str,
    task_id: &str,
    owner: Option<&str>,
    gate_kind: &str,
    expires_at: i64,
    now: i64,
) -> Stmt {
    Stmt::pick(
        d,
        "INSERT INTO checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, status, expires_at, \
         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?7)",
        "INSERT INTO checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, status, expires_at, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $7)",
        (
            "INSERT INTO checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, status, expires_at, \
             created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            &[1, 2, 3, 4, 5, 6, 7, 7],
        ),
        vec![
            checkpoint_id.into(),
            session_id.into(),
            task_id.into(),
            SqlValue::from(owner),
            gate_kind.into(),
            expires_at.into(),
            now.into(),
        ],
    )
}
