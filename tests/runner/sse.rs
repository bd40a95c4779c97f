//! A small SSE client and runner-process helpers for the execution tests.

use crate::helpers::{unique, Client, Resp};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub fn server() -> String {
    std::env::var("SEMA_RUNNER_URL").expect("SEMA_RUNNER_URL is not set: run through scripts/test")
}

/// A client of the runner-test server.
pub fn client() -> Client {
    Client::anonymous().at(&server())
}

/// A client speaking as a runner.
pub fn runner_client() -> Client {
    client().with_role("runner")
}

/// Longest a test reads one stream before calling it stuck.
const STREAM_DEADLINE: Duration = Duration::from_secs(40);

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<i64>,
    pub event: Option<String>,
    pub data: Value,
}

impl Frame {
    pub fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or_default()
    }
}

/// Opens `path` as SSE (optionally resuming after `last_event_id`) and reads frames until `done`, the
/// end of the stream, or `max` ledger/done frames. Heartbeat frames are skipped.
pub fn read_sse(
    path: &str,
    last_event_id: Option<i64>,
    max: usize,
) -> (Vec<Frame>, Vec<(String, String)>) {
    read_sse_at(&server(), path, last_event_id, max)
}

/// [`read_sse`] against the server at `base`.
pub fn read_sse_at(
    base: &str,
    path: &str,
    last_event_id: Option<i64>,
    max: usize,
) -> (Vec<Frame>, Vec<(String, String)>) {
    let agent = ureq::AgentBuilder::new()
        .timeout_read(Duration::from_secs(30))
        .build();
    let mut req = agent
        .get(&format!("{base}{path}"))
        .set("accept", "text/event-stream");
    if let Some(id) = last_event_id {
        req = req.set("last-event-id", &id.to_string());
    }
    let resp = req.call().expect("SSE request");
    read_stream(resp, max)
}

/// Reads frames from an SSE response (see [`read_sse`]). Hand-written: the SSE client crates are
/// async (tokio/hyper), and the tests need only `id`/`event`/`data` lines over a blocking reader.
pub fn read_stream(resp: ureq::Response, max: usize) -> (Vec<Frame>, Vec<(String, String)>) {
    let headers = resp
        .headers_names()
        .into_iter()
        .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_owned())))
        .collect();
    assert!(
        resp.content_type().starts_with("text/event-stream"),
        "{}",
        resp.content_type()
    );
    let reader = BufReader::new(resp.into_reader());
    let mut frames = vec![];
    let (mut id, mut event, mut data) = (None, None, String::new());
    // Heartbeats keep a stream that never ends alive, so bound the whole read, not each line.
    let deadline = Instant::now() + STREAM_DEADLINE;
    for line in reader.lines() {
        let line = line.expect("stream line");
        assert!(
            Instant::now() < deadline,
            "the stream did not end within {STREAM_DEADLINE:?}; frames so far: {frames:?}"
        );
        if line.is_empty() {
            if !data.is_empty() {
                let frame = Frame {
                    id,
                    event: event.clone(),
                    data: serde_json::from_str(&data).expect("frame JSON"),
                };
                let is_done = frame.kind() == "done";
                if event.as_deref() != Some("heartbeat") {
                    frames.push(frame);
                }
                if is_done || frames.len() >= max {
                    break;
                }
            }
            (id, event, data) = (None, None, String::new());
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().expect("numeric id"));
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    (frames, headers)
}

/// The runners' lease long-poll in these tests. A killed runner's poll still in flight can lease a
/// run nobody will drive, so dropping a runner waits this long (plus margin) before the next test.
const RUNNER_WAIT_MS: u64 = 300;

/// A reference runner process; killed when dropped.
pub struct Runner(Child);

impl Runner {
    pub fn start() -> Self {
        let bin = std::env::var("SEMA_RUNNER_BIN")
            .expect("SEMA_RUNNER_BIN is not set: run through scripts/test");
        let child = Command::new(bin)
            .args([
                "--url",
                &server(),
                "--runner-id",
                &unique("runner"),
                "--wait-ms",
                &RUNNER_WAIT_MS.to_string(),
            ])
            .spawn()
            .expect("start sema-runner");
        Runner(child)
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        std::thread::sleep(Duration::from_millis(RUNNER_WAIT_MS + 400));
    }
}

/// Submits a run into a fresh session and returns its task id.
pub fn submit(objective: &str) -> (String, String) {
    let session = unique("exec");
    let r = client().post_json(
        "/v1/runs",
        &json!({"sessionId": session, "objective": objective}),
    );
    (r.admitted(), session)
}

pub fn run(task: &str) -> Value {
    client().get(&format!("/v1/runs/{task}")).json()
}

/// Polls the run until `pred` holds (at most 20 s).
pub fn wait_until(task: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let r = run(task);
        if pred(&r) {
            return r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The run's ledger as the JSON page reads it.
pub fn ledger(task: &str) -> Vec<Value> {
    let page = client()
        .get(&format!("/v1/runs/{task}/events?limit=1000"))
        .json();
    page["events"].as_array().cloned().unwrap_or_default()
}

/// Leases as a runner through HTTP (no runner process): the lease body, or None on 204.
pub fn lease(runner_id: &str) -> Option<Value> {
    let r: Resp = runner_client().post_json("/v1/runner/lease", &json!({"runnerId": runner_id}));
    match r.status {
        200 => Some(r.json()),
        204 => None,
        other => panic!("lease: {other} {}", r.body),
    }
}
