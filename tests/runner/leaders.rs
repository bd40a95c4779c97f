//! Leader runs, black-box, on the runner-test Worker: a leader run (`POST /v1/leader/runs`) fans its
//! subtasks out to child runs (each in its own session `leader-<id>-<index>`, owned by the leader's
//! owner, executed by ordinary runners: reference runner processes, or the runner protocol spoken by
//! hand), never more than `maxConcurrency` of them at once, and settles from its children's ends.
//! Each test speaks as a principal of its own, so its listings hold only what it made, and leaves
//! every run it made terminal. The cron is triggered through wrangler's scheduled test route.

use crate::helpers::{unique, Client, Resp};
use crate::sse::{runner_client, server, Runner};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The texts the spec fixes, written out here independently of the server's code.
const CANCELLED_BEFORE_START: &str = "cancelled before start";
const STOPPED_AT_DEADLINE: &str = "stopped at the leader run's deadline";
const DEADLINE_PASSED: &str = "leader run deadline passed";
const LEADER_CANCELLED: &str = "leader run cancelled";

/// Longest a test waits for a leader or a run to reach a state.
const PATIENCE: Duration = Duration::from_secs(40);

/// A client speaking as a principal no other test uses.
fn owner() -> Client {
    named_owner().1
}

/// [`owner`], with the principal's name.
fn named_owner() -> (String, Client) {
    let name = unique("lead-owner");
    let c = Client::as_principal(&name).at(&server());
    (name, c)
}

/// An operator: reads every run (the children are their leader's owner's, not anonymous).
fn ops() -> Client {
    Client::as_principal("ops")
        .with_role("operator")
        .at(&server())
}

/// A run as an operator reads it.
fn run(task: &str) -> Value {
    let r = ops().get(&format!("/v1/runs/{task}"));
    assert_eq!(r.status, 200, "GET run {task}: {}", r.body);
    r.json()
}

/// Polls the run until `pred` holds (at most [`PATIENCE`]).
#[track_caller]
fn wait_until(task: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let r = run(task);
        if pred(&r) {
            return r;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The run's ledger, as an operator reads it.
fn ledger(task: &str) -> Vec<Value> {
    let r = ops().get(&format!("/v1/runs/{task}/events?limit=1000"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["events"].as_array().cloned().unwrap_or_default()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A leader body: `subtasks` as objectives, at most `max` children at once.
fn body(objective: &str, subtasks: &[&str], max: usize) -> Value {
    json!({
        "objective": objective,
        "subtasks": subtasks.iter().map(|s| json!({"objective": s})).collect::<Vec<_>>(),
        "maxConcurrency": max,
    })
}

fn post(c: &Client, body: &Value, key: Option<&str>) -> Resp {
    match key {
        Some(k) => c.post_json_with("/v1/leader/runs", body, &[("Idempotency-Key", k)]),
        None => c.post_json("/v1/leader/runs", body),
    }
}

/// Admits a new leader run (asserting the 201 and `created: true`); its body.
#[track_caller]
fn admit(c: &Client, body: &Value) -> Value {
    let r = post(c, body, None);
    assert_eq!(
        r.status, 201,
        "setup: expected a new leader run: {}",
        r.body
    );
    let v = r.json();
    assert_eq!(v["created"], true, "{v}");
    v
}

fn id_of(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_owned()
}

/// The leader run as `c` reads it (asserting the 200).
#[track_caller]
fn leader(c: &Client, id: &str) -> Value {
    let r = c.get(&format!("/v1/leader/runs/{id}"));
    assert_eq!(r.status, 200, "GET leader {id}: {}", r.body);
    r.json()
}

fn cancel_leader(c: &Client, id: &str) -> Resp {
    c.send("POST", &format!("/v1/leader/runs/{id}/cancel"), None, &[])
}

/// Polls the leader until `pred` holds (at most [`PATIENCE`]).
#[track_caller]
fn wait_leader(c: &Client, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let v = leader(c, id);
        if pred(&v) {
            return v;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls the leader until it has settled (left `running`).
#[track_caller]
fn settled(c: &Client, id: &str) -> Value {
    wait_leader(c, id, "the leader to settle", |v| v["status"] != "running")
}

fn children(v: &Value) -> &Vec<Value> {
    v["children"]
        .as_array()
        .unwrap_or_else(|| panic!("no children in {v}"))
}

/// The children that hold a concurrency slot (running or parked).
fn active(v: &Value) -> usize {
    children(v)
        .iter()
        .filter(|c| c["state"] == "running" || c["state"] == "parked")
        .count()
}

fn child_task(v: &Value, index: usize) -> String {
    v["children"][index]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("child {index} has no taskId: {v}"))
        .to_owned()
}

/// Triggers one cron tick on the runner-test Worker.
fn cron() {
    let r = Client::anonymous()
        .at(&server())
        .get("/__scheduled?cron=*+*+*+*+*");
    assert_eq!(r.status, 200, "scheduled route: {}", r.body);
}

/// Every run `c` can list, newest first (walking every page).
fn all_runs(c: &Client, query: &str) -> Vec<Value> {
    let mut out = vec![];
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let path = match &cursor {
            Some(cur) => format!("/v1/runs?limit=200&{query}&cursor={cur}"),
            None => format!("/v1/runs?limit=200&{query}"),
        };
        let r = c.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let page = r.json();
        out.extend(page["runs"].as_array().cloned().unwrap_or_default());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return out,
        }
    }
    panic!("run listing does not terminate");
}

/// The runs of one session.
fn runs_in(c: &Client, session: &str) -> Vec<Value> {
    all_runs(c, &format!("sessionId={session}"))
}

/// Every child session of leader `v` holds exactly the one run its child names (or none, for a
/// child that never started), and the owner's listing holds exactly the children's runs.
#[track_caller]
fn assert_one_run_per_child(c: &Client, v: &Value) {
    let mut expected = BTreeSet::new();
    for (i, child) in children(v).iter().enumerate() {
        let session = child["sessionId"].as_str().unwrap();
        assert_eq!(session, format!("leader-{}-{i}", id_of(v)), "{child}");
        assert_eq!(child["workerId"], format!("worker-{i}"), "{child}");
        let runs = runs_in(c, session);
        match child["taskId"].as_str() {
            Some(task) => {
                assert_eq!(runs.len(), 1, "child {i}'s session: {runs:?}");
                assert_eq!(runs[0]["taskId"], task, "child {i}");
                expected.insert(task.to_owned());
            }
            None => assert!(runs.is_empty(), "child {i} never started: {runs:?}"),
        }
    }
    let listed: Vec<String> = all_runs(c, "")
        .iter()
        .map(|r| r["taskId"].as_str().unwrap().to_owned())
        .collect();
    let distinct: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        distinct.len(),
        listed.len(),
        "a run listed twice: {listed:?}"
    );
    assert_eq!(distinct, expected, "the owner's runs are the children's");
}

/// The worker report of child `index` with `status` (and `error`), as the spec writes it.
fn report(v: &Value, index: usize, status: &str, error: Option<&str>) -> Value {
    let child = &v["children"][index];
    let mut r = json!({
        "workerId": format!("worker-{index}"),
        "sessionId": child["sessionId"],
        "status": status,
    });
    if let Some(t) = child["taskId"].as_str() {
        r["taskId"] = json!(t);
    }
    if let Some(e) = error {
        r["error"] = json!(e);
    }
    r
}

fn held(task: &str) -> bool {
    run(task)["heldBy"].as_str().is_some_and(|h| h != "default")
}

/// Leases (by hand) every run that is queued now, waiting up to `within` until there are `want`;
/// a lease of a run outside `prefix` sessions is a leftover and is finished on the way.
fn lease_all(prefix: &str, want: usize, within: Duration) -> Vec<Value> {
    let mut got: Vec<Value> = vec![];
    let start = Instant::now();
    loop {
        let runner_id = unique("hand");
        let r = runner_client().post_json("/v1/runner/lease", &json!({"runnerId": runner_id}));
        match r.status {
            200 => {
                let mut l = r.json();
                l["runnerId"] = json!(runner_id);
                if l["sessionId"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(prefix))
                {
                    got.push(l);
                } else {
                    finish(&l, json!({"status": "completed"}));
                }
            }
            204 if got.len() >= want || start.elapsed() > within => return got,
            204 => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("lease: {other} {}", r.body),
        }
    }
}

/// Finishes a hand-held lease (as [`lease_all`] returns it, with its `runnerId`) with `outcome`
/// (`{status, error?}`).
fn finish(lease: &Value, outcome: Value) -> Resp {
    let mut b = json!({"runnerId": lease["runnerId"], "leaseEpoch": lease["leaseEpoch"]});
    b.as_object_mut()
        .unwrap()
        .extend(outcome.as_object().unwrap().clone());
    let task = lease["taskId"].as_str().unwrap();
    runner_client().post_json(&format!("/v1/runs/{task}/finish"), &b)
}

// ---- admission: one leader run per key, one fan-out ----------------------------------------------

#[test]
fn twenty_concurrent_posts_with_one_key_admit_one_leader_run_that_fans_out_once() {
    let _runners = [Runner::start(), Runner::start()];
    let c = owner();
    let key = unique("leader-key");
    let n = 4;
    let subtasks: Vec<String> = (0..n).map(|i| format!("say child {i}")).collect();
    let refs: Vec<&str> = subtasks.iter().map(String::as_str).collect();
    let b = body("fan out once", &refs, 2);
    let barrier = Arc::new(Barrier::new(20));
    let answers: Vec<Resp> = (0..20)
        .map(|_| {
            let (c, b, key, barrier) = (c.clone(), b.clone(), key.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                post(&c, &b, Some(&key))
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let created: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    let replayed: Vec<&Resp> = answers.iter().filter(|r| r.status == 200).collect();
    assert_eq!(
        (created.len(), replayed.len()),
        (1, 19),
        "statuses: {:?}",
        answers
            .iter()
            .map(|r| (r.status, &r.body))
            .collect::<Vec<_>>()
    );
    let id = id_of(&created[0].json());
    assert_eq!(created[0].json()["created"], true);
    for r in &replayed {
        let v = r.json();
        assert_eq!(
            (id_of(&v), &v["created"]),
            (id.clone(), &json!(false)),
            "{v}"
        );
    }
    let v = settled(&c, &id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(children(&v).len(), n);
    assert_one_run_per_child(&c, &v);
    // A retry after the leader settled still names it, settled as it is.
    let again = post(&c, &b, Some(&key));
    assert_eq!(again.status, 200, "{}", again.body);
    let w = again.json();
    assert_eq!(
        (id_of(&w), &w["created"], &w["status"]),
        (id, &json!(false), &json!("completed"))
    );
    assert_eq!(w["result"], v["result"]);
}

#[test]
fn a_key_replays_its_leader_run_whatever_its_status_and_refuses_another_body_with_422() {
    let c = owner();
    let key = unique("leader-key");
    let b = body("keyed", &["manual"], 1);
    let first = post(&c, &b, Some(&key));
    assert_eq!(first.status, 201, "{}", first.body);
    let id = id_of(&first.json());
    // The same request formatted differently (keys reordered, whitespace) is the same request.
    let raw = br#"{ "maxConcurrency" : 1,
        "subtasks" : [ { "objective" : "manual" } ],   "objective":"keyed" }"#;
    let r = c.send(
        "POST",
        "/v1/leader/runs",
        Some(raw),
        &[
            ("Content-Type", "application/json"),
            ("Idempotency-Key", &key),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (id_of(&r.json()), &r.json()["created"]),
        (id.clone(), &json!(false))
    );
    // Another body under the key: refused, whatever differs.
    for other in [
        body("keyed, but other", &["manual"], 1),
        body("keyed", &["manual", "manual"], 1),
        body("keyed", &["manual"], 2),
        json!({"objective": "keyed", "subtasks": [{"objective": "manual", "meta": {"x": 1}}], "maxConcurrency": 1}),
    ] {
        post(&c, &other, Some(&key)).assert_refusal(422, "idempotency.key_reused");
    }
    // The key is the owner's: another principal's same key and body is a new leader run.
    let stranger = owner();
    let theirs = post(&stranger, &b, Some(&key));
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    let theirs = id_of(&theirs.json());
    assert_ne!(theirs, id);
    // Settled (cancelled), the key still names the same run, as it is now.
    assert_eq!(cancel_leader(&c, &id).json()["cancelled"], true);
    let late = post(&c, &b, Some(&key));
    assert_eq!(late.status, 200, "{}", late.body);
    let v = late.json();
    assert_eq!(
        (id_of(&v), &v["created"], &v["status"], &v["error"]),
        (
            id.clone(),
            &json!(false),
            &json!("failed"),
            &json!(LEADER_CANCELLED)
        )
    );
    post(&c, &body("keyed", &["manual"], 3), Some(&key))
        .assert_refusal(422, "idempotency.key_reused");
    // Without a key every POST is a new leader run.
    let a = id_of(&admit(&c, &b));
    let bb = id_of(&admit(&c, &b));
    assert!(a != bb && a != id && bb != id);
    for (who, l) in [(&c, &a), (&c, &bb), (&stranger, &theirs)] {
        assert_eq!(cancel_leader(who, l).json()["status"], "failed");
    }
    // Exactly one fan-out per leader run: each of the owner's leaders started its one child once.
    for l in [&id, &a, &bb] {
        let v = leader(&c, l);
        assert_eq!(
            runs_in(&c, v["children"][0]["sessionId"].as_str().unwrap()).len(),
            1,
            "{v}"
        );
        assert_eq!(run(&child_task(&v, 0))["status"], "cancelled");
    }
    assert_eq!(all_runs(&c, "").len(), 3);
}

// ---- the concurrency bound -----------------------------------------------------------------------

#[test]
fn the_fan_out_never_exceeds_max_concurrency() {
    let _runners: Vec<Runner> = (0..4).map(|_| Runner::start()).collect();
    let c = owner();
    let subtasks: Vec<String> = (0..10)
        .map(|i| format!("say child {i}\nsleep 300\nsay done"))
        .collect();
    let refs: Vec<&str> = subtasks.iter().map(String::as_str).collect();
    let first = admit(&c, &body("bounded", &refs, 3));
    assert_eq!(first["maxConcurrency"], 3);
    assert!(active(&first) <= 3, "{first}");
    let id = id_of(&first);
    let mut most = active(&first);
    let mut samples = 0;
    let start = Instant::now();
    let v = loop {
        let v = leader(&c, &id);
        let now = active(&v);
        assert!(now <= 3, "{now} children active at once: {v}");
        // The children's runs say the same: never more than 3 of the owner's runs unfinished.
        let unfinished = all_runs(&c, "")
            .iter()
            .filter(|r| {
                ["running", "suspended", "needs_review"].contains(&r["status"].as_str().unwrap())
            })
            .count();
        assert!(
            unfinished <= 3,
            "{unfinished} child runs unfinished at once"
        );
        most = most.max(now);
        samples += 1;
        if v["status"] != "running" {
            break v;
        }
        assert!(start.elapsed() < PATIENCE, "never settled: {v}");
        std::thread::sleep(Duration::from_millis(30));
    };
    assert_eq!(most, 3, "the bound was never reached ({samples} samples)");
    assert_eq!(v["status"], "completed", "{v}");
    assert!(children(&v)
        .iter()
        .all(|ch| ch["state"] == "ended" && ch["runStatus"] == "completed"));
    assert_one_run_per_child(&c, &v);
}

#[test]
fn children_finishing_at_the_same_instant_never_start_a_child_twice() {
    let c = owner();
    let (n, max) = (9usize, 3usize);
    let subtasks: Vec<Value> = (0..n)
        .map(|i| json!({"objective": format!("manual {i}"), "meta": {"child": i}}))
        .collect();
    let v = admit(
        &c,
        &json!({"objective": "barrier", "subtasks": subtasks, "maxConcurrency": max}),
    );
    let id = id_of(&v);
    let prefix = format!("leader-{id}-");
    let mut leased: Vec<String> = vec![];
    let mut finished = 0;
    while finished < n {
        // The finishes of the last round drove the leader before answering: exactly the next
        // children are queued now, as many as the bound leaves room for.
        let want = max.min(n - finished);
        let batch = lease_all(&prefix, want, Duration::from_secs(10));
        assert_eq!(
            batch.len(),
            want,
            "after {finished} finished: {:?}\n{}",
            batch,
            leader(&c, &id)
        );
        for l in &batch {
            let i: usize = l["sessionId"].as_str().unwrap()[prefix.len()..]
                .parse()
                .unwrap();
            assert_eq!(l["meta"], json!({"child": i}), "{l}");
            assert_eq!(l["objective"], format!("manual {i}"), "{l}");
            leased.push(l["taskId"].as_str().unwrap().to_owned());
        }
        // Every lease of the batch is finished at once.
        let barrier = Arc::new(Barrier::new(batch.len()));
        let answers: Vec<Resp> = batch
            .into_iter()
            .map(|l| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    finish(&l, json!({"status": "completed"}))
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        for a in &answers {
            assert_eq!(a.status, 200, "{}", a.body);
        }
        finished += answers.len();
    }
    // Nothing more to lease, and the leader settled with the last finish.
    assert!(lease_all(&prefix, 0, Duration::ZERO).is_empty());
    let v = leader(&c, &id);
    assert_eq!(v["status"], "completed", "{v}");
    let tasks: Vec<String> = (0..n).map(|i| child_task(&v, i)).collect();
    let distinct: BTreeSet<&String> = tasks.iter().collect();
    assert_eq!(distinct.len(), n, "a task id shared by two children: {v}");
    let mut leased_sorted = leased.clone();
    leased_sorted.sort();
    let mut tasks_sorted = tasks.clone();
    tasks_sorted.sort();
    assert_eq!(
        leased_sorted, tasks_sorted,
        "each child leased exactly once"
    );
    assert_one_run_per_child(&c, &v);
}

// ---- settling ------------------------------------------------------------------------------------

#[test]
fn a_leader_whose_children_all_complete_settles_completed_with_one_report_per_child() {
    let _runner = Runner::start();
    let (name, c) = named_owner();
    let objective = "write three haiku";
    let first = admit(
        &c,
        &body(objective, &["say one", "say two", "say three"], 2),
    );
    assert_eq!(first["status"], "running");
    assert_eq!(first["objectivePreview"], objective);
    assert_eq!(first["owner"], name.as_str());
    assert_eq!(first["maxConcurrency"], 2);
    assert_eq!(first["cancelRequested"], false);
    assert!(first.get("deadlineAtMs").is_none(), "{first}");
    assert!(first.get("result").is_none() && first.get("error").is_none());
    for (i, ch) in children(&first).iter().enumerate() {
        assert_eq!(ch["index"], i);
        assert_eq!(
            ch["objectivePreview"],
            ["say one", "say two", "say three"][i]
        );
    }
    let id = id_of(&first);
    let v = settled(&c, &id);
    assert_eq!(v["status"], "completed", "{v}");
    assert!(v.get("error").is_none(), "{v}");
    assert!(v["finishedAtMs"].as_i64().unwrap() >= v["startedAtMs"].as_i64().unwrap());
    let expected: Vec<Value> = (0..3).map(|i| report(&v, i, "completed", None)).collect();
    assert_eq!(v["result"], json!(expected));
    for (i, ch) in children(&v).iter().enumerate() {
        assert_eq!(
            (&ch["state"], &ch["runStatus"]),
            (&json!("ended"), &json!("completed"))
        );
        let r = run(&child_task(&v, i));
        assert_eq!(r["status"], "completed");
        assert_eq!(r["result"], json!({"text": (["one", "two", "three"][i])}));
    }
    assert_one_run_per_child(&c, &v);
    // A settled leader is not cancelled again: 200, `cancelled: false`, unchanged.
    let again = cancel_leader(&c, &id);
    assert_eq!(again.status, 200, "{}", again.body);
    let w = again.json();
    assert_eq!(
        (&w["cancelled"], &w["status"], &w["result"]),
        (&json!(false), &json!("completed"), &v["result"])
    );
}

#[test]
fn a_failing_child_fails_the_leader_with_the_count_of_failed_children() {
    let _runner = Runner::start();
    let c = owner();
    let id = id_of(&admit(
        &c,
        &body(
            "one breaks",
            &["say ok", "fail the tool broke", "say ok"],
            3,
        ),
    ));
    let v = settled(&c, &id);
    assert_eq!(
        (&v["status"], &v["error"]),
        (
            &json!("failed"),
            &json!("1 of 3 children failed or timed out")
        ),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "completed", None),
            report(&v, 1, "failed", Some("the tool broke")),
            report(&v, 2, "completed", None),
        ])
    );
    assert_eq!(
        (&v["children"][1]["runStatus"], &v["children"][1]["error"]),
        (&json!("failed"), &json!("the tool broke"))
    );
    assert_one_run_per_child(&c, &v);
}

#[test]
fn a_child_parked_on_a_gate_makes_the_leader_need_a_human() {
    let _runner = Runner::start();
    let c = owner();
    let id = id_of(&admit(
        &c,
        &body("needs a yes", &["say ok", "ask tool_approval may I?"], 2),
    ));
    let v = settled(&c, &id);
    assert_eq!(v["status"], "needs_human", "{v}");
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "completed", None),
            report(&v, 1, "suspended", None)
        ])
    );
    assert_eq!(v["children"][1]["state"], "parked", "{v}");
    let parked = child_task(&v, 1);
    assert_eq!(run(&parked)["status"], "suspended");
    // Leave nothing parked: the owner cancels the child; the settled leader stays as it was.
    assert_eq!(c.cancel(&parked).status, 200);
    assert_eq!(run(&parked)["status"], "cancelled");
    let w = leader(&c, &id);
    assert_eq!((&w["status"], &w["result"]), (&v["status"], &v["result"]));
    assert_one_run_per_child(&c, &v);
}

#[test]
fn a_child_finished_blocked_by_hand_makes_the_leader_need_a_human_when_the_finish_answers() {
    let c = owner();
    let v = admit(&c, &body("blocked", &["manual"], 1));
    let id = id_of(&v);
    let task = child_task(&v, 0);
    let lease = lease_all(&format!("leader-{id}-"), 1, Duration::from_secs(10));
    assert_eq!(lease.len(), 1, "{lease:?}");
    assert_eq!(lease[0]["taskId"], task.as_str());
    let done = finish(
        &lease[0],
        json!({"status": "blocked", "error": "needs a human"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    // The finish drove the leader before answering.
    let v = leader(&c, &id);
    assert_eq!(v["status"], "needs_human", "{v}");
    assert_eq!(
        v["result"],
        json!([report(&v, 0, "suspended", Some("needs a human"))])
    );
    assert_eq!(
        (&v["children"][0]["state"], &v["children"][0]["runStatus"]),
        (&json!("ended"), &json!("blocked"))
    );
    assert_one_run_per_child(&c, &v);
}

#[test]
fn cancelling_a_child_run_drives_its_leader_before_the_cancel_answers() {
    let c = owner();
    let v = admit(&c, &body("cancel the children", &["manual", "manual"], 1));
    let id = id_of(&v);
    assert_eq!(v["children"][1]["state"], "not_started", "{v}");
    let first = child_task(&v, 0);
    assert_eq!(c.cancel(&first).json()["status"], "cancelled");
    // The cancel's answer came after the drive: the next child is already started.
    let v = leader(&c, &id);
    assert_eq!(v["status"], "running", "{v}");
    assert_eq!(
        (&v["children"][0]["state"], &v["children"][0]["runStatus"]),
        (&json!("ended"), &json!("cancelled"))
    );
    assert_eq!(v["children"][1]["state"], "running", "{v}");
    let second = child_task(&v, 1);
    assert_eq!(c.cancel(&second).json()["status"], "cancelled");
    // A cancelled child counts as failed: the leader settled with the last cancel.
    let v = leader(&c, &id);
    assert_eq!(
        (&v["status"], &v["error"]),
        (
            &json!("failed"),
            &json!("2 of 2 children failed or timed out")
        ),
        "{v}"
    );
    for i in 0..2 {
        assert_eq!(v["result"][i]["status"], "failed", "{v}");
        assert_eq!(v["result"][i]["taskId"], v["children"][i]["taskId"]);
    }
    assert_one_run_per_child(&c, &v);
}

#[test]
fn a_parked_child_holds_its_slot_until_a_decision_lets_it_finish() {
    let _runner = Runner::start();
    let c = owner();
    let v = admit(
        &c,
        &body(
            "ask first",
            &["ask tool_approval may I?\nsay after", "say next"],
            1,
        ),
    );
    let id = id_of(&v);
    let parked = wait_leader(&c, &id, "the first child to park", |v| {
        v["children"][0]["state"] == "parked"
    });
    // Parked, it still holds the only slot: a tick starts nothing and settles nothing.
    cron();
    let v = leader(&c, &id);
    assert_eq!(
        (&v["status"], &v["children"][1]["state"]),
        (&json!("running"), &json!("not_started")),
        "{v}"
    );
    let session = parked["children"][0]["sessionId"].as_str().unwrap();
    let d = c.post_json(
        &format!("/v1/approvals/{session}/decide"),
        &json!({"decision": "approve"}),
    );
    assert_eq!(d.status, 200, "{}", d.body);
    let v = settled(&c, &id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "completed", None),
            report(&v, 1, "completed", None)
        ])
    );
    let text = run(&child_task(&v, 0))["result"]["text"].clone();
    assert!(text.as_str().is_some_and(|t| t.contains("after")), "{text}");
    assert_one_run_per_child(&c, &v);
}

// ---- the deadline and cancel ---------------------------------------------------------------------

/// Waits (by the local clock, on the same machine as the Worker) until `at_ms` has passed.
fn sleep_past(at_ms: i64) {
    let wait = (at_ms + 50 - now_ms()).max(0);
    std::thread::sleep(Duration::from_millis(wait as u64));
}

#[test]
fn at_its_deadline_a_leader_skips_unstarted_children_and_stops_the_running_one() {
    let _runner = Runner::start();
    let c = owner();
    let v = admit(
        &c,
        &json!({
            "objective": "too slow",
            "subtasks": [
                {"objective": "say started\nsleep 60000\nsay never"},
                {"objective": "say b"},
                {"objective": "say c"},
            ],
            "maxConcurrency": 1,
            "deadlineMs": 3000,
        }),
    );
    let id = id_of(&v);
    let deadline_at = v["deadlineAtMs"].as_i64().expect("deadlineAtMs");
    assert_eq!(deadline_at, v["startedAtMs"].as_i64().unwrap() + 3000);
    let slow = child_task(&v, 0);
    wait_until(&slow, "a runner to lease the first child", |r| {
        r["heldBy"].as_str().is_some_and(|h| h != "default")
    });
    sleep_past(deadline_at);
    cron();
    let v = wait_leader(&c, &id, "the deadline to be acted on", |v| {
        v["status"] != "running"
    });
    assert_eq!(
        (&v["status"], &v["error"]),
        (&json!("failed"), &json!(DEADLINE_PASSED)),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "timeout", Some(STOPPED_AT_DEADLINE)),
            report(&v, 1, "timeout", Some(CANCELLED_BEFORE_START)),
            report(&v, 2, "timeout", Some(CANCELLED_BEFORE_START)),
        ])
    );
    for i in [1, 2] {
        let ch = &v["children"][i];
        assert_eq!(
            (&ch["state"], &ch["report"]),
            (&json!("skipped"), &json!("timeout"))
        );
        assert!(ch.get("taskId").is_none(), "{ch}");
    }
    // The running child was asked to stop: its run ends cancelled once the runner notices.
    let r = wait_until(&slow, "the running child to end", |r| {
        r["status"] != "running"
    });
    assert_eq!(r["status"], "cancelled", "{r}");
    assert!(!ledger(&slow)
        .iter()
        .any(|e| e["data"]["delta"].as_str() == Some("never")));
    // Nothing starts after the deadline, even on later ticks.
    cron();
    let w = leader(&c, &id);
    assert_eq!((&w["status"], &w["result"]), (&v["status"], &v["result"]));
    assert_one_run_per_child(&c, &w);
}

#[test]
fn a_child_finishing_after_the_deadline_settles_the_leader_and_starts_nothing() {
    let c = owner();
    let v = admit(
        &c,
        &json!({"objective": "late", "subtasks": [{"objective": "manual"}, {"objective": "manual"}],
            "maxConcurrency": 1, "deadlineMs": 1500}),
    );
    let id = id_of(&v);
    let l = lease_all(&format!("leader-{id}-"), 1, Duration::from_secs(10));
    assert_eq!(l.len(), 1, "{l:?}");
    sleep_past(v["deadlineAtMs"].as_i64().unwrap());
    // No tick: the child's own finish is the next drive, and it acts on the deadline.
    assert_eq!(finish(&l[0], json!({"status": "completed"})).status, 200);
    let v = leader(&c, &id);
    assert_eq!(
        (&v["status"], &v["error"]),
        (&json!("failed"), &json!(DEADLINE_PASSED)),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "completed", None),
            report(&v, 1, "timeout", Some(CANCELLED_BEFORE_START)),
        ])
    );
    assert_eq!(v["children"][1]["state"], "skipped");
    assert!(lease_all(&format!("leader-{id}-"), 0, Duration::ZERO).is_empty());
    assert_one_run_per_child(&c, &v);
}

#[test]
fn every_report_status_is_produced_completed_failed_suspended_and_timeout() {
    let _runners: Vec<Runner> = (0..3).map(|_| Runner::start()).collect();
    let c = owner();
    let v = admit(
        &c,
        &json!({
            "objective": "one of each",
            "subtasks": [
                {"objective": "say fine"},
                {"objective": "fail it broke"},
                {"objective": "ask tool_approval may I?"},
                {"objective": "say started\nsleep 60000"},
            ],
            "maxConcurrency": 4,
            "deadlineMs": 8000,
        }),
    );
    let id = id_of(&v);
    let deadline_at = v["deadlineAtMs"].as_i64().unwrap();
    let slow = child_task(&v, 3);
    // Before the deadline: one child completed, one failed, one parked, one leased and sleeping.
    let before = wait_leader(&c, &id, "each child in its state", |v| {
        let s: Vec<&str> = children(v)
            .iter()
            .map(|ch| {
                ch["runStatus"]
                    .as_str()
                    .unwrap_or(ch["state"].as_str().unwrap())
            })
            .collect();
        s == ["completed", "failed", "parked", "running"] && held(&slow) || v["status"] != "running"
    });
    assert_eq!(
        before["status"], "running",
        "settled before its children got going (deadline too short for this machine?): {before}"
    );
    sleep_past(deadline_at);
    cron();
    let v = settled(&c, &id);
    assert_eq!(
        (&v["status"], &v["error"]),
        (&json!("failed"), &json!(DEADLINE_PASSED)),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "completed", None),
            report(&v, 1, "failed", Some("it broke")),
            report(&v, 2, "suspended", None),
            report(&v, 3, "timeout", Some(STOPPED_AT_DEADLINE)),
        ])
    );
    let statuses: BTreeSet<&str> = v["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["completed", "failed", "suspended", "timeout"])
    );
    // The running child is stopped; the parked one is abandoned (left parked for a human).
    let r = wait_until(&slow, "the sleeping child to stop", |r| {
        r["status"] != "running"
    });
    assert_eq!(r["status"], "cancelled", "{r}");
    let parked = child_task(&v, 2);
    assert_eq!(run(&parked)["status"], "suspended");
    assert_eq!(c.cancel(&parked).status, 200);
    assert_eq!(run(&parked)["status"], "cancelled");
    let w = leader(&c, &id);
    assert_eq!((&w["status"], &w["result"]), (&v["status"], &v["result"]));
    assert_one_run_per_child(&c, &w);
}

#[test]
fn cancelling_a_running_leader_fails_it_and_stops_every_child_and_a_second_cancel_changes_nothing()
{
    let _runners = [Runner::start(), Runner::start()];
    let c = owner();
    let v = admit(
        &c,
        &body(
            "to be cancelled",
            &[
                "say started\nsleep 60000\nsay never",
                "ask tool_approval may I?",
                "say never",
                "say never",
            ],
            2,
        ),
    );
    let id = id_of(&v);
    let (sleeping, parked) = (child_task(&v, 0), child_task(&v, 1));
    wait_until(&sleeping, "a runner to lease the first child", |r| {
        r["heldBy"].as_str().is_some_and(|h| h != "default")
    });
    wait_leader(&c, &id, "the second child to park", |v| {
        v["children"][1]["state"] == "parked"
    });
    let r = cancel_leader(&c, &id);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(
        (
            &v["cancelled"],
            &v["status"],
            &v["error"],
            &v["cancelRequested"]
        ),
        (
            &json!(true),
            &json!("failed"),
            &json!(LEADER_CANCELLED),
            &json!(true)
        ),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!([
            report(&v, 0, "failed", Some(LEADER_CANCELLED)),
            report(&v, 1, "failed", Some(LEADER_CANCELLED)),
            report(&v, 2, "failed", Some(CANCELLED_BEFORE_START)),
            report(&v, 3, "failed", Some(CANCELLED_BEFORE_START)),
        ])
    );
    for i in [2, 3] {
        let ch = &v["children"][i];
        assert_eq!(
            (&ch["state"], &ch["report"]),
            (&json!("skipped"), &json!("failed"))
        );
        assert!(ch.get("taskId").is_none(), "{ch}");
    }
    // The parked child ends at once, the leased one once its runner notices.
    assert_eq!(run(&parked)["status"], "cancelled");
    let r = wait_until(&sleeping, "the running child to end", |r| {
        r["status"] != "running"
    });
    assert_eq!(r["status"], "cancelled", "{r}");
    // A second cancel: 200, nothing cancelled, the leader as it was.
    let again = cancel_leader(&c, &id);
    assert_eq!(again.status, 200, "{}", again.body);
    let w = again.json();
    assert_eq!(
        (
            &w["cancelled"],
            &w["status"],
            &w["error"],
            &w["result"],
            &w["finishedAtMs"]
        ),
        (
            &json!(false),
            &v["status"],
            &v["error"],
            &v["result"],
            &v["finishedAtMs"]
        )
    );
    assert_one_run_per_child(&c, &w);
}

// ---- visibility and the list ---------------------------------------------------------------------

#[test]
fn another_owners_leader_run_is_the_same_404_as_a_missing_one_for_get_and_cancel() {
    let (alice, bob) = (owner(), owner());
    let v = admit(&alice, &body("mine", &["manual"], 1));
    let id = id_of(&v);
    let missing = "01000000-0000-7000-8000-000000000000";
    for (method, path) in [("GET", ""), ("POST", "/cancel")] {
        let theirs = bob.send(method, &format!("/v1/leader/runs/{id}{path}"), None, &[]);
        let none = bob.send(
            method,
            &format!("/v1/leader/runs/{missing}{path}"),
            None,
            &[],
        );
        let own_none = alice.send(
            method,
            &format!("/v1/leader/runs/{missing}{path}"),
            None,
            &[],
        );
        theirs.assert_refusal(404, "not_found");
        assert_eq!(
            (theirs.status, &theirs.body),
            (none.status, &none.body),
            "{method} {path}"
        );
        assert_eq!((none.status, &none.body), (own_none.status, &own_none.body));
    }
    // Bob's cancel changed nothing; bob's list does not show it; the child run is alice's too.
    let v = leader(&alice, &id);
    assert_eq!(
        (&v["status"], &v["cancelRequested"]),
        (&json!("running"), &json!(false))
    );
    assert_eq!(bob.get("/v1/leader/runs").json()["leaderRuns"], json!([]));
    let child = child_task(&v, 0);
    assert_eq!(bob.get(&format!("/v1/runs/{child}")).status, 404);
    let r = alice.get(&format!("/v1/runs/{child}"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["sessionId"], format!("leader-{id}-0"));
    // An operator reads it.
    let ops = Client::as_principal("ops")
        .with_role("operator")
        .at(&server());
    assert_eq!(leader(&ops, &id)["id"], id.as_str());
    assert_eq!(cancel_leader(&alice, &id).json()["cancelled"], true);
    assert_eq!(run(&child)["status"], "cancelled");
}

#[test]
fn the_leader_list_shows_the_callers_own_newest_first_filters_by_status_and_pages_by_one() {
    let ((alice_name, alice), bob) = (named_owner(), owner());
    let pause = || std::thread::sleep(Duration::from_millis(5));
    // failed: cancelled at once.
    let failed = id_of(&admit(&alice, &body("first", &["manual"], 1)));
    assert_eq!(cancel_leader(&alice, &failed).json()["status"], "failed");
    pause();
    // completed: its one child leased and finished by hand.
    let completed = id_of(&admit(&alice, &body("second", &["manual"], 1)));
    let l = lease_all(&format!("leader-{completed}-"), 1, Duration::from_secs(10));
    assert_eq!(l.len(), 1);
    assert_eq!(finish(&l[0], json!({"status": "completed"})).status, 200);
    pause();
    // running.
    let running = id_of(&admit(&alice, &body("third", &["manual"], 1)));
    pause();
    let bobs = id_of(&admit(&bob, &body("bob's", &["manual"], 1)));

    let list = |c: &Client, q: &str| {
        let r = c.get(&format!("/v1/leader/runs{q}"));
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        r.json()
    };
    let ids = |page: &Value| -> Vec<String> {
        page["leaderRuns"]
            .as_array()
            .unwrap()
            .iter()
            .map(id_of)
            .collect()
    };
    let all = list(&alice, "");
    assert_eq!(
        ids(&all),
        [running.as_str(), completed.as_str(), failed.as_str()]
    );
    assert!(all["nextCursor"].is_null(), "{all}");
    for rec in all["leaderRuns"].as_array().unwrap() {
        assert!(rec.get("children").is_none(), "records only: {rec}");
        assert_eq!(rec["owner"], alice_name.as_str(), "{rec}");
    }
    assert_eq!(all["leaderRuns"][0]["status"], "running");
    assert_eq!(all["leaderRuns"][1]["status"], "completed");
    assert_eq!(all["leaderRuns"][2]["status"], "failed");
    assert_eq!(ids(&list(&bob, "")), [bobs.as_str()]);
    for (status, want) in [
        ("running", vec![running.as_str()]),
        ("completed", vec![completed.as_str()]),
        ("failed", vec![failed.as_str()]),
        ("needs_human", vec![]),
    ] {
        assert_eq!(
            ids(&list(&alice, &format!("?status={status}"))),
            want,
            "{status}"
        );
    }
    let bad = alice.get("/v1/leader/runs?status=paused");
    assert_eq!(
        bad.assert_refusal(400, "invalid_request")["field"],
        "status",
        "{}",
        bad.body
    );
    // limit=1 walks every one, newest first, each once.
    let mut walked = vec![];
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let q = match &cursor {
            Some(cur) => format!("?limit=1&cursor={cur}"),
            None => "?limit=1".to_owned(),
        };
        let page = list(&alice, &q);
        let got = ids(&page);
        assert!(got.len() <= 1, "{page}");
        walked.extend(got);
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(
        walked,
        [running.as_str(), completed.as_str(), failed.as_str()]
    );
    // The same walk with the status filter.
    let page = list(&alice, "?status=failed&limit=1");
    assert_eq!(ids(&page), [failed.as_str()]);
    // An operator lists everyone's: these four are the newest.
    let ops = Client::as_principal("ops")
        .with_role("operator")
        .at(&server());
    let everyone = ids(&list(&ops, "?limit=4"));
    assert_eq!(
        everyone,
        [
            bobs.as_str(),
            running.as_str(),
            completed.as_str(),
            failed.as_str()
        ]
    );
    // Leave nothing running.
    assert_eq!(cancel_leader(&alice, &running).json()["cancelled"], true);
    assert_eq!(cancel_leader(&bob, &bobs).json()["cancelled"], true);
    let mut statuses = BTreeMap::new();
    for c in [&alice, &bob] {
        for r in all_runs(c, "") {
            *statuses
                .entry(r["status"].as_str().unwrap().to_owned())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(
        statuses,
        BTreeMap::from([("cancelled".to_owned(), 3), ("completed".to_owned(), 1)])
    );
}
