//! The fault tests' failpoints (src/failpoint.rs) are closed by default: this Worker, like every
//! deployment of the repository's config, does not set `SEMA_TEST_FAILPOINTS`, so the header that
//! arms a step in the kill tests arms nothing here (an armed step would never answer).

use crate::helpers::{unique, Client};
use serde_json::json;

#[test]
fn a_failpoint_header_arms_nothing_on_a_worker_without_sema_test_failpoints() {
    let c = Client::anonymous();
    let session = unique("failpoint");
    let task = c
        .post_json_with(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "x"}),
            &[("x-sema-failpoint", "admit.before_d1")],
        )
        .admitted();
    for step in ["admit.after_d1", "admit.after_save"] {
        c.post_json_with(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "y"}),
            &[("x-sema-failpoint", step)],
        )
        .assert_refusal(409, "conflict.session_active_run");
    }
    let r = c.send(
        "POST",
        &format!("/v1/runs/{task}/cancel"),
        None,
        &[("x-sema-failpoint", "cancel.after_d1")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "cancelled");
}
