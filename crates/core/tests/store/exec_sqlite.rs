//! SQLite executor for the contract suite: the statements D1 runs, on a real SQLite file database.
//! A batch is `BEGIN IMMEDIATE … COMMIT`, rolled back on the first failure (as D1 does).

use rusqlite::types::{Value as SqlV, ValueRef};
use sema_core::{
    sql::{classify_sqlite_error, DbError, Dialect, Outcome, Row, SqlValue, Stmt},
    store::Executor,
};
use std::cell::RefCell;

pub struct SqliteExec(RefCell<rusqlite::Connection>);

impl SqliteExec {
    pub fn open(path: &std::path::Path) -> Self {
        let conn = rusqlite::Connection::open(path).expect("open sqlite");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        Self(RefCell::new(conn))
    }

    pub fn conn(&self) -> std::cell::RefMut<'_, rusqlite::Connection> {
        self.0.borrow_mut()
    }
}

fn db_err(e: rusqlite::Error) -> DbError {
    match &e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) => classify_sqlite_error(msg),
        other => classify_sqlite_error(&other.to_string()),
    }
}

fn run_one(conn: &rusqlite::Connection, s: &Stmt) -> Result<Outcome, DbError> {
    let mut st = conn.prepare(&s.sql).map_err(db_err)?;
    let params: Vec<SqlV> = s
        .params
        .iter()
        .map(|p| match p {
            SqlValue::Null => SqlV::Null,
            SqlValue::Int(n) => SqlV::Integer(*n),
            SqlValue::Text(t) => SqlV::Text(t.clone()),
        })
        .collect();
    if st.column_count() == 0 {
        let changes = st
            .execute(rusqlite::params_from_iter(params))
            .map_err(db_err)?;
        return Ok(Outcome {
            rows: vec![],
            changes: changes as u64,
        });
    }
    let names: Vec<String> = st.column_names().iter().map(|n| n.to_string()).collect();
    let mut rows = st
        .query(rusqlite::params_from_iter(params))
        .map_err(db_err)?;
    let mut out = vec![];
    while let Some(r) = rows.next().map_err(db_err)? {
        let mut row = Row::new();
        for (i, name) in names.iter().enumerate() {
            let v = match r.get_ref(i).map_err(db_err)? {
                ValueRef::Null => sema_core::json::Value::Null,
                ValueRef::Integer(n) => n.into(),
                ValueRef::Real(f) => f.into(),
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
                ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned().into(),
            };
            row.insert(name.clone(), v);
        }
        out.push(row);
    }
    drop(rows);
    // A statement with rows that writes (`UPDATE … RETURNING`) reports its changes, as D1 does.
    let changes = if st.readonly() { 0 } else { conn.changes() };
    Ok(Outcome { rows: out, changes })
}

impl Executor for SqliteExec {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        let conn = self.0.borrow_mut();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(db_err)?;
        let mut outs = Vec::with_capacity(stmts.len());
        for s in stmts {
            match run_one(&conn, s) {
                Ok(o) => outs.push(o),
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
        conn.execute_batch("COMMIT").map_err(db_err)?;
        Ok(outs)
    }
}
