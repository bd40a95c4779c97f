//! A runner that dies right after leasing a run that waited in its queue: the session object's looks
//! at a queued run back off (1, 2, 4, 8 … cutoffs after it was queued, at most four apart), so
//! whoever writes the lease of a run that waited longer than a cutoff tells the object, which then
//! looks within one cutoff again. The silent run is reaped by the object's alarm at its stale
//! deadline, with no reaper tick, on both lease paths (a poll answered from D1 by the Worker, a wait
//! answered by the queue's dispatcher), whether the object is still in memory or starts afresh.

use crate::harness::{migrate, test_seed, work_dir, Api, Wrangler};
use serde_json::json;
use std::time::{Duration, Instant};

/// `RUN_STALE_SEC` of this test's Worker.
const STALE: Duration = Duration::from_secs(5);
/// The Worker's knobs: a queue deadline far beyond the test, so every look at a queued run backs
/// off: at 5, 10, 20, 40 and 60 s after admission.
const KNOBS: [&str; 3] = [
    "SEMA_AUTH:local",
    "RUN_STALE_SEC:5",
    "RUN_QUEUE_STALE_SEC:600",
];
/// When the first pair is leased, objects in memory: midway between their looks at 20 and 40 s
/// (each look comes a little late, the alarm's and the read's time, and the next is timed from it).
const IN_MEMORY_AT: Duration = Duration::from_secs(29);
/// When the runtime is restarted for the second pair: past their look at 40 s (the next, pending
/// in the objects' storage, at 60 s); they are leased as soon as it answers again.
const RESTART_AT: Duration = Duration::from_secs(46);
/// How long past its lease a silent run may hold its session: its stale deadline and a margin for a
/// loaded machine, short of the 11 s (first pair) or 12 s less the restart (second pair) that the
/// pending look would take.
const REAPED_WITHIN: Duration = Duration::from_secs(8);

#[test]
fn a_run_leased_after_its_sessions_looks_backed_off_is_reaped_by_the_alarm_at_its_stale_deadline() {
    let dir = work_dir("late-lease");
    let state = dir.join("state");
    migrate(&state);
    let vars = KNOBS.map(str::to_owned);
    let worker = Wrangler::start(&state, dir.join("wrangler-1.log"), &vars);
    let tag = format!("{:x}", test_seed() & 0xffff_ffff);
    let admitted = Instant::now();
    let in_memory = [
        admit(&worker.api(), "mem", 0, &tag),
        admit(&worker.api(), "mem", 2_000, &tag),
    ];
    let restarted = [
        admit(&worker.api(), "new", 0, &tag),
        admit(&worker.api(), "new", 2_000, &tag),
    ];

    std::thread::sleep(IN_MEMORY_AT.saturating_sub(admitted.elapsed()));
    let leased: Vec<_> = in_memory
        .iter()
        .map(|r| lease_then_fall_silent(&worker.api(), r))
        .collect();
    for (r, at) in in_memory.iter().zip(leased) {
        assert_reaped(&worker.api(), r, at, "an object in memory");
    }

    std::thread::sleep(RESTART_AT.saturating_sub(admitted.elapsed()));
    drop(worker);
    // The runtime again on the same state: the objects' memory gone, their stored alarms pending.
    let worker = Wrangler::start(&state, dir.join("wrangler-2.log"), &vars);
    let leased: Vec<_> = restarted
        .iter()
        .map(|r| lease_then_fall_silent(&worker.api(), r))
        .collect();
    eprintln!(
        "leased after the restart {:?} after admission (the pending looks are due at 60 s: a lease \
         after 52 s cannot tell a build without the notice)",
        admitted.elapsed()
    );
    for (r, at) in restarted.iter().zip(leased) {
        assert_reaped(&worker.api(), r, at, "an object started afresh");
    }
}

/// A run waiting in a queue of its own: (session, queue, task, the lease's `waitMs`: 0 polls D1
/// from the Worker, more waits in the queue's dispatcher).
struct Waiting {
    session: String,
    queue: String,
    task: String,
    wait_ms: u64,
}

fn admit(api: &Api, phase: &str, wait_ms: u64, tag: &str) -> Waiting {
    let session = format!("late-{phase}-{wait_ms}-{tag}");
    let queue = session.clone();
    let r = api.must(
        "POST",
        "/v1/runs",
        Some(&json!({"sessionId": session, "objective": "waits", "queue": queue})),
    );
    assert_eq!(r.status, 202, "submit: {}", r.body);
    let task = r.json()["taskId"].as_str().unwrap().to_owned();
    Waiting {
        session,
        queue,
        task,
        wait_ms,
    }
}

/// Leases `r` and acknowledges the lease with one heartbeat; then its runner is never heard from
/// again. When that heartbeat was answered.
fn lease_then_fall_silent(api: &Api, r: &Waiting) -> Instant {
    let runner = api.as_role("runner");
    let l = runner.must(
        "POST",
        "/v1/runner/lease",
        Some(&json!({"runnerId": "mayfly", "queue": r.queue, "waitMs": r.wait_ms})),
    );
    assert_eq!(l.status, 200, "lease (waitMs {}): {}", r.wait_ms, l.body);
    let lease = l.json();
    assert_eq!(lease["taskId"], r.task.as_str(), "{lease}");
    let epoch = lease["leaseEpoch"].as_i64().unwrap();
    let beat = runner.must(
        "POST",
        &format!("/v1/runs/{}/heartbeat", r.task),
        Some(&json!({"runnerId": "mayfly", "leaseEpoch": epoch})),
    );
    assert_eq!(beat.status, 200, "heartbeat: {}", beat.body);
    Instant::now()
}

/// The session of `r` is let go by its object (no reaper tick runs in this test) within
/// [`REAPED_WITHIN`] of the runner's last word, the run failed as stalled, and the session admits.
fn assert_reaped(api: &Api, r: &Waiting, last_word: Instant, case: &str) {
    while api.object_claim(&r.session).is_some() {
        assert!(
            last_word.elapsed() < REAPED_WITHIN,
            "{case}, waitMs {}: the session still holds {} {:?} after its runner's last \
             heartbeat (RUN_STALE_SEC {:?}), with no reaper tick",
            r.wait_ms,
            r.task,
            last_word.elapsed(),
            STALE
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = api
        .must("GET", &format!("/v1/runs/{}", r.task), None)
        .json();
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["errorCode"], "run.stalled", "{run}");
    let again = api.must(
        "POST",
        "/v1/runs",
        Some(&json!({"sessionId": r.session, "objective": "next"})),
    );
    assert_eq!(
        again.status, 202,
        "the session admits again: {}",
        again.body
    );
}
