//! The route table × roles, black-box, on the Worker with bearer tokens (`SEMA_TOKEN_URL`): each
//! route is called with every role's token. A route the role may not use answers 403 `forbidden`;
//! a route it may use gets past the role check to the handler, which then refuses the deliberately
//! harmless request (an unparsable body, an unknown run) — so this walk changes nothing.

use crate::helpers::{Client, Resp};
use crate::tokens::{ALICE, OPS, RUNNER};

fn server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

/// `(method, path, may client, may runner, may operator)`: every route of the table.
const TABLE: [(&str, &str, bool, bool, bool); 29] = [
    ("GET", "/health", true, true, true),
    ("POST", "/v1/runs", true, false, true),
    ("GET", "/v1/runs", true, false, true),
    ("GET", "/v1/runs/no-such-run", true, false, true),
    ("POST", "/v1/runs/no-such-run/cancel", true, false, true),
    ("GET", "/v1/runs/no-such-run/events", true, false, true),
    ("POST", "/v1/runs/no-such-run/steer", true, false, true),
    ("POST", "/v1/tasks", true, false, true),
    ("POST", "/v1/runner/lease", false, true, false),
    ("POST", "/v1/runs/no-such-run/heartbeat", false, true, false),
    ("POST", "/v1/runs/no-such-run/events", false, true, false),
    ("POST", "/v1/runs/no-such-run/finish", false, true, false),
    ("GET", "/v1/admin/reapers", false, false, true),
    ("POST", "/v1/runs/no-such-run/park", false, true, false),
    ("GET", "/v1/approvals", true, false, true),
    (
        "POST",
        "/v1/approvals/no-such-session/decide",
        true,
        false,
        true,
    ),
    (
        "POST",
        "/v1/assistant/tasks/no-such-run/plan_review",
        true,
        false,
        true,
    ),
    (
        "POST",
        "/v1/assistant/tasks/no-such-run/resume",
        true,
        false,
        true,
    ),
    (
        "POST",
        "/v1/sessions/no-such-session/wake",
        true,
        false,
        true,
    ),
    (
        "GET",
        "/v1/admin/sessions/no-such-session",
        false,
        false,
        true,
    ),
    ("POST", "/v1/leader/runs", true, false, true),
    ("GET", "/v1/leader/runs", true, false, true),
    ("GET", "/v1/leader/runs/no-such-leader", true, false, true),
    (
        "POST",
        "/v1/leader/runs/no-such-leader/cancel",
        true,
        false,
        true,
    ),
    ("GET", "/v1/sessions", true, false, true),
    ("GET", "/v1/sessions/no-such-session", true, false, true),
    ("DELETE", "/v1/sessions/no-such-session", true, false, true),
    ("GET", "/console", true, true, true),
    (
        "POST",
        "/v1/runs/no-such-run/stream-ticket",
        true,
        false,
        true,
    ),
];

fn call(token: &str, method: &str, path: &str) -> Resp {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Authorization", auth.as_str())];
    // POSTs carry a body that cannot parse: an allowed role reaches the handler and gets a 400.
    let body = (method == "POST").then_some(&b"{"[..]);
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    Client::anonymous()
        .at(&server())
        .send(method, path, body, &headers)
}

#[test]
fn every_route_answers_every_role_as_the_role_matrix_says() {
    for (method, path, client, runner, operator) in TABLE {
        for (token, allowed) in [(ALICE, client), (RUNNER, runner), (OPS, operator)] {
            let r = call(token, method, path);
            if allowed {
                assert_ne!(
                    r.status, 403,
                    "{method} {path} with {token}: refused by role: {}",
                    r.body
                );
                assert!(
                    r.status < 500,
                    "{method} {path} with {token}: {} {}",
                    r.status,
                    r.body
                );
            } else {
                r.assert_refusal(403, "forbidden");
            }
        }
    }
}
