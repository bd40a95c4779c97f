//! Routing: match the request in the core's route table, resolve the principal, check the route's
//! access once, run the handler, and map the outcome to HTTP in one place (`error.rs`).

mod admin;
mod body;
pub mod error;
mod gates;
mod leaders;
mod reply;
mod runner;
mod runs;

use crate::{cx::Cx, d1::METER_HEADER, failure::Failure};
use error::{json, respond};
use sema_core::{
    gate::DecidePath,
    route::{match_route, Access, Route},
};
use worker::{Env, Headers, Request, Response};

pub async fn handle(mut req: Request, env: Env, context: worker::Context) -> Response {
    let cx = Cx::for_request(env, context).armed_by(&req);
    let resp = respond(dispatch(&mut req, &cx).await);
    // A response passed through from the session object has immutable headers: copy them.
    let headers = Headers::new();
    for (k, v) in resp.headers().entries() {
        let _ = headers.set(&k, &v);
    }
    let _ = headers.set(METER_HEADER, &cx.meter.header());
    resp.with_headers(headers)
}

async fn dispatch(req: &mut Request, cx: &Cx) -> Result<Response, Failure> {
    sema_core::headers::check_sizes(|name| req.headers().get(name).ok().flatten())?;
    let method = req.inner().method();
    let route = match_route(&method, &req.path())?;
    if route.access() == Access::Public {
        return Ok(health());
    }
    let principal = crate::auth::principal(req, &cx.env)?;
    route.access().check(&principal)?;
    let p = &principal;
    match route {
        Route::Health => Ok(health()),
        Route::SubmitRun => runs::submit(req, cx, p).await,
        Route::ListRuns => runs::list(req, cx, p).await,
        Route::GetRun(id) => runs::get(cx, p, &id).await,
        Route::CancelRun(id) => runs::cancel(cx, p, &id).await,
        Route::RunEvents(id) => runs::events(req, cx, p, &id).await,
        Route::Steer(id) => runs::steer(req, cx, p, &id).await,
        Route::SubmitTask => runs::submit_task(req, cx, p).await,
        Route::Lease => runner::lease(req, cx).await,
        Route::Connect => runner::connect(req, cx).await,
        Route::Heartbeat(id) => runner::heartbeat(req, cx, &id).await,
        Route::AppendEvents(id) => runner::append(req, cx, &id).await,
        Route::Finish(id) => runner::finish(req, cx, &id).await,
        Route::AdminReapers => admin::reapers(cx).await,
        Route::AdminSession(id) => admin::session(cx, id.as_str()).await,
        Route::AdminQueue(q) => admin::queue(cx, q.as_str()).await,
        Route::Park(id) => gates::park(req, cx, &id).await,
        Route::ListApprovals => gates::list(req, cx, p).await,
        Route::DecideApproval(id) => {
            gates::decide(req, cx, p, DecidePath::Approvals, id.as_str()).await
        }
        Route::PlanReview(id) => {
            gates::decide(req, cx, p, DecidePath::PlanReview, id.as_str()).await
        }
        Route::ResumeTask(id) => gates::decide(req, cx, p, DecidePath::Resume, id.as_str()).await,
        Route::Wake(id) => gates::wake(req, cx, p, &id).await,
        Route::SubmitLeader => leaders::submit(req, cx, p).await,
        Route::ListLeaders => leaders::list(req, cx, p).await,
        Route::GetLeader(id) => leaders::get(cx, p, &id).await,
        Route::CancelLeader(id) => leaders::cancel(cx, p, &id).await,
    }
}

/// `GET /health`: public, answered before authentication.
fn health() -> Response {
    json(
        200,
        format!(
            r#"{{"ok":true,"service":"sema-edge","version":"{}"}}"#,
            env!("CARGO_PKG_VERSION")
        ),
    )
}
