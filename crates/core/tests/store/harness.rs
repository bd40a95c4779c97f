//! Fixtures: a fresh, empty database with the project's schema applied, per test and per dialect.
//!
//! SQLite: a new file. PostgreSQL: a new schema (connections set `search_path` to it). MariaDB: a new
//! database. The servers are the ones scripts/test starts (`SEMA_PG_URL`, `SEMA_MYSQL_URL`).

use crate::{exec_mysql::MyExec, exec_postgres::PgExec, exec_sqlite::SqliteExec};
use sema_core::{
    sql::Dialect,
    store::{Executor, SqlStore},
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A unique lowercase name for a database, schema or id. (A test fixture's name, not a decision of
/// the store: the clock only makes names unique across test processes.)
#[allow(clippy::disallowed_methods)]
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}_{}_{:x}_{}",
        std::process::id(),
        nanos & 0xffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The DDL files of a dialect, in migration order.
pub fn schema_files(d: Dialect) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(match d {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
            Dialect::Mysql => "mysql",
        });
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    files
}

/// The DDL statements of a dialect: comments dropped, split on `;`.
pub fn schema_statements(d: Dialect) -> Vec<String> {
    let mut out = vec![];
    for f in schema_files(d) {
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        out.extend(
            text.split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
    }
    out
}

fn env_url(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run through scripts/test, which starts the servers")
    })
}

/// An executor that counts its round trips (batches; a single statement is a batch of one).
pub struct Counted<E> {
    inner: E,
    batches: std::cell::Cell<usize>,
}

impl<E: Executor> Counted<E> {
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            batches: std::cell::Cell::new(0),
        }
    }

    /// Round trips since the last call (and resets the count).
    pub fn take(&self) -> usize {
        self.batches.replace(0)
    }
}

impl<E: Executor> Executor for Counted<E> {
    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    async fn batch(
        &self,
        stmts: &[sema_core::sql::Stmt],
    ) -> Result<Vec<sema_core::sql::Outcome>, sema_core::sql::DbError> {
        self.batches.set(self.batches.get() + 1);
        self.inner.batch(stmts).await
    }
}

/// A fresh database of one dialect.
pub trait Fixture {
    type E: Executor;
    /// A new connection to this fixture's database.
    fn connect(&self) -> Self::E;
    /// Runs literal SQL out of band (no parameters), as an operator's manual statement would.
    fn raw(&self, sql: &str);
    /// Applies the schema (again).
    fn apply_schema(&self);

    fn store(&self) -> SqlStore<Self::E> {
        SqlStore::new(self.connect())
    }

    /// A store whose executor counts round trips (`store.exec.take()`).
    fn counted_store(&self) -> SqlStore<Counted<Self::E>> {
        SqlStore::new(Counted::new(self.connect()))
    }
}

pub struct SqliteFx {
    dir: PathBuf,
}

impl SqliteFx {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("sema_sqlite"));
        std::fs::create_dir_all(&dir).unwrap();
        let fx = Self { dir };
        fx.apply_schema();
        fx
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("db.sqlite")
    }
}

impl Drop for SqliteFx {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fixture for SqliteFx {
    type E = SqliteExec;
    fn connect(&self) -> SqliteExec {
        SqliteExec::open(&self.path())
    }
    fn raw(&self, sql: &str) {
        self.connect()
            .conn()
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    fn apply_schema(&self) {
        let exec = self.connect();
        for s in schema_statements(Dialect::Sqlite) {
            exec.conn()
                .execute_batch(&s)
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }
}

pub struct PgFx {
    schema: String,
}

impl PgFx {
    pub fn new() -> Self {
        let fx = Self {
            schema: unique("t"),
        };
        let admin = PgExec::connect(&env_url("SEMA_PG_URL"));
        admin
            .client()
            .batch_execute(&format!("CREATE SCHEMA {}", fx.schema))
            .unwrap();
        fx.apply_schema();
        fx
    }
}

impl Drop for PgFx {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&env_url("SEMA_PG_URL"), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
        }
    }
}

impl Fixture for PgFx {
    type E = PgExec;
    fn connect(&self) -> PgExec {
        PgExec::connect(&format!(
            "{} options='-c search_path={}'",
            env_url("SEMA_PG_URL"),
            self.schema
        ))
    }
    fn raw(&self, sql: &str) {
        self.connect()
            .client()
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    fn apply_schema(&self) {
        let exec = self.connect();
        for s in schema_statements(Dialect::Postgres) {
            exec.client()
                .batch_execute(&s)
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }
}

pub struct MyFx {
    db: String,
}

impl MyFx {
    pub fn new() -> Self {
        use mysql::prelude::Queryable;
        let fx = Self { db: unique("t") };
        let admin = MyExec::connect(&env_url("SEMA_MYSQL_URL"));
        admin
            .conn()
            .query_drop(format!("CREATE DATABASE {}", fx.db))
            .unwrap();
        fx.apply_schema();
        fx
    }
}

impl Drop for MyFx {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        if let Ok(opts) = mysql::Opts::from_url(&env_url("SEMA_MYSQL_URL")) {
            if let Ok(mut c) = mysql::Conn::new(opts) {
                let _ = c.query_drop(format!("DROP DATABASE {}", self.db));
            }
        }
    }
}

impl Fixture for MyFx {
    type E = MyExec;
    fn connect(&self) -> MyExec {
        MyExec::connect(&format!("{}/{}", env_url("SEMA_MYSQL_URL"), self.db))
    }
    fn raw(&self, sql: &str) {
        use mysql::prelude::Queryable;
        let exec = self.connect();
        for s in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            exec.conn()
                .query_drop(s)
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }
    fn apply_schema(&self) {
        self.raw(&schema_statements(Dialect::Mysql).join(";\n"));
    }
}

/// Repeats a contract test body on SQLite, PostgreSQL and MariaDB: `every_dialect!(name, ...)` for
/// `async fn name<F: Fixture>(fx: &F)`.
#[macro_export]
macro_rules! every_dialect {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                pollster::block_on(super::$name(&$crate::harness::SqliteFx::new()));
            }
            #[test]
            fn postgres() {
                pollster::block_on(super::$name(&$crate::harness::PgFx::new()));
            }
            #[test]
            fn mysql() {
                pollster::block_on(super::$name(&$crate::harness::MyFx::new()));
            }
        }
    )*};
}
