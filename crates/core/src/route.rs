//! The HTTP route table: `(method, path)` to a [`Route`], so the adapter only dispatches.

use crate::{error::ApiError, ids::TaskId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    SubmitRun,
    ListRuns,
    GetRun(TaskId),
    CancelRun(TaskId),
    /// `GET`: replay (JSON page or SSE tail); `POST`: a runner appends.
    RunEvents(TaskId),
    AppendEvents(TaskId),
    Heartbeat(TaskId),
    Finish(TaskId),
    Steer(TaskId),
    Lease,
    SubmitTask,
}

/// Matches a request. Unknown paths are 404, known paths with another method 405; a path id that is
/// not a safe id is refused with 400 before anything is looked up.
pub fn match_route(method: &str, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let task = |raw: &str| {
        TaskId::parse(raw)
            .ok_or_else(|| ApiError::invalid_field("taskId", crate::ids::SAFE_ID_RULE))
    };
    let only = |allowed: &str, route: Route| {
        if method == allowed {
            Ok(route)
        } else {
            Err(ApiError::method_not_allowed(allowed))
        }
    };
    match segments.as_slice() {
        ["health"] => only("GET", Route::Health),
        ["v1", "runs"] => match method {
            "POST" => Ok(Route::SubmitRun),
            "GET" => Ok(Route::ListRuns),
            _ => Err(ApiError::method_not_allowed("GET, POST")),
        },
        ["v1", "runs", id] => {
            let id = task(id)?;
            only("GET", Route::GetRun(id))
        }
        ["v1", "runs", id, "cancel"] => {
            let id = task(id)?;
            only("POST", Route::CancelRun(id))
        }
        ["v1", "runs", id, "events"] => {
            let id = task(id)?;
            match method {
                "GET" => Ok(Route::RunEvents(id)),
                "POST" => Ok(Route::AppendEvents(id)),
                _ => Err(ApiError::method_not_allowed("GET, POST")),
            }
        }
        ["v1", "runs", id, "heartbeat"] => {
            let id = task(id)?;
            only("POST", Route::Heartbeat(id))
        }
        ["v1", "runs", id, "finish"] => {
            let id = task(id)?;
            only("POST", Route::Finish(id))
        }
        ["v1", "runs", id, "steer"] => {
            let id = task(id)?;
            only("POST", Route::Steer(id))
        }
        ["v1", "runner", "lease"] => only("POST", Route::Lease),
        ["v1", "tasks"] => only("POST", Route::SubmitTask),
        _ => Err(ApiError::route_not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_routes_match_with_their_ids() {
        assert_eq!(match_route("GET", "/health").unwrap(), Route::Health);
        assert_eq!(match_route("POST", "/v1/runs").unwrap(), Route::SubmitRun);
        assert_eq!(match_route("GET", "/v1/runs/").unwrap(), Route::ListRuns);
        assert_eq!(
            match_route("POST", "/v1/runs/t-1/cancel").unwrap(),
            Route::CancelRun(TaskId::parse("t-1").unwrap())
        );
    }

    #[test]
    fn wrong_methods_are_405_and_unknown_paths_404() {
        assert_eq!(match_route("DELETE", "/v1/runs").unwrap_err().status, 405);
        assert_eq!(
            match_route("GET", "/v1/runs/t/cancel").unwrap_err().status,
            405
        );
        assert_eq!(match_route("GET", "/v2/runs").unwrap_err().status, 404);
        assert_eq!(
            match_route("GET", "/v1/runs/t/x/y").unwrap_err().status,
            404
        );
    }

    #[test]
    fn unsafe_path_ids_are_400() {
        let e = match_route("GET", "/v1/runs/a%2Fb").unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_request"));
    }
}
