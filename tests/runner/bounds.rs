//! Bounded memory under a hostile reader: a subscriber that never reads while 50 MiB of events are
//! appended is closed once its queue is full (it would resume by `Last-Event-ID`), the object does not
//! buffer the rest for it, and a subscriber that reads receives every event.

use crate::sse::{client, lease, read_sse, runner_client, submit};
use serde_json::json;
use std::time::Duration;

#[test]
fn a_subscriber_that_never_reads_is_closed_and_the_others_receive_everything() {
    let (task, session) = submit("manual");
    let l = lease("bulk").expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let url = format!("{}/v1/runs/{task}/events", crate::sse::server());
    // Opened and never read.
    let _stalled = ureq::get(&url)
        .set("accept", "text/event-stream")
        .call()
        .expect("the stalled stream opens");
    // Read to the end, on its own thread.
    let path = format!("/v1/runs/{task}/events");
    let reader = std::thread::spawn(move || read_sse(&path, None, usize::MAX).0);
    std::thread::sleep(Duration::from_millis(300));
    // 50 MiB: 50 calls of 500 events of ~2 KiB.
    let blob = "y".repeat(2_000);
    let rc = runner_client();
    for _ in 0..50 {
        let events: Vec<_> = (0..500)
            .map(|_| json!({"type": "chunk", "data": {"b": blob}}))
            .collect();
        let r = rc.post_json(
            &format!("/v1/runs/{task}/events"),
            &json!({"runnerId": "bulk", "leaseEpoch": epoch, "events": events}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // The stalled reader's queue overflowed long ago: only the reading stream is still held.
    let held = client()
        .with_role("operator")
        .get(&format!("/v1/admin/sessions/{session}"))
        .json();
    assert_eq!(
        held["streams"], 1,
        "the stalled stream is still held: {held}"
    );
    let done = rc.post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "bulk", "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    let frames = reader.join().unwrap();
    assert_eq!(frames.len(), 25_001, "every event and the done frame");
    assert_eq!(frames.last().unwrap().kind(), "done");
    // The stalled stream was let go: the object holds no stream for it any more.
    let stats = client()
        .with_role("operator")
        .get(&format!("/v1/admin/sessions/{session}"))
        .json();
    assert_eq!(stats["streams"], 0, "{stats}");
}
