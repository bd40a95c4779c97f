//! The D1 executor: runs statements planned by the core and hands back rows and change counts.
//!
//! Integers are bound as JS numbers and must lie within ±2^53 (checked: D1 would otherwise round them
//! silently). A batch runs as one transaction: it commits whole or not at all.
//!
//! Before its first statement in an isolate, the executor reads wrangler's migration ledger and
//! refuses with [`DbError::SchemaMismatch`] (a 503 `store.schema_mismatch`) unless the database is
//! at [`schema::VERSION`]. A mismatch is not remembered, so applying the migrations heals at once.

use sema_core::{
    schema,
    sql::{classify_sqlite_error, DbError, Dialect, Outcome, Row, SqlValue, Stmt, JS_SAFE_INT},
    store::Executor,
};
use std::{cell::Cell, rc::Rc};
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, D1Result, Env};

thread_local! {
    /// Set once this isolate has seen the D1 database at [`schema::VERSION`] (an isolate is
    /// single-threaded; the flag only spares the ledger read on later calls).
    static SCHEMA_CHECKED: Cell<bool> = const { Cell::new(false) };
}

/// D1 as the store's executor (SQLite dialect), counting what it costs.
pub struct D1Exec {
    db: D1Database,
    meter: Rc<Meter>,
}

/// D1 round trips and statements spent on one request (reported in the `x-sema-d1` header, so the
/// cost of each operation is measured, not guessed).
#[derive(Debug, Default)]
pub struct Meter {
    round_trips: Cell<u32>,
    statements: Cell<u32>,
    /// Rows D1 reports it read (its `meta.rows_read`): what a statement examined, not what it
    /// returned. Not in the header; the reaper's tick summary reports it.
    rows_read: Cell<u64>,
}

impl Meter {
    pub fn add(&self, round_trips: u32, statements: u32) {
        self.round_trips.set(self.round_trips.get() + round_trips);
        self.statements.set(self.statements.get() + statements);
    }

    pub fn round_trips(&self) -> u32 {
        self.round_trips.get()
    }

    pub fn rows_read(&self) -> u64 {
        self.rows_read.get()
    }

    fn read(&self, rows: usize) {
        self.rows_read.set(self.rows_read.get() + rows as u64);
    }

    /// `round-trips=N; statements=M`.
    pub fn header(&self) -> String {
        format!(
            "round-trips={}; statements={}",
            self.round_trips.get(),
            self.statements.get()
        )
    }

    /// Adds the counts of a header written by [`Meter::header`] (a Durable Object's share).
    pub fn add_header(&self, header: &str) {
        let num = |key: &str| {
            header
                .split(';')
                .filter_map(|p| p.trim().strip_prefix(key))
                .find_map(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        };
        self.add(num("round-trips="), num("statements="));
    }
}

pub const METER_HEADER: &str = "x-sema-d1";

/// The executor over the `DB` binding, charging `meter`.
pub fn exec(env: &Env, meter: &Rc<Meter>) -> Result<D1Exec, worker::Error> {
    Ok(D1Exec {
        db: env.d1("DB")?,
        meter: meter.clone(),
    })
}

fn prepare(db: &D1Database, stmt: &Stmt) -> Result<D1PreparedStatement, DbError> {
    let mut args = Vec::with_capacity(stmt.params.len());
    for p in &stmt.params {
        args.push(match p {
            SqlValue::Null => JsValue::NULL,
            SqlValue::Int(n) => {
                if n.unsigned_abs() > JS_SAFE_INT as u64 {
                    return Err(DbError::Other(format!(
                        "integer {n} exceeds 2^53 and cannot be bound"
                    )));
                }
                JsValue::from_f64(*n as f64)
            }
            SqlValue::Text(s) => JsValue::from_str(s),
        });
    }
    db.prepare(stmt.sql.as_ref())
        .bind(&args)
        .map_err(to_db_error)
}

fn to_db_error(e: worker::Error) -> DbError {
    let text = match &e {
        // D1Error's Display assumes a string cause and panics otherwise: read the parts safely.
        worker::Error::D1(d1) => {
            let js: &js_sys::Error = d1.as_ref();
            format!("{} {}", String::from(js.message()), d1.cause())
        }
        other => other.to_string(),
    };
    classify_sqlite_error(&text)
}

fn outcome(result: &D1Result, meter: &Meter) -> Result<Outcome, DbError> {
    if let Some(err) = result.error() {
        return Err(classify_sqlite_error(&err));
    }
    let rows: Vec<Row> = result.results().map_err(to_db_error)?;
    let meta = result.meta().map_err(to_db_error)?;
    meter.read(meta.as_ref().and_then(|m| m.rows_read).unwrap_or(0));
    let changes = meta.and_then(|m| m.changes).unwrap_or(0) as u64;
    Ok(Outcome { rows, changes })
}

impl D1Exec {
    /// Refuses a database whose ledger is not at [`schema::VERSION`] (read once per isolate). The
    /// read is the isolate's cost, not the operation's: it is not charged to the request's meter,
    /// so the `x-sema-d1` figures stay the operation's own.
    async fn check_schema(&self) -> Result<(), DbError> {
        if SCHEMA_CHECKED.with(Cell::get) {
            return Ok(());
        }
        let found = match prepare(&self.db, &schema::d1_applied())?.all().await {
            Ok(result) => {
                let rows: Vec<Row> = result.results().map_err(to_db_error)?;
                schema::d1_version(rows.iter().filter_map(|r| r.get("name")?.as_str()))
            }
            Err(e) => match to_db_error(e) {
                DbError::Other(text) if schema::d1_ledger_missing(&text) => 0,
                other => return Err(other),
            },
        };
        schema::judge(found)?;
        SCHEMA_CHECKED.with(|c| c.set(true));
        Ok(())
    }
}

/// The bench-only distance to D1's primary (feature `bench-d1-distance`): waited before every
/// metered round trip. A timer, so the object's other calls run meanwhile, as they would while a
/// real request crosses regions.
#[cfg(feature = "bench-d1-distance")]
async fn distance() {
    worker::Delay::from(std::time::Duration::from_millis(50)).await;
}

#[cfg(not(feature = "bench-d1-distance"))]
async fn distance() {}

impl Executor for D1Exec {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        let prepared = stmts
            .iter()
            .map(|s| prepare(&self.db, s))
            .collect::<Result<Vec<_>, _>>()?;
        self.check_schema().await?;
        self.meter.add(1, stmts.len() as u32);
        distance().await;
        let results = self.db.batch(prepared).await.map_err(to_db_error)?;
        results.iter().map(|r| outcome(r, &self.meter)).collect()
    }

    async fn run(&self, stmt: &Stmt) -> Result<Outcome, DbError> {
        self.check_schema().await?;
        self.meter.add(1, 1);
        distance().await;
        let result = prepare(&self.db, stmt)?.all().await.map_err(to_db_error)?;
        outcome(&result, &self.meter)
    }
}
