//! Sessions that heal themselves, black-box, on a Worker of their own (`SEMA_HEAL_URL`) started with
//! small liveness knobs: `RUN_STALE_SEC=2` (a held run unheard from for 2 s is stale),
//! `RUN_QUEUE_STALE_SEC=4`, `LEASE_ACK_SEC=1`, `APPROVAL_TIMEOUT_SEC=3` (the expiry tests of
//! tests/runner/gates.rs), `LEADER_RUN_STALE_MS=3000` (a leader run still running 3 s after its
//! start is failed by the cron). The cron is triggered through wrangler's scheduled test route; out-of-band
//! changes go to the Worker's local D1 the way an operator's manual SQL would (`wrangler d1 execute
//! --local --persist-to SEMA_HEAL_STATE`).

use crate::helpers::{unique, Client, Resp};
use crate::sse::{read_sse_at, Frame};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn server() -> String {
    std::env::var("SEMA_HEAL_URL").expect("SEMA_HEAL_URL is not set: run through scripts/test")
}

fn client() -> Client {
    Client::anonymous().at(&server())
}

fn runner() -> Client {
    client().with_role("runner")
}

/// RUN_STALE_SEC of the heal Worker, and the margin a test allows past it.
const STALE: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_secs(6);

/// LEADER_RUN_STALE_MS of the heal Worker.
const LEADER_STALE_MS: i64 = 3_000;

/// The stale sweep's sentence, written out here independently of the server's code (U+2014 dash).
const LEADER_STALE_SENTENCE: &str = "leader run went stale: no replica settled it within LEADER_RUN_STALE_MS (the replica driving it most likely died). The run was NOT taken over \u{2014} re-submit with a NEW Idempotency-Key to run it again.";

/// Runs statements against the heal Worker's store of record, out of band; the rows the last one
/// returns, as JSON objects. The store is the Worker's local D1, or, when `SEMA_HEAL_PG` names a
/// connection string (scripts/test-postgres), its PostgreSQL database through psql.
pub(crate) fn d1(sql: &str) -> Vec<Value> {
    if let Ok(url) = std::env::var("SEMA_HEAL_PG") {
        return pg(&url, sql);
    }
    let state = std::env::var("SEMA_HEAL_STATE").expect("SEMA_HEAL_STATE is not set");
    crate::helpers::d1_execute(&state, sql)
}

/// [`d1`] on PostgreSQL: a lone `SELECT` comes back through `json_agg`, so its rows read as D1's
/// do (column names as keys, numbers as numbers); anything else runs as written and returns none.
fn pg(url: &str, sql: &str) -> Vec<Value> {
    let body = sql.trim().trim_end_matches(';');
    let lone_select = body.to_ascii_uppercase().starts_with("SELECT") && !body.contains(';');
    let sql = if lone_select {
        format!("SELECT COALESCE(json_agg(t), '[]'::json) FROM ({body}) t")
    } else {
        sql.to_owned()
    };
    let out = crate::helpers::psql(url, &sql);
    if !lone_select {
        return vec![];
    }
    let v: Value = serde_json::from_str(&out).expect("json_agg output");
    v.as_array().cloned().unwrap_or_default()
}

/// Triggers one cron tick (wrangler dev's scheduled test route).
pub(crate) fn cron() {
    let r = client().get("/__scheduled?cron=*+*+*+*+*");
    assert_eq!(r.status, 200, "scheduled route: {}", r.body);
}

fn submit(session: &str) -> String {
    client()
        .post_json(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "heal me"}),
        )
        .admitted()
}

fn run(task: &str) -> Value {
    let r = client().get(&format!("/v1/runs/{task}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Leases runs until it gets `task` (other tests' leftovers are finished on the way).
fn lease(task: &str, runner_id: &str) -> i64 {
    for _ in 0..50 {
        let r = runner().post_json(
            "/v1/runner/lease",
            &json!({"runnerId": runner_id, "waitMs": 2000}),
        );
        if r.status == 204 {
            continue;
        }
        let l = r.json();
        let epoch = l["leaseEpoch"].as_i64().unwrap();
        if l["taskId"] == task {
            return epoch;
        }
        let other = l["taskId"].as_str().unwrap();
        let _ = runner().post_json(
            &format!("/v1/runs/{other}/finish"),
            &json!({"runnerId": runner_id, "leaseEpoch": epoch, "status": "completed"}),
        );
    }
    panic!("never leased {task}");
}

fn beat(task: &str, runner_id: &str, epoch: i64) -> Resp {
    runner().post_json(
        &format!("/v1/runs/{task}/heartbeat"),
        &json!({"runnerId": runner_id, "leaseEpoch": epoch}),
    )
}

/// Polls `check` until it holds or `within` passes.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < within {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what}: not within {within:?}");
}

/// A stored terminal row: the read face of a row the store already ended carries no quiet time.
fn stored_failed(v: &Value) -> bool {
    v["status"] == "failed" && v.get("msSinceLastActivity").is_none()
}

#[test]
fn a_runner_that_stops_heartbeating_is_reaped_by_the_alarm_and_the_session_admits_again() {
    let session = unique("heal");
    let task = submit(&session);
    let epoch = lease(&task, "quitter");
    assert_eq!(beat(&task, "quitter", epoch).status, 200);
    let silent_since = Instant::now();
    // A stream of the run: it must end with `done` when the run is reaped.
    let base = server();
    let path = format!("/v1/runs/{task}/events");
    let stream = std::thread::spawn(move || read_sse_at(&base, &path, Some(50), usize::MAX).0);
    eventually(STALE + MARGIN, "the alarm reaps the silent run", || {
        stored_failed(&run(&task))
    });
    assert!(silent_since.elapsed() >= STALE, "reaped before its cutoff");
    let v = run(&task);
    assert_eq!(
        (v["errorCode"].as_str(), v["error"].as_str()),
        (Some("run.stalled"), Some("run stalled (instance lost?)"))
    );
    let frames: Vec<Frame> = stream.join().unwrap();
    let last = frames.last().expect("the stream got a frame");
    assert_eq!(last.kind(), "done", "{frames:?}");
    assert_eq!(last.data["result"]["errorCode"], "run.stalled");
    // The session admits again, and the reaped runner's late writes are refused.
    submit(&session);
    beat(&task, "quitter", epoch).assert_refusal(409, "lease_lost");
}

#[test]
fn a_heartbeating_runner_keeps_its_run_and_the_session_stays_409() {
    let session = unique("heal");
    let task = submit(&session);
    let epoch = lease(&task, "steady");
    let until = Instant::now() + STALE * 3;
    while Instant::now() < until {
        assert_eq!(beat(&task, "steady", epoch).status, 200);
        client()
            .post_json(
                "/v1/runs",
                &json!({"sessionId": session, "objective": "again"}),
            )
            .assert_refusal(409, "conflict.session_active_run");
        cron();
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(run(&task)["status"], "running");
}

#[test]
fn a_heartbeat_racing_the_reaper_never_leaves_a_run_both_heartbeating_and_failed() {
    for round in 0..8 {
        let session = unique("race");
        let task = submit(&session);
        let epoch = lease(&task, "racer");
        assert_eq!(beat(&task, "racer", epoch).status, 200);
        // Land the next beat around the cutoff, while the cron and the alarm reap.
        std::thread::sleep(STALE + Duration::from_millis(100 * (round % 4)));
        let reaper = std::thread::spawn(cron);
        let beat_status = beat(&task, "racer", epoch).status;
        reaper.join().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let status = if stored_failed(&run(&task)) {
            "failed"
        } else {
            "running"
        };
        // D1 serialises the two: a beat that committed first moved `heartbeat_at`, so the reaper's
        // re-checked predicate no longer matches; a reaper that committed first fenced the beat out.
        match beat_status {
            200 => assert_eq!(
                status, "running",
                "round {round}: beat accepted, run failed"
            ),
            409 => assert_eq!(
                status, "failed",
                "round {round}: beat refused, run still running"
            ),
            other => panic!("round {round}: heartbeat answered {other}"),
        }
        let listed = client().get(&format!("/v1/runs?sessionId={session}&status=running"));
        assert!(
            listed.json()["runs"].as_array().unwrap().len() <= 1,
            "round {round}: two active runs"
        );
        client().cancel(&task);
    }
}

#[test]
fn the_cron_reaps_a_silent_run_its_session_object_was_never_told_about() {
    // Out of band: a running run (and its claim) that no session object admitted, silent for ages.
    let (session, task) = (unique("oob"), unique("oob-task"));
    d1(&format!(
        "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES ('{session}', NULL, 1, 1); \
         INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, objective_preview, meta, held_by, lease_epoch, lease_acked, heartbeat_at, created_at, updated_at) \
         VALUES ('{task}', '{session}', NULL, 'default', 'running', 'x', 'x', '{{}}', 'ghost', 3, 1, 1000, 1000, 1000); \
         INSERT INTO task_active (session_id, task_id, created_at) VALUES ('{session}', '{task}', 1000);"
    ));
    // The read face tells the truth before any reaper ran.
    let v = run(&task);
    assert_eq!(
        (v["status"].as_str(), v["errorCode"].as_str()),
        (Some("failed"), Some("run.stalled"))
    );
    assert!(v["msSinceLastActivity"].as_i64().unwrap() > 0);
    cron();
    assert!(stored_failed(&run(&task)), "{}", run(&task));
    assert!(d1(&format!(
        "SELECT 1 FROM task_active WHERE task_id = '{task}'"
    ))
    .is_empty());
    // The tick says what it did.
    let ops = client().with_role("operator");
    let ticks = ops.get("/v1/admin/reapers").json();
    let tick = &ticks["ticks"][0];
    assert!(tick["reaped"].as_u64().unwrap() >= 1, "{ticks}");
    // It told the session whose claim it released, and says how long telling took: a part of the
    // tick's time (the runtime's clock is coarse, so a zero is possible and not refused here).
    assert!(tick["sessionsTold"].as_u64().unwrap() >= 1, "{ticks}");
    let (told_ms, tick_ms) = (
        tick["notifyMs"].as_i64().unwrap(),
        tick["durationMs"].as_i64().unwrap(),
    );
    assert!((0..=tick_ms).contains(&told_ms), "{ticks}");
    client()
        .with_role("runner")
        .get("/v1/admin/reapers")
        .assert_refusal(403, "forbidden");
    // And the session admits.
    submit(&session);
}

#[test]
fn overlapping_ticks_change_nothing_twice() {
    let (session, base) = (unique("twice"), unique("twice-task"));
    let mut values = vec![];
    for i in 0..5 {
        values.push(format!(
            "('{base}-{i}', '{session}-{i}', NULL, 'default', 'running', 'x', 'x', '{{}}', 'ghost', 1, 1, 1000, 1000, 1000)"
        ));
    }
    d1(&format!(
        "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, objective_preview, meta, held_by, lease_epoch, lease_acked, heartbeat_at, created_at, updated_at) VALUES {};",
        values.join(", ")
    ));
    let ticks: Vec<_> = (0..3).map(|_| std::thread::spawn(cron)).collect();
    ticks.into_iter().for_each(|t| t.join().unwrap());
    let ops = client().with_role("operator");
    let log = ops.get("/v1/admin/reapers").json();
    let reaped: u64 = log["ticks"].as_array().unwrap()[..3]
        .iter()
        .map(|t| t["reaped"].as_u64().unwrap())
        .sum();
    assert_eq!(reaped, 5, "{log}");
    let failed = d1(&format!(
        "SELECT COUNT(*) AS n FROM task_run WHERE task_id LIKE '{base}-%' AND status = 'failed' AND error_code = 'run.stalled'"
    ));
    assert_eq!(failed[0]["n"], 5);
}

#[test]
fn a_run_ended_out_of_band_frees_its_session_at_the_next_cancel() {
    let session = unique("oob-end");
    let task = submit(&session);
    d1(&format!(
        "UPDATE task_run SET status = 'failed', error = 'manual fix' WHERE task_id = '{task}'; \
         DELETE FROM task_active WHERE task_id = '{task}';"
    ));
    let c = client().cancel(&task);
    assert_eq!(
        (c.status, c.json()["status"].as_str()),
        (200, Some("failed"))
    );
    let again = client().post_json(
        "/v1/runs",
        &json!({"sessionId": session, "objective": "next"}),
    );
    assert_eq!(again.status, 202, "{}", again.body);
}

#[test]
fn a_claim_whose_run_row_vanished_is_released_at_its_recheck_and_the_session_admits() {
    let session = unique("vanished");
    let task = submit(&session);
    d1(&format!("DELETE FROM task_run WHERE task_id = '{task}'"));
    eventually(STALE + MARGIN, "the session admits again", || {
        client()
            .post_json(
                "/v1/runs",
                &json!({"sessionId": session, "objective": "next"}),
            )
            .status
            == 202
    });
}

#[test]
fn a_claim_whose_run_ended_out_of_band_is_released_at_its_recheck_and_the_session_admits() {
    let session = unique("ended");
    let task = submit(&session);
    // Ended behind the object's back, claim left in place (a finish whose answer was lost, say).
    d1(&format!(
        "UPDATE task_run SET status = 'completed' WHERE task_id = '{task}'"
    ));
    eventually(STALE + MARGIN, "the session admits again", || {
        client()
            .post_json(
                "/v1/runs",
                &json!({"sessionId": session, "objective": "next"}),
            )
            .status
            == 202
    });
    assert!(d1(&format!(
        "SELECT 1 FROM task_active WHERE task_id = '{task}'"
    ))
    .is_empty());
}

#[test]
fn a_silent_holder_is_taken_over_by_the_next_submit_and_fails_with_its_reason() {
    let session = unique("takeover");
    let task = submit(&session);
    let epoch = lease(&task, "ghost-runner");
    assert_eq!(beat(&task, "ghost-runner", epoch).status, 200);
    let start = Instant::now();
    let mut admitted = None;
    while admitted.is_none() && start.elapsed() < STALE + MARGIN {
        let r = client().post_json(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "next"}),
        );
        match r.status {
            202 => admitted = Some(r.task_id()),
            409 => std::thread::sleep(Duration::from_millis(200)),
            other => panic!("{other}: {}", r.body),
        }
    }
    assert!(admitted.is_some(), "never admitted");
    assert!(
        start.elapsed() >= STALE - Duration::from_millis(300),
        "taken over while live"
    );
    let old = run(&task);
    assert!(stored_failed(&old), "{old}");
    // Either the takeover (SPEC reason, no code) or the alarm (run.stalled) ended it first.
    let error = old["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "run orphaned by engine restart (claim held by runner ghost-runner last heard "
        ) || error == "run stalled (instance lost?)",
        "{error}"
    );
}

#[test]
fn epoch_zero_writes_to_a_run_nobody_leased_are_refused_and_change_nothing() {
    let task = submit(&unique("forge"));
    let path = |verb: &str| format!("/v1/runs/{task}/{verb}");
    runner()
        .post_json(
            &path("events"),
            &json!({"runnerId": "forger", "leaseEpoch": 0, "events": [{"type": "x"}]}),
        )
        .assert_refusal(409, "lease_lost");
    runner()
        .post_json(
            &path("finish"),
            &json!({"runnerId": "forger", "leaseEpoch": 0, "status": "completed", "result": {"forged": true}}),
        )
        .assert_refusal(409, "lease_lost");
    beat(&task, "forger", 0).assert_refusal(409, "lease_lost");
    let v = run(&task);
    assert_eq!(
        (v["status"].as_str(), &v["result"]),
        (Some("running"), &Value::Null)
    );
    let events = client().get(&format!("/v1/runs/{task}/events")).json();
    assert_eq!(events["events"], json!([]));
    client().cancel(&task);
}

#[test]
fn a_stream_anchored_past_the_last_seq_gets_done_when_the_run_is_cancelled() {
    let task = submit(&unique("anchor"));
    let base = server();
    let path = format!("/v1/runs/{task}/events");
    let stream = std::thread::spawn(move || read_sse_at(&base, &path, Some(50), usize::MAX).0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(client().cancel(&task).status, 200);
    let frames = stream.join().unwrap();
    assert_eq!(frames.last().map(Frame::kind), Some("done"), "{frames:?}");
    assert_eq!(frames.last().unwrap().data["result"]["status"], "cancelled");
}

#[test]
fn a_lease_never_acknowledged_goes_back_to_the_queue_with_a_new_epoch() {
    let task = submit(&unique("unacked"));
    let first = lease(&task, "mute");
    std::thread::sleep(Duration::from_millis(1_500)); // LEASE_ACK_SEC = 1
    cron();
    let second = lease(&task, "speaker");
    assert!(second > first, "epoch {second} after {first}");
    beat(&task, "mute", first).assert_refusal(409, "lease_lost");
    assert_eq!(beat(&task, "speaker", second).status, 200);
    runner().post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "speaker", "leaseEpoch": second, "status": "completed"}),
    );
}

#[test]
fn stale_leader_runs_are_failed_with_the_exact_sentence() {
    let id = unique("leader");
    d1(&format!(
        "INSERT INTO leader_run (leader_run_id, idem_key, owner, objective_preview, status, started_at_ms) \
         VALUES ('{id}', NULL, NULL, 'p', 'running', 1000)"
    ));
    cron();
    let rows = d1(&format!(
        "SELECT status, error FROM leader_run WHERE leader_run_id = '{id}'"
    ));
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["error"], LEADER_STALE_SENTENCE);
}

#[test]
fn a_leader_run_left_running_past_leader_run_stale_ms_is_failed_by_the_cron_and_its_key_returns_it()
{
    let owner = Client::as_principal(&unique("stale-owner")).at(&server());
    let key = unique("stale-key");
    let body = json!({"objective": "outlive me", "subtasks": [{"objective": "manual"}], "maxConcurrency": 1});
    let keyed = || owner.post_json_with("/v1/leader/runs", &body, &[("Idempotency-Key", &key)]);
    let first = keyed();
    assert_eq!(first.status, 201, "{}", first.body);
    let v = first.json();
    let id = v["id"].as_str().unwrap().to_owned();
    let started = v["startedAtMs"].as_i64().unwrap();
    let child = v["children"][0]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("the child did not start: {v}"))
        .to_owned();
    // The child is held and heartbeating: alive, so nothing but the leader's age can end anything.
    let epoch = lease(&child, "stale-child");
    let mut last_beat = Instant::now() - Duration::from_secs(1);
    let mut beat_alive = || {
        if last_beat.elapsed() >= Duration::from_millis(300) {
            assert_eq!(beat(&child, "stale-child", epoch).status, 200);
            last_beat = Instant::now();
        }
    };
    let leader = || {
        let r = owner.get(&format!("/v1/leader/runs/{id}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    // Not stale yet: a tick leaves it running.
    beat_alive();
    cron();
    let age = now_ms() - started;
    if age < LEADER_STALE_MS {
        assert_eq!(leader()["status"], "running", "failed at {age} ms");
    }
    while now_ms() <= started + LEADER_STALE_MS + 100 {
        beat_alive();
        std::thread::sleep(Duration::from_millis(50));
    }
    beat_alive();
    cron();
    let v = leader();
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"], LEADER_STALE_SENTENCE);
    assert!(v["finishedAtMs"].as_i64().is_some(), "{v}");
    // Not taken over: its child still runs, held by its runner.
    let r = owner.get(&format!("/v1/runs/{child}"));
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (200, Some("running")),
        "{}",
        r.body
    );
    assert_eq!(beat(&child, "stale-child", epoch).status, 200);
    // The key is still bound to the failed run: 200, not created, the same run as it is.
    let again = keyed();
    assert_eq!(again.status, 200, "{}", again.body);
    let w = again.json();
    assert_eq!(
        (&w["id"], &w["created"], &w["status"], &w["error"]),
        (
            &json!(id),
            &json!(false),
            &json!("failed"),
            &json!(LEADER_STALE_SENTENCE)
        )
    );
    // The listing says the same.
    let listed = owner.get("/v1/leader/runs?status=failed").json();
    assert_eq!(listed["leaderRuns"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["leaderRuns"][0]["error"], LEADER_STALE_SENTENCE);
    // The child ends; the failed leader stays as the sweep left it.
    let done = runner().post_json(
        &format!("/v1/runs/{child}/finish"),
        &json!({"runnerId": "stale-child", "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    let r = owner.get(&format!("/v1/runs/{child}"));
    assert_eq!(r.json()["status"], "completed", "{}", r.body);
    let end = leader();
    assert_eq!(
        (&end["status"], &end["error"]),
        (&json!("failed"), &json!(LEADER_STALE_SENTENCE))
    );
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn a_parked_run_whose_gate_is_gone_is_taken_over_after_the_settle_margin() {
    let session = unique("lost-gate");
    let task = submit(&session);
    let epoch = lease(&task, "parker");
    let park = runner().post_json(
        &format!("/v1/runs/{task}/park"),
        &json!({"runnerId": "parker", "leaseEpoch": epoch, "gate": {"kind": "human", "card": {"text": "ok?"}}}),
    );
    assert_eq!(park.status, 200, "{}", park.body);
    // While its gate is pending the parked run holds the session, and the 409 says where to decide.
    let held = client().post_json(
        "/v1/runs",
        &json!({"sessionId": session, "objective": "second"}),
    );
    let body = held.assert_refusal(409, "conflict.session_active_run");
    assert_eq!(body["pendingGate"]["kind"], "human", "{body}");
    // The gate vanishes (as a lost write would leave it) and the park is older than the 30 s
    // settle margin: nothing can resume the run any more.
    d1(&format!(
        "UPDATE gate_checkpoint SET status = 'voided', pending_session = NULL WHERE task_id = '{task}'"
    ));
    d1(&format!(
        "UPDATE task_run SET updated_at = updated_at - 31000 WHERE task_id = '{task}'"
    ));
    // The object looks again at the claim's recheck time (the gate's deadline: this Worker bounds
    // every park by APPROVAL_TIMEOUT_SEC=3), judges the park stale and takes the session over.
    let mut admitted = None;
    eventually(Duration::from_secs(15), "the takeover", || {
        let r = client().post_json(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "second"}),
        );
        admitted = (r.status == 202).then(|| r.json()["taskId"].as_str().unwrap().to_owned());
        admitted.is_some()
    });
    let old = run(&task);
    assert_eq!(old["status"], "failed", "{old}");
    assert_eq!(
        old["error"],
        "parked run (suspended) has no resumable checkpoint \u{2014} claim reclaimed"
    );
    let new = admitted.unwrap();
    assert_eq!(run(&new)["status"], "running");
    // Leave nothing behind for the other tests: the new (unheld) run is cancelled at once.
    assert_eq!(client().cancel(&new).status, 200);
}
