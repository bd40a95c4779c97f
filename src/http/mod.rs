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
mod sessions;
mod static_files;
mod stream_ticket;

use crate::{cx::Cx, failure::Failure, incoming::Incoming, outgoing::Outgoing};
use error::{json, respond};
use sema_core::{
    gate::DecidePath,
    route::{match_route, Access, Route},
    static_file::StaticFile,
};

use worker::{web_sys, Env};

/// The response to `raw`, with the request's D1 meter line; an error only where the runtime
/// refuses a response of ours (see `Outgoing::into_raw`).
pub async fn handle(
    raw: web_sys::Request,
    env: Env,
    context: worker::Context,
) -> Result<web_sys::Response, wasm_bindgen::JsValue> {
    let cx = Cx::for_request(env, context);
    let Some(req) = Incoming::new(raw) else {
        let failed =
            Failure::Infra("the runtime's request text was not in its packed shape".into());
        return respond(Err(failed)).into_raw(&cx.meter.header());
    };
    let failpoint = crate::failpoint::by_header(&cx.env)
        .then(|| req.header(crate::failpoint::HEADER))
        .flatten();
    let cx = cx.armed_with(failpoint);
    let resp = respond(dispatch(&req, &cx).await);
    resp.into_raw(&cx.meter.header())
}

async fn dispatch(req: &Incoming, cx: &Cx) -> Result<Outgoing, Failure> {
    sema_core::headers::check_sizes(|name| req.header_len(name))?;
    let route = match_route(req.method(), req.path())?;
    if route.access() == Access::Public {
        return public(&route, cx).await;
    }
    // The one request authenticated otherwise: a run's event stream opened with a stream ticket
    // (a browser's EventSource sends no Authorization header). Only this route, only with `ticket=`.
    if let Route::RunEvents(id) = &route {
        let query = sema_core::list::query_of(req.url());
        if let Some(ticket) = sema_core::stream_ticket::in_query(query)? {
            return stream_ticket::events(req, cx, id, ticket).await;
        }
    }
    let principal = crate::auth::principal(req, &cx.env)?;
    route.access().check(&principal)?;
    let p = &principal;
    match route {
        Route::Health | Route::OpenApi | Route::Docs | Route::Console(_) => {
            public(&route, cx).await
        }
        Route::StreamTicket(id) => stream_ticket::issue(cx, p, &id).await,
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
        Route::ListSessions => sessions::list(req, cx, p).await,
        Route::GetSession(id) => sessions::get(cx, p, &id).await,
        Route::DeleteSession(id) => sessions::delete(cx, p, &id).await,
    }
}

/// The public routes, answered before authentication (a closed deployment serves them too):
/// `/health`, and the static files, the same for every caller (`sema_core::static_file`).
async fn public(route: &Route, cx: &Cx) -> Result<Outgoing, Failure> {
    match StaticFile::of(route) {
        Some(file) => static_files::serve(&cx.env, file).await,
        None => Ok(health()),
    }
}

/// `GET /health`: public, answered before authentication.
fn health() -> Outgoing {
    json(
        200,
        format!(
            r#"{{"ok":true,"service":"sema-edge","version":"{}"}}"#,
            env!("CARGO_PKG_VERSION")
        ),
    )
}
