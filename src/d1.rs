//! The D1 executor: runs statements planned by the core and hands back rows and change counts.
//!
//! Integers are bound as JS numbers and must lie within ±2^53 (checked: D1 would otherwise round them
//! silently). A batch runs as one transaction: it commits whole or not at all.
//!
//! Results are read in one call: a snippet of JavaScript keeps the parts read (rows, error, and two
//! of `meta`'s counts) and turns the whole batch's result into JSON text (`JSON.stringify`,
//! native); the core parses it here, into the tree whose objects are the rows (moved out of it,
//! not copied). worker's `D1Result` walks each row and the whole `meta` object field by field
//! across the wasm boundary (`serde_wasm_bindgen`), which a CPU profile of submit → lease put at
//! ~4% of the isolate's busy time.
//!
//! Before its first statement in an isolate, the executor reads wrangler's migration ledger and
//! refuses with [`DbError::SchemaMismatch`] (a 503 `store.schema_mismatch`) unless the database is
//! at [`schema::VERSION`]. A mismatch is not remembered, so applying the migrations heals at once.

use sema_core::{
    json::Value,
    schema,
    sql::{classify_sqlite_error, DbError, Dialect, Outcome, Row, SqlValue, Stmt, JS_SAFE_INT},
    store::Executor,
};
use std::{cell::Cell, rc::Rc};
use wasm_bindgen::{prelude::wasm_bindgen, JsCast, JsValue};
use worker::{wasm_bindgen_futures::JsFuture, worker_sys, D1Database, D1PreparedStatement, Env};

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
    match &e {
        // D1Error's Display assumes a string cause and panics otherwise: read the parts safely.
        worker::Error::D1(d1) => rejected(AsRef::<JsValue>::as_ref(d1).clone()),
        other => classify_sqlite_error(&other.to_string()),
    }
}

/// A rejection of one of D1's promises (or worker's `D1Error`), read as its message, then its
/// cause's message.
fn rejected(e: JsValue) -> DbError {
    let text = match e.dyn_ref::<js_sys::Error>() {
        Some(err) => {
            let cause = err
                .cause()
                .dyn_ref::<js_sys::Error>()
                .map_or_else(|| "unknown error".to_owned(), |c| String::from(c.message()));
            format!("{} {cause}", String::from(err.message()))
        }
        None => crate::failure::js_text(&e),
    };
    classify_sqlite_error(&text)
}

/// One statement's result as [`d1_text`] hands it over: its rows, `meta`'s two counts, its error.
struct RawResult {
    results: Vec<Row>,
    changes: Option<u64>,
    rows_read: Option<u64>,
    error: Option<String>,
}

/// D1's result could not be read: `what` says which part.
fn unreadable(what: &str) -> DbError {
    DbError::Other(format!("D1's result could not be read: {what}"))
}

impl RawResult {
    /// Reads one statement's result from its parsed JSON, taking its rows out of the tree (moved,
    /// not copied). A part left out (or null, but for the rows) reads as absent; a part of another
    /// kind than D1's makes the result unreadable, as a typed read of it would.
    fn take(v: Value) -> Result<Self, DbError> {
        let Value::Object(mut m) = v else {
            return Err(unreadable("a result that is not an object"));
        };
        let results = match m.remove("results") {
            None => Vec::new(),
            Some(Value::Array(rows)) => rows
                .into_iter()
                .map(|r| match r {
                    Value::Object(row) => Ok(row),
                    _ => Err(unreadable("a row that is not an object")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(unreadable("results that are not an array")),
        };
        let count = |name: &str| match m.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| unreadable(&format!("a {name} that is not a count"))),
        };
        Ok(Self {
            results,
            changes: count("changes")?,
            rows_read: count("rows_read")?,
            error: match m.remove("error") {
                None | Some(Value::Null) => None,
                Some(Value::String(e)) => Some(e),
                Some(_) => return Err(unreadable("an error that is not text")),
            },
        })
    }
}

#[wasm_bindgen(inline_js = "function one(r) {
  const m = r.meta || {};
  return { results: r.results, changes: m.changes, rows_read: m.rows_read, error: r.error };
}
export function d1_text(r) {
  return JSON.stringify(Array.isArray(r) ? r.map(one) : one(r));
}")]
extern "C" {
    /// The JSON text of a D1 result (one statement's, or a batch's array of them) with only the
    /// parts [`RawResult`] reads: its rows, error, and `meta`'s two counts, lifted beside them.
    #[wasm_bindgen(catch)]
    fn d1_text(result: &JsValue) -> Result<String, JsValue>;
}

/// Awaits a D1 promise and parses its result as JSON ([`d1_text`]), with the program's one JSON
/// parser (`sema_core::json::Value`'s).
async fn settled(promise: js_sys::Promise) -> Result<Value, DbError> {
    let value = JsFuture::from(promise).await.map_err(rejected)?;
    let text = d1_text(&value).map_err(rejected)?;
    sema_core::json::parse(&text).map_err(|e| unreadable(&e.to_string()))
}

fn outcome(result: RawResult, meter: &Meter) -> Result<Outcome, DbError> {
    if let Some(err) = result.error {
        return Err(classify_sqlite_error(&err));
    }
    meter.read(result.rows_read.unwrap_or(0) as usize);
    Ok(Outcome {
        rows: result.results,
        changes: result.changes.unwrap_or(0),
    })
}

impl D1Exec {
    /// Refuses a database whose ledger is not at [`schema::VERSION`] (read once per isolate). The
    /// read is the isolate's cost, not the operation's: it is not charged to the request's meter,
    /// so the `x-sema-d1` figures stay the operation's own.
    async fn check_schema(&self) -> Result<(), DbError> {
        if SCHEMA_CHECKED.with(Cell::get) {
            return Ok(());
        }
        let found = match all(&prepare(&self.db, &schema::d1_applied())?).await {
            Ok(result) => schema::d1_version(
                result
                    .results
                    .iter()
                    .filter_map(|r| r.get("name")?.as_str()),
            ),
            Err(e) => match e {
                DbError::Other(text) if schema::d1_ledger_missing(&text) => 0,
                other => return Err(other),
            },
        };
        schema::judge(found)?;
        SCHEMA_CHECKED.with(|c| c.set(true));
        Ok(())
    }
}

/// Runs one prepared statement (`all`: its rows and meta).
async fn all(stmt: &D1PreparedStatement) -> Result<RawResult, DbError> {
    RawResult::take(settled(stmt.inner().all().map_err(rejected)?).await?)
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
        let statements = prepared
            .iter()
            .map(|s| JsValue::from(s.inner()))
            .collect::<js_sys::Array>();
        let db: &worker_sys::D1Database = self.db.as_ref().unchecked_ref();
        let Value::Array(results) = settled(db.batch(statements).map_err(rejected)?).await? else {
            return Err(unreadable("a batch's result that is not an array"));
        };
        // Every statement's result read before any is judged, as one typed read of the batch was.
        let results = results
            .into_iter()
            .map(RawResult::take)
            .collect::<Result<Vec<_>, _>>()?;
        results
            .into_iter()
            .map(|r| outcome(r, &self.meter))
            .collect()
    }

    async fn run(&self, stmt: &Stmt) -> Result<Outcome, DbError> {
        self.check_schema().await?;
        self.meter.add(1, 1);
        distance().await;
        let result = all(&prepare(&self.db, stmt)?).await?;
        outcome(result, &self.meter)
    }
}
