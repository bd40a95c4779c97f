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
    // The object gave up after its 4 MiB queue: it says so itself. What reached this socket
    // besides sat in wrangler's proxy and the kernel's buffers, which grow with the machine's load
    // (23 MB and 38 MB seen on busy machines), so its byte count proves nothing either way.
    let stats = client()
        .with_role("operator")
        .get(&format!("/v1/admin/sessions/{session}"))
        .json();
    assert_eq!(stats["streams"], 0, "{stats}");
    // At least the stalled stream (the resuming reader may have been cut off too, and resumed).
    assert!(
        stats["streamsCutOff"].as_u64().is_some_and(|n| n >= 1),
        "the object ended no stream for falling behind: {stats}"
    );
}

/// Steer messages a heartbeat delivered, `(seq, message)`, and how many it said still wait.
fn beat_once(task: &str, runner: &str, epoch: i64) -> (Vec<(i64, String)>, i64) {
    let beat = runner_client().post_json(
        &format!("/v1/runs/{task}/heartbeat"),
        &json!({"runnerId": runner, "leaseEpoch": epoch}),
    );
    assert_eq!(beat.status, 200, "{}", beat.body);
    let b = beat.json();
    let got: Vec<(i64, String)> = b["steer"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["seq"].as_i64().unwrap(),
                m["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(got.len() <= 16, "a heartbeat delivers at most a page of 16");
    (got, b["steerPending"].as_i64().unwrap())
}

/// Heartbeats until nothing waits; every message delivered, in delivery order.
fn drain(task: &str, runner: &str, epoch: i64) -> Vec<(i64, String)> {
    let mut all = vec![];
    loop {
        let (got, pending) = beat_once(task, runner, epoch);
        all.extend(got);
        if pending == 0 {
            return all;
        }
    }
}

/// One steer: `Some(seq)` when queued, `None` when refused because the queue is full.
fn steer_one(task: &str, message: &str) -> Option<i64> {
    let r = client().post_json(
        &format!("/v1/runs/{task}/steer"),
        &json!({"message": message}),
    );
    match r.status {
        202 => Some(r.json()["seq"].as_i64().unwrap()),
        _ => {
            let e = r.assert_refusal(429, "steer.queue_full");
            assert_eq!(
                (e["maxMessages"].as_i64(), e["maxBytes"].as_i64()),
                (Some(64), Some(1 << 20))
            );
            None
        }
    }
}

/// A 64 KiB steer message that names its sender and number.
fn big_message(who: usize, i: usize) -> String {
    let head = format!("{who}-{i}-");
    format!("{head}{}", "s".repeat(64 * 1024 - head.len()))
}

#[test]
fn a_full_steer_queue_refuses_past_its_bounds_and_every_queued_message_is_delivered_once() {
    let (task, _) = submit("manual");
    let runner = "steered";
    let l = lease(runner).expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    // The count bound: 100 short messages into a queue nobody takes from: 64 queued.
    let queued: Vec<(i64, String)> = (0..100)
        .filter_map(|i| {
            let m = format!("short-{i}");
            steer_one(&task, &m).map(|seq| (seq, m))
        })
        .collect();
    assert_eq!(queued.len(), 64);
    assert_eq!(drain(&task, runner, epoch), queued, "each once, in order");
    // The byte bound: 40 messages of 64 KiB: 16 fit in 1 MiB.
    let queued: Vec<(i64, String)> = (0..40)
        .filter_map(|i| {
            let m = big_message(0, i);
            steer_one(&task, &m).map(|seq| (seq, m))
        })
        .collect();
    assert_eq!(queued.len(), 16);
    assert_eq!(drain(&task, runner, epoch), queued, "each once, in order");
    // The flood: 2,000 × 64 KiB from 8 clients while the runner takes pages as it heartbeats. The
    // runner beats whenever a steer was refused since its last beat, so the queue is full at times
    // (refusals happen whatever the machine's speed) and drains while the senders keep sending.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let refusals = std::sync::Arc::new(AtomicUsize::new(0));
    let drainer = {
        let (task, stop, refusals) = (task.clone(), stop.clone(), refusals.clone());
        std::thread::spawn(move || {
            let (mut all, mut seen) = (vec![], 0);
            while !stop.load(Ordering::SeqCst) {
                let now = refusals.load(Ordering::SeqCst);
                if now > seen {
                    seen = now;
                    all.extend(beat_once(&task, runner, epoch).0);
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            all.extend(drain(&task, runner, epoch));
            (all, seen)
        })
    };
    let senders: Vec<_> = (1..=8)
        .map(|who| {
            let (task, refusals) = (task.clone(), refusals.clone());
            std::thread::spawn(move || {
                (0..250)
                    .filter_map(|i| {
                        let m = big_message(who, i);
                        let queued = steer_one(&task, &m).map(|seq| (seq, m));
                        if queued.is_none() {
                            refusals.fetch_add(1, Ordering::SeqCst);
                        }
                        queued
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut queued: Vec<(i64, String)> = senders
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    stop.store(true, Ordering::SeqCst);
    let (delivered, _) = drainer.join().unwrap();
    queued.sort();
    let refused = refusals.load(Ordering::SeqCst);
    assert_eq!(queued.len() + refused, 2_000);
    assert!(
        refused > 0 && queued.len() > 16,
        "the bound refused part of the flood and the queue drained meanwhile ({} queued)",
        queued.len()
    );
    let seqs: Vec<i64> = delivered.iter().map(|(seq, _)| *seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "delivered in seq order, once"
    );
    assert_eq!(
        delivered, queued,
        "every queued message delivered, none lost"
    );
    let done = runner_client().post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": runner, "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
}

#[test]
fn a_page_of_events_is_bounded_in_bytes_and_the_next_page_and_the_stream_carry_the_rest() {
    let (task, _) = submit("manual");
    let runner = "paged";
    let l = lease(runner).expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    // Three events of ~600 KB: the first two reach 1 MiB, so a page holds two.
    let blob = "p".repeat(600_000);
    for _ in 0..3 {
        let r = runner_client().post_json(
            &format!("/v1/runs/{task}/events"),
            &json!({"runnerId": runner, "leaseEpoch": epoch, "events": [{"type": "chunk", "data": {"b": blob}}]}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let page = |after: i64| {
        client()
            .get(&format!("/v1/runs/{task}/events?after={after}&limit=1000"))
            .json()
    };
    let first = page(0);
    let seqs = |p: &serde_json::Value| -> Vec<i64> {
        p["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&first), [1, 2], "{}", first["nextAfter"]);
    assert_eq!(
        (first["nextAfter"].as_i64(), first["done"].as_bool()),
        (Some(2), Some(false))
    );
    let second = page(2);
    assert_eq!(seqs(&second), [3]);
    let done = runner_client().post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": runner, "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    // The stream replays across byte-cut pages: every event, then done.
    let (frames, _) = read_sse(&format!("/v1/runs/{task}/events"), None, usize::MAX);
    let ids: Vec<i64> = frames.iter().filter_map(|f| f.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(frames.last().unwrap().kind(), "done");
}
