//! Routing: match the request in the core's route table, resolve the principal, run the handler, and
//! map the outcome to HTTP in one place (`error.rs`).

pub mod error;
mod runner;
pub mod runs;

use crate::d1::{Meter, METER_HEADER};
use error::{json, respond, Failure};
use sema_core::route::{match_route, Route};
use std::rc::Rc;
use worker::{Env, Headers, Request, Response};

/// What a request's handlers share: the bindings and the D1 cost meter.
pub struct Cx {
    pub env: Env,
    pub meter: Rc<Meter>,
}

impl Cx {
    pub fn new(env: Env) -> Self {
        Self {
            env,
            meter: Rc::new(Meter::default()),
        }
    }

    /// The run store, charging this request's meter.
    pub fn store(&self) -> Result<sema_core::store::SqlStore<crate::d1::D1Exec>, Failure> {
        Ok(crate::d1::store(&self.env, &self.meter)?)
    }
}

pub async fn handle(mut req: Request, env: Env) -> Response {
    let cx = Cx::new(env);
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
    let env = &cx.env;
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
        Route::SubmitRun => runs::submit(req, cx, &principal).await,
        Route::ListRuns => runs::list(req, cx, &principal).await,
        Route::GetRun(id) => runs::get(cx, &principal, &id).await,
        Route::CancelRun(id) => runs::cancel(cx, &principal, &id).await,
        Route::RunEvents(id) => runs::events(req, cx, &principal, &id).await,
        Route::Steer(id) => runs::steer(req, cx, &principal, &id).await,
        Route::SubmitTask => runs::submit_task(req, cx, &principal).await,
        Route::Lease => runner::lease(req, cx, &principal).await,
        Route::Heartbeat(id) => runner::heartbeat(req, cx, &principal, &id).await,
        Route::AppendEvents(id) => runner::append(req, cx, &principal, &id).await,
        Route::Finish(id) => runner::finish(req, cx, &principal, &id).await,
    }
}

fn unreachable_health() -> Result<Response, Failure> {
    Err(Failure::Infra(
        "health is answered before authentication".into(),
    ))
}
