//! End to end: runs through the whole protocol, driven by the real reference runner.
//!
//! - `end-to-end`: the bench starts the reference runner binary (`sema-runner --concurrency N
//!   --queue Q --wait-ms 20000 --transport auto`, local mode) as a child process, so N worker
//!   threads = N reference runners wait on a fresh queue; once the queue's dispatcher shows N
//!   waiters (bounded wait), C client threads share R runs. Each run: `POST /v1/runs` into a new
//!   session on the queue with an objective of E lines `say wK` (the runner heartbeats, then appends
//!   one `text_delta` per line, then finishes `completed`), then the client opens
//!   `GET /v1/runs/{taskId}/events` and reads it until the `done` frame. Timed per run on the
//!   client's monotonic clock: submit sent → submit answered, → first `text_delta` read, → `done`
//!   read (the per-run control-plane latency: the runner does no work between its calls). A run is
//!   completed only when its stream showed exactly E `text_delta` frames and a `done` saying
//!   `completed`; any other run is an error (counted by kind). runs/s = completed runs ÷ (first
//!   submit sent → last `done` read).
//! - `peer-end-to-end`: LangGraph's dev server, per run `POST /threads/{new}/runs/stream` of the stub
//!   graph (`hold_ms` 0) read to the end of its SSE response (`event: end`, or the stream closing
//!   after frames without an `event: error`). The peer runs the graph in-process: no runner, no lease,
//!   no hops between processes, no appends; its run is one node returning at once.
//!
//! Bounded: every request and stream read has a timeout, the scenario a deadline, every loop a fixed
//! count; the runner child is killed when the scenario ends, early or not.

use crate::leader::{agent, send, Reply};
use crate::queues::{await_waiters, dist, ms_since};
use crate::{emit, unique, uuid_like};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The most time one scenario may take (runner start and client runs).
const DEADLINE: Duration = Duration::from_secs(600);
/// The most time the runner's workers may take to be all waiting in the dispatcher.
const WAITERS_DEADLINE: Duration = Duration::from_secs(60);
/// The most time one run's stream may stay open (its read included).
const STREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// The reference runner's lease long-poll.
const RUNNER_WAIT_MS: u64 = 20_000;
/// Lines of the runner's stderr kept in the result line.
const STDERR_TAIL: usize = 5;

/// The reference runner process; killed (and reaped) when dropped.
struct RunnerChild {
    child: Child,
    stderr: std::path::PathBuf,
}

impl RunnerChild {
    fn spawn(bin: &str, url: &str, queue: &str, runners: usize) -> Result<Self, String> {
        let stderr = std::env::temp_dir().join(format!("{}.log", unique("sema-bench-e2e-runner")));
        let log =
            std::fs::File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        let child = Command::new(bin)
            .args(["--url", url, "--queue", queue, "--transport", "auto"])
            .args(["--concurrency", &runners.to_string()])
            .args(["--wait-ms", &RUNNER_WAIT_MS.to_string()])
            .args(["--runner-id", &unique("bench-e2e")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{bin}: {e}"))?;
        Ok(Self { child, stderr })
    }

    /// Whether the runner is still running (it never exits on its own).
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines the runner wrote to stderr.
    fn stderr_tail(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(STDERR_TAIL);
        lines[from..].iter().map(|l| (*l).to_owned()).collect()
    }
}

impl Drop for RunnerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Why a run did not count as completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The submit was not answered 202 with a task id.
    Submit,
    /// The stream did not open, broke, or timed out before its `done` frame.
    Stream,
    /// The `done` frame came after a number of `text_delta` frames other than the objective's.
    Deltas,
    /// The `done` frame did not say `completed`.
    NotCompleted,
}

/// One run as its client saw it (instants on the client's monotonic clock).
struct Seen {
    sent: Instant,
    submit: Reply,
    first_delta: Option<Instant>,
    done: Option<Instant>,
    failure: Option<Failure>,
}

/// What a read stream showed: `text_delta` frames, when the first was read, when the `done` frame
/// was read and the status it carried.
#[derive(Debug, Default, PartialEq)]
struct Stream {
    deltas: usize,
    first_delta: Option<Instant>,
    done: Option<(Instant, String)>,
}

/// Reads a run's SSE body until its `done` frame (or `max_lines`, the end, or a read error).
fn read_stream(body: impl Read, max_lines: usize) -> Stream {
    let mut out = Stream::default();
    for line in BufReader::new(body).lines().take(max_lines) {
        let Ok(line) = line else { break };
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let frame: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
        match frame["type"].as_str() {
            Some("text_delta") => {
                out.deltas += 1;
                out.first_delta.get_or_insert_with(Instant::now);
            }
            Some("done") => {
                let status = frame["result"]["status"].as_str().unwrap_or_default();
                out.done = Some((Instant::now(), status.to_owned()));
                break;
            }
            _ => {}
        }
    }
    out
}

/// The objective of one run: `events` lines `say wK`, one `text_delta` each.
fn objective(events: usize) -> String {
    (0..events)
        .map(|k| format!("say w{k}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Submits one run and reads its stream to `done`.
fn one_run(a: &ureq::Agent, url: &str, queue: &str, k: usize, events: usize) -> Seen {
    let sent = Instant::now();
    let submit = send(
        a,
        "POST",
        &format!("{url}/v1/runs"),
        None,
        Some(
            &json!({"sessionId": unique(&format!("e2e-{k}")), "objective": objective(events), "queue": queue}),
        ),
    );
    let mut seen = Seen {
        sent,
        submit,
        first_delta: None,
        done: None,
        failure: None,
    };
    let task = match seen.submit.body["taskId"].as_str() {
        Some(t) if seen.submit.status == 202 => t.to_owned(),
        _ => {
            seen.failure = Some(Failure::Submit);
            return seen;
        }
    };
    let resp = a
        .get(&format!("{url}/v1/runs/{task}/events"))
        .set("accept", "text/event-stream")
        .timeout(STREAM_TIMEOUT)
        .call();
    let Ok(resp) = resp else {
        seen.failure = Some(Failure::Stream);
        return seen;
    };
    // Each frame is at most 3 lines (`id:`, `data:`, blank); heartbeats and meta frames add a few.
    let s = read_stream(resp.into_reader(), 3 * events + 1000);
    seen.first_delta = s.first_delta;
    seen.failure = match &s.done {
        None => Some(Failure::Stream),
        Some(_) if s.deltas != events => Some(Failure::Deltas),
        Some((_, status)) if status != "completed" => Some(Failure::NotCompleted),
        Some(_) => None,
    };
    seen.done = s.done.map(|(at, _)| at);
    seen
}

/// Runs `work(k)` for k in 0..runs on `clients` threads (each takes the next k) until `deadline`.
fn share<T: Send>(
    runs: usize,
    clients: usize,
    deadline: Instant,
    work: impl Fn(&ureq::Agent, usize) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients.max(1))
            .map(|_| {
                let (next, work) = (&next, &work);
                s.spawn(move || {
                    let a = agent();
                    let mut out = vec![];
                    for _ in 0..runs {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        if k >= runs || Instant::now() >= deadline {
                            break;
                        }
                        out.push(work(&a, k));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Seconds from the first instant of `from` to the last of `to`.
fn span(from: impl Iterator<Item = Instant>, to: impl Iterator<Item = Instant>) -> Option<f64> {
    let (first, last) = (from.min()?, to.max()?);
    Some(last.saturating_duration_since(first).as_secs_f64())
}

/// The scenario `end-to-end`.
pub fn end_to_end(
    url: &str,
    runs: usize,
    runners: usize,
    clients: usize,
    events: usize,
    runner_bin: &str,
) {
    let deadline = Instant::now() + DEADLINE;
    let queue = unique("e2e");
    let runners = runners.max(1);
    let mut runner = match RunnerChild::spawn(runner_bin, url, &queue, runners) {
        Ok(r) => r,
        Err(e) => {
            emit(json!({
                "scenario": "end-to-end", "runs": runs, "runners": runners, "completed": 0,
                "errors": runs, "error": format!("the reference runner did not start: {e}"),
            }));
            return;
        }
    };
    let main = agent();
    let (all_waiting, waiting) = await_waiters(
        &main,
        url,
        &queue,
        runners as u64,
        Duration::from_millis(20),
        WAITERS_DEADLINE,
    );
    let seen = if runner.alive() {
        share(runs, clients, deadline, |a, k| {
            one_run(a, url, &queue, k, events)
        })
    } else {
        vec![]
    };
    let runner_alive_at_end = runner.alive();
    let stderr_tail = runner.stderr_tail();
    drop(runner);
    let ok: Vec<&Seen> = seen.iter().filter(|s| s.failure.is_none()).collect();
    let count = |f: Failure| seen.iter().filter(|s| s.failure == Some(f)).count();
    let not_run = runs - seen.len();
    let errors = seen.len() - ok.len() + not_run;
    let elapsed_s = span(
        seen.iter().map(|s| s.sent),
        ok.iter().filter_map(|s| s.done),
    );
    let (d50, d99, dmax) = dist(
        ok.iter()
            .filter_map(|s| Some(ms_since(s.sent, s.done?)))
            .collect(),
    );
    let (s50, s99, _) = dist(ok.iter().map(|s| s.submit.ms).collect());
    let (e50, e99, _) = dist(
        ok.iter()
            .filter_map(|s| Some(ms_since(s.sent, s.first_delta?)))
            .collect(),
    );
    emit(json!({
        "scenario": "end-to-end",
        "queue": queue,
        "runs": runs,
        "runners": runners,
        "clients": clients,
        "events_per_run": events,
        "runner_wait_ms": RUNNER_WAIT_MS,
        "runners_waiting_at_start": waiting,
        "all_runners_waiting_at_start": all_waiting,
        "completed": ok.len(),
        "errors": errors,
        "errors_by_kind": {
            "submit": count(Failure::Submit),
            "stream": count(Failure::Stream),
            "text_deltas": count(Failure::Deltas),
            "not_completed": count(Failure::NotCompleted),
            "not_run_by_deadline": not_run,
        },
        "elapsed_s": elapsed_s,
        "runs_per_s": elapsed_s.filter(|e| *e > 0.0).map(|e| ok.len() as f64 / e),
        "submit_to_done_p50_ms": d50,
        "submit_to_done_p99_ms": d99,
        "submit_to_done_max_ms": dmax,
        "submit_p50_ms": s50,
        "submit_p99_ms": s99,
        "submit_to_first_event_p50_ms": e50,
        "submit_to_first_event_p99_ms": e99,
        "runner_alive_at_end": runner_alive_at_end,
        "runner_stderr_tail": if errors > 0 { json!(stderr_tail) } else { json!(null) },
    }));
}

/// How one peer stream ended.
#[derive(Debug, PartialEq, Eq)]
enum PeerEnd {
    /// `event: end`, or the stream closed after at least one frame.
    Done,
    /// An `event: error` frame.
    Error,
    /// No frame, a read error or timeout, or the line bound reached.
    Broken,
}

/// Reads a peer run's SSE body to its end: `(how it ended, frames read)`.
fn read_peer_stream(body: impl Read, max_lines: usize) -> (PeerEnd, usize) {
    let (mut frames, mut lines) = (0, 0);
    for line in BufReader::new(body).lines().take(max_lines) {
        lines += 1;
        let Ok(line) = line else {
            return (PeerEnd::Broken, frames);
        };
        let Some(event) = line.strip_prefix("event:").map(str::trim) else {
            continue;
        };
        frames += 1;
        match event {
            "end" => return (PeerEnd::Done, frames),
            "error" => return (PeerEnd::Error, frames),
            _ => {}
        }
    }
    // A stream that reached the line bound did not end.
    let end = if frames > 0 && lines < max_lines {
        PeerEnd::Done
    } else {
        PeerEnd::Broken
    };
    (end, frames)
}

/// One peer run: `(sent, stream end read)` when it ended well, else `(sent, None)`.
fn peer_run(a: &ureq::Agent, url: &str) -> (Instant, Option<Instant>) {
    let body = json!({
        "assistant_id": "stub",
        "input": {"objective": "bench", "hold_ms": 0},
        "if_not_exists": "create",
        "stream_mode": ["values"],
    });
    let sent = Instant::now();
    let resp = a
        .post(&format!("{url}/threads/{}/runs/stream", uuid_like()))
        .set("content-type", "application/json")
        .set("accept", "text/event-stream")
        .timeout(STREAM_TIMEOUT)
        .send_string(&body.to_string());
    let Ok(resp) = resp else {
        return (sent, None);
    };
    match read_peer_stream(resp.into_reader(), 1000) {
        (PeerEnd::Done, _) => (sent, Some(Instant::now())),
        _ => (sent, None),
    }
}

/// The scenario `peer-end-to-end`.
pub fn peer_end_to_end(url: &str, runs: usize, clients: usize) {
    let deadline = Instant::now() + DEADLINE;
    let seen = share(runs, clients, deadline, |a, _| peer_run(a, url));
    let done: Vec<(Instant, Instant)> =
        seen.iter().filter_map(|(s, d)| Some((*s, (*d)?))).collect();
    let elapsed_s = span(seen.iter().map(|s| s.0), done.iter().map(|d| d.1));
    let (d50, d99, dmax) = dist(done.iter().map(|(s, d)| ms_since(*s, *d)).collect());
    emit(json!({
        "scenario": "peer-end-to-end",
        "runs": runs,
        "clients": clients,
        "completed": done.len(),
        "errors": runs - done.len(),
        "elapsed_s": elapsed_s,
        "runs_per_s": elapsed_s.filter(|e| *e > 0.0).map(|e| done.len() as f64 / e),
        "submit_to_done_p50_ms": d50,
        "submit_to_done_p99_ms": d99,
        "submit_to_done_max_ms": dmax,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_stream_counts_text_deltas_and_stops_at_the_done_frame() {
        let body = "id: 1\ndata: {\"delta\":\"w0\",\"seq\":1,\"type\":\"text_delta\"}\n\n\
                    event: heartbeat\ndata: {}\n\n\
                    id: 2\ndata: {\"delta\":\"w1\",\"seq\":2,\"type\":\"text_delta\"}\n\n\
                    id: 3\ndata: {\"type\":\"done\",\"result\":{\"status\":\"completed\"}}\n\n\
                    id: 4\ndata: {\"delta\":\"late\",\"seq\":4,\"type\":\"text_delta\"}\n\n";
        let s = read_stream(body.as_bytes(), 100);
        assert_eq!(s.deltas, 2);
        assert!(s.first_delta.is_some());
        assert_eq!(s.done.map(|d| d.1).as_deref(), Some("completed"));
    }

    #[test]
    fn a_run_stream_that_ends_without_done_has_no_done() {
        let body = "id: 1\ndata: {\"type\":\"text_delta\",\"delta\":\"x\"}\n\n";
        let s = read_stream(body.as_bytes(), 100);
        assert_eq!((s.deltas, s.done), (1, None));
        assert_eq!(read_stream("".as_bytes(), 100), Stream::default());
    }

    #[test]
    fn the_objective_is_one_say_line_per_event() {
        assert_eq!(objective(3), "say w0\nsay w1\nsay w2");
        assert_eq!(objective(0), "");
    }

    #[test]
    fn a_peer_stream_ends_well_at_end_or_close_and_badly_at_error_or_nothing() {
        let frames = "event: metadata\ndata: {\"run_id\":\"r\"}\n\nevent: values\ndata: {}\n\n";
        assert_eq!(read_peer_stream(frames.as_bytes(), 100).0, PeerEnd::Done);
        let ended = format!("{frames}event: end\ndata: null\n\nevent: values\n");
        assert_eq!(read_peer_stream(ended.as_bytes(), 100), (PeerEnd::Done, 3));
        let failed = format!("{frames}event: error\ndata: {{}}\n\n");
        assert_eq!(read_peer_stream(failed.as_bytes(), 100).0, PeerEnd::Error);
        assert_eq!(read_peer_stream("".as_bytes(), 100).0, PeerEnd::Broken);
    }
}
