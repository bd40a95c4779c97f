//! Query plans on SQLite (the engine D1 runs): every reaper, runner, ledger, list and leader-driving
//! statement is served by an index, never a full scan of `task_run`, `run_event`, `gate_checkpoint`,
//! `steer_message`, `task_active`, `leader_run`, `leader_plan` or `leader_child` (the claim sweep
//! included: it examines one window of claims by primary key), and ordered queries never sort in a
//! temp B-tree.
//!
//! Leader listings and the cron's driving pass are planned by all three engines on a seeded table:
//! each reads `leader_run` through an index that also gives the order (no sort).

use crate::harness::{Fixture, MyFx, PgFx, SqliteFx};
use sema_core::sql::{
    claim_sql, event_sql, event_sql::NewEvent, gate_sql, leader_sql, run_sql, run_sql::ListScope,
    runner_sql, Dialect, SqlValue, Stmt,
};
use sema_core::{run::RunSnapshot, status::TerminalStatus};

fn plan(fx: &SqliteFx, stmt: &Stmt) -> Vec<String> {
    let exec = fx.connect();
    let conn = exec.conn();
    let mut st = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", stmt.sql))
        .unwrap();
    let params: Vec<rusqlite::types::Value> = stmt
        .params
        .iter()
        .map(|p| match p {
            SqlValue::Null => rusqlite::types::Value::Null,
            SqlValue::Int(n) => rusqlite::types::Value::Integer(*n),
            SqlValue::Text(t) => rusqlite::types::Value::Text(t.clone()),
        })
        .collect();
    st.query_map(rusqlite::params_from_iter(params), |r| {
        r.get::<_, String>(3)
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Table names and the aliases the statements give them.
const GUARDED: [&str; 14] = [
    "leader_child",
    "c",
    "leader_plan",
    "task_run",
    "tr",
    "run_event",
    "gate_checkpoint",
    "ck",
    "steer_message",
    "task_active",
    "ta",
    "leader_run",
    "reaper_tick",
    "session",
];

fn assert_indexed(name: &str, lines: &[String], ordered: bool) {
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["SCAN", table, rest @ ..] = words.as_slice() {
            assert!(
                !GUARDED.contains(table) || rest.first() == Some(&"USING"),
                "{name}: full scan of {table}: {lines:#?}"
            );
        }
        if ordered {
            assert!(
                !line.contains("TEMP B-TREE FOR ORDER BY"),
                "{name}: sorts without an index: {lines:#?}"
            );
        }
    }
}

/// The heartbeat the plans are made of.
const BEAT: runner_sql::Heartbeat<'static> = runner_sql::Heartbeat {
    task_id: "t",
    lease_epoch: 1,
    runner_id: "r",
    delivery_id: "dv",
    steer_page: 16,
    now: 1,
};

/// The steer the plans are made of.
const STEER: runner_sql::NewSteer<'static> = runner_sql::NewSteer {
    task_id: "t",
    message: "m",
    now: 1,
    max_messages: 64,
    max_bytes: 1 << 20,
};

#[test]
fn every_reaper_runner_ledger_and_list_statement_is_served_by_an_index() {
    let fx = SqliteFx::new();
    let d = Dialect::Sqlite;
    let tick = claim_sql::Tick {
        id: "tick",
        now: 2,
        limit: 100,
    };
    // The claim sweep, from the start and from a cursor: its window is a primary-key range read
    // in key order, each claim's run a primary-key lookup, its reads and delete by tick indexed.
    for after in ["", "s"] {
        let window = claim_sql::SweepWindow { after, limit: 100 };
        let sweep = claim_sql::sweep_claims(d, "tick", &window);
        for (i, stmt) in sweep.iter().enumerate() {
            let lines = plan(&fx, stmt);
            assert_indexed(&format!("sweep {i} after {after:?}"), &lines, true);
            if i == claim_sql::SWEEP_STAMP {
                assert!(
                    lines
                        .iter()
                        .any(|l| l.contains("sqlite_autoindex_task_active_1 (session_id>?)")),
                    "the sweep's window is a primary-key range: {lines:#?}"
                );
            }
        }
    }
    let reaper_batches = [
        (
            "reap_stale",
            claim_sql::reap_stale(d, &tick, &claim_sql::StaleCutoffs { held: 1, queued: 3 }),
        ),
        (
            "fail_parked_expired",
            claim_sql::fail_parked_with_expired_checkpoint(d, &tick),
        ),
        (
            "reap_parked_older",
            claim_sql::reap_parked_older_than(d, &tick, 1),
        ),
    ];
    let mut reapers: Vec<(&str, Stmt)> = vec![];
    for (name, batch) in reaper_batches {
        // The whole batch: the write, the read-back of the reaped runs, the release of their claims
        // (and, for parked runs, their `done` events and the expiry of their gates).
        let want = if name == "reap_stale" {
            claim_sql::REAP_CLAIM_DELETE + 1
        } else {
            claim_sql::REAP_GATE_EXPIRE + 1
        };
        assert_eq!(batch.len(), want, "{name}");
        let stamp = plan(&fx, &batch[claim_sql::REAP_CLAIM_STAMP]);
        assert!(
            stamp.iter().any(|l| l.contains("uq_task_active_task"))
                && stamp
                    .iter()
                    .any(|l| l.contains("idx_task_run_status_updated")),
            "{name}: the reaped runs' claims are found by index: {stamp:#?}"
        );
        reapers.extend(batch.into_iter().map(|s| (name, s)));
    }
    reapers.extend(
        leader_sql::reap_stale_running(d, "tick", "r", 10, 5)
            .into_iter()
            .map(|s| ("leader_reap_stale", s)),
    );
    reapers.extend(
        claim_sql::requeue_unacked_leases(d, &tick, 1)
            .into_iter()
            .map(|s| ("requeue_unacked_leases", s)),
    );
    reapers.extend(
        claim_sql::record_tick(
            d,
            &claim_sql::TickRecord {
                tick_id: "tick",
                started_at: 1,
                finished_at: 2,
                report_json: "{}",
            },
            50,
        )
        .into_iter()
        .map(|s| ("record_tick", s)),
    );
    let snapshot = RunSnapshot {
        status: "running".into(),
        task_id: "old".into(),
        lease_epoch: 2,
        heartbeat_at: Some(7),
        held_by: Some("r".into()),
    };
    reapers.extend(
        run_sql::fail_if_unchanged(
            d,
            &run_sql::GuardedFail {
                snapshot: &snapshot,
                error: "e",
                error_code: None,
                now: 1,
            },
        )
        .into_iter()
        .map(|s| ("fail_if_unchanged", s)),
    );
    let new = run_sql::NewRun {
        task_id: "t",
        session_id: "s",
        owner: Some("o"),
        instance_id: "i",
        objective: "obj",
        objective_preview: "obj",
        meta_json: "{}",
        queue: "default",
        now: 1,
        idempotency: Some(("k", "f", 202, "{}")),
    };
    reapers.extend(
        run_sql::take_over(
            d,
            &run_sql::Takeover {
                snapshot: &snapshot,
                reason: "r",
                new: &new,
            },
        )
        .into_iter()
        .map(|s| ("take_over", s)),
    );
    reapers.push(("release_claim_of", run_sql::release_claim_of(d, "t")));
    reapers.extend(
        run_sql::delete_by_session(d, "s")
            .into_iter()
            .map(|s| ("delete_by_session", s)),
    );
    reapers.push((
        "events_after",
        event_sql::events_after(d, "t", 0, 100, event_sql::EVENT_PAGE_MAX_BYTES),
    ));
    for (name, stmt) in &reapers {
        assert_indexed(name, &plan(&fx, stmt), false);
    }
    let event = NewEvent {
        kind: "x",
        data: "{}",
        event_id: Some("e"),
    };
    let mut runner: Vec<(&str, Stmt)> = vec![];
    runner.extend(
        runner_sql::try_lease(d, "t", "r", 1)
            .into_iter()
            .map(|s| ("try_lease", s)),
    );
    runner.extend(
        runner_sql::heartbeat(d, &BEAT)
            .into_iter()
            .map(|s| ("heartbeat", s)),
    );
    runner.extend(
        runner_sql::finish(
            d,
            &runner_sql::Finish {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                status: TerminalStatus::Completed,
                result_json: None,
                error: None,
                error_code: None,
                done_json: "{}",
                now: 1,
            },
        )
        .into_iter()
        .map(|s| ("finish", s)),
    );
    runner.extend(
        runner_sql::add_steer(d, &STEER)
            .into_iter()
            .map(|s| ("add_steer", s)),
    );
    runner.extend(
        event_sql::append(
            d,
            &event_sql::Append {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                events: &[event, event],
                now: 1,
            },
        )
        .into_iter()
        .map(|s| ("append", s)),
    );
    // Gates: the park, both decisions, the reads by session and task, the void, the lease's resume.
    runner.extend(
        gate_sql::park(
            d,
            &gate_sql::Park {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                checkpoint_id: "c",
                gate_kind: "human",
                status: sema_core::status::ParkStatus::Suspended,
                card_json: "{}",
                event_json: "{}",
                expires_at: None,
                now: 1,
            },
        )
        .into_iter()
        .map(|s| ("park", s)),
    );
    for effect in [
        gate_sql::Effect::Resume { event_json: "{}" },
        gate_sql::Effect::End {
            status: TerminalStatus::Cancelled,
            result_json: None,
            error: None,
            error_code: None,
            done_json: "{}",
        },
    ] {
        runner.extend(
            gate_sql::resolve(
                d,
                &gate_sql::ResolveWrite {
                    checkpoint_id: "c",
                    task_id: "t",
                    resolution_id: "rid",
                    decision: "approve",
                    reason: None,
                    effect,
                    now: 1,
                },
            )
            .into_iter()
            .map(|s| ("resolve", s)),
        );
    }
    runner.push(("pending_gate", gate_sql::pending_gate(d, "s")));
    runner.push((
        "latest_gate session",
        gate_sql::latest_gate(d, gate_sql::GateScope::Session("s")),
    ));
    runner.push((
        "latest_gate task",
        gate_sql::latest_gate(d, gate_sql::GateScope::Task("t")),
    ));
    runner.push(("void_pending_of", gate_sql::void_pending_of(d, "t", 1)));
    runner.push(("resume_of", gate_sql::resume_of(d, "t", "r")));
    runner.push((
        "release_lease",
        runner_sql::release_lease(d, "t", "r", 1, 2),
    ));
    let fifty: Vec<String> = (0..runner_sql::MAX_UNACKED_READ)
        .map(|i| format!("t{i}"))
        .collect();
    let fifty: Vec<&str> = fifty.iter().map(String::as_str).collect();
    let unacked = plan(&fx, &runner_sql::unacked_leases(d, &fifty));
    assert!(
        unacked.iter().any(|l| l.contains("task_id=?")),
        "unacked_leases: by primary key: {unacked:#?}"
    );
    runner.extend(
        run_sql::cancel(d, "t", 1)
            .into_iter()
            .map(|s| ("cancel", s)),
    );
    for (name, stmt) in &runner {
        assert_indexed(name, &plan(&fx, stmt), false);
    }
    // Driving a leader run: every statement finds its rows by key, the children read in key order.
    let child_run = run_sql::NewRun {
        task_id: "t",
        session_id: "leader-l-0",
        owner: Some("o"),
        instance_id: "i",
        objective: "o",
        objective_preview: "o",
        meta_json: "{}",
        queue: "default",
        now: 1,
        idempotency: None,
    };
    let mut leader: Vec<(&str, Stmt)> = vec![
        (
            "leader_insert_plan",
            leader_sql::insert_plan(d, "l", 2, Some(9), Some("fp"), 1),
        ),
        (
            "leader_insert_child",
            leader_sql::insert_child(d, "l", 0, "leader-l-0", "o", "{}", 1),
        ),
        ("leader_select_plan", leader_sql::select_plan(d, "l")),
        (
            "leader_skip_child",
            leader_sql::skip_child(d, "l", 0, "timeout"),
        ),
        (
            "leader_skip_unstarted",
            leader_sql::skip_unstarted(d, "l", "timeout"),
        ),
        ("leader_request_cancel", leader_sql::request_cancel(d, "l")),
    ];
    leader.extend(
        leader_sql::start_child(d, "l", 0, &child_run)
            .into_iter()
            .map(|s| ("leader_start_child", s)),
    );
    for (name, stmt) in &leader {
        assert_indexed(name, &plan(&fx, stmt), false);
    }
    assert_indexed(
        "leader_children",
        &plan(&fx, &leader_sql::select_children(d, "l")),
        true,
    );
    // The tick log reads newest first from its index, without a sort.
    assert_indexed(
        "recent_ticks",
        &plan(&fx, &claim_sql::recent_ticks(d, 20)),
        true,
    );
    // Lease candidates (a queue's backlog) and the cron's sweep of runs leasable for a while: each
    // has its index, serving both the filter and the order.
    for (name, stmt, index) in [
        (
            "lease_candidates",
            runner_sql::lease_candidates(d, "q", 8),
            "idx_task_run_lease",
        ),
        (
            "leasable_since",
            runner_sql::leasable_since(d, 5, 8),
            "idx_task_run_leasable",
        ),
    ] {
        let lines = plan(&fx, &stmt);
        assert_indexed(name, &lines, true);
        assert!(
            lines.iter().any(|l| l.contains(index)),
            "{name}: {lines:#?}"
        );
    }
    let mut lists: Vec<(String, Stmt)> = vec![];
    for scope in [
        ListScope::Owner(Some("o")),
        ListScope::Owner(None),
        ListScope::All,
    ] {
        for session in [Some("s"), None] {
            for cursor in [Some((5, "t")), None] {
                lists.push((
                    format!("list_runs {scope:?} {session:?} {cursor:?}"),
                    run_sql::list_runs(d, &scope, session, Some("running"), cursor, 51),
                ));
            }
        }
        lists.push((
            format!("list_sessions {scope:?}"),
            run_sql::list_sessions(d, &scope, Some((5, "s")), 51),
        ));
        for cursor in [Some((5, "s")), None] {
            lists.push((
                format!("list_pending {scope:?} {cursor:?}"),
                gate_sql::list_pending(d, &scope, None, cursor, 51),
            ));
        }
    }
    for (name, stmt) in &lists {
        assert_indexed(name, &plan(&fx, stmt), true);
    }
}

/// Leader runs enough to make a planner choose by cost: `n` rows over 20 owners and the anonymous
/// one, the four status words, start times with ties. Then the engine's statistics are refreshed.
fn seed_leader_runs<F: Fixture>(fx: &F, d: Dialect, n: usize) {
    let statuses = ["running", "completed", "failed", "needs_human"];
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let owner = match i % 21 {
                0 => "NULL".to_owned(),
                k => format!("'o{k}'"),
            };
            format!(
                "('l{i:06}', {owner}, '{}', {})",
                statuses[i % 4],
                1_000 + i / 3
            )
        })
        .collect();
    insert_rows(
        fx,
        "INSERT INTO leader_run (leader_run_id, owner, status, started_at_ms) VALUES",
        &rows,
    );
    analyze(fx, d, "leader_run");
}

/// Inserts `rows` (value tuples) after `head` (`INSERT INTO … VALUES`), 500 to a statement.
fn insert_rows<F: Fixture>(fx: &F, head: &str, rows: &[String]) {
    for chunk in rows.chunks(500) {
        fx.raw(&format!("{head} {}", chunk.join(", ")));
    }
}

/// Refreshes the engine's statistics of `table` (SQLite's of every table).
fn analyze<F: Fixture>(fx: &F, d: Dialect, table: &str) {
    fx.raw(&match d {
        Dialect::Sqlite => "ANALYZE".to_owned(),
        Dialect::Postgres => format!("ANALYZE {table}"),
        Dialect::Mysql => format!("ANALYZE TABLE {table}"),
    });
}

/// A statement's text with its parameters written in as literals (EXPLAIN of a parameterless text).
fn inlined(d: Dialect, stmt: &Stmt) -> String {
    let literal = |v: &SqlValue| match v {
        SqlValue::Null => "NULL".to_owned(),
        SqlValue::Int(n) => n.to_string(),
        SqlValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
    };
    let (mut out, mut next, mut in_literal) = (String::new(), 0, false);
    let mut chars = stmt.sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            in_literal = !in_literal;
        }
        match (c, d, in_literal) {
            ('?', Dialect::Mysql, false) => {
                out.push_str(&literal(&stmt.params[next]));
                next += 1;
            }
            ('$', Dialect::Postgres, false) | ('?', Dialect::Sqlite, false) => {
                let mut digits = String::new();
                while let Some(k) = chars.peek().filter(|k| k.is_ascii_digit()) {
                    digits.push(*k);
                    chars.next();
                }
                let i: usize = digits.parse().unwrap();
                out.push_str(&literal(&stmt.params[i - 1]));
            }
            _ => out.push(c),
        }
    }
    out
}

/// An engine that shows its plan of a parameterless text, one line per plan line (MySQL: per table).
trait PlanFx: Fixture {
    fn explain(&self, sql: &str) -> Vec<String>;
    /// Fails when the plan reads `leader_run` without an index or sorts outside one.
    fn assert_served_by_an_index(&self, name: &str, sql: &str);
}

impl PlanFx for SqliteFx {
    fn explain(&self, sql: &str) -> Vec<String> {
        plan(self, &Stmt::new(sql.to_owned(), vec![]))
    }

    fn assert_served_by_an_index(&self, name: &str, sql: &str) {
        let lines = self.explain(sql);
        assert_indexed(name, &lines, true);
        assert!(
            lines.iter().any(|l| l.contains(" INDEX ")),
            "{name}: {lines:#?}"
        );
    }
}

/// PostgreSQL's planner prefers a top-N sort of a few dozen rows to an ordered index scan at any
/// size a test can seed (and a small table to any index), so its check is what the index can do:
/// with scans that cannot deliver order (sequential, bitmap) and sorts priced out, the plan must
/// still need neither, i.e. an index serves both the filter and the order.
impl PlanFx for PgFx {
    fn explain(&self, sql: &str) -> Vec<String> {
        let exec = self.connect();
        let mut client = exec.client();
        client
            .batch_execute(
                "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off; \
                 SET enable_incremental_sort = off",
            )
            .unwrap();
        client
            .query(&format!("EXPLAIN {sql}"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect()
    }

    fn assert_served_by_an_index(&self, name: &str, sql: &str) {
        let text = self.explain(sql).join("\n");
        assert!(
            !text.contains("Seq Scan") && !text.contains("Sort") && text.contains("Index"),
            "{name}: {text}"
        );
    }
}

/// MariaDB's plan as its optimizer chooses it for the seeded table.
impl PlanFx for MyFx {
    fn explain(&self, sql: &str) -> Vec<String> {
        use mysql::prelude::Queryable;
        let rows: Vec<mysql::Row> = self
            .connect()
            .conn()
            .query(format!("EXPLAIN {sql}"))
            .unwrap();
        rows.iter()
            .map(|r| {
                let col = |c: &str| {
                    r.get_opt::<Option<String>, _>(c)
                        .and_then(Result::ok)
                        .flatten()
                        .unwrap_or_else(|| "NULL".to_owned())
                };
                format!(
                    "{} | {} | {} | {}",
                    col("table"),
                    col("type"),
                    col("key"),
                    col("Extra")
                )
            })
            .collect()
    }

    fn assert_served_by_an_index(&self, name: &str, sql: &str) {
        let lines = self.explain(sql);
        for line in &lines {
            let cols: Vec<&str> = line.split(" | ").collect();
            assert!(
                cols[1] != "ALL" && cols[2] != "NULL" && !cols[3].contains("filesort"),
                "{name}: a full scan or a sort: {lines:#?}"
            );
        }
    }
}

/// Leader listings (owner, anonymous owner, owner + status, all, all + status; first pages and pages
/// after a cursor) and the driving pass's windows of running ids, planned by each engine on a table
/// of 20,000 leader runs.
fn leader_reads_are_served_by_an_index<F: PlanFx>(fx: &F, d: Dialect) {
    seed_leader_runs(fx, d, 20_000);
    let mut reads: Vec<(String, Stmt)> = vec![];
    for scope in [
        ListScope::Owner(Some("o3")),
        ListScope::Owner(None),
        ListScope::All,
    ] {
        for status in [None, Some("running")] {
            for cursor in [None, Some((1_900, "l002700"))] {
                reads.push((
                    format!("list_leader_runs {scope:?} {status:?} {cursor:?}"),
                    leader_sql::list(d, &scope, status, cursor, 51),
                ));
            }
        }
    }
    for after in ["", "l003000"] {
        reads.push((
            format!("running_leader_ids after {after:?}"),
            leader_sql::running_ids(d, after, 100),
        ));
    }
    for (name, stmt) in &reads {
        fx.assert_served_by_an_index(name, &inlined(d, stmt));
    }
}

/// Runs enough to make a planner choose by cost: `n` rows over 7 queues, the four status words
/// (running ones held by a runner one time in three), creation and update times with ties. Then the
/// engine's statistics are refreshed.
fn seed_runs<F: Fixture>(fx: &F, d: Dialect, n: usize) {
    let statuses = ["running", "completed", "failed", "suspended"];
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let held = if i % 3 == 0 { "'r'" } else { "NULL" };
            format!(
                "('t{i:06}', 's{i:06}', 'i', '{}', 'o', 'o', '{{}}', {}, {}, {}, 'q{}', {held})",
                statuses[i % 4],
                1_000 + i,
                1_000 + i / 3,
                1_000 + i / 2,
                i % 7
            )
        })
        .collect();
    insert_rows(
        fx,
        "INSERT INTO task_run (task_id, session_id, instance_id, status, objective, \
         objective_preview, meta, heartbeat_at, created_at, updated_at, queue, held_by) VALUES",
        &rows,
    );
    analyze(fx, d, "task_run");
}

/// A queue's backlog (the lease candidates), first pages of every size a dispatcher asks for, the
/// cron's sweep of runs leasable since before a time, and the dispatcher's writes on one run (the
/// lease of a named run, the release of an unacknowledged lease), planned by each engine on a table
/// of 20,000 runs.
fn queue_reads_and_writes_are_served_by_an_index<F: PlanFx>(fx: &F, d: Dialect) {
    seed_runs(fx, d, 20_000);
    let mut stmts: Vec<(String, Stmt)> = vec![];
    for limit in [1, 8, 100] {
        stmts.push((
            format!("lease_candidates q3 {limit}"),
            runner_sql::lease_candidates(d, "q3", limit),
        ));
        for before in [2_000, 20_000] {
            stmts.push((
                format!("leasable_since {before} {limit}"),
                runner_sql::leasable_since(d, before, limit),
            ));
        }
    }
    stmts.push((
        "release_lease".into(),
        runner_sql::release_lease(d, "t000003", "r", 1, 5),
    ));
    let fifty: Vec<String> = (0..runner_sql::MAX_UNACKED_READ)
        .map(|i| format!("t{:06}", i * 7))
        .collect();
    let fifty: Vec<&str> = fifty.iter().map(String::as_str).collect();
    stmts.push((
        "unacked_leases".into(),
        runner_sql::unacked_leases(d, &fifty),
    ));
    let lease = runner_sql::try_lease(d, "t000003", "r", 5);
    stmts.push(("try_lease cas".into(), lease[runner_sql::LEASE_CAS].clone()));
    stmts.push((
        "try_lease read".into(),
        lease[runner_sql::lease_read(d)].clone(),
    ));
    for (name, stmt) in &stmts {
        fx.assert_served_by_an_index(name, &inlined(d, stmt));
    }
}

#[test]
fn queue_backlogs_sweeps_and_dispatcher_writes_use_an_index_and_never_sort_on_sqlite() {
    queue_reads_and_writes_are_served_by_an_index(&SqliteFx::new(), Dialect::Sqlite);
}

#[test]
fn queue_backlogs_sweeps_and_dispatcher_writes_use_an_index_and_never_sort_on_postgres() {
    queue_reads_and_writes_are_served_by_an_index(&PgFx::new(), Dialect::Postgres);
}

#[test]
fn queue_backlogs_sweeps_and_dispatcher_writes_use_an_index_and_never_sort_on_mysql() {
    queue_reads_and_writes_are_served_by_an_index(&MyFx::new(), Dialect::Mysql);
}

#[test]
fn leader_listings_and_the_driving_pass_use_an_index_and_never_sort_on_sqlite() {
    leader_reads_are_served_by_an_index(&SqliteFx::new(), Dialect::Sqlite);
}

#[test]
fn leader_listings_and_the_driving_pass_use_an_index_and_never_sort_on_postgres() {
    leader_reads_are_served_by_an_index(&PgFx::new(), Dialect::Postgres);
}

#[test]
fn leader_listings_and_the_driving_pass_use_an_index_and_never_sort_on_mysql() {
    leader_reads_are_served_by_an_index(&MyFx::new(), Dialect::Mysql);
}

/// Runs of many sessions owned by few principals: `n` runs, session `s<i mod 2000>` owned by
/// `o<session mod 10>` (so each owner has 200 sessions and n/10 runs), created in the order of i.
/// Statistics are refreshed on PostgreSQL and MariaDB, as their servers keep them; SQLite is left
/// without, as D1 keeps none unless told to.
fn seed_owned_runs<F: Fixture>(fx: &F, d: Dialect, n: usize) {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let session = i % 2000;
            format!(
                "('t{i:06}', 's{session:04}', 'o{}', 'i', 'completed', 'o', 'o', '{{}}', {}, {}, {})",
                session % 10,
                1_000 + i,
                1_000 + i,
                1_000 + i
            )
        })
        .collect();
    insert_rows(
        fx,
        "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, \
         objective_preview, meta, heartbeat_at, created_at, updated_at) VALUES",
        &rows,
    );
    if d != Dialect::Sqlite {
        analyze(fx, d, "task_run");
    }
}

/// A session's runs as its owner lists them (first page, after a cursor, by status) are read
/// through the session's index: never by walking every run of the owner.
fn session_listings_read_the_session_index<F: PlanFx>(fx: &F, d: Dialect) {
    seed_owned_runs(fx, d, 20_000);
    for status in [None, Some("completed")] {
        for cursor in [None, Some((15_000, "t014000"))] {
            let stmt = run_sql::list_runs(
                d,
                &ListScope::Owner(Some("o3")),
                Some("s0003"),
                status,
                cursor,
                51,
            );
            let name = format!("list_runs of s0003 for o3 {status:?} {cursor:?}");
            let sql = inlined(d, &stmt);
            fx.assert_served_by_an_index(&name, &sql);
            let plan = fx.explain(&sql).join("\n");
            assert!(
                plan.contains("idx_task_run_session_created"),
                "{name}: not through the session's index: {plan}"
            );
        }
    }
}

#[test]
fn a_sessions_runs_listed_by_its_owner_are_read_through_the_session_index_on_sqlite() {
    session_listings_read_the_session_index(&SqliteFx::new(), Dialect::Sqlite);
}

#[test]
fn a_sessions_runs_listed_by_its_owner_are_read_through_the_session_index_on_postgres() {
    session_listings_read_the_session_index(&PgFx::new(), Dialect::Postgres);
}

#[test]
fn a_sessions_runs_listed_by_its_owner_are_read_through_the_session_index_on_mysql() {
    session_listings_read_the_session_index(&MyFx::new(), Dialect::Mysql);
}

/// Session faces (listing and one session), the session's deletion and the retention purge: no
/// table is ever scanned without an index (stricter than [`GUARDED`]: every table, every alias), and
/// the listing reads sessions in index order (no sort).
#[test]
fn session_faces_deletion_and_retention_are_served_by_indexes() {
    use sema_core::sql::session_sql;
    let fx = SqliteFx::new();
    let d = Dialect::Sqlite;
    let mut stmts: Vec<(String, Stmt, bool)> = vec![];
    for scope in [
        ListScope::Owner(Some("o")),
        ListScope::Owner(None),
        ListScope::All,
    ] {
        for cursor in [Some((5, "s")), None] {
            stmts.push((
                format!("list_views {scope:?} {cursor:?}"),
                session_sql::list_views(d, &scope, cursor, 51),
                true,
            ));
        }
    }
    stmts.push(("select_view".into(), session_sql::select_view(d, "s"), true));
    let delete = session_sql::SessionDelete {
        session_id: "s",
        owner: Some("o"),
        marker: "m",
        leader_run_id: "l",
        now: 5,
    };
    for (i, stmt) in session_sql::delete_session(d, &delete)
        .into_iter()
        .enumerate()
    {
        stmts.push((format!("delete_session #{i}"), stmt, false));
    }
    stmts.push((
        "purge_candidates".into(),
        session_sql::purge_candidates(d, 5, 50),
        false,
    ));
    for (i, stmt) in session_sql::purge_runs(d, &["a", "b"], 5)
        .into_iter()
        .enumerate()
    {
        stmts.push((format!("purge_runs #{i}"), stmt, false));
    }
    for (name, stmt, ordered) in &stmts {
        let lines = plan(&fx, stmt);
        for line in &lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["SCAN", table, rest @ ..] = words.as_slice() {
                assert!(
                    *table == "CONSTANT" || rest.first() == Some(&"USING"),
                    "{name}: full scan of {table}: {lines:#?}"
                );
            }
            if *ordered {
                assert!(
                    !line.contains("TEMP B-TREE"),
                    "{name}: sorts without an index: {lines:#?}"
                );
            }
        }
    }
    let candidates = plan(&fx, &session_sql::purge_candidates(d, 5, 50));
    assert!(
        candidates
            .iter()
            .any(|l| l.contains("idx_task_run_status_updated")),
        "{candidates:#?}"
    );
}

/// The steer reads of the append, the lease, the heartbeat and a new steer: `(name, statement)`.
fn steer_reads(d: Dialect) -> Vec<(String, Stmt)> {
    let event = NewEvent {
        kind: "text_delta",
        data: "{}",
        event_id: None,
    };
    let mut reads: Vec<(String, Stmt)> = vec![];
    let lease = runner_sql::try_lease(d, "t", "r", 1);
    reads.push((
        "try_lease read".into(),
        lease[runner_sql::lease_read(d)].clone(),
    ));
    let beat = runner_sql::heartbeat(d, &BEAT);
    for (what, i) in [
        ("mark", runner_sql::HEARTBEAT_MARK),
        ("read", runner_sql::HEARTBEAT_READ),
        ("read back", runner_sql::HEARTBEAT_STEER),
    ] {
        reads.push((format!("heartbeat {what}"), beat[i].clone()));
    }
    let append = event_sql::append(
        d,
        &event_sql::Append {
            task_id: "t",
            lease_epoch: 1,
            runner_id: "r",
            events: &[event],
            now: 1,
        },
    );
    // The fenced update's own RETURNING, or the read that ends the batch (`event_sql::append_read`).
    let read = match event_sql::append_read(d) {
        Some(i) => append[i].clone(),
        None => append.last().expect("an append's batch").clone(),
    };
    reads.push(("append read".into(), read));
    let steer = runner_sql::add_steer(d, &STEER);
    reads.push((
        "add_steer insert".into(),
        steer[runner_sql::STEER_INSERT].clone(),
    ));
    reads
}

#[test]
fn a_runs_steer_reads_look_at_its_waiting_messages_not_at_every_message_it_was_sent() {
    let fx = SqliteFx::new();
    let d = Dialect::Sqlite;
    // One run steered 2,000 times, three messages still waiting; the planner has the statistics.
    let rows: Vec<String> = (1..=2_003)
        .map(|seq| {
            let delivered = if seq <= 2_000 {
                "5, 'dv0'"
            } else {
                "NULL, NULL"
            };
            format!("('t', {seq}, 'm', 1, {delivered})")
        })
        .collect();
    insert_rows(
        &fx,
        "INSERT INTO steer_message (task_id, seq, message, created_at, delivered_at, delivery_id) VALUES",
        &rows,
    );
    analyze(&fx, d, "steer_message");
    for (name, stmt) in steer_reads(d) {
        let lines = plan(&fx, &stmt);
        let steer: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("steer_message"))
            .collect();
        let pending = steer
            .iter()
            .filter(|l| l.contains("idx_steer_message_pending (task_id=? AND delivered_at"))
            .count();
        // The new steer's seq (`MAX(seq)`, the last entry of the run's key range) is the one read
        // by the primary key alone; its count and bytes of the waiting messages are not.
        let (by_key, waiting) = if name == "add_steer insert" {
            (1, 2)
        } else {
            (0, 1)
        };
        assert!(
            steer.len() == pending + by_key && pending >= waiting,
            "{name}: reads steer_message without its waiting-messages index: {lines:#?}"
        );
        assert!(
            steer
                .iter()
                .filter(|l| !l.contains("idx_steer_message_pending"))
                .all(|l| l.contains("sqlite_autoindex_steer_message_1 (task_id=?)")),
            "{name}: {lines:#?}"
        );
    }
}
