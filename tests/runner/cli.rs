//! The `sema` CLI as a user runs it: spawned `sema` processes (`SEMA_CLI_BIN`) against the runner-test
//! Worker, with reference runner processes executing the runs. Each test reads what the process
//! printed and its exit code, and checks it against the server's own record (read over HTTP).
//! Dropped connections are made by a loopback TCP proxy in this file that cuts event streams mid-body.

use crate::helpers::unique;
use crate::sse::{client, ledger, server, wait_until, Runner};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest one `sema` process may take before the test calls it stuck.
const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

/// What a `sema` process left behind.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    #[track_caller]
    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "sema failed: {self:?}");
        self
    }

    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {self:?}"))
    }

    /// Every stdout line as JSON (the `--json` form of a watch).
    #[track_caller]
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("line {l:?} is not JSON ({e}): {self:?}"))
            })
            .collect()
    }
}

/// Runs `sema args...` against the runner-test Worker.
fn sema(args: &[&str]) -> Out {
    sema_with(&server(), &[], args)
}

/// Runs `sema args...` with `SEMA_URL=url` and extra environment; no token or principal is
/// inherited from the test's own environment.
fn sema_with(url: &str, env: &[(&str, &str)], args: &[&str]) -> Out {
    let bin =
        std::env::var("SEMA_CLI_BIN").expect("SEMA_CLI_BIN is not set: run through scripts/test");
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("SEMA_URL", url)
        .env_remove("SEMA_TOKEN")
        .env_remove("SEMA_PRINCIPAL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start sema");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for sema") {
            break s;
        }
        if start.elapsed() > PROCESS_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "sema {args:?} did not end within {PROCESS_DEADLINE:?}; stderr: {}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Out {
        code: status.code().expect("sema ended by a signal"),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The run's text as its ledger holds it: every `text_delta`, in seq order, once.
fn ledger_text(task: &str) -> String {
    ledger(task)
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["data"]["delta"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn status_of(task: &str) -> String {
    client().get(&format!("/v1/runs/{task}")).json()["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn submit_prints_a_task_id_that_get_and_runs_find_and_cancel_ends_it() {
    let session = unique("cli");
    let out = sema(&["submit", "-s", &session, "write a haiku"]).ok();
    let task = out.stdout.trim().to_owned();
    assert_eq!(out.stdout, format!("{task}\n"), "one line, the id: {out:?}");
    // The server knows the run by that id, in that session.
    let face = client().get(&format!("/v1/runs/{task}")).json();
    assert_eq!(face["sessionId"], session.as_str());

    let human = sema(&["get", &task]).ok();
    assert!(
        human.stdout.contains(&format!("taskId: {task}\n")),
        "{human:?}"
    );
    assert!(human.stdout.contains("status: running\n"), "{human:?}");
    let got = sema(&["--json", "get", &task]).ok().json();
    assert_eq!(
        (got["taskId"].as_str(), got["status"].as_str()),
        (Some(task.as_str()), Some("running"))
    );

    let listed = sema(&["runs", "--session", &session]).ok();
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&task) && l.contains("running")),
        "{listed:?}"
    );
    let page = sema(&["runs", "--session", &session, "--limit", "5", "--json"])
        .ok()
        .json();
    let ids: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["taskId"].as_str())
        .collect();
    assert_eq!(ids, [task.as_str()]);

    let cancelled = sema(&["cancel", &task]).ok();
    assert_eq!(cancelled.stdout, format!("run {task} cancelled\n"));
    assert_eq!(status_of(&task), "cancelled");
    let again = sema(&["--json", "cancel", &task]).ok().json();
    assert_eq!(
        again["status"], "cancelled",
        "cancel is answered as the run is: {again}"
    );
}

#[test]
fn submit_watch_with_a_runner_streams_the_said_text_and_exits_0() {
    let _runner = Runner::start();
    let out = sema(&["submit", "--watch", "say hello from the sema cli"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "hello from the sema cli\n");
    let task = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .unwrap_or_else(|| panic!("no task line on stderr: {out:?}"))
        .to_owned();
    assert!(
        out.stderr.contains(&format!("run {task} completed")),
        "{out:?}"
    );
    assert_eq!(status_of(&task), "completed");
}

#[test]
fn watch_of_a_failing_run_exits_1_and_says_why() {
    let _runner = Runner::start();
    let task = sema(&["submit", "say about to fail\nfail the disk is full"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let out = sema(&["watch", &task]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout, "about to fail\n");
    assert!(
        out.stderr.contains(&format!(
            "run {task} failed: the disk is full (runner.script_failed)"
        )),
        "{out:?}"
    );
    let json = sema(&["--json", "watch", &task]);
    assert_eq!(json.code, 1, "{json:?}");
    let last = json.json_lines().pop().unwrap();
    assert_eq!(last["type"], "done");
    assert_eq!(last["result"]["status"], "failed");
    // --after: the watch starts past the events already seen.
    let later = sema(&["--json", "watch", &task, "--after", "1"]);
    assert_eq!(later.code, 1, "{later:?}");
    let seqs: Vec<i64> = later
        .json_lines()
        .iter()
        .filter_map(|e| e["seq"].as_i64())
        .collect();
    let ledger_seqs: Vec<i64> = ledger(&task)
        .iter()
        .filter(|e| e["type"] != "done")
        .filter_map(|e| e["seq"].as_i64())
        .filter(|s| *s > 1)
        .collect();
    assert_eq!(seqs, ledger_seqs);
    // Past the end of a finished run (the server replays `done`, or answers 204 and the run's state
    // is read): the watch still reports how it ended, in both forms.
    let past = sema(&["watch", &task, "--after", "1000"]);
    assert_eq!((past.code, past.stdout.as_str()), (1, ""), "{past:?}");
    assert!(past.stderr.contains("failed: the disk is full"), "{past:?}");
    let past = sema(&["--json", "watch", &task, "--after", "1000"]);
    assert_eq!(past.code, 1, "{past:?}");
    assert_eq!(
        past.json_lines(),
        [
            serde_json::json!({"type": "done", "result": {"status": "failed",
            "error": "the disk is full", "errorCode": "runner.script_failed"}})
        ]
    );
}

/// A loopback TCP proxy in front of the Worker that cuts event-stream responses: the n-th stream
/// response is cut (both sockets shut) after `cuts[n]` bytes of its body, mid-frame as it falls;
/// later streams and every other response pass whole.
struct CuttingProxy {
    url: String,
    cut: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
}

impl CuttingProxy {
    fn start(cuts: &[usize]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = server()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let plan = Arc::new(Mutex::new(
            cuts.iter().copied().collect::<VecDeque<usize>>(),
        ));
        let cut = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let (cut2, conns2) = (cut.clone(), connections.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                conns2.fetch_add(1, Ordering::SeqCst);
                let (upstream, plan, cut) = (upstream.clone(), plan.clone(), cut2.clone());
                std::thread::spawn(move || {
                    let _ = Self::relay(client, &upstream, &plan, &cut);
                });
            }
        });
        Self {
            url,
            cut,
            connections,
        }
    }

    fn relay(
        client: TcpStream,
        upstream: &str,
        plan: &Mutex<VecDeque<usize>>,
        cut: &AtomicUsize,
    ) -> std::io::Result<()> {
        let server = TcpStream::connect(upstream)?;
        let (mut c_in, mut s_out) = (client.try_clone()?, server.try_clone()?);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut c_in, &mut s_out);
            let _ = s_out.shutdown(Shutdown::Write);
        });
        let (mut s_in, mut c_out) = (server, client);
        let mut head = Vec::new();
        let mut budget: Option<usize> = None;
        let mut seen_head = false;
        let mut buf = [0u8; 4096];
        loop {
            let n = s_in.read(&mut buf)?;
            if n == 0 {
                let _ = c_out.shutdown(Shutdown::Write);
                return Ok(());
            }
            let mut chunk = &buf[..n];
            if !seen_head {
                head.extend_from_slice(chunk);
                let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                    c_out.write_all(chunk)?;
                    continue;
                };
                seen_head = true;
                let head_text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                if head_text.contains("text/event-stream") {
                    budget = plan.lock().unwrap().pop_front();
                }
                // Forward the rest of the head now; count only body bytes against the budget.
                let body_in_chunk = head.len() - (end + 4);
                let (h, b) = chunk.split_at(chunk.len() - body_in_chunk);
                c_out.write_all(h)?;
                chunk = b;
            }
            if let Some(left) = budget.as_mut() {
                if chunk.len() >= *left {
                    c_out.write_all(&chunk[..*left])?;
                    c_out.flush()?;
                    cut.fetch_add(1, Ordering::SeqCst);
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                    return Ok(());
                }
                *left -= chunk.len();
            }
            c_out.write_all(chunk)?;
        }
    }
}

#[test]
fn watch_survives_dropped_connections_without_losing_or_repeating_text() {
    let _runner = Runner::start();
    let words = |tag: &str| {
        (1..=25)
            .map(|i| format!("{tag}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let objective = format!(
        "say {}\nsleep 400\nsay {}\nsleep 400\nsay {}",
        words("a"),
        words("b"),
        words("c")
    );
    let task = sema(&["submit", &objective]).ok().stdout.trim().to_owned();

    // Live: the watch starts while the run is still saying; three streams are cut mid-body.
    let proxy = CuttingProxy::start(&[300, 650, 1000]);
    let out = sema_with(&proxy.url, &[], &["watch", &task]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        proxy.cut.load(Ordering::SeqCst),
        3,
        "every planned cut happened: {out:?}"
    );
    assert_eq!(
        out.stderr.matches("reconnecting").count(),
        3,
        "one reconnect per cut: {}",
        out.stderr
    );
    assert!(proxy.connections.load(Ordering::SeqCst) >= 4);
    let text = ledger_text(&task);
    assert!(
        text.contains("a25") && text.contains("c25"),
        "the run said it all: {text}"
    );
    assert_eq!(
        out.stdout,
        format!("{text}\n"),
        "every delta exactly once, in order"
    );

    // Replay of the finished run through fresh cuts, in the script form: each seq exactly once.
    let proxy = CuttingProxy::start(&[200, 500, 900, 1400]);
    let out = sema_with(&proxy.url, &[], &["--json", "watch", &task]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(proxy.cut.load(Ordering::SeqCst), 4, "{out:?}");
    let lines = out.json_lines();
    let (done, events) = lines.split_last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["result"]["status"], "completed");
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    let ledger_seqs: Vec<i64> = ledger(&task)
        .iter()
        .filter(|e| e["type"] != "done")
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, ledger_seqs);
}

#[test]
fn a_stream_that_keeps_dropping_gives_up_after_max_reconnects_with_exit_4() {
    // No runner: the run stays running; every stream is cut before its first byte of body.
    let task = sema(&["submit", "write a haiku"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let proxy = CuttingProxy::start(&[0, 0, 0, 0]);
    let out = sema_with(&proxy.url, &[], &["watch", &task, "--max-reconnects", "2"]);
    assert_eq!(out.code, 4, "{out:?}");
    assert_eq!(
        proxy.cut.load(Ordering::SeqCst),
        3,
        "the first try and two reconnects: {out:?}"
    );
    assert!(out.stderr.contains("gave up after 2 reconnects"), "{out:?}");
    sema(&["cancel", &task]).ok();
}

#[test]
fn steer_queues_a_message_the_runner_injects_once() {
    let _runner = Runner::start();
    let task = sema(&["submit", "sleep 1500\nsay steered to the end"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let out = sema(&["steer", &task, "shorter please"]).ok();
    assert!(out.stdout.starts_with("steer message 1 queued"), "{out:?}");
    let watch = sema(&["--json", "watch", &task]).ok();
    let steers: Vec<Value> = watch
        .json_lines()
        .into_iter()
        .filter(|e| e["type"] == "steering_injected")
        .collect();
    assert_eq!(steers.len(), 1, "{watch:?}");
    assert_eq!(steers[0]["message"], "shorter please");
    // Steering a run that ended is a conflict: exit 5 with the server's code.
    let late = sema(&["steer", &task, "too late"]);
    assert_eq!(late.code, 5, "{late:?}");
    assert!(
        late.stderr.contains("(conflict.run_not_running)"),
        "{late:?}"
    );
}

#[test]
fn approve_of_a_parked_gate_resumes_the_run_and_it_completes() {
    let _runner = Runner::start();
    let session = unique("cli-gate");
    let task = sema(&[
        "submit",
        "-s",
        &session,
        "say before\nask tool_approval deploy to prod?\nsay after",
    ])
    .ok()
    .stdout
    .trim()
    .to_owned();
    wait_until(&task, "the park", |r| r["status"] == "suspended");
    let cards = sema(&["approvals", "--session", &session]).ok();
    assert!(cards.stdout.contains("tool_approval"), "{cards:?}");
    assert!(cards.stdout.contains("deploy to prod?"), "{cards:?}");
    let listed = sema(&["--json", "approvals", "--session", &session])
        .ok()
        .json();
    assert_eq!(
        listed["approvals"][0]["decidePath"],
        format!("/v1/approvals/{session}/decide")
    );

    let out = sema(&["approve", &session, "--reason", "ship it"]).ok();
    assert!(
        out.stdout.starts_with(&format!("approve: run {task} is")),
        "{out:?}"
    );
    let watch = sema(&["watch", &task]).ok();
    assert_eq!(watch.stdout, format!("{}\n", ledger_text(&task)));
    assert!(
        watch.stdout.contains("decision: approve (ship it)"),
        "{watch:?}"
    );
    assert!(watch.stdout.ends_with("after\n"), "{watch:?}");
    assert!(watch.stderr.contains("[suspended]"), "{watch:?}");
    assert_eq!(status_of(&task), "completed");
    // Nothing left to decide: exit 3.
    let none = sema(&["deny", &session]);
    assert_eq!(none.code, 3, "{none:?}");
    assert!(none.stderr.contains("has no pending gate"), "{none:?}");
}

#[test]
fn decide_follows_each_gates_path_resume_and_wake() {
    let _runner = Runner::start();
    // A resource limit: `deny` means stop there, `decide continue` goes on.
    let session = unique("cli-limit");
    let task = sema(&[
        "submit",
        "-s",
        &session,
        "ask resource_limit budget spent\nsay kept going",
    ])
    .ok()
    .stdout
    .trim()
    .to_owned();
    wait_until(&task, "the park", |r| r["status"] == "suspended");
    let out = sema(&["--json", "decide", &session, "continue"])
        .ok()
        .json();
    assert_eq!(out["taskId"], task.as_str());
    let watch = sema(&["watch", &task]).ok();
    assert!(watch.stdout.contains("decision: continue"), "{watch:?}");
    assert!(watch.stdout.contains("kept going"), "{watch:?}");

    // A plan review: `deny` sends `revise`, its --reason as `feedback`.
    let session = unique("cli-plan");
    let task = sema(&[
        "submit",
        "-s",
        &session,
        "ask plan_review step one then two\nsay revised plan",
    ])
    .ok()
    .stdout
    .trim()
    .to_owned();
    wait_until(&task, "the park", |r| r["status"] == "needs_review");
    let out = sema(&["deny", &session, "--reason", "fewer steps"]).ok();
    assert!(
        out.stdout.starts_with(&format!("revise: run {task} is")),
        "{out:?}"
    );
    let watch = sema(&["watch", &task]).ok();
    assert!(
        watch.stdout.contains("decision: revise (fewer steps)"),
        "{watch:?}"
    );
    assert!(watch.stderr.contains("[needs_review]"), "{watch:?}");

    // A finished task: approve cannot wake it (exit 5, saying how); decide wake starts a new run.
    let session = unique("cli-wake");
    let task = sema(&[
        "submit",
        "-s",
        &session,
        "say first part\nask task_done all done",
    ])
    .ok()
    .stdout
    .trim()
    .to_owned();
    wait_until(&task, "the park", |r| r["status"] == "suspended");
    let refused = sema(&["approve", &session]);
    assert_eq!(refused.code, 5, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains(&format!("sema decide {session} wake --objective")),
        "{refused:?}"
    );
    let bad = sema(&["decide", &session, "wake"]);
    assert_eq!(
        bad.code, 2,
        "a wake without an objective is a usage error: {bad:?}"
    );
    let woken = sema(&[
        "decide",
        &session,
        "wake",
        "--objective",
        "say the second part",
    ])
    .ok();
    let new_task = woken
        .stdout
        .strip_prefix("woken: new run ")
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("{woken:?}"))
        .to_owned();
    assert_ne!(new_task, task);
    let watch = sema(&["watch", &new_task]).ok();
    assert_eq!(watch.stdout, "the second part\n");
    assert_eq!(status_of(&task), "completed");
}

#[test]
fn a_conflict_exits_5_with_the_servers_guidance_and_the_commands_that_resolve_it() {
    let session = unique("cli-busy");
    let task = sema(&["submit", "-s", &session, "write a haiku"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let out = sema(&["submit", "-s", &session, "another"]);
    assert_eq!(out.code, 5, "{out:?}");
    assert_eq!(out.stdout, "");
    let first = out.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("error: session already has an active run"),
        "{out:?}"
    );
    assert!(
        first.contains(&format!("POST /v1/runs/{task}/steer")),
        "the placeholder is filled: {out:?}"
    );
    assert!(first.ends_with("(conflict.session_active_run)"), "{out:?}");
    assert!(
        out.stderr.contains(&format!("sema cancel {task}")),
        "{out:?}"
    );
    // --json: the server's body on stdout, for scripts.
    let json = sema(&["--json", "submit", "-s", &session, "another"]);
    assert_eq!(json.code, 5, "{json:?}");
    let body = json.json();
    assert_eq!(body["errorCode"], "conflict.session_active_run");
    assert_eq!(body["activeTaskId"], task.as_str());
    sema(&["cancel", &task]).ok();
}

#[test]
fn bad_usage_exits_2_and_help_documents_the_exit_codes() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["get"],
        &["steer", "only-a-task-id"],
        &["runs", "--limit", "many"],
        &["submit", "x", "--meta", "[1]"],
        &["leader", "submit", "no subtasks"],
    ] {
        let out = sema(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(
            !out.stderr.is_empty(),
            "{args:?}: a usage error says what is wrong"
        );
    }
    let help = sema(&["--help"]).ok();
    for needle in [
        "Exit codes:",
        "  1  the watched run ended",
        "  5  conflict (HTTP 409)",
        "SEMA_URL",
        "SEMA_TOKEN",
    ] {
        assert!(help.stdout.contains(needle), "{needle}: {help:?}");
    }
}

#[test]
fn a_refusal_exits_3_with_the_error_code_and_an_unreachable_server_exits_4() {
    let missing = sema(&["get", "no-such-run"]);
    assert_eq!(missing.code, 3, "{missing:?}");
    assert!(missing.stderr.contains("(not_found)"), "{missing:?}");
    let json = sema(&["--json", "get", "no-such-run"]);
    assert_eq!(
        (json.code, json.json()["errorCode"].as_str()),
        (3, Some("not_found"))
    );
    let bad = sema(&["get", "not/a/safe id"]);
    assert_eq!(bad.code, 3, "{bad:?}");
    assert!(bad.stderr.contains("(invalid_request)"), "{bad:?}");

    // Local mode: the principal comes from SEMA_PRINCIPAL; another principal's run is not there.
    let alice = [("SEMA_PRINCIPAL", "alice")];
    let task = sema_with(&server(), &alice, &["submit", "write a haiku"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    sema_with(&server(), &alice, &["get", &task]).ok();
    let other = sema_with(&server(), &[("SEMA_PRINCIPAL", "bob")], &["get", &task]);
    assert_eq!(other.code, 3, "{other:?}");
    sema_with(&server(), &alice, &["cancel", &task]).ok();

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = sema_with(&format!("http://127.0.0.1:{port}"), &[], &["get", "x"]);
    assert_eq!(down.code, 4, "{down:?}");
    assert!(
        down.stderr.contains("could not reach the server"),
        "{down:?}"
    );
}

#[test]
fn leader_submit_prints_an_id_that_leader_get_shows_with_its_children() {
    let _runner = Runner::start();
    let out = sema(&[
        "leader",
        "submit",
        "two parts",
        "--subtask",
        "say part one",
        "--subtask",
        "say part two",
    ])
    .ok();
    let id = out.stdout.trim().to_owned();
    assert_eq!(out.stdout, format!("{id}\n"));
    let start = Instant::now();
    let leader = loop {
        let v = sema(&["--json", "leader", "get", &id]).ok().json();
        if v["status"] != "running" {
            break v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the leader did not settle: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(leader["id"], id.as_str());
    assert_eq!(leader["status"], "completed", "{leader}");
    let human = sema(&["leader", "get", &id]).ok();
    assert!(human.stdout.contains(&format!("id: {id}\n")), "{human:?}");
    assert!(human.stdout.contains("status: completed\n"), "{human:?}");
    for w in ["worker-0 ended", "worker-1 ended"] {
        assert!(human.stdout.contains(w), "{w}: {human:?}");
    }
    let submitted = sema(&["--json", "leader", "submit", "one", "--subtask", "say x"])
        .ok()
        .json();
    assert_eq!(submitted["created"], true, "{submitted}");
    let id = submitted["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    while sema(&["--json", "leader", "get", &id]).ok().json()["status"] == "running" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the second leader did not settle"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn sessions_lists_the_session_with_its_active_run_and_session_delete_is_refused_until_it_ends() {
    let session = unique("cli-sessions");
    let task = sema(&["submit", "-s", &session, "write a haiku"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    // Newest first: the session just submitted into is on the first page, with its run.
    let listed = sema(&["sessions", "--limit", "20"]).ok();
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&session) && l.contains(&task) && l.contains("running")),
        "{listed:?}"
    );
    let one = sema(&["session", &session]).ok();
    assert!(
        one.stdout
            .contains(&format!("active run: {task} (running)")),
        "{one:?}"
    );
    let face = sema(&["--json", "session", &session]).ok().json();
    assert_eq!(face["activeRun"]["taskId"], task.as_str());

    // While the run is active the delete is a conflict (exit 5) and deletes nothing.
    let refused = sema(&["session", &session, "--delete"]);
    assert_eq!(refused.code, 5, "{refused:?}");
    assert!(
        refused.stderr.contains("conflict.session_active_run"),
        "{refused:?}"
    );
    assert_eq!(status_of(&task), "running");

    sema(&["cancel", &task]).ok();
    let deleted = sema(&["session", &session, "--delete"]).ok();
    assert_eq!(
        deleted.stdout,
        format!("session {session} deleted (1 run)\n"),
        "{deleted:?}"
    );
    // Gone: the session and its run are 404 (exit 3).
    assert_eq!(sema(&["session", &session]).code, 3);
    assert_eq!(sema(&["get", &task]).code, 3);
}
