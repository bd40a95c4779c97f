//! PostgreSQL executor for the contract suite: one client, a batch is one transaction.

use bytes::{BufMut, BytesMut};
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
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

/// Binds a [`SqlValue`] as whatever type the server inferred for the placeholder.
#[derive(Debug)]
struct Param<'a>(&'a SqlValue);

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(n) => match *ty {
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                Type::INT8 => n.to_sql(ty, out),
                Type::BOOL => (*n != 0).to_sql(ty, out),
                _ => Err(format!("cannot bind an integer as {ty}").into()),
            },
            SqlValue::Text(t) => match *ty {
                Type::JSONB => {
                    out.put_u8(1);
                    out.put_slice(t.as_bytes());
                    Ok(IsNull::No)
                }
                _ => {
                    out.put_slice(t.as_bytes());
                    Ok(IsNull::No)
                }
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
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
        let v: serde_json::Value = match *col.type_() {
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
            let params: Vec<Param<'_>> = s.params.iter().map(Param).collect();
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
            if s.is_query() {
                let rows = tx.query(s.sql.as_ref(), &refs).map_err(db_err)?;
                outs.push(Outcome {
                    rows: rows.iter().map(to_json).collect(),
                    changes: 0,
                });
            } else {
                let changes = tx.execute(s.sql.as_ref(), &refs).map_err(db_err)?;
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
