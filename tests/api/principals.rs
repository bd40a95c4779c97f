use crate::helpers::{unique, Client};
use serde_json::json;

#[test]
fn another_principal_gets_the_same_404_as_for_a_run_that_does_not_exist() {
    let alice = Client::as_principal("alice");
    let bob = Client::as_principal("bob");
    let task = alice.submit(&unique("own"), json!({})).admitted();
    let missing = bob.get(&format!("/v1/runs/{}", unique("nope")));
    let foreign = bob.get(&format!("/v1/runs/{task}"));
    foreign.assert_refusal(404, "not_found");
    assert_eq!(foreign.body, missing.body);
    let anon = Client::anonymous().get(&format!("/v1/runs/{task}"));
    assert_eq!(anon.body, missing.body);
    // Cancel by a non-owner is the same 404 and changes nothing.
    assert_eq!(bob.cancel(&task).body, missing.body);
    assert_eq!(
        alice.get(&format!("/v1/runs/{task}")).json()["status"],
        "running"
    );
}

#[test]
fn another_principal_cannot_submit_into_a_session_it_does_not_own() {
    let session = unique("owned");
    assert_eq!(
        Client::as_principal("carol")
            .submit(&session, json!({}))
            .status,
        202
    );
    let r = Client::as_principal("dave").submit(&session, json!({}));
    r.assert_refusal(404, "not_found");
    assert!(
        !r.body.contains("activeTaskId"),
        "no holder leaks to a non-owner: {}",
        r.body
    );
}

#[test]
fn an_operator_sees_and_cancels_any_run() {
    let owner = Client::as_principal("erin");
    let op = Client::as_principal("ops").with_role("operator");
    let session = unique("opsee");
    let task = owner.submit(&session, json!({})).admitted();
    assert_eq!(op.get(&format!("/v1/runs/{task}")).status, 200);
    let listed = op.get(&format!("/v1/runs?sessionId={session}")).json();
    assert_eq!(listed["runs"][0]["taskId"], task.as_str());
    assert_eq!(op.cancel(&task).json()["status"], "cancelled");
}

#[test]
fn listings_show_only_the_callers_runs() {
    let session = unique("mine");
    let frank = Client::as_principal("frank");
    let task = frank.submit(&session, json!({})).admitted();
    // The owner sees the run, so the empty listing below is the filter, not a missing run.
    let own = frank.get(&format!("/v1/runs?sessionId={session}"));
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(own.json()["runs"][0]["taskId"], task.as_str());
    let other = Client::as_principal("grace").get(&format!("/v1/runs?sessionId={session}"));
    assert_eq!(other.status, 200);
    assert_eq!(other.json()["runs"], json!([]));
}

#[test]
fn runner_credentials_cannot_use_client_routes() {
    let runner = Client::as_principal("r1").with_role("runner");
    runner
        .submit(&unique("runner"), json!({}))
        .assert_refusal(403, "forbidden");
    runner.get("/v1/runs").assert_refusal(403, "forbidden");
}
