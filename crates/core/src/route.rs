//! The HTTP route table: `(method, path)` to a [`Route`], and who may call each route ([`Access`]),
//! so the adapter only dispatches and checks the role once.

use crate::{
    auth::{Principal, Role},
    console::ConsoleAsset,
    error::ApiError,
    ids::{SessionId, TaskId},
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    /// `GET /openapi.json`: the OpenAPI 3.1 document of this surface ([`crate::openapi::DOCUMENT`]).
    OpenApi,
    /// `GET /docs`: a readable page of the document's operations.
    Docs,
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
    /// `GET /v1/runner/connect?queue=&runnerId=`: the WebSocket on which the queue's dispatcher
    /// pushes leases (hibernatable; `Upgrade: websocket` required).
    Connect,
    SubmitTask,
    /// `GET /v1/admin/reapers`: the last reaper ticks.
    AdminReapers,
    /// `GET /v1/admin/sessions/{id}`: what a session's object holds in memory.
    AdminSession(SessionId),
    /// `GET /v1/admin/queues/{queue}`: what a queue's dispatcher holds (waiting runners, backlog).
    AdminQueue(SessionId),
    /// `POST /v1/runs/{id}/park`: the lease holder parks its run on a human gate.
    Park(TaskId),
    /// `GET /v1/approvals?sessionId=`: pending gate cards.
    ListApprovals,
    /// `POST /v1/approvals/{sessionId}/decide`: approve or deny a tool-approval-like gate.
    DecideApproval(SessionId),
    /// `POST /v1/assistant/tasks/{taskId}/plan_review`: approve or revise a plan.
    PlanReview(TaskId),
    /// `POST /v1/assistant/tasks/{taskId}/resume`: continue or stop past a resource limit.
    ResumeTask(TaskId),
    /// `POST /v1/sessions/{sessionId}/wake`: a new run after a `task_done` gate.
    Wake(SessionId),
    /// `POST /v1/leader/runs`: admit a leader run (idempotent on `Idempotency-Key`).
    SubmitLeader,
    /// `GET /v1/leader/runs`: the caller's leader runs (operators: all), newest first.
    ListLeaders,
    /// `GET /v1/leader/runs/{id}`: a leader run with its plan and children.
    GetLeader(TaskId),
    /// `POST /v1/leader/runs/{id}/cancel`: stop its children and settle it `failed`.
    CancelLeader(TaskId),
    /// `GET /v1/sessions`: the caller's sessions (operators: all), most recently admitted into first.
    ListSessions,
    /// `GET /v1/sessions/{id}`: one session with its active run and pending gate.
    GetSession(SessionId),
    /// `DELETE /v1/sessions/{id}`: the session and everything of it, unless a run is active.
    DeleteSession(SessionId),
    /// `GET /console` and its assets: the operator console (static; no data, no authentication).
    Console(ConsoleAsset),
    /// `POST /v1/runs/{id}/stream-ticket`: a short-lived ticket that opens this run's SSE stream
    /// (`GET /v1/runs/{id}/events?ticket=`) without a bearer token (`stream_ticket.rs`).
    StreamTicket(TaskId),
}

/// Who may call a route. Ownership of the run a route names is checked by its handler (a run that
/// is not the caller's is the same 404 as a missing one); the role is checked here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, before authentication (`/health`, `/openapi.json`, `/docs`).
    Public,
    /// Clients on their own runs, operators on every run. Runner credentials execute runs; they do
    /// not submit, read or cancel them as clients.
    ClientSide,
    /// The runner protocol: runner credentials only. Operators oversee runs (read, list, cancel, the
    /// reaper log); they do not drive them, so a leaked operator token cannot forge a run's ledger.
    RunnerSide,
    /// Operators only (diagnostics).
    Operator,
}

impl Access {
    pub fn permits(self, role: Role) -> bool {
        match self {
            Self::Public => true,
            Self::ClientSide => matches!(role, Role::Client | Role::Operator),
            Self::RunnerSide => role == Role::Runner,
            Self::Operator => role == Role::Operator,
        }
    }

    /// The one role check: 403 `forbidden` naming what the route needs.
    pub fn check(self, principal: &Principal) -> Result<(), ApiError> {
        if self.permits(principal.role) {
            return Ok(());
        }
        Err(ApiError::forbidden(match self {
            Self::RunnerSide => "runner routes need a runner credential",
            Self::Operator => "this route needs an operator credential",
            Self::Public | Self::ClientSide => "runner credentials cannot use client routes",
        }))
    }
}

impl Route {
    /// Who may call this route.
    pub fn access(&self) -> Access {
        match self {
            Self::Health | Self::OpenApi | Self::Docs | Self::Console(_) => Access::Public,
            Self::SubmitRun
            | Self::ListRuns
            | Self::GetRun(_)
            | Self::CancelRun(_)
            | Self::RunEvents(_)
            | Self::Steer(_)
            | Self::SubmitTask
            | Self::ListApprovals
            | Self::DecideApproval(_)
            | Self::PlanReview(_)
            | Self::ResumeTask(_)
            | Self::Wake(_)
            | Self::SubmitLeader
            | Self::ListLeaders
            | Self::GetLeader(_)
            | Self::CancelLeader(_)
            | Self::ListSessions
            | Self::GetSession(_)
            | Self::DeleteSession(_)
            | Self::StreamTicket(_) => Access::ClientSide,
            Self::Lease
            | Self::Connect
            | Self::Heartbeat(_)
            | Self::AppendEvents(_)
            | Self::Finish(_)
            | Self::Park(_) => Access::RunnerSide,
            Self::AdminReapers | Self::AdminSession(_) | Self::AdminQueue(_) => Access::Operator,
        }
    }

    /// The operation this route is in the OpenAPI document: `(method, path template)`, path ids
    /// named as the document names them. Exhaustive, so a new variant cannot be added without its
    /// template; `openapi.rs`'s agreement test checks both directions against the document.
    pub fn template(&self) -> (&'static str, &'static str) {
        match self {
            Self::Health => ("GET", "/health"),
            Self::OpenApi => ("GET", "/openapi.json"),
            Self::Docs => ("GET", "/docs"),
            Self::SubmitRun => ("POST", "/v1/runs"),
            Self::ListRuns => ("GET", "/v1/runs"),
            Self::GetRun(_) => ("GET", "/v1/runs/{taskId}"),
            Self::CancelRun(_) => ("POST", "/v1/runs/{taskId}/cancel"),
            Self::RunEvents(_) => ("GET", "/v1/runs/{taskId}/events"),
            Self::AppendEvents(_) => ("POST", "/v1/runs/{taskId}/events"),
            Self::Heartbeat(_) => ("POST", "/v1/runs/{taskId}/heartbeat"),
            Self::Finish(_) => ("POST", "/v1/runs/{taskId}/finish"),
            Self::Steer(_) => ("POST", "/v1/runs/{taskId}/steer"),
            Self::Lease => ("POST", "/v1/runner/lease"),
            Self::Connect => ("GET", "/v1/runner/connect"),
            Self::SubmitTask => ("POST", "/v1/tasks"),
            Self::AdminReapers => ("GET", "/v1/admin/reapers"),
            Self::AdminSession(_) => ("GET", "/v1/admin/sessions/{sessionId}"),
            Self::AdminQueue(_) => ("GET", "/v1/admin/queues/{queue}"),
            Self::Park(_) => ("POST", "/v1/runs/{taskId}/park"),
            Self::ListApprovals => ("GET", "/v1/approvals"),
            Self::DecideApproval(_) => ("POST", "/v1/approvals/{sessionId}/decide"),
            Self::PlanReview(_) => ("POST", "/v1/assistant/tasks/{taskId}/plan_review"),
            Self::ResumeTask(_) => ("POST", "/v1/assistant/tasks/{taskId}/resume"),
            Self::Wake(_) => ("POST", "/v1/sessions/{sessionId}/wake"),
            Self::SubmitLeader => ("POST", "/v1/leader/runs"),
            Self::ListLeaders => ("GET", "/v1/leader/runs"),
            Self::GetLeader(_) => ("GET", "/v1/leader/runs/{leaderRunId}"),
            Self::CancelLeader(_) => ("POST", "/v1/leader/runs/{leaderRunId}/cancel"),
            Self::ListSessions => ("GET", "/v1/sessions"),
            Self::GetSession(_) => ("GET", "/v1/sessions/{sessionId}"),
            Self::DeleteSession(_) => ("DELETE", "/v1/sessions/{sessionId}"),
            Self::StreamTicket(_) => ("POST", "/v1/runs/{taskId}/stream-ticket"),
            Self::Console(ConsoleAsset::Page) => ("GET", "/console"),
            Self::Console(ConsoleAsset::Script) => ("GET", "/console/console.js"),
            Self::Console(ConsoleAsset::Style) => ("GET", "/console/console.css"),
        }
    }

    /// How many variants [`Route`] has: [`Route::variant_index`] is below it, and the test table of
    /// one request per variant (`tests::TABLE`) must reach every index, so a variant added without
    /// a line there (or without raising this count) fails the tests.
    pub const VARIANT_COUNT: usize = 33;

    /// A distinct number per variant in `0..VARIANT_COUNT` (exhaustive: a new variant must get one).
    pub fn variant_index(&self) -> usize {
        match self {
            Self::Health => 0,
            Self::OpenApi => 1,
            Self::Docs => 2,
            Self::SubmitRun => 3,
            Self::ListRuns => 4,
            Self::GetRun(_) => 5,
            Self::CancelRun(_) => 6,
            Self::RunEvents(_) => 7,
            Self::AppendEvents(_) => 8,
            Self::Heartbeat(_) => 9,
            Self::Finish(_) => 10,
            Self::Steer(_) => 11,
            Self::Lease => 12,
            Self::Connect => 13,
            Self::SubmitTask => 14,
            Self::AdminReapers => 15,
            Self::AdminSession(_) => 16,
            Self::AdminQueue(_) => 17,
            Self::Park(_) => 18,
            Self::ListApprovals => 19,
            Self::DecideApproval(_) => 20,
            Self::PlanReview(_) => 21,
            Self::ResumeTask(_) => 22,
            Self::Wake(_) => 23,
            Self::SubmitLeader => 24,
            Self::ListLeaders => 25,
            Self::GetLeader(_) => 26,
            Self::CancelLeader(_) => 27,
            Self::ListSessions => 28,
            Self::GetSession(_) => 29,
            Self::DeleteSession(_) => 30,
            Self::StreamTicket(_) => 31,
            Self::Console(_) => 32,
        }
    }
}

/// Matches a request. Unknown paths are 404, known paths with another method 405; a path id that is
/// not a safe id is refused with 400 before anything is looked up.
pub fn match_route(method: &str, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let task = |raw: &str| {
        TaskId::parse(raw)
            .ok_or_else(|| ApiError::invalid_field("taskId", crate::ids::SAFE_ID_RULE))
    };
    let session = |raw: &str| {
        SessionId::parse(raw)
            .ok_or_else(|| ApiError::invalid_field("sessionId", crate::ids::SAFE_ID_RULE))
    };
    let leader = |raw: &str| {
        TaskId::parse(raw)
            .ok_or_else(|| ApiError::invalid_field("leaderRunId", crate::ids::SAFE_ID_RULE))
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
        ["console", rest @ ..] => match ConsoleAsset::at(rest) {
            Some(asset) => only("GET", Route::Console(asset)),
            None => Err(ApiError::route_not_found()),
        },
        ["openapi.json"] => only("GET", Route::OpenApi),
        ["docs"] => only("GET", Route::Docs),
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
        ["v1", "runs", id, "stream-ticket"] => {
            let id = task(id)?;
            only("POST", Route::StreamTicket(id))
        }
        ["v1", "runner", "lease"] => only("POST", Route::Lease),
        ["v1", "runner", "connect"] => only("GET", Route::Connect),
        ["v1", "tasks"] => only("POST", Route::SubmitTask),
        ["v1", "admin", "reapers"] => only("GET", Route::AdminReapers),
        ["v1", "admin", "sessions", id] => {
            let id = session(id)?;
            only("GET", Route::AdminSession(id))
        }
        ["v1", "admin", "queues", id] => {
            let id = SessionId::parse(id)
                .ok_or_else(|| ApiError::invalid_field("queue", crate::ids::SAFE_ID_RULE))?;
            only("GET", Route::AdminQueue(id))
        }
        ["v1", "runs", id, "park"] => {
            let id = task(id)?;
            only("POST", Route::Park(id))
        }
        ["v1", "approvals"] => only("GET", Route::ListApprovals),
        ["v1", "approvals", id, "decide"] => {
            let id = session(id)?;
            only("POST", Route::DecideApproval(id))
        }
        ["v1", "assistant", "tasks", id, "plan_review"] => {
            let id = task(id)?;
            only("POST", Route::PlanReview(id))
        }
        ["v1", "assistant", "tasks", id, "resume"] => {
            let id = task(id)?;
            only("POST", Route::ResumeTask(id))
        }
        ["v1", "sessions"] => only("GET", Route::ListSessions),
        ["v1", "sessions", id] => {
            let id = session(id)?;
            match method {
                "GET" => Ok(Route::GetSession(id)),
                "DELETE" => Ok(Route::DeleteSession(id)),
                _ => Err(ApiError::method_not_allowed("GET, DELETE")),
            }
        }
        ["v1", "sessions", id, "wake"] => {
            let id = session(id)?;
            only("POST", Route::Wake(id))
        }
        ["v1", "leader", "runs"] => match method {
            "POST" => Ok(Route::SubmitLeader),
            "GET" => Ok(Route::ListLeaders),
            _ => Err(ApiError::method_not_allowed("GET, POST")),
        },
        ["v1", "leader", "runs", id] => {
            let id = leader(id)?;
            only("GET", Route::GetLeader(id))
        }
        ["v1", "leader", "runs", id, "cancel"] => {
            let id = leader(id)?;
            only("POST", Route::CancelLeader(id))
        }
        _ => Err(ApiError::route_not_found()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
        assert_eq!(match_route("DELETE", "/v1/runs").unwrap_err().status(), 405);
        assert_eq!(
            match_route("GET", "/v1/runs/t/cancel")
                .unwrap_err()
                .status(),
            405
        );
        assert_eq!(match_route("GET", "/v2/runs").unwrap_err().status(), 404);
        assert_eq!(
            match_route("GET", "/v1/runs/t/x/y").unwrap_err().status(),
            404
        );
    }

    #[test]
    fn the_console_serves_its_page_and_two_assets_and_nothing_else_under_its_path() {
        assert_eq!(
            match_route("GET", "/console/").unwrap(),
            Route::Console(ConsoleAsset::Page)
        );
        assert_eq!(
            match_route("GET", "/console/console.js").unwrap(),
            Route::Console(ConsoleAsset::Script)
        );
        assert_eq!(
            match_route("GET", "/console/../x").unwrap_err().status(),
            404
        );
        assert_eq!(match_route("POST", "/console").unwrap_err().status(), 405);
        assert_eq!(
            match_route("GET", "/v1/runs/t/stream-ticket")
                .unwrap_err()
                .status(),
            405
        );
    }

    #[test]
    fn unsafe_path_ids_are_400() {
        let e = match_route("GET", "/v1/runs/a%2Fb").unwrap_err();
        assert_eq!((e.status(), e.code()), (400, "invalid_request"));
    }

    /// One request per route of the table: adding a route without a line here fails to compile
    /// (the match in `expected` is exhaustive) or fails
    /// `the_table_reaches_every_variant_once_and_each_has_its_own_template`.
    pub(crate) const TABLE: [(&str, &str); 33] = [
        ("GET", "/health"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("POST", "/v1/runs"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/runs/t"),
        ("POST", "/v1/runs/t/cancel"),
        ("GET", "/v1/runs/t/events"),
        ("POST", "/v1/runs/t/events"),
        ("POST", "/v1/runs/t/heartbeat"),
        ("POST", "/v1/runs/t/finish"),
        ("POST", "/v1/runs/t/steer"),
        ("POST", "/v1/runner/lease"),
        ("GET", "/v1/runner/connect"),
        ("POST", "/v1/tasks"),
        ("GET", "/v1/admin/reapers"),
        ("GET", "/v1/admin/sessions/s"),
        ("GET", "/v1/admin/queues/q"),
        ("POST", "/v1/runs/t/park"),
        ("GET", "/v1/approvals"),
        ("POST", "/v1/approvals/s/decide"),
        ("POST", "/v1/assistant/tasks/t/plan_review"),
        ("POST", "/v1/assistant/tasks/t/resume"),
        ("POST", "/v1/sessions/s/wake"),
        ("POST", "/v1/leader/runs"),
        ("GET", "/v1/leader/runs"),
        ("GET", "/v1/leader/runs/l"),
        ("POST", "/v1/leader/runs/l/cancel"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/s"),
        ("DELETE", "/v1/sessions/s"),
        ("GET", "/console"),
        ("POST", "/v1/runs/t/stream-ticket"),
    ];

    /// (client, runner, operator) may call it.
    fn expected(route: &Route) -> (bool, bool, bool) {
        match route {
            Route::Health | Route::OpenApi | Route::Docs | Route::Console(_) => (true, true, true),
            Route::SubmitRun
            | Route::ListRuns
            | Route::GetRun(_)
            | Route::CancelRun(_)
            | Route::RunEvents(_)
            | Route::Steer(_)
            | Route::SubmitTask
            | Route::ListApprovals
            | Route::DecideApproval(_)
            | Route::PlanReview(_)
            | Route::ResumeTask(_)
            | Route::Wake(_)
            | Route::SubmitLeader
            | Route::ListLeaders
            | Route::GetLeader(_)
            | Route::CancelLeader(_)
            | Route::ListSessions
            | Route::GetSession(_)
            | Route::DeleteSession(_)
            | Route::StreamTicket(_) => (true, false, true),
            Route::AppendEvents(_)
            | Route::Heartbeat(_)
            | Route::Finish(_)
            | Route::Lease
            | Route::Connect
            | Route::Park(_) => (false, true, false),
            Route::AdminReapers | Route::AdminSession(_) | Route::AdminQueue(_) => {
                (false, false, true)
            }
        }
    }

    #[test]
    fn every_route_times_every_role_is_allowed_or_forbidden_as_the_matrix_says() {
        let mut seen = std::collections::HashSet::new();
        for (method, path) in TABLE {
            let route = match_route(method, path).unwrap();
            seen.insert(std::mem::discriminant(&route));
            let (client, runner, operator) = expected(&route);
            for (role, allowed) in [
                (Role::Client, client),
                (Role::Runner, runner),
                (Role::Operator, operator),
            ] {
                let p = Principal {
                    id: Some("p".into()),
                    role,
                };
                let outcome = route.access().check(&p);
                assert_eq!(outcome.is_ok(), allowed, "{method} {path} as {role:?}");
                if let Err(e) = outcome {
                    assert_eq!((e.status(), e.code()), (403, "forbidden"));
                }
            }
        }
        assert_eq!(
            seen.len(),
            TABLE.len(),
            "every route of the table appears once"
        );
    }

    #[test]
    fn the_table_reaches_every_variant_once_and_each_has_its_own_template() {
        let mut indices = std::collections::BTreeSet::new();
        let mut templates = std::collections::BTreeSet::new();
        for (method, path) in TABLE {
            let route = match_route(method, path).unwrap();
            let i = route.variant_index();
            assert!(
                i < Route::VARIANT_COUNT,
                "{method} {path}: index {i} ≥ VARIANT_COUNT"
            );
            assert!(indices.insert(i), "{method} {path}: index {i} twice");
            assert!(
                templates.insert(route.template()),
                "{method} {path}: template twice"
            );
            assert_eq!(route.template().0, method, "{path}");
        }
        assert_eq!(
            indices.len(),
            Route::VARIANT_COUNT,
            "every variant has one request in TABLE"
        );
    }
}
