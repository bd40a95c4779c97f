//! Query plans on SQLite (the engine D1 runs): every reaper and list query is served by an index, never
//! a full scan of `task_run`, `run_event` or `checkpoint`, and list queries never sort in a temp B-tree.

use crate::harness::{Fixture, SqliteFx};
use sema_core::sql::{
    claim_sql, event_sql, leader_sql, run_sql, run_sql::ListScope, Dialect, SqlValue, Stmt,
};

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
const GUARDED: [&str; 6] = ["task_run", "tr", "run_event", "checkpoint", "ck", "pending"];

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

#[test]
fn every_reaper_and_list_query_is_served_by_an_index() {
    let fx = SqliteFx::new();
    let d = Dialect::Sqlite;
    let mut reapers: Vec<(&str, Stmt)> = vec![];
    reapers.extend(
        claim_sql::reap_stale(d, 1, 2, 100)
            .into_iter()
            .map(|s| ("reap_stale", s)),
    );
    reapers.extend(
        claim_sql::fail_parked_with_expired_checkpoint(d, 1, 100)
            .into_iter()
            .map(|s| ("fail_parked_expired", s)),
    );
    reapers.extend(
        claim_sql::reap_parked_older_than(d, 1, 2, 100)
            .into_iter()
            .map(|s| ("reap_parked_older", s)),
    );
    reapers.push((
        "leader_reap_stale",
        leader_sql::reap_stale_running(d, "r", 10, 5),
    ));
    reapers.push(("release_claim_of", run_sql::release_claim_of(d, "t")));
    reapers.extend(
        run_sql::delete_by_session(d, "s")
            .into_iter()
            .map(|s| ("delete_by_session", s)),
    );
    reapers.push(("events_after", event_sql::events_after(d, "t", 0, 100)));
    for (name, stmt) in &reapers {
        assert_indexed(name, &plan(&fx, stmt), false);
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
    }
    for (name, stmt) in &lists {
        assert_indexed(name, &plan(&fx, stmt), true);
    }
}
