//! MySQL / MariaDB executor for the contract suite: one connection, a batch is one transaction.
//! MySQL reports no table in a duplicate-key error, so the failing INSERT's table names it.

use mysql::prelude::Queryable;
use sema_core::{
    sql::{mysql_is_duplicate, DbError, Dialect, Outcome, Row, SqlValue, Stmt},
    store::Executor,
};
use std::cell::RefCell;

pub struct MyExec(RefCell<mysql::Conn>);

impl MyExec {
    pub fn connect(url: &str) -> Self {
        let opts = mysql::Opts::from_url(url).expect("mysql url");
        Self(RefCell::new(
            mysql::Conn::new(opts).expect("connect to MariaDB"),
        ))
    }

    pub fn conn(&self) -> std::cell::RefMut<'_, mysql::Conn> {
        self.0.borrow_mut()
    }
}

fn db_err(e: mysql::Error, s: &Stmt) -> DbError {
    match &e {
        mysql::Error::MySqlError(me) if mysql_is_duplicate(me.code) => DbError::Duplicate {
            table: s.insert_target().unwrap_or_default().to_owned(),
        },
        _ => DbError::Other(format!("{e} in {}", s.sql)),
    }
}

fn to_json(row: &mysql::Row) -> Row {
    let mut out = Row::new();
    for (i, col) in row.columns_ref().iter().enumerate() {
        let v = match row.as_ref(i) {
            None | Some(mysql::Value::NULL) => sema_core::json::Value::Null,
            Some(mysql::Value::Int(n)) => (*n).into(),
            Some(mysql::Value::UInt(n)) => (*n).into(),
            Some(mysql::Value::Float(f)) => (*f as f64).into(),
            Some(mysql::Value::Double(f)) => (*f).into(),
            Some(mysql::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned().into(),
            Some(other) => format!("{other:?}").into(),
        };
        out.insert(col.name_str().into_owned(), v);
    }
    out
}

impl Executor for MyExec {
    fn dialect(&self) -> Dialect {
        Dialect::Mysql
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        let mut conn = self.0.borrow_mut();
        let mut tx = conn
            .start_transaction(mysql::TxOpts::default())
            .map_err(|e| DbError::Other(e.to_string()))?;
        let mut outs = Vec::with_capacity(stmts.len());
        for s in stmts {
            let params: Vec<mysql::Value> = s
                .params
                .iter()
                .map(|p| match p {
                    SqlValue::Null => mysql::Value::NULL,
                    SqlValue::Int(n) => mysql::Value::Int(*n),
                    SqlValue::Text(t) => mysql::Value::Bytes(t.clone().into_bytes()),
                })
                .collect();
            let params = if params.is_empty() {
                mysql::Params::Empty
            } else {
                mysql::Params::Positional(params)
            };
            if s.is_query() {
                let rows: Vec<mysql::Row> =
                    tx.exec(s.sql.as_ref(), params).map_err(|e| db_err(e, s))?;
                outs.push(Outcome {
                    rows: rows.iter().map(to_json).collect(),
                    changes: 0,
                });
            } else {
                tx.exec_drop(s.sql.as_ref(), params)
                    .map_err(|e| db_err(e, s))?;
                outs.push(Outcome {
                    rows: vec![],
                    changes: tx.affected_rows(),
                });
            }
        }
        tx.commit().map_err(|e| DbError::Other(e.to_string()))?;
        Ok(outs)
    }
}
