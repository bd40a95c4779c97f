//! The leader-run routes' refusals, black-box: the admission body's bounds and the runner credential
//! on the Worker with bearer tokens (`SEMA_TOKEN_URL`, leader runs on), and a deployment with leader
//! runs switched off (`LEADER_ENABLED=false`: the local-mode Worker, `SEMA_URL`). Leader runs that
//! execute are tested against the runner Worker (tests/runner/leaders.rs).

use crate::helpers::{base_url, Client, Resp};
use crate::tokens::{ALICE, BOB, OPS, RUNNER};
use serde_json::{json, Value};

fn token_server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

/// A request as `token` on the tokens Worker, with a JSON body when given.
fn call(token: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Authorization", auth.as_str())];
    let text = body.map(Value::to_string);
    if text.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    Client::anonymous().at(&token_server()).send(
        method,
        path,
        text.as_deref().map(str::as_bytes),
        &headers,
    )
}

fn subtasks(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"objective": format!("part {i}")}))
        .collect()
}

/// One byte over the 64 KiB objective bound.
fn too_long() -> String {
    "x".repeat(65_537)
}

#[test]
fn every_bound_of_a_leader_admission_is_refused_with_its_status_and_field() {
    let ok = |extra: Value| {
        let mut b = json!({"objective": "o", "subtasks": subtasks(3)});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let mut three = subtasks(3);
    three[2]["objective"] = json!(too_long());
    let mut bad_meta = subtasks(3);
    bad_meta[1]["meta"] = json!(["not", "an", "object"]);
    let mut empty_sub = subtasks(3);
    empty_sub[1]["objective"] = json!("");
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            ok(json!({"objective": ""})),
            400,
            "invalid_request",
            "objective",
        ),
        (
            ok(json!({"objective": too_long()})),
            413,
            "payload_too_large",
            "objective",
        ),
        (
            ok(json!({"subtasks": []})),
            400,
            "invalid_request",
            "subtasks",
        ),
        (
            ok(json!({"subtasks": subtasks(101)})),
            400,
            "invalid_request",
            "subtasks",
        ),
        (
            ok(json!({"subtasks": empty_sub})),
            400,
            "invalid_request",
            "subtasks[1].objective",
        ),
        (
            ok(json!({"subtasks": three})),
            413,
            "payload_too_large",
            "subtasks[2].objective",
        ),
        (
            ok(json!({"subtasks": bad_meta})),
            400,
            "invalid_request",
            "subtasks[1].meta",
        ),
        (
            ok(json!({"maxConcurrency": 0})),
            400,
            "invalid_request",
            "maxConcurrency",
        ),
        (
            ok(json!({"maxConcurrency": 17})),
            400,
            "invalid_request",
            "maxConcurrency",
        ),
        (
            ok(json!({"maxConcurrency": -1})),
            400,
            "invalid_request",
            "maxConcurrency",
        ),
        (
            ok(json!({"deadlineMs": 0})),
            400,
            "invalid_request",
            "deadlineMs",
        ),
        (
            ok(json!({"deadlineMs": 86_400_001})),
            400,
            "invalid_request",
            "deadlineMs",
        ),
    ];
    for (body, status, code, field) in cases {
        let r = call(BOB, "POST", "/v1/leader/runs", Some(&body));
        let v = r.assert_refusal(status, code);
        assert_eq!(v["field"], field, "{}", r.body);
    }
    // Bodies the parser refuses: unknown fields (at either level), missing and mistyped ones.
    for (body, needle) in [
        (ok(json!({"priority": 1})), "priority"),
        (
            json!({"objective": "o", "subtasks": [{"objective": "a", "sessionId": "s"}]}),
            "sessionId",
        ),
        (json!({"objective": "o"}), "subtasks"),
        (json!({"subtasks": subtasks(1)}), "objective"),
        (ok(json!({"subtasks": "a"})), "invalid type"),
        (ok(json!({"maxConcurrency": 1.5})), "invalid type"),
        (ok(json!({"maxConcurrency": "2"})), "invalid type"),
        (ok(json!({"deadlineMs": "soon"})), "invalid type"),
    ] {
        let r = call(BOB, "POST", "/v1/leader/runs", Some(&body));
        let v = r.assert_refusal(400, "invalid_request");
        let text = v["error"].as_str().unwrap();
        assert!(text.contains(needle), "{body}: {}", r.body);
    }
    // Malformed JSON.
    let auth = format!("Bearer {BOB}");
    Client::anonymous()
        .at(&token_server())
        .send(
            "POST",
            "/v1/leader/runs",
            Some(b"{\"objective\":"),
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
        )
        .assert_refusal(400, "invalid_json");
    // None of these admitted anything: bob has no leader runs (no other test makes bob's).
    let listed = call(BOB, "GET", "/v1/leader/runs", None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["leaderRuns"], json!([]), "{}", listed.body);
    // Bad list queries.
    for q in [
        "status=paused",
        "limit=0",
        "limit=201",
        "cursor=zz",
        "sessionId=s",
    ] {
        call(BOB, "GET", &format!("/v1/leader/runs?{q}"), None)
            .assert_refusal(400, "invalid_request");
    }
    let r = call(BOB, "GET", "/v1/leader/runs?status=paused", None);
    assert_eq!(r.json()["field"], "status", "{}", r.body);
}

#[test]
fn a_leader_admission_exactly_at_every_bound_is_admitted() {
    let mut admitted = vec![];
    for body in [
        json!({"objective": "o", "subtasks": subtasks(100), "maxConcurrency": 16, "deadlineMs": 86_400_000}),
        json!({"objective": "x".repeat(65_536), "subtasks": [{"objective": "y".repeat(65_536), "meta": {"k": [1, 2]}}],
            "maxConcurrency": 1, "deadlineMs": 1}),
        json!({"objective": "o", "subtasks": subtasks(1)}),
    ] {
        let r = call(ALICE, "POST", "/v1/leader/runs", Some(&body));
        assert_eq!(r.status, 201, "{}", &r.body[..r.body.len().min(400)]);
        let v = r.json();
        assert_eq!(v["created"], true);
        assert_eq!(
            v["children"].as_array().unwrap().len(),
            body["subtasks"].as_array().unwrap().len()
        );
        admitted.push(v);
    }
    assert_eq!(admitted[0]["maxConcurrency"], 16);
    assert_eq!(
        admitted[0]["deadlineAtMs"].as_i64().unwrap(),
        admitted[0]["startedAtMs"].as_i64().unwrap() + 86_400_000
    );
    // The default concurrency is 2; no deadline unless one is given.
    assert_eq!(admitted[2]["maxConcurrency"], 2);
    assert!(admitted[2].get("deadlineAtMs").is_none(), "{}", admitted[2]);
    // The preview of a long objective is cut (160 UTF-16 units).
    assert_eq!(admitted[1]["objectivePreview"], "x".repeat(160));
    // A 1 ms deadline has passed by the admission's own drive: it settles at once, its child never
    // started.
    let short = &admitted[1];
    assert_eq!(
        (&short["status"], &short["error"]),
        (&json!("failed"), &json!("leader run deadline passed")),
        "{short}"
    );
    assert_eq!(
        (
            &short["children"][0]["state"],
            &short["children"][0]["report"]
        ),
        (&json!("skipped"), &json!("timeout"))
    );
    assert_eq!(
        short["result"][0]["error"], "cancelled before start",
        "{short}"
    );
    // Leave nothing running: the others are cancelled (their started children with them).
    for (i, v) in admitted.iter().enumerate() {
        let id = v["id"].as_str().unwrap();
        let r = call(ALICE, "POST", &format!("/v1/leader/runs/{id}/cancel"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = r.json();
        assert_eq!(
            (&c["cancelled"], &c["status"]),
            (&json!(i != 1), &json!("failed")),
            "{i}"
        );
        for child in c["children"].as_array().unwrap() {
            if let Some(task) = child["taskId"].as_str() {
                let run = call(ALICE, "GET", &format!("/v1/runs/{task}"), None).json();
                assert_eq!(run["status"], "cancelled", "{run}");
            } else {
                assert_eq!(child["state"], "skipped", "{child}");
            }
        }
    }
}

#[test]
fn a_runner_credential_is_refused_on_every_leader_route() {
    let body = json!({"objective": "o", "subtasks": subtasks(1)});
    for (method, path, body) in [
        ("POST", "/v1/leader/runs", Some(&body)),
        ("GET", "/v1/leader/runs", None),
        ("GET", "/v1/leader/runs/some-leader", None),
        ("POST", "/v1/leader/runs/some-leader/cancel", None),
    ] {
        call(RUNNER, method, path, body).assert_refusal(403, "forbidden");
    }
    // Nothing was admitted: the operator sees no leader run with that objective from a runner.
    let all = call(OPS, "GET", "/v1/leader/runs?limit=200", None);
    assert_eq!(all.status, 200, "{}", all.body);
    assert!(all.json()["leaderRuns"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["owner"] != "runner1"));
}

#[test]
fn with_leader_runs_disabled_every_leader_route_is_404_leader_disabled() {
    // The local-mode Worker runs with LEADER_ENABLED=false (scripts/test).
    let base = base_url();
    let body = json!({"objective": "o", "subtasks": subtasks(1)}).to_string();
    for role in ["client", "operator"] {
        let c = Client::as_principal("leader-off").with_role(role).at(&base);
        for (method, path) in [
            ("POST", "/v1/leader/runs"),
            ("GET", "/v1/leader/runs"),
            ("GET", "/v1/leader/runs?status=running"),
            ("GET", "/v1/leader/runs/some-leader"),
            ("POST", "/v1/leader/runs/some-leader/cancel"),
        ] {
            let b = (method == "POST").then_some(body.as_bytes());
            let r = c.send(
                method,
                path,
                b,
                &[
                    ("Content-Type", "application/json"),
                    ("Idempotency-Key", "k"),
                ],
            );
            r.assert_refusal(404, "leader.disabled");
        }
    }
    // Runs themselves are unaffected.
    let c = Client::as_principal("leader-off").at(&base);
    let task = c
        .submit(&crate::helpers::unique("no-leaders"), json!({}))
        .admitted();
    assert_eq!(c.cancel(&task).status, 200);
}
