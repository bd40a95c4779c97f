//! The PostgreSQL executor: the store of record through a Hyperdrive binding (feature `postgres`).
//!
//! Connection discipline. A [`PgLink`] belongs to one [`crate::cx::Cx`] (one Worker request, one
//! object call, one cron tick) and never outlives it: it opens at most one connection, on its first
//! batch, and closes it when the last store over it is dropped (the client goes, its connection task
//! sends Terminate and ends). No connection is shared across requests: the runtime forbids I/O objects
//! crossing requests, and two requests on one connection would interleave their transactions.
//! Hyperdrive pools the server side, so a connection per call is the platform's intended shape.
//!
//! Transactions. A batch is `BEGIN`; its statements in order; `COMMIT`, pipelined: all of it goes
//! out at once and costs one round trip, and the first failure turns the `COMMIT` into a rollback,
//! so it commits whole or not at all, as a D1 batch does (see [`transaction`]). Batches on one link
//! are serialised by an async mutex held for the whole transaction, so no other batch's statement
//! lands inside it (the Worker is single-threaded; the mutex orders one call's concurrent futures).
//! Isolation is the server's default, READ COMMITTED, exactly as the native contract suite runs it.
//!
//! Bounds. Every statement is bounded by the server (`statement_timeout`, and an idle transaction by
//! `idle_in_transaction_session_timeout`), every batch by a timer here: when it fires, the connection
//! is dropped, which rolls the transaction back, and the next batch opens a fresh one.
//!
//! Values and errors are mapped as the native executor (`crates/core/tests/store/exec_postgres.rs`)
//! maps them, errors through the core's `classify_postgres_error`, so the store decides the same way.

use crate::d1::Meter;
use bytes::{BufMut, BytesMut};
use futures_util::{
    future::{join_all, Either},
    lock::Mutex,
    TryStreamExt,
};
use sema_core::{
    schema,
    sql::{classify_postgres_error, DbError, Dialect, Outcome, Row, SqlValue, Stmt},
    store::Executor,
};
use std::{cell::Cell, rc::Rc, time::Duration};
use tokio_postgres::{
    types::{to_sql_checked, Format, IsNull, ToSql, Type},
    Client,
};
use worker::{postgres_tls::PassthroughTls, Env, SecureTransport, Socket};

/// The Hyperdrive binding's name in wrangler.toml.
pub const BINDING: &str = "PG";

/// What the server allows one statement (ms), lock waits included.
const STATEMENT_TIMEOUT_MS: u32 = 8_000;
/// What one batch may take here, connecting included, before its connection is dropped (ms).
const BATCH_DEADLINE_MS: u64 = 10_000;
/// The most rows one statement may hand back (every store read is bounded far below this).
const MAX_ROWS: usize = 10_000;

thread_local! {
    /// Set once this isolate has seen the database at [`schema::VERSION`]. A mismatch is not
    /// remembered: every new connection looks again, so applying the migrations heals without a
    /// redeploy. (An isolate is single-threaded; the flag only spares a read per connection.)
    static SCHEMA_CHECKED: Cell<bool> = const { Cell::new(false) };
}

/// One call's lazily opened connection (see the module docs).
pub struct PgLink {
    env: Env,
    client: Mutex<Option<Client>>,
}

impl PgLink {
    pub fn new(env: Env) -> Self {
        Self {
            env,
            client: Mutex::new(None),
        }
    }
}

/// PostgreSQL as the store's executor, over one call's [`PgLink`], counting what it costs.
pub struct PgExec {
    link: Rc<PgLink>,
    meter: Rc<Meter>,
}

impl PgExec {
    pub fn new(link: Rc<PgLink>, meter: Rc<Meter>) -> Self {
        Self { link, meter }
    }
}

fn other(context: &str, e: impl std::fmt::Display) -> DbError {
    DbError::Other(format!("postgres {context}: {e}"))
}

/// A driver error as the core classifies it (the server's own text kept for the log).
fn db_err(e: tokio_postgres::Error) -> DbError {
    let db = e.as_db_error();
    let text = match db {
        Some(d) => format!("postgres: {d}"),
        None => format!("postgres: {e}"),
    };
    classify_postgres_error(
        db.map(|d| d.code().code()),
        db.and_then(|d| d.table()),
        text,
    )
}

/// Opens a connection through the binding. The socket starts plain and is upgraded only when the
/// connection string asks for TLS (Hyperdrive's local emulation says `sslmode=disable`).
async fn open(env: &Env) -> Result<Client, DbError> {
    let hd = env.hyperdrive(BINDING).map_err(|e| other("binding", e))?;
    let config: tokio_postgres::Config = hd
        .connection_string()
        .parse()
        .map_err(|e| other("connection string", e))?;
    let socket = Socket::builder()
        .secure_transport(SecureTransport::StartTls)
        .connect(hd.host(), hd.port())
        .map_err(|e| other("connect", e))?;
    let (client, connection) = config
        .connect_raw(socket, PassthroughTls)
        .await
        .map_err(db_err)?;
    // The connection's I/O runs beside the caller; it ends when the client is dropped.
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = connection.await {
            worker::console_warn!("postgres connection ended: {e}");
        }
    });
    Ok(client)
}

/// Refuses a database whose migration ledger is not at [`schema::VERSION`] (once per isolate).
async fn check_schema(client: &Client) -> Result<(), DbError> {
    if SCHEMA_CHECKED.with(Cell::get) {
        return Ok(());
    }
    let found = match client
        .query(schema::postgres_version().sql.as_ref(), &[])
        .await
    {
        Ok(rows) => match rows.first().map(|r| r.try_get::<_, i64>("version")) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(other("schema version", e)),
            None => 0,
        },
        Err(e)
            if e.code()
                .is_some_and(|c| schema::postgres_ledger_missing(c.code())) =>
        {
            0
        }
        Err(e) => return Err(db_err(e)),
    };
    schema::judge(found)?;
    SCHEMA_CHECKED.with(|c| c.set(true));
    Ok(())
}

/// Binds a [`SqlValue`] in text form, as an untyped literal: each statement goes out as
/// `query_typed` with every parameter typed `unknown`, so the server infers each type exactly as
/// it would when preparing (the native suite's path) and parses the text as that type, without a
/// round trip to describe the statement first. Encoding never fails: a value's text is its bytes.
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

/// A row as the core reads it: integers and booleans as JSON numbers and booleans, all else as
/// text (JSON columns are cast to text by the statements themselves); NULL as JSON null.
fn to_json(row: &tokio_postgres::Row) -> Result<Row, DbError> {
    let mut out = Row::new();
    for (i, col) in row.columns().iter().enumerate() {
        let bad = |e| other(&format!("column {}", col.name()), e);
        let v: sema_core::json::Value = match *col.type_() {
            Type::INT2 => row.try_get::<_, Option<i16>>(i).map_err(bad)?.into(),
            Type::INT4 => row.try_get::<_, Option<i32>>(i).map_err(bad)?.into(),
            Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(bad)?.into(),
            Type::BOOL => row.try_get::<_, Option<bool>>(i).map_err(bad)?.into(),
            _ => row.try_get::<_, Option<String>>(i).map_err(bad)?.into(),
        };
        out.insert(col.name().to_owned(), v);
    }
    Ok(out)
}

/// The most parameters one statement may bind (the protocol counts them in 16 bits).
const MAX_PARAMS: usize = i16::MAX as usize;

/// What could make the driver refuse a statement before sending it. Checked for the whole batch
/// before anything is sent, because the batch is pipelined with its `COMMIT` (see [`transaction`]):
/// a statement refused locally would otherwise leave the rest to commit without it.
fn sendable(stmts: &[Stmt]) -> Result<(), DbError> {
    for s in stmts {
        if s.sql.contains('\0') {
            return Err(other("statement", "the SQL text holds a NUL byte"));
        }
        if s.params.len() > MAX_PARAMS {
            return Err(other(
                "statement",
                format!("{} parameters (at most {MAX_PARAMS})", s.params.len()),
            ));
        }
    }
    Ok(())
}

/// One statement of an open transaction: its rows, or how many rows it changed.
async fn statement(client: &Client, s: &Stmt) -> Result<Outcome, DbError> {
    let params = s.params.iter().map(|v| (Param(v), Type::UNKNOWN));
    let rows = client
        .query_typed_raw(s.sql.as_ref(), params)
        .await
        .map_err(db_err)?;
    let mut rows = std::pin::pin!(rows);
    let mut out = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(db_err)? {
        if out.len() == MAX_ROWS {
            return Err(other("query", format!("more than {MAX_ROWS} rows")));
        }
        out.push(to_json(&row)?);
    }
    // A write's rows (`UPDATE … RETURNING`) are kept with its changes.
    let changes = match s.is_query() {
        true => 0,
        false => rows.rows_affected().unwrap_or(0),
    };
    Ok(Outcome { rows: out, changes })
}

/// One batch as one transaction, in one round trip: `BEGIN` (with the statement bounds), every
/// statement, and `COMMIT` are written to the connection together and the server runs them in
/// order. The first failing statement aborts the transaction server-side; every later one then
/// fails (SQLSTATE 25P02) and the `COMMIT` ends it as a rollback, so the batch commits whole or
/// not at all, as a D1 batch does. The first failure in order is the one returned. Nothing can be
/// refused locally once sending starts ([`sendable`], and [`Param`] never fails to encode).
async fn transaction(client: &Client, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
    sendable(stmts)?;
    let begin = format!(
        "BEGIN; SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}; \
         SET LOCAL idle_in_transaction_session_timeout = {BATCH_DEADLINE_MS}"
    );
    // `join!` and `join_all` poll their futures first in the order given, and each future writes
    // its request on its first poll, so the requests reach the connection in this order.
    let (began, outs, committed) = futures_util::join!(
        client.batch_execute(&begin),
        join_all(stmts.iter().map(|s| statement(client, s))),
        client.batch_execute("COMMIT"),
    );
    began.map_err(db_err)?;
    let outs = outs.into_iter().collect::<Result<Vec<_>, _>>()?;
    committed.map_err(db_err)?;
    Ok(outs)
}

impl PgExec {
    /// Connects if need be, then runs the batch; any failure that may have left the connection in
    /// an unknown state (a broken connection, the deadline) drops it, so the next batch starts clean.
    async fn run_batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        let mut slot = self.link.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            let client = open(&self.link.env).await?;
            check_schema(&client).await?;
            *slot = Some(client);
        }
        let Some(client) = slot.as_ref() else {
            return Err(other("connection", "not open"));
        };
        let result = transaction(client, stmts).await;
        if client.is_closed() {
            *slot = None;
        }
        result
    }
}

impl Executor for PgExec {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        // Counted as D1 counts: one round trip per batch (a transaction), one per statement.
        self.meter.add(1, stmts.len() as u32);
        let work = Box::pin(self.run_batch(stmts));
        let deadline = worker::Delay::from(Duration::from_millis(BATCH_DEADLINE_MS));
        match futures_util::future::select(work, deadline).await {
            Either::Left((result, _)) => result,
            Either::Right(((), work)) => {
                // The batch is abandoned mid-flight (its lock released with it); its connection is
                // dropped too, which ends the transaction server-side.
                drop(work);
                if let Some(mut slot) = self.link.client.try_lock() {
                    *slot = None;
                }
                Err(other(
                    "batch",
                    format!("no answer within {BATCH_DEADLINE_MS} ms; connection dropped"),
                ))
            }
        }
    }
}
