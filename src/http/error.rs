//! The one place that turns outcomes into HTTP responses.
//!
//! A handler returns `Result<Outgoing, Failure>`. `Failure::Api` carries a caller-facing refusal (its
//! status and body come from the core's catalogue); `Failure::Infra` is ours: logged once here,
//! answered with an opaque 500.

use crate::{failure::Failure, outgoing::Outgoing};
use sema_core::ApiError;

/// A JSON response with `status` and a body already serialised.
pub fn json(status: u16, body: String) -> Outgoing {
    Outgoing::json(status, body)
}

/// The response for a handler's outcome.
pub fn respond(outcome: Result<Outgoing, Failure>) -> Outgoing {
    match outcome {
        Ok(resp) => resp,
        Err(Failure::Api(e)) => {
            let resp = json(e.status(), e.body());
            match e.detail("allow") {
                Some(allow) => resp.with_header("allow", allow.trim_matches('"')),
                None => resp,
            }
        }
        Err(Failure::Infra(cause)) => {
            worker::console_error!("internal error: {cause}");
            json(500, ApiError::internal().body())
        }
    }
}
