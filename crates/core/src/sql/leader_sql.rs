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

/// A page of leader runs, newest first by `(started_at_ms, leader_run_id)`, strictly after `cursor`
/// in that order; `scope` filters by owner as [`run_sql::list_runs`] does (an equality or `IS NULL`),
/// `status` by status word. Fetch `limit + 1` to learn whether another page follows. Served by the
/// index whose prefix is the filter (`owner`, `owner, status`, `status`, else none) and whose tail is
/// the sort key: `idx_leader_run_owner_started`, `idx_leader_run_owner_status_started`,
/// `idx_leader_run_status_started`, `idx_leader_run_started_id`.
pub fn list(
    d: Dialect,
    scope: &run_sql::ListScope<'_>,
    status: Option<&str>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    let cols = match d.built() {
        Dialect::Sqlite => leader_cols!(sqlite),
        Dialect::Postgres => leader_cols!(postgres),
        Dialect::Mysql => leader_cols!(mysql),
    };
    let mut b = super::Builder::new(d, &format!("SELECT {cols} FROM leader_run WHERE "));
    scope.push(&mut b);
    if let Some(status) = status {
        b.push(" AND status = ").bind(status);
    }
    if let Some((at, id)) = cursor {
        // The first conjunct is implied by the second; it is there because MariaDB turns only it,
        // not a row comparison, into an index range (so a deep page does not scan the pages before it).
        b.push(" AND started_at_ms <= ")
            .bind(at)
            .push(" AND (started_at_ms, leader_run_id) < (")
            .bind(at)
            .push(", ")
            .bind(id)
            .push(")");
    }
    b.push(" ORDER BY started_at_ms DESC, leader_run_id DESC LIMIT ")
        .bind(limit);
    b.build()
}

/// The ids of `running` leader runs after `after` (exclusive), ascending, at most `limit`: one window
/// of the cron's driving pass (it passes the last id back as `after`, and `""` to start over). Served
/// by `idx_leader_run_status_id`.
pub fn running_ids(d: Dialect, after: &str, limit: i64) -> Stmt {
    Stmt::portable(
        d,
        "SELECT leader_run_id FROM leader_run WHERE status = 'running' AND leader_run_id > ?1 \
         ORDER BY leader_run_id LIMIT ?2",
        vec![after.into(), limit.into()],
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

/// Index of the plan-row lock in [`start_child`]'s batch (its first statement).
pub const START_LOCK: usize = 0;
/// Index of the compare-and-set in [`start_child`]'s batch, and where the admission starts.
pub const START_CAS: usize = 1;
pub const START_ADMIT: usize = 2;

/// Counts the leader's children that hold a concurrency slot: `started` with a run that is not
/// terminal (`running`, or parked on a gate: it still has to finish). `$leader` is the placeholder
/// of the leader's id.
macro_rules! live_children {
    ($leader:literal) => {
        concat!(
            "SELECT COUNT(*) AS n FROM leader_child lc JOIN task_run tr ON tr.task_id = lc.task_id \
             WHERE lc.leader_run_id = ",
            $leader,
            " AND lc.state = 'started' AND tr.status IN ('running','suspended','needs_review')"
        )
    };
}

/// Starting a child, one batch: a lock on the leader's plan row, then the compare-and-set
/// `not_started` → `started` that names the new run, then [`run_sql::admit_guarded`] under a guard
/// that holds exactly when that CAS wrote `run.task_id` (a fresh id). The CAS holds only while the
/// leader is `running` and owned by the run's owner, its plan neither cancelled nor past its deadline
/// at `run.now`, `run.session_id` is the child's session and that session is absent or the owner's,
/// and **fewer than `max_concurrency`** of the leader's children are `started` with a non-terminal run
/// (`running`, `suspended` or `needs_review`; a started child whose run row is gone counts as ended).
/// A loser's batch (the child already started or skipped, the leader stopped, the bound full) writes
/// nothing at all.
///
/// The bound is a count, so concurrent starters of one leader (of different children too) must not
/// both count before either writes. The batch's first statement is a write that changes nothing on
/// the leader's plan row ([`START_LOCK`]): every starter of the leader queues there, holding no other
/// lock, and counts only after the one before it committed.
/// - D1 / SQLite: one writer at a time; a batch is a transaction, so the count is always current.
/// - PostgreSQL (READ COMMITTED): the plan-row lock is held until commit; the CAS is a new statement
///   and so takes a fresh snapshot, which includes every starter that committed before the lock was
///   granted.
/// - MySQL / MariaDB (InnoDB): the plan-row lock, then the CAS, whose subqueries are locking reads
///   of the latest committed rows (never an older snapshot). MySQL forbids a subquery on the
///   UPDATE's own table (error 1093; MariaDB allows it), so the twin counts through a derived table
///   that is materialised (it aggregates).
///
/// Without the lock the bound fails (PostgreSQL let six racing starters of a bound of two all win)
/// or the batch deadlocks (InnoDB). The same lock replaces the child-row lock this batch used to take
/// first: a starter queued on the child's row could hold a gap lock on the absent session that the
/// winner's session insert needs; queued on the plan row it holds nothing yet, and the plan row
/// serialises the starters of one child as it does those of different children.
pub fn start_child(d: Dialect, id: &str, idx: i64, run: &run_sql::NewRun<'_>) -> Vec<Stmt> {
    let lock = Stmt::portable(
        d,
        "UPDATE leader_plan SET max_concurrency = max_concurrency WHERE leader_run_id = ?1",
        vec![id.into()],
    );
    let cas = Stmt::pick(
        d,
        concat!(
            "UPDATE leader_child SET state = 'started', task_id = ?3 \
             WHERE leader_run_id = ?1 AND idx = ?2 AND session_id = ?4 AND state = 'not_started' \
             AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND status = 'running' AND owner IS ?5) \
             AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = ?1 AND cancel_requested = 0 \
             AND (deadline_at IS NULL OR deadline_at > ?6) AND max_concurrency > (",
            live_children!("?1"),
            ")) AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = ?4 AND owner IS NOT ?5)"
        ),
        concat!(
            "UPDATE leader_child SET state = 'started', task_id = $3 \
             WHERE leader_run_id = $1 AND idx = $2 AND session_id = $4 AND state = 'not_started' \
             AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = $1 AND status = 'running' \
             AND owner IS NOT DISTINCT FROM $5) \
             AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = $1 AND cancel_requested = 0 \
             AND (deadline_at IS NULL OR deadline_at > $6) AND max_concurrency > (",
            live_children!("$1"),
            ")) AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = $4 AND owner IS DISTINCT FROM $5)"
        ),
        concat!(
            "UPDATE leader_child SET state = 'started', task_id = ?3 \
             WHERE leader_run_id = ?1 AND idx = ?2 AND session_id = ?4 AND state = 'not_started' \
             AND EXISTS (SELECT 1 FROM leader_run WHERE leader_run_id = ?1 AND status = 'running' AND owner <=> ?5) \
             AND EXISTS (SELECT 1 FROM leader_plan WHERE leader_run_id = ?1 AND cancel_requested = 0 \
             AND (deadline_at IS NULL OR deadline_at > ?6) AND max_concurrency > (SELECT live.n FROM (",
            live_children!("?1"),
            ") AS live)) AND NOT EXISTS (SELECT 1 FROM session WHERE session_id = ?4 AND NOT (owner <=> ?5))"
        ),
        vec![
            id.into(),
            idx.into(),
            run.task_id.into(),
            run.session_id.into(),
            run.owner.into(),
            run.now.into(),
        ],
    );
    let mut batch = vec![lock, cas];
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

/// Compare-and-set of every `not_started` child of the leader → `skipped` with what they report
/// (the leader stopped); the rows changed are the children this call skipped.
pub fn skip_unstarted(d: Dialect, id: &str, report: &str) -> Stmt {
    Stmt::portable(
        d,
        "UPDATE leader_child SET state = 'skipped', skip_report = ?2 \
         WHERE leader_run_id = ?1 AND state = 'not_started'",
        vec![id.into(), report.into()],
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
