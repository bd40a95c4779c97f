//! Statements over a session as a whole, in three dialects: its listing and read face (the
//! session row with its active run and pending gate), its deletion, and the retention purge of old
//! terminal runs.
//!
//! **Deleting a session is one batch guarded by a marker claim.** The batch locks the session row
//! (the lock an admission takes first, so the two queue rather than deadlock), releases a dead
//! claim (its run terminal or missing), then inserts a claim for the session naming a fresh,
//! never-used task id (the marker) — only if the session is still the one the caller checked (owner,
//! NULL-safe), none of its runs is running or parked, and it is no child of a leader run that is
//! still running. Every delete after that is conditional on the marker claim existing, and the
//! last statement removes the marker. So the batch deletes everything or nothing, and a live claim
//! fails the marker's insert on `task_active`'s primary key (the whole batch rolls back): an
//! admission racing the delete either commits first (the delete then refuses) or finds the
//! session's claim taken by the marker and loses, in every engine. The guard never references the
//! table a statement deletes from (MySQL refuses that), and the session's object serialises the
//! delete with its own admissions on top.
//!
//! **Retention** reads at most `limit` terminal runs that ended before a cutoff, hold no claim and
//! belong to no running leader run, then deletes exactly those (their events, steer messages,
//! idempotency bindings and gates first, the runs last), each statement re-checking the same
//! predicate, so a run that somehow stopped qualifying is left whole.

use super::{Builder, Dialect, Stmt};
use crate::status::TerminalStatus;

/// The words of a non-terminal run (running or parked).
const LIVE: &str = "('running','suspended','needs_review')";

/// Columns of a session's face, `card` being the expression of the pending gate's card.
fn view_head(d: Dialect, full_card: bool) -> String {
    let card = match (d.built(), full_card) {
        (Dialect::Sqlite, true) => "g.card",
        (Dialect::Sqlite, false) => "substr(g.card, 1, 400)",
        (Dialect::Postgres, true) => "g.card::text",
        (Dialect::Postgres, false) => "substr(g.card::text, 1, 400)",
        (Dialect::Mysql, true) => "CAST(g.card AS CHAR)",
        (Dialect::Mysql, false) => "SUBSTRING(CAST(g.card AS CHAR), 1, 400)",
    };
    format!(
        "SELECT s.session_id AS session_id, s.owner AS owner, s.created_at AS created_at, \
         s.updated_at AS updated_at, tr.task_id AS active_task_id, tr.status AS active_status, \
         tr.heartbeat_at AS active_heartbeat_at, tr.updated_at AS active_updated_at, \
         (SELECT lr.updated_at FROM task_run lr WHERE lr.session_id = s.session_id \
         ORDER BY lr.created_at DESC, lr.task_id DESC LIMIT 1) AS last_run_updated_at, \
         g.task_id AS gate_task_id, g.gate_kind AS gate_kind, {card} AS gate_card, \
         g.expires_at AS gate_expires_at, g.created_at AS gate_created_at \
         FROM session s \
         LEFT JOIN task_active ta ON ta.session_id = s.session_id \
         LEFT JOIN task_run tr ON tr.task_id = ta.task_id AND tr.status IN {LIVE} \
         LEFT JOIN gate_checkpoint g ON g.pending_session = s.session_id WHERE "
    )
}

/// A page of sessions' faces, most recently admitted into first by `(updated_at, session_id)`,
/// strictly after `cursor` in that order (fetch `limit + 1` to learn whether a page follows). The
/// session rows come from `idx_session_owner_updated` (or `idx_session_updated` for operators) in
/// order; each row's claim, run and pending gate are primary-key or unique lookups, its newest run
/// one seek of `idx_task_run_session_created`. Gate cards are cut to 400 characters (a page holds
/// previews, never whole cards).
pub fn list_views(
    d: Dialect,
    scope: &super::run_sql::ListScope<'_>,
    cursor: Option<(i64, &str)>,
    limit: i64,
) -> Stmt {
    use super::run_sql::ListScope;
    let mut b = Builder::new(d, &view_head(d, false));
    match scope {
        ListScope::Owner(Some(owner)) => {
            b.push("s.owner = ").bind(*owner);
        }
        ListScope::Owner(None) => {
            b.push("s.owner IS NULL");
        }
        ListScope::All => {
            b.push("1 = 1");
        }
    }
    if let Some((at, id)) = cursor {
        b.push(" AND (s.updated_at, s.session_id) < (")
            .bind(at)
            .push(", ")
            .bind(id)
            .push(")");
    }
    b.push(" ORDER BY s.updated_at DESC, s.session_id DESC LIMIT ")
        .bind(limit);
    b.build()
}

/// One session's face, with its pending gate's whole card.
pub fn select_view(d: Dialect, session_id: &str) -> Stmt {
    let mut b = Builder::new(d, &view_head(d, true));
    b.push("s.session_id = ").bind(session_id);
    b.build()
}

/// A session deletion: the session as the caller saw it, and a fresh marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionDelete<'a> {
    pub session_id: &'a str,
    /// The session's owner as the caller checked it (NULL-safe): a session deleted and re-created by
    /// someone else since is not deleted.
    pub owner: Option<&'a str>,
    /// A fresh id never used as a task id (e.g. a UUIDv7): the marker claim's task id.
    pub marker: &'a str,
    /// The leader run whose child the session's name says it is ([`crate::leader::leader_of_session`]),
    /// `""` when none: a child of a running leader is not deleted.
    pub leader_run_id: &'a str,
    pub now: i64,
}

/// Index of the marker's insert in [`delete_session`]'s batch (1 row: the session qualified).
pub const DELETE_MARK: usize = 2;
/// Index of the `task_run` delete.
pub const DELETE_RUNS: usize = 7;
/// Index of the marker's removal (1 row: everything was deleted).
pub const DELETE_UNMARK: usize = 9;
/// Index of the read of a run that keeps the session (one row: `task_id`, `status`).
pub const DELETE_BLOCKER: usize = 10;
/// Index of the read of the running leader run the session is a child of (one row).
pub const DELETE_LEADER: usize = 11;

/// The condition every delete of [`delete_session`] carries: the marker claim exists.
const MARKED: &str =
    " AND EXISTS (SELECT 1 FROM task_active m WHERE m.session_id = ?1 AND m.task_id = ?2)";

/// Deletes a session whole, one batch (see the module header): its runs' events, steer messages
/// and idempotency bindings, its gates, its runs, the session row and any dead claim; then reads
/// what kept it, if anything did.
pub fn delete_session(d: Dialect, s: &SessionDelete<'_>) -> Vec<Stmt> {
    let p = |sql: String| portable_owned(d, sql, vec![s.session_id.into(), s.marker.into()]);
    let of_runs = |table: &str| {
        p(format!(
            "DELETE FROM {table} WHERE task_id IN (SELECT task_id FROM task_run WHERE session_id = ?1){MARKED}"
        ))
    };
    let owner = crate::sql::SqlValue::from(s.owner);
    vec![
        // Lock the session row first, as an admission's upsert does, so a delete and an admission
        // of one session queue on it in PostgreSQL and MySQL instead of deadlocking (the admission
        // locks the session, then the claim key; the marker would otherwise take the key first).
        Stmt::portable(
            d,
            "UPDATE session SET updated_at = updated_at WHERE session_id = ?1",
            vec![s.session_id.into()],
        ),
        Stmt::portable(
            d,
            "DELETE FROM task_active WHERE session_id = ?1 AND NOT EXISTS (SELECT 1 FROM task_run tr \
             WHERE tr.task_id = task_active.task_id AND tr.status IN ('running','suspended','needs_review'))",
            vec![s.session_id.into()],
        ),
        Stmt::pick(
            d,
            "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner IS ?4) \
             AND NOT EXISTS (SELECT 1 FROM task_run WHERE session_id = ?1 \
             AND status IN ('running','suspended','needs_review')) \
             AND NOT EXISTS (SELECT 1 FROM leader_child lc JOIN leader_run lr \
             ON lr.leader_run_id = lc.leader_run_id WHERE lc.leader_run_id = ?5 \
             AND lc.session_id = ?1 AND lr.status = 'running')",
            "INSERT INTO task_active (session_id, task_id, created_at) \
             SELECT $1::varchar, $2::varchar, $3::bigint \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = $1::varchar \
             AND owner IS NOT DISTINCT FROM $4::varchar) \
             AND NOT EXISTS (SELECT 1 FROM task_run WHERE session_id = $1::varchar \
             AND status IN ('running','suspended','needs_review')) \
             AND NOT EXISTS (SELECT 1 FROM leader_child lc JOIN leader_run lr \
             ON lr.leader_run_id = lc.leader_run_id WHERE lc.leader_run_id = $5::varchar \
             AND lc.session_id = $1::varchar AND lr.status = 'running')",
            "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 FROM DUAL \
             WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner <=> ?4) \
             AND NOT EXISTS (SELECT 1 FROM task_run WHERE session_id = ?1 \
             AND status IN ('running','suspended','needs_review')) \
             AND NOT EXISTS (SELECT 1 FROM leader_child lc JOIN leader_run lr \
             ON lr.leader_run_id = lc.leader_run_id WHERE lc.leader_run_id = ?5 \
             AND lc.session_id = ?1 AND lr.status = 'running')",
            vec![
                s.session_id.into(),
                s.marker.into(),
                s.now.into(),
                owner,
                s.leader_run_id.into(),
            ],
        ),
        of_runs("run_event"),
        of_runs("steer_message"),
        of_runs("idempotency_key"),
        p(format!(
            "DELETE FROM gate_checkpoint WHERE session_id = ?1{MARKED}"
        )),
        p(format!("DELETE FROM task_run WHERE session_id = ?1{MARKED}")),
        p(format!("DELETE FROM session WHERE session_id = ?1{MARKED}")),
        Stmt::portable(
            d,
            "DELETE FROM task_active WHERE session_id = ?1 AND task_id = ?2",
            vec![s.session_id.into(), s.marker.into()],
        ),
        Stmt::portable(
            d,
            "SELECT task_id, status FROM task_run WHERE session_id = ?1 \
             AND status IN ('running','suspended','needs_review') ORDER BY created_at DESC LIMIT 1",
            vec![s.session_id.into()],
        ),
        Stmt::portable(
            d,
            "SELECT lc.leader_run_id AS leader_run_id FROM leader_child lc JOIN leader_run lr \
             ON lr.leader_run_id = lc.leader_run_id WHERE lc.leader_run_id = ?2 \
             AND lc.session_id = ?1 AND lr.status = 'running'",
            vec![s.session_id.into(), s.leader_run_id.into()],
        ),
    ]
}

/// [`Stmt::portable`] for a text composed at run time.
fn portable_owned(d: Dialect, sql: String, params: Vec<super::SqlValue>) -> Stmt {
    match d.built() {
        Dialect::Sqlite => Stmt::new(sql, params),
        _ => Stmt::rendered(d, &sql, params),
    }
}

/// `('completed','failed',…)`: the terminal words a run is written with.
fn terminal_words() -> String {
    let words: Vec<String> = TerminalStatus::ALL
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("({})", words.join(","))
}

/// What makes a run purgeable at cutoff `?` (bound by the caller right after this text): terminal,
/// ended (last written) before the cutoff, holding no claim, and no child of a running leader run.
/// `t` is the alias (or name) of the run's table.
fn purgeable(b: &mut Builder, t: &str, before: i64) {
    b.push(&format!(
        "{t}.status IN {} AND NOT EXISTS (SELECT 1 FROM task_active ta WHERE ta.task_id = {t}.task_id) \
         AND NOT EXISTS (SELECT 1 FROM leader_child lc JOIN leader_run lr \
         ON lr.leader_run_id = lc.leader_run_id WHERE lc.task_id = {t}.task_id AND lr.status = 'running') \
         AND {t}.updated_at < ",
        terminal_words()
    ))
    .bind(before);
}

/// At most `limit` purgeable runs ended before `before` (`session_id`, `task_id`), found through
/// `idx_task_run_status_updated`.
pub fn purge_candidates(d: Dialect, before: i64, limit: i64) -> Stmt {
    let mut b = Builder::new(
        d,
        "SELECT session_id, task_id, last_seq FROM task_run WHERE ",
    );
    purgeable(&mut b, "task_run", before);
    b.push(" LIMIT ").bind(limit);
    b.build()
}

/// Index of the `task_run` delete in [`purge_runs`]'s batch (the others precede it).
pub const PURGE_RUNS: usize = 4;
/// Index of the `run_event` delete in [`purge_runs`]'s batch.
pub const PURGE_EVENTS: usize = 0;

/// Deletes the runs `task_ids` (read by [`purge_candidates`]) with their events, steer messages,
/// idempotency bindings and gates, one batch; each statement re-checks that the run is still
/// purgeable at `before`. `task_ids` must not be empty (an empty `IN ()` is not SQL).
pub fn purge_runs(d: Dialect, task_ids: &[&str], before: i64) -> Vec<Stmt> {
    let child = |table: &str| {
        let mut b = Builder::new(
            d,
            &format!(
                "DELETE FROM {table} WHERE task_id IN (SELECT tr.task_id FROM task_run tr WHERE tr.task_id IN "
            ),
        );
        b.bind_list(task_ids);
        b.push(" AND ");
        purgeable(&mut b, "tr", before);
        b.push(")");
        b.build()
    };
    let mut runs = Builder::new(d, "DELETE FROM task_run WHERE task_id IN ");
    runs.bind_list(task_ids);
    runs.push(" AND ");
    purgeable(&mut runs, "task_run", before);
    vec![
        child("run_event"),
        child("steer_message"),
        child("idempotency_key"),
        child("gate_checkpoint"),
        runs.build(),
    ]
}
