//! Kill anywhere: the runtime is stopped abruptly (SIGKILL of the `wrangler dev` process group,
//! workerd included) while a step is in flight, restarted on the same `--persist-to` state, one
//! reaper tick runs, and then: no session is stuck (a submit into it is admitted, or refused with a
//! 409 naming a run that is truly active, which then resolves), no orphan claim, no run both
//! terminal and claimed, no acknowledged event lost, never two active runs in a session, and the
//! session's object agrees with D1.
//!
//! The steps are the Worker's test-only failpoints (`src/failpoint.rs`): the Worker runs with
//! `SEMA_TEST_FAILPOINTS=header`, a request arms one with `x-sema-failpoint: <name>`, and at that
//! step the Worker logs `failpoint reached: <name>` and waits forever; this harness sees the line
//! in the log and kills. The reaper's tick has no request: its failpoint is armed for the whole
//! Worker for one start. Out-of-band edits (a stale holder, a backdated heartbeat) are made while
//! the runtime is down, straight into its local D1 file.

use crate::harness::{d1_file, d1_reader, migrate, Api, Resp, Wrangler};
use crate::invariants::{is_active, Snapshot};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// The Worker's vars: local mode, failpoints armable by header (default liveness knobs).
fn vars(extra: &str, knobs: &[&str]) -> Vec<String> {
    let mut v = vec![
        "SEMA_AUTH:local".to_owned(),
        format!("SEMA_TEST_FAILPOINTS:header{extra}"),
    ];
    v.extend(knobs.iter().map(|k| (*k).to_owned()));
    v
}

struct Harness {
    state: PathBuf,
    dir: PathBuf,
    starts: usize,
    worker: Option<Wrangler>,
    /// Every event whose append was acknowledged (2xx): (task, seq, type).
    acked: Vec<(String, i64, String)>,
    /// Every step killed in flight, in order.
    killed: Vec<&'static str>,
    /// Sessions found stuck (recorded, so the steps after still run; asserted at the end).
    stuck: std::cell::RefCell<Vec<String>>,
    /// Vars (`NAME:value`) of every start.
    knobs: Vec<String>,
}

impl Harness {
    fn new() -> Self {
        Self::new_with(&[], "")
    }

    /// Started with `knobs` (`NAME:value`), here and at every restart, and failpoints `extra`
    /// armed everywhere for this first start only.
    fn new_with(knobs: &[&str], extra: &str) -> Self {
        let dir = crate::harness::work_dir("kill");
        let state = dir.join("state");
        migrate(&state);
        let mut h = Self {
            state,
            dir,
            starts: 0,
            worker: None,
            acked: Vec::new(),
            killed: Vec::new(),
            stuck: Default::default(),
            knobs: knobs.iter().map(|k| (*k).to_owned()).collect(),
        };
        h.start(extra);
        h
    }

    fn start(&mut self, extra: &str) {
        let knobs = self.knobs.clone();
        let knobs: Vec<&str> = knobs.iter().map(String::as_str).collect();
        self.start_with(extra, &knobs);
    }

    /// Starts with failpoints `extra` armed everywhere and liveness `knobs` (`NAME:value`).
    fn start_with(&mut self, extra: &str, knobs: &[&str]) {
        self.starts += 1;
        let log = self.dir.join(format!("wrangler-{}.log", self.starts));
        self.worker = Some(Wrangler::start(&self.state, log, &vars(extra, knobs)));
    }

    /// Waits until the Worker reports the armed step `name` reached on its own (an alarm), then
    /// kills, restarts and ticks as [`Harness::kill_at`] does.
    fn kill_when_reached(&mut self, name: &'static str) {
        let w = self.worker.as_ref().unwrap();
        let reached = w.wait_for_log(
            &format!("failpoint reached: {name}"),
            Duration::from_secs(60),
        );
        let log = std::fs::read_to_string(&w.log).unwrap_or_default();
        assert!(reached, "failpoint {name} was never reached; log:\n{log}");
        self.kill();
        self.killed.push(name);
        self.restart_and_tick();
    }

    fn api(&self) -> Api {
        self.worker.as_ref().expect("a running worker").api()
    }

    fn runner(&self) -> Api {
        self.api().as_role("runner")
    }

    /// Kills the runtime now (whatever is in flight) and leaves it down.
    fn kill(&mut self) {
        self.worker.take().expect("a running worker").kill();
    }

    /// Sends `request` with failpoint `name` armed, waits until the Worker reports the step
    /// reached, kills the runtime mid-step, restarts it on the same state (`extra` vars for the
    /// next start) and runs one reaper tick.
    fn kill_at(
        &mut self,
        name: &'static str,
        request: impl FnOnce(Api, &'static str) -> Result<Resp, String> + Send + 'static,
    ) {
        let api = self.api();
        let inflight = std::thread::spawn(move || request(api, name));
        let w = self.worker.as_ref().unwrap();
        let reached = w.wait_for_log(
            &format!("failpoint reached: {name}"),
            Duration::from_secs(60),
        );
        let log = std::fs::read_to_string(&w.log).unwrap_or_default();
        assert!(reached, "failpoint {name} was never reached; log:\n{log}");
        self.kill();
        let answer = inflight.join().unwrap();
        assert!(
            answer.is_err(),
            "the request at {name} was answered before the kill: {answer:?}"
        );
        self.killed.push(name);
        self.restart_and_tick();
    }

    fn restart_and_tick(&mut self) {
        self.start("");
        self.api().cron();
    }

    /// Out of band, while the runtime is down: SQL straight into its local D1 file.
    fn offline_sql(&self, sql: &str) {
        assert!(self.worker.is_none(), "offline edits need the runtime down");
        let c = rusqlite::Connection::open(d1_file(&self.state)).expect("open local D1");
        c.execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::read(&mut d1_reader(&self.state), None)
    }

    /// The invariants over the whole database, plus every acknowledged event still in its ledger.
    #[track_caller]
    fn assert_invariants(&self, after: &str) {
        let s = self.snapshot();
        let mut v = s.violations();
        for (task, seq, kind) in &self.acked {
            let found = s
                .events
                .get(task)
                .and_then(|es| es.iter().find(|e| e.seq == *seq));
            if found.is_none_or(|e| e.kind != *kind) {
                v.push(format!(
                    "acknowledged event {task}#{seq} ({kind}) lost: {found:?}"
                ));
            }
        }
        assert!(v.is_empty(), "after a kill at {after}:\n{}", v.join("\n"));
    }

    /// The session is not stuck: a submit is admitted, or refused for a truly active run, which
    /// `resolve` ends before a second submit is admitted. Leaves the session free, and checks that
    /// its object's claim agrees with D1 at each step.
    #[track_caller]
    fn assert_not_stuck(&self, session: &str, after: &str, resolve: impl FnOnce(&str)) {
        let api = self.api();
        let first = submit(&api, session, None, None);
        let blocker = match first.status {
            202 => None,
            409 => {
                let v = first.json();
                assert_eq!(
                    v["errorCode"], "conflict.session_active_run",
                    "{}",
                    first.body
                );
                let t = v["activeTaskId"].as_str().expect("activeTaskId").to_owned();
                let s = self.snapshot();
                let run = s.runs.get(&t);
                if !run.is_some_and(|r| is_active(&r.status)) {
                    self.stuck.borrow_mut().push(format!(
                        "after {after}: session {session} is stuck: its 409 names {t}, which is not active: {run:?}"
                    ));
                    return;
                }
                if v["activeTaskStatus"].as_str() != run.map(|r| r.status.as_str()) {
                    self.stuck.borrow_mut().push(format!(
                        "after {after}: session {session}'s 409 says {} for {t}, D1 has {run:?}",
                        v["activeTaskStatus"]
                    ));
                }
                Some(t)
            }
            other => panic!("after {after}: submit answered {other}: {}", first.body),
        };
        self.assert_object_agrees(session, after);
        let admitted = match blocker {
            None => first.json()["taskId"].as_str().unwrap().to_owned(),
            Some(t) => {
                resolve(&t);
                let again = submit(&api, session, None, None);
                assert_eq!(again.status, 202, "after {after}, resolved: {}", again.body);
                again.json()["taskId"].as_str().unwrap().to_owned()
            }
        };
        self.assert_object_agrees(session, after);
        let c = api.must("POST", &format!("/v1/runs/{admitted}/cancel"), None);
        assert_eq!(c.status, 200, "{}", c.body);
        self.assert_object_agrees(session, after);
    }

    /// The session is held by `task` (a submit's 409 names it) until its runner finishes it with
    /// `epoch`; then it admits again.
    #[track_caller]
    fn assert_held_until_its_runner_finishes(
        &self,
        session: &str,
        task: &str,
        epoch: i64,
        after: &str,
    ) {
        let runner = self.runner();
        self.assert_not_stuck(session, after, |blocker| {
            assert_eq!(blocker, task, "the 409 names another run");
            let f = runner.must(
                "POST",
                &format!("/v1/runs/{task}/finish"),
                Some(&json!({"runnerId": "killer", "leaseEpoch": epoch, "status": "completed"})),
            );
            assert_eq!(f.status, 200, "{}", f.body);
        });
    }

    #[track_caller]
    fn assert_object_agrees(&self, session: &str, after: &str) {
        let object = self.api().object_claim(session);
        let d1 = self.snapshot().claims.get(session).cloned();
        assert_eq!(
            object, d1,
            "after {after}: the object's claim and D1's differ ({session})"
        );
    }

    /// Leases `task` (the only run of its session's own queue); its lease epoch.
    fn lease(&self, queue: &str, task: &str) -> i64 {
        let r = self.runner().must(
            "POST",
            "/v1/runner/lease",
            Some(&json!({"runnerId": "killer", "queue": queue, "waitMs": 0})),
        );
        assert_eq!(r.status, 200, "lease: {}", r.body);
        let l = r.json();
        assert_eq!(l["taskId"], task, "{l}");
        let epoch = l["leaseEpoch"].as_i64().unwrap();
        let b = self.runner().must(
            "POST",
            &format!("/v1/runs/{task}/heartbeat"),
            Some(&json!({"runnerId": "killer", "leaseEpoch": epoch})),
        );
        assert_eq!(b.status, 200, "{}", b.body);
        epoch
    }

    fn append(&mut self, task: &str, epoch: i64, events: Value) -> Vec<i64> {
        let r = self.runner().must(
            "POST",
            &format!("/v1/runs/{task}/events"),
            Some(&json!({"runnerId": "killer", "leaseEpoch": epoch, "events": events})),
        );
        assert_eq!(r.status, 200, "append: {}", r.body);
        let seqs: Vec<i64> = r.json()["seqs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_i64().unwrap())
            .collect();
        for (seq, e) in seqs.iter().zip(events.as_array().unwrap()) {
            self.acked.push((
                task.to_owned(),
                *seq,
                e["type"].as_str().unwrap().to_owned(),
            ));
        }
        seqs
    }

    fn park(&self, task: &str, epoch: i64) {
        let r = self.runner().must(
            "POST",
            &format!("/v1/runs/{task}/park"),
            Some(&json!({"runnerId": "killer", "leaseEpoch": epoch, "gate": {"kind": "human", "card": {"q": "ok?"}}})),
        );
        assert_eq!(r.status, 200, "park: {}", r.body);
    }

    fn run(&self, task: &str) -> Option<crate::invariants::Run> {
        self.snapshot().runs.get(task).cloned()
    }
}

fn submit(api: &Api, session: &str, task: Option<&str>, key: Option<&str>) -> Resp {
    let mut body =
        json!({"sessionId": session, "objective": "survive", "queue": queue_of(session)});
    if let Some(t) = task {
        body["taskId"] = json!(t);
    }
    let headers: Vec<(&str, &str)> = key.map(|k| ("Idempotency-Key", k)).into_iter().collect();
    api.send("POST", "/v1/runs", Some(&body), &headers)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Each session's runs go to a queue of its own, so a poll lease takes exactly that run.
fn queue_of(session: &str) -> String {
    format!("q-{session}")
}

fn armed_submit(
    session: String,
    task: String,
    key: String,
) -> impl FnOnce(Api, &'static str) -> Result<Resp, String> + Send + 'static {
    move |api, name| {
        let body = json!({"sessionId": session, "objective": "survive", "taskId": task, "queue": queue_of(&session)});
        api.send(
            "POST",
            "/v1/runs",
            Some(&body),
            &[("Idempotency-Key", &key), (FAILPOINT, name)],
        )
    }
}

const FAILPOINT: &str = "x-sema-failpoint";

fn armed_post(
    path: String,
    body: Value,
    role: Option<&'static str>,
) -> impl FnOnce(Api, &'static str) -> Result<Resp, String> + Send + 'static {
    move |api, name| {
        let api = match role {
            Some(r) => api.as_role(r),
            None => api,
        };
        api.send("POST", &path, Some(&body), &[(FAILPOINT, name)])
    }
}

#[test]
fn a_runtime_killed_at_any_step_restarts_with_no_session_stuck_no_orphan_claim_and_no_acknowledged_event_lost(
) {
    let mut h = Harness::new();
    let tag = format!("{:x}", std::process::id());

    // ---- admission: before the D1 batch, after it (object not yet saved), after the save ----
    for (step, committed) in [
        ("admit.before_d1", false),
        ("admit.after_d1", true),
        ("admit.after_save", true),
    ] {
        let session = format!("kill-{tag}-{}", step.replace('.', "-"));
        let task = format!("{session}-t");
        let key = format!("{session}-key");
        h.kill_at(
            step,
            armed_submit(session.clone(), task.clone(), key.clone()),
        );
        h.assert_invariants(step);
        let run = h.run(&task);
        assert_eq!(run.is_some(), committed, "{step}: run {run:?}");
        // The client's retry with its key: the original answer (committed) or a fresh admission.
        let retry = submit(&h.api(), &session, Some(&task), Some(&key));
        assert_eq!(retry.status, 202, "{step}: retry {}", retry.body);
        assert_eq!(
            retry.json()["taskId"],
            task.as_str(),
            "{step}: {}",
            retry.body
        );
        h.assert_invariants(step);
        let (t, api) = (task.clone(), h.api());
        h.assert_not_stuck(&session, step, |blocker| {
            assert_eq!(blocker, t, "{step}: the 409 names another run");
            h_cancel(&api, blocker);
        });
        h.assert_invariants(step);
    }

    // ---- cancel: after the D1 batch, before the object forgot the claim ----
    let session = format!("kill-{tag}-cancel");
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    h.kill_at(
        "cancel.after_d1",
        armed_post(format!("/v1/runs/{task}/cancel"), json!({}), None),
    );
    h.assert_invariants("cancel.after_d1");
    assert_eq!(h.run(&task).unwrap().status, "cancelled");
    h.assert_not_stuck(&session, "cancel.after_d1", |b| {
        panic!("cancel.after_d1: the session is held by {b} after its run was cancelled")
    });

    // ---- append: the batch committed, the runner never got its answer ----
    let session = format!("kill-{tag}-append");
    let queue = queue_of(&session);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    h.append(
        &task,
        epoch,
        json!([{"type": "text_delta", "data": {"delta": "a"}, "eventId": "e1"}, {"type": "text_delta", "data": {"delta": "b"}, "eventId": "e2"}]),
    );
    let unacked = json!([{"type": "text_delta", "data": {"delta": "c"}, "eventId": "e3"}, {"type": "text_delta", "data": {"delta": "d"}, "eventId": "e4"}]);
    h.kill_at(
        "append.after_d1",
        armed_post(
            format!("/v1/runs/{task}/events"),
            json!({"runnerId": "killer", "leaseEpoch": epoch, "events": unacked}),
            Some("runner"),
        ),
    );
    h.assert_invariants("append.after_d1");
    assert_eq!(
        h.run(&task).unwrap().last_seq,
        4,
        "the committed batch is whole"
    );
    // The runner's retry of the unanswered batch is refused whole: nothing is written twice.
    let retry = h.runner().must(
        "POST",
        &format!("/v1/runs/{task}/events"),
        Some(&json!({"runnerId": "killer", "leaseEpoch": epoch, "events": unacked})),
    );
    assert_eq!(retry.status, 409, "{}", retry.body);
    assert_eq!(retry.json()["errorCode"], "conflict.duplicate_event_id");
    assert_eq!(h.run(&task).unwrap().last_seq, 4);
    // Still its runner's: the session is truly held until the runner finishes.
    h.assert_held_until_its_runner_finishes(&session, &task, epoch, "append.after_d1");
    h.assert_invariants("append.after_d1");

    // ---- finish: terminal in D1, the object not yet told ----
    let session = format!("kill-{tag}-finish");
    let queue = queue_of(&session);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    h.append(
        &task,
        epoch,
        json!([{"type": "text_delta", "data": {"delta": "x"}}]),
    );
    h.kill_at(
        "finish.after_d1",
        armed_post(
            format!("/v1/runs/{task}/finish"),
            json!({"runnerId": "killer", "leaseEpoch": epoch, "status": "completed", "result": {"text": "x"}}),
            Some("runner"),
        ),
    );
    h.assert_invariants("finish.after_d1");
    let run = h.run(&task).unwrap();
    assert_eq!((run.status.as_str(), run.last_seq), ("completed", 2));
    h.assert_not_stuck(&session, "finish.after_d1", |b| {
        panic!("finish.after_d1: the session is held by {b} after its run completed")
    });

    // ---- park: parked in D1, the object still remembers a running claim ----
    let session = format!("kill-{tag}-park");
    let queue = queue_of(&session);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    h.kill_at(
        "park.after_d1",
        armed_post(
            format!("/v1/runs/{task}/park"),
            json!({"runnerId": "killer", "leaseEpoch": epoch, "gate": {"kind": "human", "card": {"q": "ok?"}}}),
            Some("runner"),
        ),
    );
    h.assert_invariants("park.after_d1");
    assert_eq!(h.run(&task).unwrap().status, "suspended");
    let api = h.api();
    let (t, s) = (task.clone(), session.clone());
    h.assert_not_stuck(&session, "park.after_d1", |blocker| {
        assert_eq!(blocker, t);
        // The gate survived: deciding it resumes the run; cancelling it then frees the session.
        let d = api.must(
            "POST",
            &format!("/v1/approvals/{s}/decide"),
            Some(&json!({"decision": "approve"})),
        );
        assert_eq!(d.status, 200, "{}", d.body);
        assert_eq!(d.json()["status"], "running", "{}", d.body);
        h_cancel(&api, &t);
    });
    h.assert_invariants("park.after_d1");

    // ---- decide (deny): the run ended and its claim went in D1, the object still holds it ----
    let session = format!("kill-{tag}-decide");
    let queue = queue_of(&session);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    h.park(&task, epoch);
    h.kill_at(
        "decide.after_d1",
        armed_post(
            format!("/v1/approvals/{session}/decide"),
            json!({"decision": "deny", "reason": "no"}),
            None,
        ),
    );
    h.assert_invariants("decide.after_d1");
    let run = h.run(&task).unwrap();
    assert_eq!(run.status, "cancelled", "{run:?}");
    h.assert_not_stuck(&session, "decide.after_d1", |b| {
        panic!("decide.after_d1: the session is held by {b} after its gate was denied")
    });

    // ---- takeover: the silent holder failed and the new run admitted in D1, nothing saved ----
    let session = format!("kill-{tag}-takeover");
    let ghost = format!("{session}-ghost");
    let task = format!("{session}-t");
    h.kill();
    // Out of band: a running run held by a runner silent for ages (its object never saw it).
    h.offline_sql(&format!(
        "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES ('{session}', NULL, 1, 1);
         INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, objective_preview, meta, held_by, lease_epoch, lease_acked, heartbeat_at, created_at, updated_at, queue)
           VALUES ('{ghost}', '{session}', NULL, 'default', 'running', 'x', 'x', '{{}}', 'ghost', 3, 1, 1000, 1000, 1000, 'q-{session}');
         INSERT INTO task_active (session_id, task_id, created_at) VALUES ('{session}', '{ghost}', 1000);"
    ));
    h.start("");
    h.kill_at(
        "takeover.after_d1",
        armed_submit(session.clone(), task.clone(), format!("{session}-key")),
    );
    h.assert_invariants("takeover.after_d1");
    let old = h.run(&ghost).unwrap();
    assert_eq!(old.status, "failed", "{old:?}");
    assert!(
        old.error
            .as_deref()
            .is_some_and(|e| e.starts_with("run orphaned by engine restart")),
        "{old:?}"
    );
    let api = h.api();
    let t = task.clone();
    h.assert_not_stuck(&session, "takeover.after_d1", |blocker| {
        assert_eq!(blocker, t, "the 409 names the run the takeover admitted");
        h_cancel(&api, blocker);
    });

    // ---- the session object's alarm: the silent run failed in D1, its claim not yet forgotten ----
    let session = format!("kill-{tag}-alarm");
    let queue = queue_of(&session);
    h.kill();
    h.start_with(",alarm.after_fail", &["RUN_STALE_SEC:2"]);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    // Its runner goes silent: the object's alarm judges it stale RUN_STALE_SEC later and fails it.
    h.kill_when_reached("alarm.after_fail");
    h.assert_invariants("alarm.after_fail");
    let run = h.run(&task).unwrap();
    assert_eq!(
        (run.status.as_str(), run.error_code.as_deref()),
        ("failed", Some("run.stalled"))
    );
    let beat = h.runner().must(
        "POST",
        &format!("/v1/runs/{task}/heartbeat"),
        Some(&json!({"runnerId": "killer", "leaseEpoch": epoch})),
    );
    assert_eq!(
        beat.status, 409,
        "the reaped runner is fenced out: {}",
        beat.body
    );
    h.assert_not_stuck(&session, "alarm.after_fail", |b| {
        panic!("alarm.after_fail: the session is held by {b} after its alarm reaped its run")
    });

    // ---- a reaper pass: runs failed and claims released in D1, no session told yet ----
    let session = format!("kill-{tag}-reaper");
    let queue = queue_of(&session);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    h.kill();
    // Its runner went silent long ago (heartbeat backdated past RUN_STALE_SEC).
    h.offline_sql(&format!(
        "UPDATE task_run SET heartbeat_at = heartbeat_at - 3600000 WHERE task_id = '{task}'"
    ));
    h.start(",reaper.before_notify");
    h.kill_at("reaper.before_notify", |api, _| {
        api.send("GET", "/__scheduled?cron=*+*+*+*+*", None, &[])
    });
    h.assert_invariants("reaper.before_notify");
    let run = h.run(&task).unwrap();
    assert_eq!(
        (run.status.as_str(), run.error_code.as_deref()),
        ("failed", Some("run.stalled"))
    );
    let beat = h.runner().must(
        "POST",
        &format!("/v1/runs/{task}/heartbeat"),
        Some(&json!({"runnerId": "killer", "leaseEpoch": epoch})),
    );
    assert_eq!(
        beat.status, 409,
        "the reaped runner is fenced out: {}",
        beat.body
    );
    h.assert_not_stuck(&session, "reaper.before_notify", |b| {
        panic!("reaper.before_notify: the session is held by {b} after its run was reaped")
    });

    // ---- a parked run expired by the reaper, its object never told and never asked again ----
    // The object's alarm has already seen the gate expired (left for the expiry reaper to settle)
    // when the reaper expires the run in D1 and dies before telling the object. No submission
    // follows: the object must let the claim go on its own (its alarm looks at the row again).
    let session = format!("kill-{tag}-parked");
    let queue = queue_of(&session);
    h.kill();
    h.start_with(",reaper.before_notify", &["RUN_STALE_SEC:2"]);
    let task = submit(&h.api(), &session, None, None).json()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let epoch = h.lease(&queue, &task);
    let r = h.runner().must(
        "POST",
        &format!("/v1/runs/{task}/park"),
        Some(
            &json!({"runnerId": "killer", "leaseEpoch": epoch, "expiresInSec": 1,
                     "gate": {"kind": "human", "card": {"q": "soon?"}}}),
        ),
    );
    assert_eq!(r.status, 200, "park: {}", r.body);
    // Past the gate's expiry and the object's first look at it (its alarm, RUN_STALE_SEC after
    // admission).
    std::thread::sleep(Duration::from_secs(4));
    h.kill_at("reaper.before_notify", |api, _| {
        api.send("GET", "/__scheduled?cron=*+*+*+*+*", None, &[])
    });
    h.assert_invariants("reaper.before_notify (parked)");
    let run = h.run(&task).unwrap();
    assert!(!is_active(&run.status), "the reaper expired it: {run:?}");
    assert_eq!(h.snapshot().claims.get(&session), None);
    let start = std::time::Instant::now();
    while h.api().object_claim(&session).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "reaper.before_notify (parked): the object still names {task} 20 s after D1 let it go"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    h.assert_object_agrees(&session, "reaper.before_notify (parked)");

    // ---- finally: everything still holds after one more tick ----
    h.api().cron();
    h.assert_invariants("the last tick");
    eprintln!(
        "killed in flight at {} steps: {:?}; {} starts of the runtime",
        h.killed.len(),
        h.killed,
        h.starts
    );
    let stuck = h.stuck.borrow();
    assert!(stuck.is_empty(), "stuck sessions:\n{}", stuck.join("\n"));
}

fn h_cancel(api: &Api, task: &str) {
    let c = api.must("POST", &format!("/v1/runs/{task}/cancel"), None);
    assert_eq!(c.status, 200, "cancel {task}: {}", c.body);
}

/// A write stalled inside the session object (an append stopped at `append.after_d1`, holding the
/// object's lock and never answering) must not stall the submits that memory can answer: a
/// conflicting submit, the same one through `POST /v1/tasks`, and the holder's own key replayed
/// are all answered while the append still hangs. Before submits could be answered outside the
/// lock, each of these waited behind the append for ever.
#[test]
fn submits_into_a_held_session_are_answered_while_a_stalled_write_holds_the_session_object() {
    let mut h = Harness::new();
    let session = format!("held-{:x}", std::process::id());
    let queue = queue_of(&session);
    let first = submit(&h.api(), &session, None, Some("held-key"));
    assert_eq!(first.status, 202, "{}", first.body);
    let task = first.json()["taskId"].as_str().unwrap().to_owned();
    let epoch = h.lease(&queue, &task);
    let stalled = {
        let request = armed_post(
            format!("/v1/runs/{task}/events"),
            json!({"runnerId": "killer", "leaseEpoch": epoch, "events": [{"type": "text_delta", "data": {"delta": "z"}}]}),
            Some("runner"),
        );
        let api = h.api();
        std::thread::spawn(move || request(api, "append.after_d1"))
    };
    let w = h.worker.as_ref().unwrap();
    assert!(
        w.wait_for_log(
            "failpoint reached: append.after_d1",
            Duration::from_secs(60)
        ),
        "the append never reached its failpoint"
    );

    let other = submit(&h.api(), &session, None, None);
    assert_eq!(other.status, 409, "{}", other.body);
    assert_eq!(other.json()["errorCode"], "conflict.session_active_run");
    assert_eq!(other.json()["activeTaskId"], task.as_str());
    let waited = h
        .api()
        .send(
            "POST",
            "/v1/tasks",
            Some(&json!({"sessionId": session, "objective": "another", "queue": queue, "stream": false})),
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(waited.status, 409, "{}", waited.body);
    assert_eq!(waited.json()["activeTaskId"], task.as_str());
    let replay = submit(&h.api(), &session, None, Some("held-key"));
    assert_eq!(replay.status, 202, "{}", replay.body);
    assert_eq!(replay.json()["taskId"], task.as_str());
    assert!(
        !stalled.is_finished(),
        "the stalled append answered, so the lock was not held while the submits were answered"
    );

    h.kill();
    assert!(
        stalled.join().unwrap().is_err(),
        "the stalled append was answered before the kill"
    );
}

/// With `SEMA_ADMIT_COMMIT=object`, a submit into a session its object has confirmed commits in
/// the object's storage and is answered before D1 has the run. Here every write of such an
/// admission into D1 stops at `flush.before_d1` (armed for the whole Worker: the Worker's flush
/// after the answer and the object's alarm alike), so the 202 is out while D1 has no row; then
/// the runtime is killed. After the restart the run reaches D1 by itself (the object's alarm):
/// the client reads it by id, the session is held by it, a runner leases it, and cancelling it
/// frees the session.
#[test]
fn an_admission_answered_from_the_session_object_reaches_d1_after_a_kill_before_it_was_written() {
    let mut h = Harness::new_with(&["SEMA_ADMIT_COMMIT:object"], ",flush.before_d1");
    let session = format!("outbox-{:x}", std::process::id());
    let queue = queue_of(&session);
    // The first admission of a new session object commits in D1 and confirms the session.
    let first = submit(&h.api(), &session, None, None);
    assert_eq!(first.status, 202, "{}", first.body);
    let first = first.json()["taskId"].as_str().unwrap().to_owned();
    assert!(h.run(&first).is_some(), "the first admission is in D1");
    h_cancel(&h.api(), &first);

    let answered = submit(&h.api(), &session, None, None);
    assert_eq!(answered.status, 202, "{}", answered.body);
    let task = answered.json()["taskId"].as_str().unwrap().to_owned();
    let w = h.worker.as_ref().unwrap();
    assert!(
        w.wait_for_log(
            "failpoint reached: flush.before_d1",
            Duration::from_secs(60)
        ),
        "no flush of the answered admission started"
    );
    assert!(
        h.run(&task).is_none(),
        "the admission was written to D1 before its answer"
    );
    // The claim is the object's already: a second submit is refused, naming the answered run.
    let second = submit(&h.api(), &session, None, None);
    assert_eq!(second.status, 409, "{}", second.body);
    assert_eq!(second.json()["activeTaskId"], task.as_str());

    h.kill();
    assert!(h.run(&task).is_none(), "D1 got the run before the kill");
    h.start("");
    let read = h.api().must("GET", &format!("/v1/runs/{task}"), None);
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.json()["sessionId"], session.as_str());
    let row = h.run(&task);
    assert!(
        row.as_ref().is_some_and(|r| is_active(&r.status)),
        "D1 has the run, active: {row:?}"
    );
    h.assert_invariants("a kill before the outbox was written");
    h.assert_object_agrees(&session, "a kill before the outbox was written");
    let epoch = h.lease(&queue, &task);
    h.assert_held_until_its_runner_finishes(
        &session,
        &task,
        epoch,
        "a kill before the outbox was written",
    );
    h.assert_invariants("a kill before the outbox was written");
}

/// Read-your-writes while an admission is only in its session object: the Worker's flush after
/// the answer never comes (`admit.before_flush`, armed for the whole Worker), so D1 gets the run
/// only from the object's alarm, a second or so later. Meanwhile the client that got the 202
/// reads the run by id, lists it in its session, pages its events and cancels it, each answered
/// for that run (never a 404), and the session is free again afterwards.
#[test]
fn a_client_reads_lists_pages_and_cancels_its_run_while_the_admission_is_only_in_the_session_object(
) {
    let h = Harness::new_with(&["SEMA_ADMIT_COMMIT:object"], ",admit.before_flush");
    let api = h.api();
    let session = format!("ryw-{:x}", std::process::id());
    let first = submit(&api, &session, None, None);
    assert_eq!(first.status, 202, "{}", first.body);
    h_cancel(&api, first.json()["taskId"].as_str().unwrap());

    let admitted = |h: &Harness| {
        let r = submit(&h.api(), &session, None, None);
        assert_eq!(r.status, 202, "{}", r.body);
        r.json()["taskId"].as_str().unwrap().to_owned()
    };
    let task = admitted(&h);
    let read = api.must("GET", &format!("/v1/runs/{task}"), None);
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.json()["taskId"], task.as_str());
    let page = api.must("GET", &format!("/v1/runs/{task}/events"), None);
    assert_eq!(page.status, 200, "{}", page.body);
    let cancelled = api.must("POST", &format!("/v1/runs/{task}/cancel"), None);
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(
        cancelled.json()["status"],
        "cancelled",
        "{}",
        cancelled.body
    );

    let task = admitted(&h);
    let listed = api.must("GET", &format!("/v1/runs?sessionId={session}"), None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        listed.json()["runs"][0]["taskId"],
        task.as_str(),
        "the session's newest run is the one just answered: {}",
        listed.body
    );
    h_cancel(&api, &task);
    h.assert_invariants("read-your-writes");
    h.assert_object_agrees(&session, "read-your-writes");
    let again = submit(&api, &session, None, None);
    assert_eq!(again.status, 202, "{}", again.body);
}
