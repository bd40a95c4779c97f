//! Task queues and their dispatchers, black-box. A submit names a queue (default `default`); a
//! runner's lease request takes runs of one queue only. A lease that waits (`waitMs` > 0) waits in
//! the queue's dispatcher object, which offers it a run the moment one is admitted or resumed, and
//! costs no D1 query while it waits. Most tests run on the runner-test Worker, each on queues of its
//! own (fresh names, so their dispatchers start empty); the tests that need a short acknowledgement
//! window (`LEASE_ACK_SEC=1`), the cron, or the dropped-notice hook (`SEMA_TEST_DROP_NOTICES_QUEUE=lost`)
//! run on the heal Worker. Every run a test makes ends terminal.

use crate::helpers::{unique, Client, Resp};

/// The dispatcher's WebSocket (`GET /v1/runner/connect`), with this file's helpers.
#[path = "queues_ws.rs"]
mod ws;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The queue whose admission notices the heal Worker drops (scripts/test sets
/// `SEMA_TEST_DROP_NOTICES_QUEUE` to it).
const LOST_QUEUE: &str = "lost";

/// `LEASE_ACK_SEC` of the heal Worker.
const HEAL_ACK: Duration = Duration::from_secs(1);

/// How soon a run that became leasable reaches a runner already waiting for it, at most (it is
/// offered at once; the bound is for a loaded test machine).
const PROMPTLY: Duration = Duration::from_secs(5);

/// One Worker under test.
#[derive(Clone)]
struct Site {
    base: String,
}

impl Site {
    /// The runner-test Worker.
    fn runs() -> Self {
        Site {
            base: crate::sse::server(),
        }
    }

    /// The heal Worker (`LEASE_ACK_SEC=1`, cron through the scheduled route, notices of `lost`
    /// dropped).
    fn heal() -> Self {
        Site {
            base: std::env::var("SEMA_HEAL_URL")
                .expect("SEMA_HEAL_URL is not set: run through scripts/test"),
        }
    }

    fn client(&self) -> Client {
        Client::anonymous().at(&self.base)
    }

    fn runner(&self) -> Client {
        self.client().with_role("runner")
    }

    /// Submits a run on `queue` (`None`: no queue named) into a fresh session.
    fn submit(&self, queue: Option<&str>) -> String {
        let mut body = json!({"sessionId": unique("q"), "objective": "queued"});
        if let Some(q) = queue {
            body["queue"] = q.into();
        }
        self.client().post_json("/v1/runs", &body).admitted()
    }

    fn run(&self, task: &str) -> Value {
        let r = self.client().get(&format!("/v1/runs/{task}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    /// One lease request on `queue`.
    fn lease(&self, runner_id: &str, queue: &str, wait_ms: u64) -> Resp {
        let r = self.runner().post_json(
            "/v1/runner/lease",
            &json!({"runnerId": runner_id, "queue": queue, "waitMs": wait_ms}),
        );
        assert!(
            matches!(r.status, 200 | 204),
            "lease: {} {}",
            r.status,
            r.body
        );
        r
    }

    /// What the dispatcher of `queue` holds: `{queue, waiters, backlog, offered, cold}`.
    fn stats(&self, queue: &str) -> Value {
        let r = self
            .client()
            .with_role("operator")
            .get(&format!("/v1/admin/queues/{queue}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    /// Waits until `what` of the dispatcher of `queue` reads `n` (at most 10 s).
    fn await_stat(&self, queue: &str, what: &str, n: u64) {
        let start = Instant::now();
        loop {
            let s = self.stats(queue);
            if s[what] == n {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the dispatcher of {queue} never had {what} = {n}: {s}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Warms the dispatcher of `queue` (its first call reads the backlog from D1 once) with one
    /// empty wait; runs another test left on it are finished on the way.
    fn warm(&self, queue: &str) {
        for _ in 0..50 {
            let r = self.lease("warmer", queue, 100);
            if r.status == 204 {
                assert_eq!(self.stats(queue)["cold"], false);
                return;
            }
            let l = r.json();
            self.finish(
                l["taskId"].as_str().unwrap(),
                "warmer",
                l["leaseEpoch"].as_i64().unwrap(),
            );
        }
        panic!("queue {queue} never drained");
    }

    fn write(&self, task: &str, verb: &str, runner_id: &str, epoch: i64, extra: Value) -> Resp {
        let mut body = json!({"runnerId": runner_id, "leaseEpoch": epoch});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.runner()
            .post_json(&format!("/v1/runs/{task}/{verb}"), &body)
    }

    fn beat(&self, task: &str, runner_id: &str, epoch: i64) -> Resp {
        self.write(task, "heartbeat", runner_id, epoch, json!({}))
    }

    fn finish(&self, task: &str, runner_id: &str, epoch: i64) -> Resp {
        self.write(
            task,
            "finish",
            runner_id,
            epoch,
            json!({"status": "completed"}),
        )
    }

    /// Finishes a lease this test got, asserting it was its own to finish.
    #[track_caller]
    fn finish_lease(&self, lease: &Value, runner_id: &str) {
        let task = lease["taskId"].as_str().unwrap();
        let r = self.finish(task, runner_id, lease["leaseEpoch"].as_i64().unwrap());
        assert_eq!(r.status, 200, "finish of {task}: {}", r.body);
    }

    /// A lease request on a thread of its own: its response and when it came.
    fn wait_on_thread(
        &self,
        runner_id: &str,
        queue: &str,
        wait_ms: u64,
    ) -> std::thread::JoinHandle<(Resp, Instant)> {
        let (site, runner_id, queue) = (self.clone(), runner_id.to_owned(), queue.to_owned());
        std::thread::spawn(move || {
            let r = site.lease(&runner_id, &queue, wait_ms);
            (r, Instant::now())
        })
    }
}

/// A lease's task id.
fn task_of(l: &Value) -> &str {
    l["taskId"].as_str().unwrap_or_default()
}

#[test]
fn a_run_admitted_while_a_runner_waits_reaches_it_for_one_d1_round_trip_and_an_idle_wait_costs_none(
) {
    let site = Site::runs();
    let queue = unique("q-meter");
    // A new dispatcher reads its queue's backlog once.
    let first = site.lease("meter", &queue, 100);
    assert_eq!(first.status, 204, "{}", first.body);
    assert_eq!(first.round_trips(), 1, "the first call's backlog read");
    assert_eq!(site.stats(&queue)["cold"], false);
    // Warm: an empty wait costs nothing.
    let start = Instant::now();
    let idle = site.lease("meter", &queue, 400);
    assert_eq!(idle.status, 204, "{}", idle.body);
    assert!(start.elapsed() >= Duration::from_millis(350), "no wait");
    assert_eq!(idle.round_trips(), 0, "a warm dispatcher's empty wait");
    // A poll is one indexed query.
    let poll = site.lease("meter", &queue, 0);
    assert_eq!(poll.status, 204, "{}", poll.body);
    assert_eq!(poll.round_trips(), 1, "a poll");
    // A runner waits; a run is admitted; the runner gets it at once, for its one lease write.
    let waiter = site.wait_on_thread("meter", &queue, 10_000);
    site.await_stat(&queue, "waiters", 1);
    let admitted_at = Instant::now();
    let task = site.submit(Some(&queue));
    let (r, at) = waiter.join().unwrap();
    assert_eq!(r.status, 200, "the waiting runner got nothing");
    let l = r.json();
    assert_eq!(task_of(&l), task);
    assert!(
        at - admitted_at < PROMPTLY,
        "leased {:?} after the admission",
        at - admitted_at
    );
    assert_eq!(r.round_trips(), 1, "a wait that got a run");
    assert_eq!(site.run(&task)["heldBy"], "meter");
    site.finish_lease(&l, "meter");
}

#[test]
fn a_run_admitted_while_no_runner_waits_goes_to_the_next_runner_that_arrives() {
    let site = Site::runs();
    let queue = unique("q-later");
    site.warm(&queue);
    let task = site.submit(Some(&queue));
    // The admission's notice lands in the dispatcher's memory; nobody waits yet.
    site.await_stat(&queue, "backlog", 1);
    assert_eq!(site.stats(&queue)["waiters"], 0);
    let start = Instant::now();
    let r = site.lease("latecomer", &queue, 10_000);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        start.elapsed() < PROMPTLY,
        "the run in the backlog waited {:?}",
        start.elapsed()
    );
    assert_eq!(task_of(&r.json()), task);
    assert_eq!(r.round_trips(), 1, "from memory: the lease write only");
    assert_eq!(site.stats(&queue)["backlog"], 0);
    site.finish_lease(&r.json(), "latecomer");
}

#[test]
fn the_oldest_run_goes_first_and_the_longest_waiting_runner_is_served_first() {
    let site = Site::runs();
    let queue = unique("q-fair");
    site.warm(&queue);
    let mut tasks = vec![];
    for _ in 0..3 {
        tasks.push(site.submit(Some(&queue)));
        std::thread::sleep(Duration::from_millis(5));
    }
    site.await_stat(&queue, "backlog", 3);
    for (i, want) in tasks.iter().enumerate() {
        let r = site.lease("fair", &queue, 2_000);
        assert_eq!(r.status, 200, "lease {i}: {}", r.body);
        let l = r.json();
        assert_eq!(task_of(&l), want, "lease {i} is not the oldest run");
        site.finish_lease(&l, "fair");
    }
    // Two runners wait, one after the other: the first run goes to the first, the next to the second.
    let first = site.wait_on_thread("first-come", &queue, 15_000);
    site.await_stat(&queue, "waiters", 1);
    let second = site.wait_on_thread("second-come", &queue, 15_000);
    site.await_stat(&queue, "waiters", 2);
    let x = site.submit(Some(&queue));
    let (r, _) = first.join().unwrap();
    assert_eq!(r.status, 200, "the first runner got nothing");
    let l = r.json();
    assert_eq!(task_of(&l), x);
    assert_eq!(
        site.stats(&queue)["waiters"],
        1,
        "the second runner waits on"
    );
    site.finish_lease(&l, "first-come");
    let y = site.submit(Some(&queue));
    let (r, _) = second.join().unwrap();
    assert_eq!(r.status, 200, "the second runner got nothing");
    let l = r.json();
    assert_eq!(task_of(&l), y);
    site.finish_lease(&l, "second-come");
}

#[test]
fn two_hundred_runs_racing_twenty_waiting_runners_are_each_leased_exactly_once_and_none_is_stranded(
) {
    const RUNS: usize = 200;
    const RUNNERS: usize = 20;
    const SUBMITTERS: usize = 4;
    let site = Site::runs();
    let queue = unique("q-race");
    let deadline = Instant::now() + Duration::from_secs(150);
    let submitted = Mutex::new(BTreeSet::new());
    // taskId -> the runners that finished it; and every finish that was refused.
    let finished: Mutex<BTreeMap<String, Vec<String>>> = Mutex::default();
    let refused: Mutex<Vec<String>> = Mutex::default();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for i in 0..RUNNERS {
            let (site, queue) = (&site, &queue);
            let (finished, refused, done) = (&finished, &refused, &done);
            s.spawn(move || {
                let me = format!("racer-{i}");
                while done.load(Ordering::SeqCst) < RUNS && Instant::now() < deadline {
                    let r = site.lease(&me, queue, 2_000);
                    if r.status == 204 {
                        continue;
                    }
                    let l = r.json();
                    let task = task_of(&l).to_owned();
                    let f = site.finish(&task, &me, l["leaseEpoch"].as_i64().unwrap());
                    if f.status != 200 {
                        refused
                            .lock()
                            .unwrap()
                            .push(format!("{me} {task}: {} {}", f.status, f.body));
                        continue;
                    }
                    finished
                        .lock()
                        .unwrap()
                        .entry(task)
                        .or_default()
                        .push(me.clone());
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // The runs arrive while the runners wait (and pile up in the backlog while they are busy).
        for _ in 0..SUBMITTERS {
            let (site, queue, submitted) = (&site, &queue, &submitted);
            s.spawn(move || {
                for _ in 0..RUNS / SUBMITTERS {
                    let task = site.submit(Some(queue));
                    submitted.lock().unwrap().insert(task);
                }
            });
        }
    });
    let submitted = submitted.into_inner().unwrap();
    let finished = finished.into_inner().unwrap();
    let refused = refused.into_inner().unwrap();
    assert_eq!(submitted.len(), RUNS);
    assert!(refused.is_empty(), "refused finishes: {refused:#?}");
    let twice: Vec<_> = finished.iter().filter(|(_, by)| by.len() > 1).collect();
    assert!(twice.is_empty(), "leased and finished twice: {twice:?}");
    let stranded: Vec<_> = submitted
        .iter()
        .filter(|t| !finished.contains_key(*t))
        .collect();
    assert!(
        stranded.is_empty(),
        "{} runs never leased within the deadline: {stranded:?}",
        stranded.len()
    );
    assert_eq!(finished.len(), RUNS, "a lease of a run nobody submitted");
    for task in &submitted {
        assert_eq!(site.run(task)["status"], "completed", "{task}");
    }
    let by_runner = finished.values().flatten().collect::<BTreeSet<_>>().len();
    println!("{RUNS} runs leased by {by_runner} of {RUNNERS} runners");
    assert_eq!(site.stats(&queue)["backlog"], 0);
}

#[test]
fn a_runner_that_left_mid_wait_loses_its_run_to_the_next_waiting_runner_within_the_ack_window() {
    let site = Site::heal();
    let queue = unique("q-gone");
    site.warm(&queue);
    // The runner that leaves: its lease request is sent, reaches the dispatcher, and its socket closes.
    let gone = unique("gone");
    let addr = site.base.trim_start_matches("http://").to_owned();
    let body = json!({"runnerId": gone, "queue": queue, "waitMs": 20_000}).to_string();
    let mut socket = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        socket,
        "POST /v1/runner/lease HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-Sema-Role: runner\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    socket.flush().unwrap();
    site.await_stat(&queue, "waiters", 1);
    drop(socket);
    std::thread::sleep(Duration::from_millis(300));
    let left = site.stats(&queue)["waiters"].as_u64().unwrap();
    // Another runner waits behind it; a run is admitted.
    let other = unique("other");
    let waiter = site.wait_on_thread(&other, &queue, 15_000);
    site.await_stat(&queue, "waiters", left + 1);
    let admitted_at = Instant::now();
    let task = site.submit(Some(&queue));
    let (r, at) = waiter.join().unwrap();
    assert_eq!(r.status, 200, "the waiting runner never got the run");
    let l = r.json();
    assert_eq!(task_of(&l), task);
    // Released on the dispatcher's alarm at the end of the acknowledgement window (up to 2 s more
    // when an offer had to lapse first; each looked at up to 0.5 s late, FOLLOW_UP_SLACK_MS), then
    // offered at once.
    let within = HEAL_ACK + Duration::from_secs(3) + PROMPTLY;
    assert!(
        at - admitted_at < within,
        "leased {:?} after the admission (bound {within:?})",
        at - admitted_at
    );
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    // The runtime kept the gone runner's wait: the dispatcher leased the run to it first (epoch 1),
    // and released it.
    println!(
        "the gone runner's wait {} (the waiting runner leased epoch {epoch})",
        if epoch > 1 {
            "was leased the run first and lost it"
        } else {
            "ended before it was offered the run"
        }
    );
    assert_eq!(site.beat(&task, &other, epoch).status, 200);
    for e in 1..=epoch {
        site.beat(&task, &gone, e).assert_refusal(409, "lease_lost");
        site.write(
            &task,
            "events",
            &gone,
            e,
            json!({"events": [{"type": "text_delta", "data": {"delta": "ghost"}}]}),
        )
        .assert_refusal(409, "lease_lost");
    }
    let v = site.run(&task);
    assert_eq!(
        (v["status"].as_str(), v["heldBy"].as_str()),
        (Some("running"), Some(other.as_str())),
        "{v}"
    );
    site.finish_lease(&l, &other);
    assert_eq!(site.run(&task)["status"], "completed");
}

#[test]
fn runs_of_one_queue_never_reach_a_runner_of_another_and_the_read_face_names_the_queue() {
    let site = Site::runs();
    let (qa, qb) = (unique("q-a"), unique("q-b"));
    let a1 = site.submit(Some(&qa));
    assert_eq!(site.run(&a1)["queue"], qa.as_str());
    // `/v1/tasks` names a queue the same way.
    let t = site.client().post_json(
        "/v1/tasks",
        &json!({"sessionId": unique("q"), "objective": "queued", "queue": qb, "stream": false, "waitMs": 100}),
    );
    assert_eq!(t.status, 202, "{}", t.body);
    let b1 = t.task_id();
    assert_eq!(site.run(&b1)["queue"], qb.as_str());
    // No queue named: `default`.
    let d = site.submit(None);
    assert_eq!(site.run(&d)["queue"], "default");
    assert_eq!(site.client().cancel(&d).json()["status"], "cancelled");
    // A poll and a wait on `b` get b's run only.
    let r = site.lease("runner-b", &qb, 0);
    assert_eq!(task_of(&r.json()), b1);
    site.finish_lease(&r.json(), "runner-b");
    assert_eq!(site.lease("runner-b", &qb, 0).status, 204);
    assert_eq!(site.lease("runner-b", &qb, 600).status, 204);
    // A runner of `b` waiting while a run of `a` is admitted gets nothing.
    let waiter = site.wait_on_thread("runner-b", &qb, 1_500);
    site.await_stat(&qb, "waiters", 1);
    let a2 = site.submit(Some(&qa));
    let (r, _) = waiter.join().unwrap();
    assert_eq!(r.status, 204, "a run of {qa} reached {qb}: {}", r.body);
    // ...and vice versa.
    let waiter = site.wait_on_thread("runner-a", &qa, 1_500);
    let b2 = site.submit(Some(&qb));
    let mut got_a = vec![];
    let (r, _) = waiter.join().unwrap();
    if r.status == 200 {
        got_a.push(r.json());
    }
    while got_a.len() < 2 {
        let r = site.lease("runner-a", &qa, 2_000);
        assert_eq!(r.status, 200, "a run of {qa} was never leased");
        got_a.push(r.json());
    }
    let got: BTreeSet<&str> = got_a.iter().map(task_of).collect();
    assert_eq!(got, BTreeSet::from([a1.as_str(), a2.as_str()]));
    assert_eq!(site.lease("runner-a", &qa, 300).status, 204);
    for l in &got_a {
        site.finish_lease(l, "runner-a");
    }
    let r = site.lease("runner-b", &qb, 2_000);
    assert_eq!(task_of(&r.json()), b2);
    site.finish_lease(&r.json(), "runner-b");
    assert_eq!(site.stats(&qa)["queue"], qa.as_str());
}

#[test]
fn a_queue_name_that_is_not_a_safe_id_is_refused_400_naming_the_queue_field() {
    let site = Site::runs();
    let long = "q".repeat(65);
    for bad in ["a b", "", "a/b", "..", long.as_str()] {
        let session = unique("badq");
        for path in ["/v1/runs", "/v1/tasks"] {
            let mut body = json!({"sessionId": session, "objective": "x", "queue": bad});
            if path == "/v1/tasks" {
                body["stream"] = false.into();
            }
            let r = site.client().post_json(path, &body);
            let v = r.assert_refusal(400, "invalid_request");
            assert_eq!(v["field"], "queue", "{path} {bad:?}: {}", r.body);
        }
        let r = site.runner().post_json(
            "/v1/runner/lease",
            &json!({"runnerId": "r", "queue": bad, "waitMs": 100}),
        );
        let v = r.assert_refusal(400, "invalid_request");
        assert_eq!(v["field"], "queue", "lease {bad:?}: {}", r.body);
        // Nothing was admitted: the session is free.
        let free = site
            .client()
            .post_json(
                "/v1/runs",
                &json!({"sessionId": session, "objective": "x", "queue": unique("q-free")}),
            )
            .admitted();
        assert_eq!(site.client().cancel(&free).json()["status"], "cancelled");
    }
    let q = site.client().post_json(
        "/v1/runs",
        &json!({"sessionId": unique("badq"), "objective": "x", "queue": 7}),
    );
    q.assert_refusal(400, "invalid_request");
    let r = site
        .client()
        .with_role("operator")
        .get("/v1/admin/queues/a%20b");
    let v = r.assert_refusal(400, "invalid_request");
    assert_eq!(v["field"], "queue", "{}", r.body);
}

#[test]
fn a_dropped_admission_notice_delays_a_run_only_until_the_crons_sweep() {
    let site = Site::heal();
    // Warm first: a cold dispatcher's first read of D1 would find the run by itself.
    site.warm(LOST_QUEUE);
    let me = unique("sweep-waiter");
    let waiter = site.wait_on_thread(&me, LOST_QUEUE, 20_000);
    site.await_stat(LOST_QUEUE, "waiters", 1);
    let task = site.submit(Some(LOST_QUEUE));
    // The notice was dropped: the run waits in D1, the runner in the dispatcher.
    // A short look only: the heal Worker fails a run nobody leased for RUN_QUEUE_STALE_SEC (4 s).
    std::thread::sleep(Duration::from_millis(1_000));
    let v = site.run(&task);
    assert_eq!(v["status"], "running", "{v}");
    assert_ne!(v["heldBy"], me.as_str(), "leased before the sweep: {v}");
    let s = site.stats(LOST_QUEUE);
    assert_eq!(
        (s["waiters"].as_u64(), s["backlog"].as_u64()),
        (Some(1), Some(0)),
        "{s}"
    );
    assert!(!waiter.is_finished(), "the waiting runner's request ended");
    let tick = Instant::now();
    crate::heal::cron();
    let (r, at) = waiter.join().unwrap();
    assert_eq!(r.status, 200, "the sweep did not deliver the run");
    let l = r.json();
    assert_eq!(task_of(&l), task);
    assert!(
        at.saturating_duration_since(tick) < PROMPTLY,
        "leased {:?} after the tick",
        at.saturating_duration_since(tick)
    );
    assert_eq!(site.run(&task)["heldBy"], me.as_str());
    site.finish_lease(&l, &me);
}

/// Submits a run on `queue`, leases it as `runner_id` and parks it on a gate of `kind` with `card`:
/// `(task, session, epoch)`. The queue's dispatcher is warmed first: a dispatcher whose first call
/// is a notice still reads D1 once, at the first wait that finds its memory empty.
fn parked(
    site: &Site,
    queue: &str,
    runner_id: &str,
    kind: &str,
    card: &Value,
) -> (String, String, i64) {
    site.warm(queue);
    let session = unique("q-gate");
    let task = site
        .client()
        .post_json(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "manual", "queue": queue}),
        )
        .admitted();
    let r = site.lease(runner_id, queue, 5_000);
    assert_eq!(r.status, 200, "setup: the run was never leased");
    let l = r.json();
    assert_eq!(task_of(&l), task);
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let park = site.write(
        &task,
        "park",
        runner_id,
        epoch,
        json!({"gate": {"kind": kind, "card": card}}),
    );
    assert_eq!(park.status, 200, "setup: the park: {}", park.body);
    (task, session, epoch)
}

#[test]
fn a_run_resumed_after_a_gate_decision_reaches_a_runner_already_waiting() {
    let site = Site::runs();
    let queue = unique("q-resume");
    let card = json!({"text": "may I?"});
    let (task, session, epoch) = parked(&site, &queue, "parker", "human", &card);
    let waiter = site.wait_on_thread("resumer", &queue, 15_000);
    site.await_stat(&queue, "waiters", 1);
    let decided_at = Instant::now();
    let d = site.client().post_json(
        &format!("/v1/approvals/{session}/decide"),
        &json!({"decision": "approve", "reason": "go ahead"}),
    );
    assert_eq!(d.status, 200, "{}", d.body);
    let (r, at) = waiter.join().unwrap();
    assert_eq!(
        r.status, 200,
        "the waiting runner never got the resumed run"
    );
    let l = r.json();
    assert_eq!(task_of(&l), task);
    assert!(
        at - decided_at < PROMPTLY,
        "leased {:?} after the decision",
        at - decided_at
    );
    assert!(l["leaseEpoch"].as_i64().unwrap() > epoch, "{l}");
    assert_eq!(
        l["resume"],
        json!({"gate": {"kind": "human", "card": card}, "decision": "approve", "reason": "go ahead"})
    );
    assert_eq!(r.round_trips(), 1, "a wait that got a run");
    site.beat(&task, "parker", epoch)
        .assert_refusal(409, "lease_lost");
    site.finish_lease(&l, "resumer");
}

#[test]
fn a_woken_run_keeps_the_queue_of_the_run_it_wakes_from_and_reaches_its_waiting_runner() {
    let site = Site::runs();
    let queue = unique("q-wake");
    let card = json!({"text": "done for now"});
    let (task, session, _) = parked(&site, &queue, "sleeper", "task_done", &card);
    let waiter = site.wait_on_thread("waker", &queue, 15_000);
    site.await_stat(&queue, "waiters", 1);
    let w = site.client().post_json(
        &format!("/v1/sessions/{session}/wake"),
        &json!({"objective": "again"}),
    );
    assert_eq!(w.status, 202, "{}", w.body);
    let new = w.task_id();
    assert_ne!(new, task);
    assert_eq!(site.run(&new)["queue"], queue.as_str());
    assert_eq!(site.run(&task)["status"], "completed");
    let (r, _) = waiter.join().unwrap();
    assert_eq!(
        r.status, 200,
        "the woken run never reached the waiting runner"
    );
    let l = r.json();
    assert_eq!(task_of(&l), new);
    assert_eq!(l["objective"], "again");
    site.finish_lease(&l, "waker");
}
