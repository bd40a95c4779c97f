//! The store of record, chosen by configuration: `STORE_BACKEND = "d1"` (the default: the `DB` D1
//! binding) or `"postgres"` (the `PG` Hyperdrive binding; only in a build with the `postgres`
//! feature, `scripts/build --postgres`). One executor type over either, so every caller keeps its
//! `SqlStore<StoreExec>` and decides the same way whichever backend holds the rows.

use crate::d1::{self, D1Exec, Meter};
#[cfg(feature = "postgres")]
use crate::hyperdrive_pg::{PgExec, PgLink};
use sema_core::{
    sql::{DbError, Dialect, Outcome, Stmt},
    store::{Executor, SqlStore},
};
use std::rc::Rc;
use worker::Env;

/// Which database a deployment keeps its rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    D1,
    Postgres,
}

impl Backend {
    /// `STORE_BACKEND`: unset or `"d1"` is D1, `"postgres"` PostgreSQL; anything else is refused
    /// (a typo must not silently run on the wrong database).
    pub fn of(env: &Env) -> Result<Self, worker::Error> {
        match crate::config::settings(env).store_backend.trim() {
            "" | "d1" => Ok(Self::D1),
            "postgres" => Ok(Self::Postgres),
            other => Err(worker::Error::RustError(format!(
                "STORE_BACKEND {}: expected \"d1\" or \"postgres\"",
                sema_core::json::Quoted(other)
            ))),
        }
    }
}

/// A call's hold on its backend: nothing for D1 (a binding, no connection), the one lazily
/// opened connection for PostgreSQL (`hyperdrive_pg.rs`), dropped with the call.
pub enum Link {
    D1,
    #[cfg(feature = "postgres")]
    Postgres(Rc<PgLink>),
    /// Configured for a backend this build cannot reach (or misconfigured): every store refuses.
    Unavailable(String),
}

impl Link {
    pub fn new(env: &Env) -> Self {
        match Backend::of(env) {
            Ok(Backend::D1) => Self::D1,
            #[cfg(feature = "postgres")]
            Ok(Backend::Postgres) => Self::Postgres(Rc::new(PgLink::new(env.clone()))),
            #[cfg(not(feature = "postgres"))]
            Ok(Backend::Postgres) => Self::Unavailable(
                "STORE_BACKEND is \"postgres\" but this build has no PostgreSQL support \
                 (build with scripts/build --postgres)"
                    .to_owned(),
            ),
            Err(e) => Self::Unavailable(e.to_string()),
        }
    }
}

/// The store's executor over whichever backend the deployment configured.
pub enum StoreExec {
    D1(D1Exec),
    #[cfg(feature = "postgres")]
    Postgres(PgExec),
}

/// The run store over `link`, charging `meter`.
pub fn store(
    env: &Env,
    link: &Link,
    meter: &Rc<Meter>,
) -> Result<SqlStore<StoreExec>, worker::Error> {
    let exec = match link {
        Link::D1 => StoreExec::D1(d1::exec(env, meter)?),
        #[cfg(feature = "postgres")]
        Link::Postgres(pg) => StoreExec::Postgres(PgExec::new(pg.clone(), meter.clone())),
        Link::Unavailable(why) => return Err(worker::Error::RustError(why.clone())),
    };
    Ok(SqlStore::new(exec))
}

/// A store with a link of its own, for work that outlives the call that started it (a stream's
/// replay in the session object): its connection, if any, closes when the store is dropped.
pub fn detached_store(env: &Env) -> Result<SqlStore<StoreExec>, worker::Error> {
    store(env, &Link::new(env), &Rc::default())
}

impl Executor for StoreExec {
    fn dialect(&self) -> Dialect {
        match self {
            Self::D1(e) => e.dialect(),
            #[cfg(feature = "postgres")]
            Self::Postgres(e) => e.dialect(),
        }
    }

    async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<Outcome>, DbError> {
        match self {
            Self::D1(e) => e.batch(stmts).await,
            #[cfg(feature = "postgres")]
            Self::Postgres(e) => e.batch(stmts).await,
        }
    }

    async fn run(&self, stmt: &Stmt) -> Result<Outcome, DbError> {
        match self {
            Self::D1(e) => e.run(stmt).await,
            #[cfg(feature = "postgres")]
            Self::Postgres(e) => e.run(stmt).await,
        }
    }
}
