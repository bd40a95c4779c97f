use crate::helpers::{running_conflict_body, unique};
use crate::sse::{client, read_stream, server, submit, wait_until, Runner};
use serde_json::json;

fn post_task(body: serde_json::Value) -> ureq::Response {
    let r = ureq::post(&format!("{}/v1/tasks", server()))
        .set("content-type", "application/json")
        .send_string(&body.to_string());
    match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_stream_form_opens_with_meta_and_ends_with_done() {
    let _runner = Runner::start();
    let session = unique("task-stream");
    let resp = post_task(json!({"sessionId": session, "objective": "say streamed reply"}));
    assert_eq!(resp.status(), 200);
    let (frames, headers) = read_stream(resp, usize::MAX);
    let meta = &frames[0];
    assert_eq!((meta.event.as_deref(), meta.kind()), (Some("meta"), "meta"));
    let task = meta.data["taskId"].as_str().unwrap().to_owned();
    assert_eq!(meta.data["sessionId"], session.as_str());
    assert!(headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("x-task-id") && *v == task));
    let text: String = frames
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(text, "streamed reply");
    assert_eq!(frames.last().unwrap().data["result"]["status"], "completed");
}

#[test]
fn the_sync_form_waits_for_the_result_or_answers_202_with_the_current_state() {
    let _runner = Runner::start();
    let r = post_task(
        json!({"sessionId": unique("sync"), "objective": "say done quickly", "stream": false}),
    );
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.into_json().unwrap();
    assert_eq!(
        (v["status"].as_str(), v["result"]["text"].as_str()),
        (Some("completed"), Some("done quickly"))
    );
    let slow = post_task(
        json!({"sessionId": unique("sync"), "objective": "sleep 5000", "stream": false, "waitMs": 300}),
    );
    assert_eq!(slow.status(), 202);
    let v: serde_json::Value = slow.into_json().unwrap();
    assert_eq!(v["status"], "running");
    let task = v["taskId"].as_str().unwrap().to_owned();
    let cancel = client().cancel(&task);
    assert!(matches!(cancel.status, 200 | 202), "{}", cancel.body);
    wait_until(&task, "cancelled", |r| r["status"] == "cancelled");
}

#[test]
fn a_conflicting_stream_submit_ends_with_the_conflict_done_frame() {
    let (holder, session) = submit("manual");
    let resp = post_task(json!({"sessionId": session, "objective": "second"}));
    assert_eq!(resp.status(), 200);
    let body = resp.into_string().unwrap();
    let conflict: serde_json::Value =
        serde_json::from_str(&running_conflict_body(&holder)).unwrap();
    let expected = format!(
        "data: {{\"type\":\"done\",\"result\":{{\"status\":\"failed\",\"errorMessage\":{},\"activeTaskId\":\"{holder}\",\"activeTaskStatus\":\"running\"}}}}\n\n",
        conflict["error"]
    );
    assert_eq!(body, expected);
    // The refusal was not stored: the session is still held by the first run only.
    assert_eq!(client().cancel(&holder).json()["status"], "cancelled");
}
