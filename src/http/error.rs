//! The one place that turns outcomes into HTTP responses.
//!
//! A handler returns `Result<Response, Failure>`. `Failure::Api` carries a caller-facing refusal (its
//! status and body come from the core's catalogue); `Failure::Infra` is ours: logged once here,
//! answered with an opaque 500.

use crate::failure::Failure;
use sema_core::ApiError;
use worker::{Headers, Response};

/// A JSON response with `status` and a body already serialised.
pub fn json(status: u16, body: String) -> Response {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json; charset=utf-8");
    let _ = headers.set("cache-control", "no-store");
    Response::builder()
        .with_status(status)
        .with_headers(headers)
        .fixed(body.into_bytes())
}

/// The response for a handler's outcome.
pub fn respond(outcome: Result<Response, Failure>) -> Response {
    match outcome {
        Ok(resp) => resp,
        Err(Failure::Api(e)) => {
            let resp = json(e.status(), e.body());
            if let Some(allow) = e.detail("allow") {
                let _ = resp.headers().set("allow", allow.trim_matches('"'));
            }
            resp
        }
        Err(Failure::Infra(cause)) => {
            worker::console_error!("internal error: {cause}");
            json(500, ApiError::internal().body())
        }
    }
}
