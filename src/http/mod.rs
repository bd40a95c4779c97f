//! Routing: match the request in the core's route table, resolve the principal, check the route's
//! access once, run the handler, and map the outcome to HTTP in one place (`error.rs`).

mod admin;
mod body;
mod console;
pub mod error;
mod gates;
mod leaders;
mod reply;
mod runner;
mod runs;
mod sessions;
mod stream_ticket;

use crate::{cx::Cx, d1::METER_HEADER, failure::Failure, incoming::Incoming};
use error::{json, respond};
use sema_core::{
    gate::DecidePath,
    route::{match_route, Access, Route},
};

use worker::{Env, Headers, Response};

pub async fn handle(raw: worker::web_sys::Request, env: Env, context: worker::Context) -> Response {
    let req = Incoming::new(raw);
    let failpoint = crate::failpoint::by_header(&env)
        .then(|| req.header(crate::failpoint::HEADER))
        .flatten();
    let cx = Cx::for_request(env, context).armed_with(failpoint);
    let resp = respond(dispatch(&req, &cx).await);
    let meter = cx.meter.header();
    // A response built here takes the header as it is; one passed through from an object (a
    // session's stream, the dispatcher's WebSocket upgrade) has immutable headers (setting one
    // fails), so they are copied.
    if resp.headers().set(METER_HEADER, &meter).is_ok() {
        return resp;
    }
    let headers = Headers::new();
    for (k, v) in resp.headers().entries() {
        let _ = headers.set(&k, &v);
    }
    let _ = headers.set(METER_HEADER, &meter);
    resp.with_headers(headers)
}

async fn dispatch(req: &Incoming, cx: &Cx) -> Result<Response, Failure> {
    sema_core::headers::check_sizes(|name| req.header(name))?;
    let route = match_route(req.method(), req.path())?;
    if route.access() == Access::Public {
        return Ok(public(&route));
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
        Route::Health | Route::OpenApi | Route::Docs | Route::Console(_) => Ok(public(&route)),
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
/// `/health`, and the OpenAPI document and its page, the same for every caller (see
/// `sema_core::openapi`).
fn public(route: &Route) -> Response {
    use sema_core::openapi;
    let fixed = |content_type: &str, body: String| {
        let headers = Headers::new();
        let _ = headers.set("content-type", content_type);
        let _ = headers.set("cache-control", openapi::CACHE_CONTROL);
        let _ = headers.set("x-content-type-options", "nosniff");
        (headers, body)
    };
    let (headers, body) = match route {
        Route::OpenApi => fixed(
            "application/json; charset=utf-8",
            openapi::DOCUMENT.to_owned(),
        ),
        Route::Docs => {
            // Rendered once per isolate: the page is a function of the compiled-in document.
            thread_local! {
                static DOCS_PAGE: std::cell::OnceCell<String> = const { std::cell::OnceCell::new() };
            }
            let page = DOCS_PAGE.with(|p| {
                p.get_or_init(|| openapi::docs_page(openapi::DOCUMENT))
                    .clone()
            });
            let (headers, body) = fixed("text/html; charset=utf-8", page);
            let _ = headers.set("content-security-policy", openapi::DOCS_CSP);
            let _ = headers.set("referrer-policy", "no-referrer");
            (headers, body)
        }
        Route::Console(asset) => return console::serve(*asset),
        _ => return health(),
    };
    Response::builder()
        .with_status(200)
        .with_headers(headers)
        .fixed(body.into_bytes())
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
