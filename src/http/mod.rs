//! Routing: match the request in the core's route table, resolve the principal, run the handler, and
//! map the outcome to HTTP in one place (`error.rs`).

pub mod error;
mod runner;
pub mod runs;

use error::{json, respond, Failure};
use sema_core::route::{match_route, Route};
use worker::{Env, Request, Response};

pub async fn handle(mut req: Request, env: Env) -> Response {
    respond(dispatch(&mut req, &env).await)
}

async fn dispatch(req: &mut Request, env: &Env) -> Result<Response, Failure> {
    let method = req.inner().method();
    let route = match_route(&method, &req.path())?;
    if route == Route::Health {
        return Ok(json(
            200,
            format!(
                r#"{{"ok":true,"service":"sema-edge","version":"{}"}}"#,
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    let principal = crate::auth::principal(req, env)?;
    match route {
        Route::Health => unreachable_health(),
        Route::SubmitRun => runs::submit(req, env, &principal).await,
        Route::ListRuns => runs::list(req, env, &principal).await,
        Route::GetRun(id) => runs::get(env, &principal, &id).await,
        Route::CancelRun(id) => runs::cancel(env, &principal, &id).await,
        Route::RunEvents(id) => runs::events(req, env, &principal, &id).await,
        Route::Steer(id) => runs::steer(req, env, &principal, &id).await,
        Route::SubmitTask => runs::submit_task(req, env, &principal).await,
        Route::Lease => runner::lease(req, env, &principal).await,
        Route::Heartbeat(id) => runner::heartbeat(req, env, &principal, &id).await,
        Route::AppendEvents(id) => runner::append(req, env, &principal, &id).await,
        Route::Finish(id) => runner::finish(req, env, &principal, &id).await,
    }
}

fn unreachable_health() -> Result<Response, Failure> {
    Err(Failure::Infra(
        "health is answered before authentication".into(),
    ))
}
