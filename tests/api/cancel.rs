use crate::helpers::{unique, Client};
use serde_json::json;

#[test]
fn cancelling_an_unheld_run_ends_it_at_once_and_frees_the_session() {
    let c = Client::as_principal("canceller");
    let session = unique("cancel");
    let task = c.submit(&session, json!({})).admitted();
    let r = c.cancel(&task);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["error"], "cancelled by user");
    assert_eq!(v["cancelRequested"], true);
    assert!(v["heldBy"].is_null());
    let next = c.submit(&session, json!({}));
    assert_eq!(next.status, 202, "{}", next.body);
    assert_ne!(next.json()["taskId"], task.as_str());
}

#[test]
fn terminal_status_is_write_once_so_a_second_cancel_changes_nothing() {
    let c = Client::anonymous();
    let task = c.submit(&unique("twice"), json!({})).admitted();
    let first = c.cancel(&task).json();
    let second = c.cancel(&task);
    assert_eq!(second.status, 200);
    assert_eq!(second.json(), first);
}

#[test]
fn cancelling_an_unknown_run_is_404() {
    Client::anonymous()
        .cancel(&unique("ghost"))
        .assert_refusal(404, "not_found");
}

#[test]
fn a_cancelled_client_task_id_resubmitted_returns_the_ended_run_not_a_new_one() {
    let c = Client::anonymous();
    let session = unique("resub");
    let task = unique("resub-task");
    assert_eq!(c.submit(&session, json!({"taskId": task})).admitted(), task);
    assert_eq!(c.cancel(&task).json()["status"], "cancelled");
    let again = c.submit(&session, json!({"taskId": task}));
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(
        again.json(),
        json!({"taskId": task, "sessionId": session, "status": "cancelled"})
    );
    // The session is free for a new run.
    assert_eq!(c.submit(&session, json!({})).status, 202);
}
