//! PostgreSQL executor for the contract suite: one client, a batch is one transaction.

use bytes::{BufMut, BytesMut};
use postgres::types::{to_sql_checked, Format, IsNull, ToSql, Type};
use sema_core::{
    sql::{classify_postgres_error, DbError, Dialect, Outcome, Row, SqlValue, Stmt},
    store::Executor,
};
use std::cell::RefCell;

pub struct PgExec(RefCell<postgres::Client>);

impl PgExec {
    pub fn connect(url: &str) -> Self {
        Self(RefCell::new(
            postgres::Client::connect(url, postgres::NoTls).expect("connect to PostgreSQL"),
        ))
    }

    pub fn client(&self) -> std::cell::RefMut<'_, postgres::Client> {
        self.0.borrow_mut()
    }
}

/// Binds a [`SqlValue`] as the Worker's executor (`src/hyperdrive_pg.rs`) does: in text form,
/// its placeholder typed `unknown`, so the server infers the type and parses the text as it. The
/// contract suite thereby proves that binding on every statement the store plans.
#[derive(Debug)]
struct Param<'a>(&'a SqlValue);

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            SqlValue::Null => return Ok(IsNull::Yes),
            SqlValue::Int(n) => out.put_slice(n.to_string().as_bytes()),
            SqlValue::Text(t) => out.put_slice(t.as_bytes()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

fn db_err(e: postgres::Error) -> DbError {
    let db = e.as_db_error();
    classify_postgres_error(
        db.map(|d| d.code().code()),
        db.and_then(|d| d.table()),
        e.to_string(),
    )
}

fn to_json(row: &postgres::Row) -> Row {
    let mut out = Row::new();
    for (i, col) in row.columns().iter().enumerate() {
        let v: sema_core::json::Value = match *col.type_() {
            Type::INT2 => row
                .get::<_, Option<i16>>(i)
                .map(Into::into)
                .unwrap_or_default(),
            Type::INT4 => row
                .get::<_, Option<i32>>(i)
                .map(Into::into)
                .unwrap_or_default(),
            Type::INT8 => row
                .get::<_, Option<i64>>(i)
                .map(Into::into)
                .unwrap_or_default(),
            Type::BOOL => row
                .get::<_, Option<bool>>(i)
                .map(Into::into)
                .unwrap_or_default(),
            _ => row
                .get::<_, Option<String>>(i)
                .map(Into::into)
                .unwrap_or_default(),
        };
        out.insert(col.name().to_owned(), v);
    }
    out
}

impl Executor for PgExec {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        let mut client = self.0.borrow_mut();
        let mut tx = client.transaction().map_err(db_err)?;
        let mut outs = Vec::with_capacity(stmts.len());
        for s in stmts {
            let params: Vec<(Param<'_>, Type)> =
                s.params.iter().map(|v| (Param(v), Type::UNKNOWN)).collect();
            let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
                .iter()
                .map(|(p, t)| (p as &(dyn ToSql + Sync), t.clone()))
                .collect();
            if s.returns_rows() {
                let rows = tx.query_typed(s.sql.as_ref(), &typed).map_err(db_err)?;
                // A write's returned rows are the rows it changed (`UPDATE … RETURNING`).
                let changes = if s.is_query() { 0 } else { rows.len() as u64 };
                outs.push(Outcome {
                    rows: rows.iter().map(to_json).collect(),
                    changes,
                });
            } else {
                let changes = tx.execute_typed(s.sql.as_ref(), &typed).map_err(db_err)?;
                outs.push(Outcome {
                    rows: vec![],
                    changes,
                });
            }
        }
        tx.commit().map_err(db_err)?;
        Ok(outs)
    }
}
