//! The leader-run store's statements (SPEC-core §5.5), in three dialects.

use super::{run_sql, Dialect, Stmt};
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

// ---- Driving state: the plan and the children (schema part 5) ----

/// The plan row of an admission, written in [`insert`]'s batch. Conditional on the leader row with
/// this id and start time existing, i.e. on this batch's own insert (the id is freshly minted), so
/// the statement can never attach a plan to another call's leader. `fingerprint`: the request
/// fingerprint of a keyed admission (sha256 hex), `None` for an unkeyed one.
pub fn insert_plan(
    d: Dialect,
    id: &str,
    max_concurrency: i64,
    deadline_at: Option<i64>,
    fingerprint: Option<&str>,
    now: i64,
) -> Stmt {
    Stmt::pick(
        d,
        "INSERT INTO leader_plan (leader_run_id, max_concurrency, deadline_at, cancel_requested, created_at, fingerprint) \
         SELECT ?1, ?2, ?3, 0, ?4, ?5 \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND started_at_ms = ?4)",
        "INSERT INTO leader_plan (leader_run_id, max_concurrency, deadline_at, cancel_requested, created_at, fingerprint) \
         SELECT $1::varchar, $2::bigint, $3::bigint, 0, $4::bigint, $5::varchar \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = $1::varchar AND started_at_ms = $4::bigint)",
        "INSERT INTO leader_plan (leader_run_id, max_concurrency, deadline_at, cancel_requested, created_at, fingerprint) \
         SELECT ?1, ?2, ?3, 0, ?4, ?5 FROM DUAL \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND started_at_ms = ?4)",
        vec![
            id.into(),
            max_concurrency.into(),
            deadline_at.into(),
            now.into(),
            fingerprint.into(),
        ],
    )
}

/// One child row (`not_started`), conditional as [`insert_plan`] is.
pub fn insert_child(
    d: Dialect,
    id: &str,
    idx: i64,
    session_id: &str,
    objective: &str,
    meta_json: &str,
    now: i64,
) -> Stmt {
    Stmt::pick(
        d,
        "INSERT INTO leader_child (leader_run_id, idx, session_id, task_id, objective, meta, state, skip_report) \
         SELECT ?1, ?2, ?3, NULL, ?4, ?5, 'not_started', NULL \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND started_at_ms = ?6)",
        "INSERT INTO leader_child (leader_run_id, idx, session_id, task_id, objective, meta, state, skip_report) \
         SELECT $1::varchar, $2::bigint, $3::varchar, NULL, $4::text, $5::text, 'not_started', NULL \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = $1::varchar AND started_at_ms = $6::bigint)",
        "INSERT INTO leader_child (leader_run_id, idx, session_id, task_id, objective, meta, state, skip_report) \
         SELECT ?1, ?2, ?3, NULL, ?4, ?5, 'not_started', NULL FROM DUAL \
         WHERE EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND started_at_ms = ?6)",
        vec![
            id.into(),
            idx.into(),
            session_id.into(),
            objective.into(),
            meta_json.into(),
            now.into(),
        ],
    )
}

/// The plan: `max_concurrency, deadline_at, cancel_requested, fingerprint` (no row: the leader has
/// no plan).
pub fn select_plan(d: Dialect, id: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT max_concurrency, deadline_at, cancel_requested, fingerprint FROM leader_plan \
         WHERE leader_run_id = ?1",
        vec![id.into()],
    )
}

/// Every child in index order, with its run's `run_status` and `run_error` (NULL: no run).
pub fn select_children(d: Dialect, id: &str) -> Stmt {
    Stmt::portable(
        d,
        "SELECT c.idx AS idx, c.session_id AS session_id, c.task_id AS task_id, c.objective AS objective, \
         c.meta AS meta, c.state AS state, c.skip_report AS skip_report, tr.status AS run_status, \
         tr.error AS run_error FROM leader_child c LEFT JOIN task_run tr ON tr.task_id = c.task_id \
         WHERE c.leader_run_id = ?1 ORDER BY c.idx",
        vec![id.into()],
    )
}

/// Index of the compare-and-set in [`start_child`]'s batch, and where the admission starts.
pub const START_CAS: usize = 1;
pub const START_ADMIT: usize = 2;

/// Starting a child, one batch: the compare-and-set `not_started` → `started` that names the new run
/// (only while the leader is `running` and owned by the run's owner, its plan neither cancelled nor
/// past its deadline at `run.now`, `run.session_id` is the child's session and that session is absent
/// or the owner's), then [`run_sql::admit_guarded`] under a guard that holds exactly when that CAS
/// wrote `run.task_id` (a fresh id). A loser's batch (the child already started or skipped, the leader
/// stopped) writes nothing at all; two concurrent starters are serialised on the child's row.
///
/// The batch first takes the child's row lock with a write that changes nothing, so a concurrent
/// starter queues there holding no other lock. (Without it InnoDB lets the loser take a gap lock on
/// the absent session while it waits for the child's row, and the winner's session insert then
/// deadlocks with it.)
pub fn start_child(d: Dialect, id: &str, idx: i64, run: &run_sql::NewRun<'_>) -> Vec<Stmt> {
    let lock = Stmt::portable(
        d,
        "UPDATE leader_child SET state = state WHERE leader_run_id = ?1 AND idx = ?2",
        vec![id.into(), idx.into()],
    );
    let mut batch = vec![lock, Stmt::pick(
        d,
        "UPDATE leader_child SET state = 'started', task_id = ?3 \
         WHERE leader_run_id = ?1 AND idx = ?2 AND session_id = ?4 AND state = 'not_started' \
         AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND status = 'running' AND owner IS ?5) \
         AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = ?1 AND cancel_requested = 0 \
         AND (deadline_at IS NULL OR deadline_at > ?6)) \
         AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = ?4 AND owner IS NOT ?5)",
        "UPDATE leader_child SET state = 'started', task_id = $3 \
         WHERE leader_run_id = $1 AND idx = $2 AND session_id = $4 AND state = 'not_started' \
         AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = $1 AND status = 'running' \
         AND owner IS NOT DISTINCT FROM $5) \
         AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = $1 AND cancel_requested = 0 \
         AND (deadline_at IS NULL OR deadline_at > $6)) \
         AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = $4 AND owner IS DISTINCT FROM $5)",
        "UPDATE leader_child SET state = 'started', task_id = ?3 \
         WHERE leader_run_id = ?1 AND idx = ?2 AND session_id = ?4 AND state = 'not_started' \
         AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND status = 'running' AND owner <=> ?5) \
         AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = ?1 AND cancel_requested = 0 \
         AND (deadline_at IS NULL OR deadline_at > ?6)) \
         AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = ?4 AND NOT (owner <=> ?5))",
        vec![
            id.into(),
            idx.into(),
            run.task_id.into(),
            run.session_id.into(),
            run.owner.into(),
            run.now.into(),
        ],
    )];
    batch.extend(run_sql::admit_guarded(
        d,
        run,
        Some(run_sql::TaskGuard {
            table: "leader_child",
        }),
    ));
    batch
}

/// Compare-and-set `not_started` → `skipped` with what the child reports; 1 row = this call skipped it.
pub fn skip_child(d: Dialect, id: &str, idx: i64, report: &str) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE leader_child SET state = 'skipped', skip_report = ?3 \
         WHERE leader_run_id = ?1 AND idx = ?2 AND state = 'not_started'",
        vec![id.into(), idx.into(), report.into()],
    )
}

/// Sets the plan's cancel flag; 1 row = this call set it (0: already set, or no plan).
pub fn request_cancel(d: Dialect, id: &str) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE leader_plan SET cancel_requested = 1 WHERE leader_run_id = ?1 AND cancel_requested = 0",
        vec![id.into()],
    )
}
