//! Claim maintenance and the run reapers (SPEC-core §3.3), in three dialects.
//!
//! Each reaper is one batch: it writes the rows it reaps terminal first, then releases claims whose
//! run is terminal, then claims without any run row, so a crash between ticks leaves only shapes the
//! next tick heals. Reapers re-check their predicate in the writing statement, so overlapping or
//! repeated ticks are idempotent, and they bound their work with a LIMIT (through a derived table,
//! the one form MySQL accepts for a LIMITed subquery on the table being updated).
//!
//! **Which rows a tick changed.** Every reaper tick carries a fresh id ([`Tick::id`]). The reaping
//! UPDATE stamps the runs it fails (or requeues) with it (`task_run.reap_tick`), and the claim sweeps stamp the
//! claims they are about to release (`task_active.release_tick`), read the stamped rows back, then
//! delete exactly the stamped rows, all in the batch's one transaction. So each tick reports exactly
//! the `(session, task)` pairs it changed, on every dialect: a stamp is a write, which in PostgreSQL
//! and MySQL row-locks what it stamps and re-checks its predicate on rows another transaction changed
//! meanwhile (a claim an overlapping tick already deleted is skipped, a run it already failed no
//! longer matches), and SQLite / D1 batches are serialised. Overlapping ticks therefore never change
//! or report a row twice.

use super::{Dialect, Stmt};

pub const STALLED_ERROR: &str = "run stalled (instance lost?)";
pub const STALLED_CODE: &str = "run.stalled";
pub const APPROVAL_EXPIRED_ERROR: &str =
    "approval expired: the pending decision expired before anyone resolved it";
pub const APPROVAL_EXPIRED_CODE: &str = "approval.expired";
pub const APPROVAL_TIMEOUT_ERROR: &str =
    "approval timed out: the run stayed parked longer than APPROVAL_TIMEOUT_SEC";
pub const APPROVAL_TIMEOUT_CODE: &str = "approval.timeout";

/// One reaper tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick<'a> {
    /// Fresh per tick (e.g. a UUIDv7): stamps the rows this tick changes. Reusing an id would let a
    /// tick also report rows an earlier tick with the same id changed.
    pub id: &'a str,
    pub now: i64,
    /// At most this many runs reaped per tick.
    pub limit: i64,
}

/// Offsets, within [`sweep_claims`]'s statements, of the reads of the released claims.
pub const SWEEP_TERMINAL_READ: usize = 1;
pub const SWEEP_ORPHAN_READ: usize = 4;

/// The claim sweep, as statements to run in one batch: release every claim whose run is terminal
/// (neither running nor parked), then every claim without any run row (out-of-band debris). Each
/// release is stamp → read the stamped `(session_id, task_id)` → delete the stamped.
pub fn sweep_claims(d: Dialect, tick: &str) -> Vec<Stmt> {
    let read = || {
        Stmt::portable(
            d,
            "SELECT session_id, task_id FROM task_active WHERE release_tick = ?1",
            vec![tick.into()],
        )
    };
    let delete = || {
        Stmt::portable(
            d,
            "DELETE FROM task_active WHERE release_tick = ?1",
            vec![tick.into()],
        )
    };
    vec![
        Stmt::portable(
            d,
            "UPDATE task_active SET release_tick = ?1 WHERE EXISTS (SELECT 1 FROM task_run tr \
             WHERE tr.task_id = task_active.task_id AND tr.status NOT IN ('running','suspended','needs_review'))",
            vec![tick.into()],
        ),
        read(),
        delete(),
        Stmt::portable(
            d,
            "UPDATE task_active SET release_tick = ?1 WHERE NOT EXISTS \
             (SELECT 1 FROM task_run tr WHERE tr.task_id = task_active.task_id)",
            vec![tick.into()],
        ),
        read(),
        delete(),
    ]
}

/// Index of the reaping statement in each reaper batch.
pub const REAP_WRITE: usize = 0;
/// Index of the read-back of the reaped `(session_id, task_id)` in each reaper batch.
pub const REAP_READ: usize = 1;
/// Index where the claim sweep starts in each reaper batch (offsets: [`SWEEP_TERMINAL_READ`] ...).
pub const REAP_SWEEP: usize = 2;

/// The reaped runs of this tick: the reaping UPDATE set `status = 'failed'`, `updated_at = now` and
/// `reap_tick` (served by `idx_task_run_status_updated`).
fn reaped(d: Dialect, tick: &Tick<'_>) -> Stmt {
    Stmt::portable(
        d,
        "SELECT session_id, task_id FROM task_run WHERE status = 'failed' AND updated_at = ?1 \
         AND reap_tick = ?2",
        vec![tick.now.into(), tick.id.into()],
    )
}

fn reaper(d: Dialect, tick: &Tick<'_>, write: Stmt) -> Vec<Stmt> {
    let mut batch = vec![write, reaped(d, tick)];
    batch.extend(sweep_claims(d, tick.id));
    batch
}

/// When a running run counts as stale: by `heartbeat_at`, with one cutoff for runs a runner holds
/// (its heartbeats stopped) and one for runs nobody holds (queued, waiting for a runner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleCutoffs {
    /// A held run is stale when `heartbeat_at < held`.
    pub held: i64,
    /// An unheld (queued) run is stale when `heartbeat_at < queued`.
    pub queued: i64,
}

/// Fails `running` runs whose evidence of life is older than their cutoff (held: `cutoffs.held`,
/// queued: `cutoffs.queued`), oldest first, at most `limit` in all, with `run.stalled`; parked runs
/// and their claims are untouched. Each branch of the pick is served by
/// `idx_task_run_status_heartbeat`.
pub fn reap_stale(d: Dialect, tick: &Tick<'_>, cutoffs: &StaleCutoffs) -> Vec<Stmt> {
    let write = Stmt::portable(
        d,
        "UPDATE task_run SET status = 'failed', error = ?3, error_code = ?4, held_by = NULL, \
         updated_at = ?2, reap_tick = ?6 \
         WHERE status = 'running' AND ((held_by IS NOT NULL AND heartbeat_at < ?1) \
         OR (held_by IS NULL AND heartbeat_at < ?7)) AND task_id IN (SELECT task_id FROM \
         (SELECT task_id, heartbeat_at FROM task_run WHERE status = 'running' AND heartbeat_at < ?1 \
         AND held_by IS NOT NULL \
         UNION ALL SELECT task_id, heartbeat_at FROM task_run WHERE status = 'running' AND heartbeat_at < ?7 \
         AND held_by IS NULL \
         ORDER BY heartbeat_at LIMIT ?5) AS pick)",
        vec![
            cutoffs.held.into(),
            tick.now.into(),
            STALLED_ERROR.into(),
            STALLED_CODE.into(),
            tick.limit.into(),
            tick.id.into(),
            cutoffs.queued.into(),
        ],
    );
    reaper(d, tick, write)
}

/// Index of the requeueing statement in [`requeue_unacked_leases`]'s batch.
pub const REQUEUE_WRITE: usize = 0;
/// Index of the read-back of the requeued `(session_id, task_id)` in [`requeue_unacked_leases`]'s batch.
pub const REQUEUE_READ: usize = 1;

/// Puts back on the queue the running runs whose lease was never acknowledged (no heartbeat or
/// append by the holder) since before `ack_cutoff`, oldest first, at most `limit`: `held_by = NULL`,
/// `lease_epoch + 1` (fencing out the silent holder), `heartbeat_at = now` (the queue wait restarts).
/// Stamped with the tick's id like the reapers (`reap_tick`), then the stamped runs are read back
/// (served by `idx_task_run_status_updated`). The outer WHERE re-checks the predicate, so
/// overlapping ticks requeue and report each run once.
pub fn requeue_unacked_leases(d: Dialect, tick: &Tick<'_>, ack_cutoff: i64) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "UPDATE task_run SET held_by = NULL, lease_epoch = lease_epoch + 1, lease_acked = 0, \
             heartbeat_at = ?2, updated_at = ?2, reap_tick = ?4 \
             WHERE status = 'running' AND heartbeat_at < ?1 AND held_by IS NOT NULL AND lease_acked = 0 \
             AND task_id IN (SELECT task_id FROM (SELECT task_id FROM task_run WHERE status = 'running' \
             AND heartbeat_at < ?1 AND held_by IS NOT NULL AND lease_acked = 0 \
             ORDER BY heartbeat_at LIMIT ?3) AS pick)",
            vec![
                ack_cutoff.into(),
                tick.now.into(),
                tick.limit.into(),
                tick.id.into(),
            ],
        ),
        Stmt::portable(
            d,
            "SELECT session_id, task_id FROM task_run WHERE status = 'running' AND updated_at = ?1 \
             AND reap_tick = ?2",
            vec![tick.now.into(), tick.id.into()],
        ),
    ]
}

/// Fails parked runs whose session has an expired checkpoint and no pending one (at most `limit`),
/// with `approval.expired`. A checkpoint is expired once `expires_at <= now`.
pub fn fail_parked_with_expired_checkpoint(d: Dialect, tick: &Tick<'_>) -> Vec<Stmt> {
    let write = Stmt::portable(
        d,
        "UPDATE task_run SET status = 'failed', error = ?2, error_code = ?3, held_by = NULL, \
         updated_at = ?1, reap_tick = ?5 \
         WHERE status IN ('suspended','needs_review') AND task_id IN (SELECT task_id FROM \
         (SELECT tr.task_id FROM task_run tr WHERE tr.status IN ('suspended','needs_review') \
         AND EXISTS (SELECT 1 FROM checkpoint ck WHERE ck.session_id = tr.session_id \
         AND ck.status IN ('pending','expired') AND ck.expires_at <= ?1) \
         AND NOT EXISTS (SELECT 1 FROM checkpoint pending WHERE pending.session_id = tr.session_id \
         AND pending.status = 'pending' AND pending.expires_at > ?1) LIMIT ?4) AS pick)",
        vec![
            tick.now.into(),
            APPROVAL_EXPIRED_ERROR.into(),
            APPROVAL_EXPIRED_CODE.into(),
            tick.limit.into(),
            tick.id.into(),
        ],
    );
    reaper(d, tick, write)
}

/// Fails parked runs not updated since before `cutoff` (the APPROVAL_TIMEOUT_SEC leg; only
/// scheduled when that is > 0), at most `limit`, with `approval.timeout`.
pub fn reap_parked_older_than(d: Dialect, tick: &Tick<'_>, cutoff: i64) -> Vec<Stmt> {
    let write = Stmt::portable(
        d,
        "UPDATE task_run SET status = 'failed', error = ?3, error_code = ?4, held_by = NULL, \
         updated_at = ?2, reap_tick = ?6 \
         WHERE status IN ('suspended','needs_review') AND updated_at < ?1 AND task_id IN (SELECT task_id FROM \
         (SELECT task_id FROM task_run WHERE status IN ('suspended','needs_review') AND updated_at < ?1 LIMIT ?5) AS pick)",
        vec![
            cutoff.into(),
            tick.now.into(),
            APPROVAL_TIMEOUT_ERROR.into(),
            APPROVAL_TIMEOUT_CODE.into(),
            tick.limit.into(),
            tick.id.into(),
        ],
    );
    reaper(d, tick, write)
}

/// A checkpoint to record (a parked run's pending gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewCheckpoint<'a> {
    /// The sha256 (hex) of the checkpoint's token.
    pub checkpoint_id: &'a str,
    pub session_id: &'a str,
    pub task_id: &'a str,
    pub owner: Option<&'a str>,
    pub gate_kind: &'a str,
    pub expires_at: i64,
    pub now: i64,
}

/// Records a checkpoint as `pending`.
pub fn insert_checkpoint(d: Dialect, c: &NewCheckpoint<'_>) -> Stmt {
    Stmt::portable(
        d,
        "INSERT INTO checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, status, expires_at, \
         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?7)",
        vec![
            c.checkpoint_id.into(),
            c.session_id.into(),
            c.task_id.into(),
            c.owner.into(),
            c.gate_kind.into(),
            c.expires_at.into(),
            c.now.into(),
        ],
    )
}

/// One reaper tick as the tick log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickRecord<'a> {
    pub tick_id: &'a str,
    pub started_at: i64,
    pub finished_at: i64,
    /// What the tick changed, JSON text.
    pub report_json: &'a str,
}

/// Records a tick, then deletes every tick older than the newest `keep` (by `(started_at, tick_id)`),
/// one batch, so the log stays bounded. The cut is the `keep + 1`-th newest tick (none: nothing to
/// delete), read through a derived table (the form MySQL accepts on the table being deleted from).
pub fn record_tick(d: Dialect, t: &TickRecord<'_>, keep: i64) -> Vec<Stmt> {
    vec![
        Stmt::portable(
            d,
            "INSERT INTO reaper_tick (tick_id, started_at, finished_at, report) VALUES (?1, ?2, ?3, ?4)",
            vec![
                t.tick_id.into(),
                t.started_at.into(),
                t.finished_at.into(),
                t.report_json.into(),
            ],
        ),
        Stmt::portable(
            d,
            "DELETE FROM reaper_tick WHERE (started_at, tick_id) <= (SELECT started_at, tick_id FROM \
             (SELECT started_at, tick_id FROM reaper_tick ORDER BY started_at DESC, tick_id DESC \
             LIMIT 1 OFFSET ?1) AS cut)",
            vec![keep.max(0).into()],
        ),
    ]
}

/// The newest `limit` recorded ticks, newest first (served by `idx_reaper_tick_started`).
pub fn recent_ticks(d: Dialect, limit: i64) -> Stmt {
    Stmt::portable(
        d,
        "SELECT tick_id, started_at, finished_at, report FROM reaper_tick \
         ORDER BY started_at DESC, tick_id DESC LIMIT ?1",
        vec![limit.into()],
    )
}
