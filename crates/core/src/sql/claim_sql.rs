//! Claim maintenance and the run reapers (SPEC-core §3.3), in three dialects.
//!
//! Each reaper is one batch: it writes the rows it reaps terminal first, reads them back, then
//! releases exactly their claims, so a crash between ticks leaves only shapes the next tick heals.
//! Reapers re-check their predicate in the writing statement, so overlapping or repeated ticks are
//! idempotent, and they bound their work with a LIMIT (through a derived table, the one form MySQL
//! accepts for a LIMITed subquery on the table being updated).
//!
//! Other debris (a claim whose run ended out of band, a claim without any run row) is released by
//! the claim sweep, one window per call ([`sweep_claims`]): at most `limit` claims in `session_id`
//! order after a cursor, so a tick's cost is bounded by the window, never by the number of claims.
//! Walking the windows until the end of the table examines every claim once.
//!
//! **Which rows a tick changed.** Every reaper tick carries a fresh id ([`Tick::id`]). The reaping
//! UPDATE stamps the runs it fails (or requeues) with it (`task_run.reap_tick`), and the claim releases stamp the
//! claims they are about to release (`task_active.release_tick`), read the stamped rows back, then
//! delete exactly the stamped rows, all in the batch's one transaction. So each tick reports exactly
//! the `(session, task)` pairs it changed, on every dialect: a stamp is a write, which in PostgreSQL
//! and MySQL row-locks what it stamps and re-checks its predicate on rows another transaction changed
//! meanwhile (a claim an overlapping tick already deleted is skipped, a run it already failed no
//! longer matches), and SQLite / D1 batches are serialised. Overlapping ticks therefore never change
//! or report a row twice.

use super::{Dialect, SqlValue, Stmt};
use crate::json::JsonText;

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

/// A window of the claim sweep: at most `limit` claims in `session_id` order after `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepWindow<'a> {
    /// The last `session_id` a previous window examined; `""` starts from the first claim.
    pub after: &'a str,
    /// At most this many claims examined (at least 1 is examined).
    pub limit: i64,
}

/// Index, within [`sweep_claims`]'s statements, of the read of the window's last claim (one row,
/// `session_id`, when the window is full; none when the window reaches the end of the table).
pub const SWEEP_CURSOR: usize = 0;
/// Index of the stamp of the window's claims whose run is terminal or missing.
pub const SWEEP_STAMP: usize = 1;
/// Indices of the reads of the stamped claims: those whose run is terminal, those without a run row.
pub const SWEEP_TERMINAL_READ: usize = 2;
pub const SWEEP_ORPHAN_READ: usize = 3;
/// Index of the delete of the stamped claims.
pub const SWEEP_DELETE: usize = 4;

/// One text for SQLite and PostgreSQL, a twin for MySQL / MariaDB (both in `?N` notation). Where a
/// single-table `UPDATE … WHERE col IN (subquery)` would scan the updated table on MariaDB (it has
/// no semi-join for single-table updates before 11.1: a full index scan of `task_active`), the twin
/// is a multi-table `UPDATE … STRAIGHT_JOIN`, pinned to start from the small side (on small tables
/// the optimizer may otherwise start from `task_active` and lock claims outside the window).
fn mysql_twin(d: Dialect, sql: &'static str, mysql: &'static str, params: Vec<SqlValue>) -> Stmt {
    match d.built() {
        Dialect::Mysql => Stmt::portable(d, mysql, params),
        _ => Stmt::portable(d, sql, params),
    }
}

/// The claims this tick stamped, read back (served by `idx_task_active_release_tick`).
fn stamped(d: Dialect, tick: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT session_id, task_id FROM task_active WHERE release_tick = ?1",
        vec![tick.into()],
    )
}

fn delete_stamped(d: Dialect, tick: &str) -> Stmt {
    Stmt::portable(
        d,
        "DELETE FROM task_active WHERE release_tick = ?1",
        vec![tick.into()],
    )
}

/// One window of the claim sweep, as statements to run in one batch: read the window's last claim
/// (the cursor), stamp the window's claims whose run is terminal (neither running nor parked) or
/// missing (out-of-band debris), read the stamped claims back (terminal, then orphan), delete the
/// stamped. Every statement is bounded by the window: a primary-key range of at most
/// `window.limit` claims after `window.after`, then one primary-key lookup of each claim's run.
///
/// The stamp re-checks its predicate, so overlapping sweeps release and report each claim once.
/// Each statement evaluates the window anew; in SQLite / D1 a batch is serialised, so they all see
/// the same window. In PostgreSQL and MySQL, a claim admitted or released by another transaction
/// between two statements can shift the window's end by that claim; a claim so skipped is examined
/// on the next walk through the table, and no claim is ever released unless its stamp saw it as
/// debris.
pub fn sweep_claims(d: Dialect, tick: &str, window: &SweepWindow<'_>) -> Vec<Stmt> {
    let limit = window.limit.max(1);
    vec![
        // MySQL: a locking read, so the window's claims are locked in key order before the stamp
        // (overlapping sweeps of the same window otherwise deadlock upgrading the stamp's locks).
        // The rows skipped by the OFFSET are read, so locked. Sweeps walking from different
        // cursors at once can still deadlock on MariaDB; the refused batch changes nothing.
        mysql_twin(
            d,
            "SELECT session_id FROM task_active WHERE session_id > ?1 ORDER BY session_id \
             LIMIT 1 OFFSET ?2",
            "SELECT session_id FROM task_active FORCE INDEX (PRIMARY) WHERE session_id > ?1 \
             ORDER BY session_id LIMIT 1 OFFSET ?2 FOR UPDATE",
            vec![window.after.into(), (limit - 1).into()],
        ),
        mysql_twin(
            d,
            "UPDATE task_active SET release_tick = ?1 WHERE session_id IN (SELECT session_id FROM \
             task_active WHERE session_id > ?2 ORDER BY session_id LIMIT ?3) AND NOT EXISTS \
             (SELECT 1 FROM task_run tr WHERE tr.task_id = task_active.task_id \
             AND tr.status IN ('running','suspended','needs_review'))",
            "UPDATE (SELECT session_id FROM task_active FORCE INDEX (PRIMARY) WHERE session_id > ?2 \
             ORDER BY session_id LIMIT ?3) AS win STRAIGHT_JOIN task_active ta \
             ON ta.session_id = win.session_id LEFT JOIN task_run tr ON tr.task_id = ta.task_id \
             SET ta.release_tick = ?1 \
             WHERE tr.task_id IS NULL OR tr.status NOT IN ('running','suspended','needs_review')",
            vec![tick.into(), window.after.into(), limit.into()],
        ),
        Stmt::portable(
            d,
            "SELECT session_id, task_id FROM task_active WHERE release_tick = ?1 \
             AND EXISTS (SELECT 1 FROM task_run tr WHERE tr.task_id = task_active.task_id)",
            vec![tick.into()],
        ),
        Stmt::portable(
            d,
            "SELECT session_id, task_id FROM task_active WHERE release_tick = ?1 \
             AND NOT EXISTS (SELECT 1 FROM task_run tr WHERE tr.task_id = task_active.task_id)",
            vec![tick.into()],
        ),
        delete_stamped(d, tick),
    ]
}

/// Index of the reaping statement in each reaper batch.
pub const REAP_WRITE: usize = 0;
/// Index of the read-back of the reaped `(session_id, task_id)` in each reaper batch.
pub const REAP_READ: usize = 1;
/// Index of the stamp of the reaped runs' claims in each reaper batch.
pub const REAP_CLAIM_STAMP: usize = 2;
/// Index of the read-back of the reaped runs' released claims in each reaper batch.
pub const REAP_CLAIM_READ: usize = 3;
/// Index of the delete of the reaped runs' claims in each reaper batch.
pub const REAP_CLAIM_DELETE: usize = 4;

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

/// A reaper batch: the reaping write, the read-back of the reaped runs, then the release of exactly
/// their claims (stamp → read → delete). The stamp finds the reaped runs as [`reaped`] does
/// (`idx_task_run_status_updated`) and their claims by `uq_task_active_task`; no other claim is
/// examined.
fn reaper(d: Dialect, tick: &Tick<'_>, write: Stmt) -> Vec<Stmt> {
    vec![
        write,
        reaped(d, tick),
        mysql_twin(
            d,
            "UPDATE task_active SET release_tick = ?2 WHERE task_id IN (SELECT task_id FROM task_run \
             WHERE status = 'failed' AND updated_at = ?1 AND reap_tick = ?2)",
            "UPDATE task_run tr STRAIGHT_JOIN task_active ta ON ta.task_id = tr.task_id \
             SET ta.release_tick = ?2 \
             WHERE tr.status = 'failed' AND tr.updated_at = ?1 AND tr.reap_tick = ?2",
            vec![tick.now.into(), tick.id.into()],
        ),
        stamped(d, tick.id),
        delete_stamped(d, tick.id),
    ]
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

/// Index, in the parked-run reapers' batches ([`fail_parked_with_expired_checkpoint`],
/// [`reap_parked_older_than`]), of the `done` events appended for the reaped runs.
pub const REAP_DONE: usize = REAP_CLAIM_DELETE + 1;
/// Index, in the parked-run reapers' batches, of the expiry of the reaped runs' pending gates.
pub const REAP_GATE_EXPIRE: usize = REAP_CLAIM_DELETE + 2;

/// The `done` event's data for a run a parked-run reaper failed: `{status, error, errorCode}`.
fn reaped_done_json(error: &str, code: &str) -> String {
    crate::json!({ "status": "failed", "error": error, "errorCode": code }).json_text()
}

/// A parked-run reaper: [`reaper`]'s batch (the write must also advance `last_seq` by one), then a
/// `done` event at that seq for each reaped run, then its pending gate marked `expired` (no longer
/// pending, so a decision on it answers `gate_expired`), all in the one transaction. The reaping
/// write takes the run rows before the gates are touched, as every gate writer does.
fn parked_reaper(d: Dialect, tick: &Tick<'_>, write: Stmt, error: &str, code: &str) -> Vec<Stmt> {
    let mut batch = reaper(d, tick, write);
    batch.push(Stmt::pick(
        d,
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT task_id, last_seq, 'done', ?3, NULL, ?1 FROM task_run \
         WHERE status = 'failed' AND updated_at = ?1 AND reap_tick = ?2",
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT task_id, last_seq, 'done', $3::jsonb, NULL, $1::bigint FROM task_run \
         WHERE status = 'failed' AND updated_at = $1::bigint AND reap_tick = $2::varchar",
        "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
         SELECT task_id, last_seq, 'done', ?3, NULL, ?1 FROM task_run \
         WHERE status = 'failed' AND updated_at = ?1 AND reap_tick = ?2",
        vec![
            tick.now.into(),
            tick.id.into(),
            reaped_done_json(error, code).into(),
        ],
    ));
    batch.push(Stmt::portable(
        d,
        "UPDATE gate_checkpoint SET status = 'expired', pending_session = NULL, updated_at = ?1 \
         WHERE status = 'pending' AND task_id IN (SELECT task_id FROM task_run \
         WHERE status = 'failed' AND updated_at = ?1 AND reap_tick = ?2)",
        vec![tick.now.into(), tick.id.into()],
    ));
    batch
}

/// Fails parked runs whose pending gate's deadline has passed (`expires_at <= now`), at most
/// `limit`, with `approval.expired`: the run fails, its `done` event is appended, its claim released
/// and its gate marked `expired`, one batch. The candidates are found from the gates
/// (`idx_gate_checkpoint_status_expires`); a gate is pending only while its run is parked, and the
/// write re-checks the run's status.
pub fn fail_parked_with_expired_checkpoint(d: Dialect, tick: &Tick<'_>) -> Vec<Stmt> {
    let write = Stmt::portable(
        d,
        "UPDATE task_run SET status = 'failed', error = ?2, error_code = ?3, held_by = NULL, \
         last_seq = last_seq + 1, updated_at = ?1, reap_tick = ?5 \
         WHERE status IN ('suspended','needs_review') AND task_id IN (SELECT task_id FROM \
         (SELECT ck.task_id FROM gate_checkpoint ck WHERE ck.status = 'pending' \
         AND ck.expires_at <= ?1 ORDER BY ck.expires_at LIMIT ?4) AS pick)",
        vec![
            tick.now.into(),
            APPROVAL_EXPIRED_ERROR.into(),
            APPROVAL_EXPIRED_CODE.into(),
            tick.limit.into(),
            tick.id.into(),
        ],
    );
    parked_reaper(
        d,
        tick,
        write,
        APPROVAL_EXPIRED_ERROR,
        APPROVAL_EXPIRED_CODE,
    )
}

/// Fails parked runs not updated since before `cutoff` (the APPROVAL_TIMEOUT_SEC leg, for parks
/// older than the deadlines every park now carries; only scheduled when that is > 0), at most
/// `limit`, with `approval.timeout`, exactly as [`fail_parked_with_expired_checkpoint`] does.
pub fn reap_parked_older_than(d: Dialect, tick: &Tick<'_>, cutoff: i64) -> Vec<Stmt> {
    let write = Stmt::portable(
        d,
        "UPDATE task_run SET status = 'failed', error = ?3, error_code = ?4, held_by = NULL, \
         last_seq = last_seq + 1, updated_at = ?2, reap_tick = ?6 \
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
    parked_reaper(
        d,
        tick,
        write,
        APPROVAL_TIMEOUT_ERROR,
        APPROVAL_TIMEOUT_CODE,
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
