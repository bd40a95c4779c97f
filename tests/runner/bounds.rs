//! Bounded memory under hostile or slow readers: each stream's queue is capped, so a subscriber that
//! never reads while 50 MiB of events are appended is ended by the server (the object does not keep
//! the rest for it), and a reader that falls behind is ended too and resumes by `Last-Event-ID`,
//! losing nothing: it still receives every event, in order, once.

use crate::sse::{client, lease, read_sse, runner_client, submit, Frame};
use serde_json::json;
use std::io::Read;
use std::time::Duration;

#[test]
fn a_subscriber_that_never_reads_is_ended_and_a_resuming_reader_receives_everything() {
    let (task, session) = submit("manual");
    let l = lease("bulk").expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let url = format!("{}/v1/runs/{task}/events", crate::sse::server());
    // Opened and never read (until the end, to see how the server ended it).
    let stalled = ureq::AgentBuilder::new()
        .timeout_read(Duration::from_secs(30))
        .build()
        .get(&url)
        .set("accept", "text/event-stream")
        .call()
        .expect("the stalled stream opens");
    // A reader that resumes from its last id whenever the server ends its stream early.
    let path = format!("/v1/runs/{task}/events");
    let reader = std::thread::spawn(move || {
        let (mut all, mut last): (Vec<Frame>, Option<i64>) = (vec![], None);
        for _ in 0..1_000 {
            let (frames, _) = read_sse(&path, last, usize::MAX);
            last = frames.iter().rev().find_map(|f| f.id).or(last);
            let done = frames.last().is_some_and(|f| f.kind() == "done");
            all.extend(frames);
            if done {
                return all;
            }
        }
        panic!("the reader never reached done");
    });
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
    let done = rc.post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "bulk", "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    let frames = reader.join().unwrap();
    let ids: Vec<i64> = frames.iter().filter_map(|f| f.id).collect();
    assert_eq!(
        ids,
        (1..=25_001).collect::<Vec<_>>(),
        "every event once, in order, then done"
    );
    assert_eq!(frames.last().unwrap().kind(), "done");
    // The server ended the stalled stream early: it ends without `done`, far short of 50 MiB.
    let mut body = Vec::new();
    stalled
        .into_reader()
        .read_to_end(&mut body)
        .expect("the stalled stream ended (no read timeout)");
    let text = String::from_utf8_lossy(&body);
    assert!(
        !text.contains("\"type\":\"done\""),
        "the stalled stream got done"
    );
    assert!(
        body.len() < 20 * 1024 * 1024,
        "the stalled stream was sent {} bytes",
        body.len()
    );
    let stats = client()
        .with_role("operator")
        .get(&format!("/v1/admin/sessions/{session}"))
        .json();
    assert_eq!(stats["streams"], 0, "{stats}");
}
