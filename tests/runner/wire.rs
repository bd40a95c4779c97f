//! Wire completeness (SPEC-api §3.5, §4): how streams end, what a reconnect after the end gets, and
//! the stream form of keyed replays and of keyed duplicates joined in flight; one test drives a real
//! `EventSource` (Node 22's built-in) through `eventsource_client.mjs`.

use crate::helpers::{running_conflict_body, unique};
use crate::sse::{client, ledger, read_sse, read_stream, server, wait_until, Frame, Runner};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// `GET path` as SSE with an optional `Last-Event-ID`: the status and, for a 200, the frames.
fn reconnect(path: &str, last_event_id: Option<&str>) -> (u16, Vec<Frame>) {
    let mut req = ureq::AgentBuilder::new()
        .timeout_read(Duration::from_secs(30))
        .build()
        .get(&format!("{}{path}", server()))
        .set("accept", "text/event-stream");
    if let Some(id) = last_event_id {
        req = req.set("last-event-id", id);
    }
    let resp = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{path}: {e}"),
    };
    match resp.status() {
        200 => (200, read_stream(resp, usize::MAX).0),
        204 => {
            assert_eq!(resp.into_string().unwrap(), "", "a 204 carries no body");
            (204, vec![])
        }
        status => {
            let error: Value = resp.into_json().unwrap();
            assert!(error["errorCode"].is_string(), "{status} {error}");
            (status, vec![])
        }
    }
}

/// `POST /v1/tasks` (stream form) with `headers`.
fn post_task(body: &Value, headers: &[(&str, &str)]) -> ureq::Response {
    let mut req = ureq::post(&format!("{}/v1/tasks", server()))
        .timeout(Duration::from_secs(40))
        .set("content-type", "application/json");
    for (k, v) in headers {
        req = req.set(k, v);
    }
    match req.send_string(&body.to_string()) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("POST /v1/tasks: {e}"),
    }
}

fn header(resp: &ureq::Response, name: &str) -> Option<String> {
    resp.header(name).map(str::to_owned)
}

/// The id of a `done` frame, asserting it is one and has an id.
fn done_id(frame: &Frame) -> i64 {
    assert_eq!(frame.kind(), "done", "{frame:?}");
    frame.id.expect("the done frame has an id")
}

#[test]
fn a_reconnect_at_or_past_an_ended_runs_done_is_204_and_one_before_it_gets_only_done_again() {
    let _runner = Runner::start();
    let (task, _) = crate::sse::submit("say one two three");
    wait_until(&task, "completion", |r| r["status"] == "completed");
    let path = format!("/v1/runs/{task}/events");
    let (status, all) = reconnect(&path, None);
    assert_eq!(status, 200);
    let d = done_id(all.last().unwrap());
    assert_eq!(
        d,
        all.len() as i64,
        "the done frame's id is the seq after the last event"
    );
    let done = &all.last().unwrap().data;
    assert!(
        done.get("replay").is_none(),
        "a live completion is no replay: {done}"
    );
    // Before the done frame (after every event): the same done frame again, not the events.
    let (status, again) = reconnect(&path, Some(&(d - 1).to_string()));
    assert_eq!((status, again.len()), (200, 1), "{again:?}");
    assert_eq!(&again[0], all.last().unwrap());
    // At or past it: nothing left, 204 (which stops an EventSource for good); `?after=` alike.
    for anchor in [d, d + 1, 9_007_199_254_740_991] {
        assert_eq!(
            reconnect(&path, Some(&anchor.to_string())).0,
            204,
            "{anchor}"
        );
    }
    assert_eq!(reconnect(&format!("{path}?after={d}"), None).0, 204);
    // The header wins over `?after=`, as on every reconnect of an EventSource opened with `?after=`.
    assert_eq!(
        reconnect(&format!("{path}?after=0"), Some(&d.to_string())).0,
        204
    );
    let (status, tail) = reconnect(&format!("{path}?after={d}"), Some(&(d - 1).to_string()));
    assert_eq!((status, tail.len()), (200, 1));
    assert_eq!(reconnect(&path, Some("not-a-seq")).0, 400);
    assert_eq!(reconnect(&path, Some("-1")).0, 400);
}

#[test]
fn a_run_that_ended_without_a_done_event_answers_204_from_last_seq_plus_one() {
    // Cancelled with nobody holding it: the done frame is built from the row at last_seq + 1 = 1.
    let (task, _) = crate::sse::submit("say never leased");
    assert_eq!(client().cancel(&task).json()["status"], "cancelled");
    let path = format!("/v1/runs/{task}/events");
    let (status, frames) = reconnect(&path, Some("0"));
    assert_eq!((status, frames.len()), (200, 1));
    assert_eq!(frames[0].id, Some(1));
    assert_eq!(
        frames[0].data,
        json!({"type": "done", "result": {"status": "cancelled", "error": "cancelled by user"}})
    );
    assert_eq!(reconnect(&path, Some("1")).0, 204);
    assert_eq!(reconnect(&path, Some("2")).0, 204);
}

#[test]
fn a_run_still_live_gets_a_stream_at_any_anchor_and_the_reconnect_after_its_done_is_204() {
    let (task, _) = crate::sse::submit("say nobody leases this");
    let canceller = {
        let task = task.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            client().cancel(&task)
        })
    };
    // Anchored past every seq the run has: still a stream (no done frame exists yet), which ends
    // with the done frame when the run ends.
    let path = format!("/v1/runs/{task}/events");
    let (status, frames) = reconnect(&path, Some("50"));
    assert_eq!(canceller.join().unwrap().status, 200);
    assert_eq!((status, frames.len()), (200, 1), "{frames:?}");
    assert_eq!(frames[0].id, Some(1));
    assert_eq!(reconnect(&path, Some("1")).0, 204);
}

#[test]
fn a_keyed_stream_replay_of_an_ended_run_is_x_task_id_meta_and_its_done_with_replay_true() {
    let _runner = Runner::start();
    let key = unique("key");
    let session = unique("replay");
    let body = json!({"sessionId": session, "objective": "say replayed once"});
    let first = post_task(&body, &[("idempotency-key", &key)]);
    let task = header(&first, "x-task-id").expect("the original names its task");
    let (original, _) = read_stream(first, usize::MAX);
    assert_eq!(original[0].kind(), "meta");
    let live_done = original.last().unwrap();
    let d = done_id(live_done);
    assert!(live_done.data.get("replay").is_none());
    assert!(original.iter().any(|f| f.kind() == "text_delta"));
    // The replay: SSE headers plus x-task-id, meta {taskId, sessionId}, done {result, replay:true},
    // end — byte for byte, with the live done's id and result; no event of the run again.
    let again = post_task(&body, &[("idempotency-key", &key)]);
    assert_eq!(again.status(), 200);
    assert!(again.content_type().starts_with("text/event-stream"));
    assert_eq!(header(&again, "x-task-id").as_deref(), Some(task.as_str()));
    let expected = format!(
        "event: meta\ndata: {}\n\nid: {d}\ndata: {}\n\n",
        json!({"type": "meta", "taskId": task, "sessionId": session}),
        json!({"type": "done", "result": live_done.data["result"], "replay": true}),
    );
    let body_text = again.into_string().unwrap();
    // serde_json orders keys; compare parsed frames too, so key order is not what is tested.
    let frames: Vec<Value> = body_text
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| serde_json::from_str(f.rsplit("data: ").next().unwrap()).unwrap())
        .collect();
    let want: Vec<Value> = expected
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| serde_json::from_str(f.rsplit("data: ").next().unwrap()).unwrap())
        .collect();
    assert_eq!(frames, want, "{body_text}");
    assert!(
        body_text.starts_with("event: meta\ndata: {\"type\":\"meta\","),
        "{body_text}"
    );
    assert!(body_text.contains(&format!(
        "\n\nid: {d}\ndata: {{\"type\":\"done\",\"result\":"
    )));
    assert!(body_text.ends_with(",\"replay\":true}\n\n"), "{body_text}");
    // Its reconnects: at or past the done frame 204; before it the same replay.
    for (anchor, status) in [(d, 204), (d + 3, 204), (d - 1, 200), (0, 200)] {
        let r = post_task(
            &body,
            &[
                ("idempotency-key", &key),
                ("last-event-id", &anchor.to_string()),
            ],
        );
        assert_eq!(r.status(), status, "Last-Event-ID {anchor}");
    }
    let r = post_task(&body, &[("idempotency-key", &key), ("last-event-id", "x")]);
    assert_eq!(r.status(), 400);
    // One run, one done: the replays executed nothing.
    let runs = client()
        .get(&format!("/v1/runs?sessionId={session}"))
        .json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    assert_eq!(
        ledger(&task).iter().filter(|e| e["type"] == "done").count(),
        1
    );
}

#[test]
fn a_keyed_stream_duplicate_in_flight_joins_the_first_and_gets_its_done_with_replay_true() {
    let key = unique("key");
    let session = unique("join");
    let body = json!({"sessionId": session, "objective": "say joined and run once"});
    // No runner yet: the first stays running while the duplicate arrives.
    let first = post_task(&body, &[("idempotency-key", &key)]);
    let task = header(&first, "x-task-id").expect("the original names its task");
    let dup = post_task(&body, &[("idempotency-key", &key)]);
    assert_eq!(dup.status(), 200);
    assert!(dup.content_type().starts_with("text/event-stream"));
    assert_eq!(
        header(&dup, "x-task-id"),
        None,
        "a joined duplicate sends no x-task-id"
    );
    let runner = Runner::start();
    let first = std::thread::spawn(move || read_stream(first, usize::MAX).0);
    let (joined, _) = read_stream(dup, usize::MAX);
    let original = first.join().unwrap();
    drop(runner);
    assert!(original.iter().any(|f| f.kind() == "text_delta"));
    let live_done = original.last().unwrap();
    assert!(live_done.data.get("replay").is_none());
    // The duplicate got the first's outcome and nothing else: no meta, no events.
    assert_eq!(joined.len(), 1, "{joined:?}");
    assert_eq!(joined[0].id, live_done.id);
    assert_eq!(
        joined[0].data,
        json!({"type": "done", "result": live_done.data["result"], "replay": true})
    );
    assert_eq!(live_done.data["result"]["status"], "completed");
    let runs = client()
        .get(&format!("/v1/runs?sessionId={session}"))
        .json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    // It ran once: the ledger holds one done and exactly the deltas the original streamed.
    let book = ledger(&task);
    assert_eq!(book.iter().filter(|e| e["type"] == "done").count(), 1);
    let streamed: String = original
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(streamed, "joined and run once");
    let deltas = book.iter().filter(|e| e["type"] == "text_delta").count();
    assert_eq!(
        deltas,
        original.iter().filter(|f| f.kind() == "text_delta").count()
    );
}

#[test]
fn simultaneous_keyed_stream_submits_run_once_and_every_other_done_is_a_replay() {
    let _runner = Runner::start();
    let key = unique("key");
    let session = unique("burst");
    let body = json!({"sessionId": session, "objective": "say burst\nsleep 300\nsay over"});
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (key, body) = (key.clone(), body.clone());
            std::thread::spawn(move || {
                let r = post_task(&body, &[("idempotency-key", &key)]);
                assert_eq!(r.status(), 200);
                read_stream(r, usize::MAX).0
            })
        })
        .collect();
    let streams: Vec<Vec<Frame>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let dones: Vec<&Frame> = streams.iter().map(|s| s.last().unwrap()).collect();
    assert!(dones.iter().all(|d| d.kind() == "done"), "{dones:?}");
    let originals = dones
        .iter()
        .filter(|d| d.data.get("replay").is_none())
        .count();
    assert_eq!(originals, 1, "{dones:?}");
    assert!(dones
        .iter()
        .filter(|d| d.data.get("replay").is_some())
        .all(|d| d.data["replay"] == true));
    assert!(dones
        .iter()
        .all(|d| d.data["result"] == dones[0].data["result"] && d.id == dones[0].id));
    assert_eq!(dones[0].data["result"]["status"], "completed");
    // Only the original streamed the run's events.
    let with_events = streams
        .iter()
        .filter(|s| s.iter().any(|f| f.kind() == "text_delta"))
        .count();
    assert_eq!(with_events, 1);
    let runs = client()
        .get(&format!("/v1/runs?sessionId={session}"))
        .json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
}

#[test]
fn a_keyed_stream_refused_after_its_headers_carries_no_replay_and_keeps_no_binding() {
    let (holder, session) = crate::sse::submit("say holder");
    let key = unique("key");
    let body = json!({"sessionId": session, "objective": "say after the holder"});
    let refused = post_task(&body, &[("idempotency-key", &key)]);
    assert_eq!(refused.status(), 200);
    assert_eq!(header(&refused, "x-task-id"), None);
    let conflict: Value = serde_json::from_str(&running_conflict_body(&holder)).unwrap();
    assert_eq!(
        refused.into_string().unwrap(),
        format!(
            "data: {{\"type\":\"done\",\"result\":{{\"status\":\"failed\",\"errorMessage\":{},\"activeTaskId\":\"{holder}\",\"activeTaskStatus\":\"running\"}}}}\n\n",
            conflict["error"]
        ),
        "no id, no replay"
    );
    assert_eq!(client().cancel(&holder).json()["status"], "cancelled");
    // The key was not bound by the refusal: the retry really runs (a fresh stream, not a replay).
    let _runner = Runner::start();
    let retry = post_task(&body, &[("idempotency-key", &key)]);
    assert!(header(&retry, "x-task-id").is_some());
    let (frames, _) = read_stream(retry, usize::MAX);
    assert_eq!(frames[0].kind(), "meta");
    let done = frames.last().unwrap();
    assert!(done.data.get("replay").is_none(), "{done:?}");
    assert_eq!(done.data["result"]["status"], "completed");
}

/// Runs `eventsource_client.mjs` on `url` and returns what it printed, one JSON value per line.
fn event_source(url: &str) -> Vec<Value> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/runner/eventsource_client.mjs"
    );
    let node = std::env::var("SEMA_NODE").unwrap_or_else(|_| "node".into());
    let out = Command::new(&node)
        .args([
            "--no-warnings",
            "--experimental-eventsource",
            script,
            url,
            "20000",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run {node} (Node 22: source scripts/lib/env.sh): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the EventSource client exited {:?}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the EventSource did, as short words: `open`, `message <lastEventId> <type>`,
/// `reconnecting` (error with readyState CONNECTING), `closed` (error with readyState CLOSED).
fn story(log: &[Value]) -> Vec<String> {
    log.iter()
        .map(
            |l| match (l["on"].as_str().unwrap(), l["readyState"].as_i64()) {
                ("message", _) => format!(
                    "message {} {}",
                    l["lastEventId"].as_str().unwrap(),
                    l["data"]["type"].as_str().unwrap()
                ),
                ("error", Some(0)) => "reconnecting".into(),
                ("error", Some(2)) => "closed".into(),
                (on, _) => on.into(),
            },
        )
        .collect()
}

#[test]
fn a_real_event_source_that_does_not_close_on_done_gets_done_once_reconnects_gets_204_and_stops() {
    let _runner = Runner::start();
    let (task, _) = crate::sse::submit("say a real event source");
    wait_until(&task, "completion", |r| r["status"] == "completed");
    let (frames, _) = read_sse(&format!("/v1/runs/{task}/events"), None, usize::MAX);
    let d = frames.last().unwrap().id.unwrap();
    let url = format!("{}/v1/runs/{task}/events", server());
    // From the start: every event once, done once; the response ends, so the EventSource reconnects
    // by itself (after its own ~3 s) sending Last-Event-ID = the done frame's id, gets 204 and is
    // CLOSED: it never reconnects again and never sees an event twice.
    let mut want: Vec<String> = vec!["open".into()];
    want.extend((1..d).map(|seq| format!("message {seq} text_delta")));
    want.extend([
        format!("message {d} done"),
        "reconnecting".into(),
        "closed".into(),
    ]);
    let log = event_source(&url);
    assert_eq!(story(&log), want, "{log:?}");
    assert_eq!(log[d as usize]["data"], frames.last().unwrap().data);
    // A client resuming from before the done frame (after every event): done again, not the events,
    // then the same 204 end.
    let log = event_source(&format!("{url}?after={}", d - 1));
    assert_eq!(
        story(&log),
        [
            "open",
            &format!("message {d} done"),
            "reconnecting",
            "closed"
        ],
        "{log:?}"
    );
    assert_eq!(log[1]["data"], frames.last().unwrap().data);
}

#[test]
fn a_real_event_source_on_a_live_run_sees_its_done_live_then_204_and_stops() {
    let (task, _) = crate::sse::submit("say nobody leases this either");
    let url = format!("{}/v1/runs/{task}/events", server());
    let watcher = std::thread::spawn(move || event_source(&url));
    // Cancel once the EventSource is subscribed (its open stream is counted by the session object).
    let session_stats = format!("/v1/admin/sessions/{}", run_session(&task));
    let operator = client().with_role("operator");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while operator.get(&session_stats).json()["streams"] != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the EventSource never subscribed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(client().cancel(&task).json()["status"], "cancelled");
    let log = watcher.join().unwrap();
    assert_eq!(
        story(&log),
        ["open", "message 1 done", "reconnecting", "closed"],
        "{log:?}"
    );
    assert_eq!(log[1]["data"]["result"]["status"], "cancelled");
}

fn run_session(task: &str) -> String {
    client().get(&format!("/v1/runs/{task}")).json()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned()
}
