//! A runner that dies right after leasing a run that waited in its queue: the session object's looks
//! at a queued run back off (1, 2, 4, 8 … cutoffs after it was queued, at most four apart), so
//! whoever writes the lease of a run that waited longer than a cutoff tells the object, which then
//! looks within one cutoff again. The silent run is reaped by the object's alarm at its stale
//! deadline, with no reaper tick, on both lease paths: a poll answered from D1 by the Worker, and a
//! wait answered by the queue's dispatcher.

use crate::harness::{migrate, test_seed, work_dir, Wrangler};
use serde_json::json;
use std::time::{Duration, Instant};

/// `RUN_STALE_SEC` of this test's Worker.
const STALE: Duration = Duration::from_secs(3);
/// When the runs are leased, after admission: just past the object's look at 8 cutoffs (its looks
/// at a queued run fall at 3, 6, 12 and 24 s; without the notice, the next would come at 36 s).
const LEASED_AFTER: Duration = Duration::from_millis(25_000);
/// How long past its lease a silent run may hold its session: its stale deadline and a margin for a
/// loaded machine, well short of the 11 s the next backed-off look would take.
const REAPED_WITHIN: Duration = Duration::from_secs(6);

#[test]
fn a_run_leased_after_its_sessions_looks_backed_off_is_reaped_by_the_alarm_at_its_stale_deadline() {
    let dir = work_dir("late-lease");
    let state = dir.join("state");
    migrate(&state);
    let vars = [
        "SEMA_AUTH:local",
        "RUN_STALE_SEC:3",
        "RUN_QUEUE_STALE_SEC:600",
    ]
    .map(str::to_owned);
    let worker = Wrangler::start(&state, dir.join("wrangler.log"), &vars);
    let api = worker.api();
    let runner = api.as_role("runner");
    let tag = format!("{:x}", test_seed() & 0xffff_ffff);

    // (session, queue, the lease's waitMs: 0 polls D1 from the Worker, more waits in the dispatcher)
    let paths = [("poll", 0), ("wait", 2_000)];
    let admitted = Instant::now();
    let runs: Vec<(String, String, String, u64)> = paths
        .iter()
        .map(|(path, wait_ms)| {
            let session = format!("late-{path}-{tag}");
            let queue = format!("late-{path}-{tag}");
            let r = api.must(
                "POST",
                "/v1/runs",
                Some(&json!({"sessionId": session, "objective": "waits", "queue": queue})),
            );
            assert_eq!(r.status, 202, "submit: {}", r.body);
            let task = r.json()["taskId"].as_str().unwrap().to_owned();
            (session, queue, task, *wait_ms)
        })
        .collect();
    std::thread::sleep(LEASED_AFTER.saturating_sub(admitted.elapsed()));

    let mut leased = Vec::new();
    for (session, queue, task, wait_ms) in &runs {
        let r = runner.must(
            "POST",
            "/v1/runner/lease",
            Some(&json!({"runnerId": "mayfly", "queue": queue, "waitMs": wait_ms})),
        );
        assert_eq!(r.status, 200, "lease (waitMs {wait_ms}): {}", r.body);
        let lease = r.json();
        assert_eq!(lease["taskId"], task.as_str(), "{lease}");
        let epoch = lease["leaseEpoch"].as_i64().unwrap();
        // One heartbeat acknowledges the lease; then the runner is never heard from again.
        let beat = runner.must(
            "POST",
            &format!("/v1/runs/{task}/heartbeat"),
            Some(&json!({"runnerId": "mayfly", "leaseEpoch": epoch})),
        );
        assert_eq!(beat.status, 200, "heartbeat: {}", beat.body);
        leased.push((session, task, wait_ms, Instant::now()));
    }

    for (session, task, wait_ms, at) in leased {
        while api.object_claim(session).is_some() {
            assert!(
                at.elapsed() < REAPED_WITHIN,
                "waitMs {wait_ms}: the session still holds {task} {:?} after its runner's last \
                 heartbeat (RUN_STALE_SEC {:?}), with no reaper tick",
                at.elapsed(),
                STALE
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let run = api.must("GET", &format!("/v1/runs/{task}"), None).json();
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(run["errorCode"], "run.stalled", "{run}");
        let again = api.must(
            "POST",
            "/v1/runs",
            Some(&json!({"sessionId": session, "objective": "next"})),
        );
        assert_eq!(
            again.status, 202,
            "the session admits again: {}",
            again.body
        );
    }
    drop(worker);
}
