//! Sema Edge Worker: the thin adapter between the Workers runtime and `sema-core`.
//!
//! It owns transport only: the router and handlers (`http/`), the store executors (`d1.rs`, and `hyperdrive_pg.rs` for PostgreSQL through Hyperdrive with the `postgres` feature) and the choice between them (`store_backend.rs`), the request as handlers read it (`incoming.rs`), the session
//! Durable Object (`session_do/`), the task-queue dispatcher object (`dispatch_do.rs`), the cron's reaper tick (`reaper_cron.rs`), the leader-run driver (`leader_driver.rs`), the ledger reads both sides share (`ledger_read.rs`), building a request to an object's `fetch` (`object_request.rs`), an object's storage as text (`object_storage.rs`), the Worker's response (`outgoing.rs`), reading an object's reply (`object_reply.rs`), principal resolution
//! (`auth.rs`) and the clock and entropy (`platform.rs`). Decisions live in the core. On a native target this crate is empty: its code is
//! exercised by the black-box tests in `tests/` against `wrangler dev`.

#[cfg(target_arch = "wasm32")]
mod auth;
#[cfg(target_arch = "wasm32")]
mod config;
#[cfg(target_arch = "wasm32")]
mod cx;
#[cfg(target_arch = "wasm32")]
mod d1;
#[cfg(target_arch = "wasm32")]
mod dispatch_do;
#[cfg(target_arch = "wasm32")]
mod failpoint;
#[cfg(target_arch = "wasm32")]
mod failure;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(all(target_arch = "wasm32", feature = "postgres"))]
mod hyperdrive_pg;
#[cfg(target_arch = "wasm32")]
mod incoming;
#[cfg(target_arch = "wasm32")]
mod leader_driver;
#[cfg(target_arch = "wasm32")]
mod ledger_read;
#[cfg(target_arch = "wasm32")]
mod object_reply;
#[cfg(target_arch = "wasm32")]
mod object_request;
#[cfg(target_arch = "wasm32")]
mod object_storage;
#[cfg(target_arch = "wasm32")]
mod outgoing;
#[cfg(target_arch = "wasm32")]
mod platform;
#[cfg(target_arch = "wasm32")]
mod reaper_cron;
#[cfg(target_arch = "wasm32")]
mod session_do;
#[cfg(target_arch = "wasm32")]
mod store_backend;

#[cfg(target_arch = "wasm32")]
#[worker::event(fetch)]
async fn fetch(
    req: worker::web_sys::Request,
    env: worker::Env,
    ctx: worker::Context,
) -> worker::Result<worker::web_sys::Response> {
    Ok(http::handle(req, env, ctx).await?)
}

#[cfg(target_arch = "wasm32")]
#[worker::event(scheduled)]
async fn scheduled(
    _event: worker::ScheduledEvent,
    env: worker::Env,
    _ctx: worker::ScheduleContext,
) {
    reaper_cron::tick(env).await;
}
