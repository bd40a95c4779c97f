//! The role matrix, cell by cell, on the Worker with bearer tokens: every route that names a run, as
//! the run's owner (alice, a client), another client (bob), an operator (ops) and a runner (runner1).
//! Clients act on their own runs only (someone else's is the same 404 as a missing one); operators
//! read, list and cancel every run but steer only their own and never drive one; runners use only
//! the runner protocol (and hold no lease here, so their writes are `lease_lost`). Where a cell is
//! refused, the test checks that nothing changed.

use crate::helpers::{unique, Client, Resp};
use crate::tokens::{ALICE, BOB, OPS, RUNNER};
use serde_json::{json, Value};

fn server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

fn call(token: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Authorization", auth.as_str())];
    let text = body.map(|b| b.to_string());
    if text.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    Client::anonymous().at(&server()).send(
        method,
        path,
        text.as_deref().map(str::as_bytes),
        &headers,
    )
}

/// The run as its owner reads it.
fn as_owner(task: &str) -> Value {
    let r = call(ALICE, "GET", &format!("/v1/runs/{task}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn every_run_route_answers_owner_other_client_operator_and_runner_as_the_matrix_says() {
    let session = unique("matrix");
    let task = call(
        ALICE,
        "POST",
        "/v1/runs",
        Some(json!({"sessionId": session, "objective": "matrix"})),
    )
    .admitted();
    let run = format!("/v1/runs/{task}");
    let steer = json!({"message": "m"});
    let runner_body = |verb: &str| match verb {
        "heartbeat" => json!({"runnerId": "r", "leaseEpoch": 1}),
        "events" => json!({"runnerId": "r", "leaseEpoch": 1, "events": [{"type": "x"}]}),
        _ => {
            json!({"runnerId": "r", "leaseEpoch": 1, "status": "completed", "result": {"forged": true}})
        }
    };

    // Reads.
    for (token, code) in [(ALICE, 200), (BOB, 404), (OPS, 200), (RUNNER, 403)] {
        assert_eq!(
            call(token, "GET", &run, None).status,
            code,
            "GET run as {token}"
        );
        let events = call(token, "GET", &format!("{run}/events"), None);
        assert_eq!(events.status, code, "GET events as {token}");
    }
    let listed = |token: &str| {
        let r = call(token, "GET", &format!("/v1/runs?sessionId={session}"), None);
        (r.status, r.json()["runs"].as_array().map_or(0, Vec::len))
    };
    assert_eq!(listed(ALICE), (200, 1));
    assert_eq!(listed(BOB), (200, 0));
    assert_eq!(listed(OPS), (200, 1));
    assert_eq!(listed(RUNNER).0, 403);

    // Steer: the owner only. Refused cells queue nothing: the owner's next seq follows its first.
    let first = call(ALICE, "POST", &format!("{run}/steer"), Some(steer.clone()));
    assert_eq!((first.status, first.json()["seq"].as_i64()), (202, Some(1)));
    call(BOB, "POST", &format!("{run}/steer"), Some(steer.clone()))
        .assert_refusal(404, "not_found");
    call(OPS, "POST", &format!("{run}/steer"), Some(steer.clone()))
        .assert_refusal(403, "forbidden");
    call(RUNNER, "POST", &format!("{run}/steer"), Some(steer.clone()))
        .assert_refusal(403, "forbidden");
    let second = call(ALICE, "POST", &format!("{run}/steer"), Some(steer.clone()));
    assert_eq!(second.json()["seq"], 2, "a refused steer was queued");

    // The runner protocol: only runners; without the lease they change nothing.
    for verb in ["heartbeat", "events", "finish"] {
        for token in [ALICE, BOB, OPS] {
            call(
                token,
                "POST",
                &format!("{run}/{verb}"),
                Some(runner_body(verb)),
            )
            .assert_refusal(403, "forbidden");
        }
        call(
            RUNNER,
            "POST",
            &format!("{run}/{verb}"),
            Some(runner_body(verb)),
        )
        .assert_refusal(409, "lease_lost");
    }
    for token in [ALICE, BOB, OPS] {
        call(
            token,
            "POST",
            "/v1/runner/lease",
            Some(json!({"runnerId": "r"})),
        )
        .assert_refusal(403, "forbidden");
    }

    // Cancel: refused cells change nothing.
    call(BOB, "POST", &format!("{run}/cancel"), None).assert_refusal(404, "not_found");
    call(RUNNER, "POST", &format!("{run}/cancel"), None).assert_refusal(403, "forbidden");
    let v = as_owner(&task);
    assert_eq!(
        (
            v["status"].as_str(),
            v["cancelRequested"].as_bool(),
            v["heldBy"].as_str()
        ),
        (Some("running"), Some(false), Some("default")),
        "a refused call changed the run: {v}"
    );
    let events = call(ALICE, "GET", &format!("{run}/events"), None).json();
    assert_eq!(
        events["events"],
        json!([]),
        "a refused write reached the ledger"
    );

    // The reaper log is the operators'.
    for token in [ALICE, BOB, RUNNER] {
        call(token, "GET", "/v1/admin/reapers", None).assert_refusal(403, "forbidden");
    }
    assert_eq!(call(OPS, "GET", "/v1/admin/reapers", None).status, 200);

    // And an operator cancels anyone's run.
    let c = call(OPS, "POST", &format!("{run}/cancel"), None);
    assert_eq!(
        (c.status, c.json()["status"].as_str()),
        (200, Some("cancelled"))
    );
}
