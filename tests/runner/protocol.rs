use crate::sse::{client, lease, ledger, read_sse, run, runner_client, submit};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

#[test]
fn two_runners_racing_for_leases_never_share_one() {
    let tasks: BTreeSet<String> = (0..16).map(|_| submit("say x").0).collect();
    let got: Vec<Vec<(String, i64, &str)>> = std::thread::scope(|s| {
        let handles: Vec<_> = ["racer-a", "racer-b"]
            .iter()
            .map(|id| {
                s.spawn(move || {
                    let mut mine = vec![];
                    while let Some(l) = lease(id) {
                        mine.push((
                            l["taskId"].as_str().unwrap().to_owned(),
                            l["leaseEpoch"].as_i64().unwrap(),
                            *id,
                        ));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let a: BTreeSet<_> = got[0].iter().map(|(t, ..)| t.clone()).collect();
    let b: BTreeSet<_> = got[1].iter().map(|(t, ..)| t.clone()).collect();
    assert!(
        a.is_disjoint(&b),
        "shared leases: {:?}",
        a.intersection(&b).collect::<Vec<_>>()
    );
    assert!(
        tasks.is_subset(&a.union(&b).cloned().collect()),
        "some runs were never leased"
    );
    assert_eq!(
        got[0].len() + got[1].len(),
        a.len() + b.len(),
        "a runner leased one run twice"
    );
    for (task, epoch, runner) in got.iter().flatten() {
        let r = runner_client().post_json(
            &format!("/v1/runs/{task}/finish"),
            &json!({"runnerId": runner, "leaseEpoch": epoch, "status": "completed"}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

#[test]
fn a_write_with_a_stale_epoch_changes_nothing() {
    let (task, _) = submit("manual");
    let l = lease("manual-runner").expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    assert_eq!(l["objective"], "manual");
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let rc = runner_client();
    let path = |verb: &str| format!("/v1/runs/{task}/{verb}");
    let ok = rc.post_json(
        &path("events"),
        &json!({"runnerId": "manual-runner", "leaseEpoch": epoch, "events": [{"type": "text_delta", "data": {"delta": "a"}}]}),
    );
    assert_eq!(ok.json()["seqs"], json!([1]));
    for stale in [epoch - 1, epoch + 1] {
        rc.post_json(
            &path("events"),
            &json!({"runnerId": "manual-runner", "leaseEpoch": stale, "events": [{"type": "x"}]}),
        )
        .assert_refusal(409, "lease_lost");
        rc.post_json(
            &path("heartbeat"),
            &json!({"runnerId": "manual-runner", "leaseEpoch": stale}),
        )
        .assert_refusal(409, "lease_lost");
        rc.post_json(
            &path("finish"),
            &json!({"runnerId": "manual-runner", "leaseEpoch": stale, "status": "completed"}),
        )
        .assert_refusal(409, "lease_lost");
    }
    // The right epoch from a runner that does not hold the lease is refused the same way.
    rc.post_json(
        &path("heartbeat"),
        &json!({"runnerId": "impostor", "leaseEpoch": epoch}),
    )
    .assert_refusal(409, "lease_lost");
    rc.post_json(
        &path("finish"),
        &json!({"runnerId": "impostor", "leaseEpoch": epoch, "status": "completed"}),
    )
    .assert_refusal(409, "lease_lost");
    assert_eq!(ledger(&task).len(), 1);
    assert_eq!(run(&task)["status"], "running");
    let beat = rc.post_json(
        &path("heartbeat"),
        &json!({"runnerId": "manual-runner", "leaseEpoch": epoch}),
    );
    assert_eq!(
        beat.json(),
        json!({"cancelRequested": false, "steer": [], "steerPending": 0})
    );
    let done = rc.post_json(
        &path("finish"),
        &json!({"runnerId": "manual-runner", "leaseEpoch": epoch, "status": "blocked", "error": "needs a human"}),
    );
    assert_eq!(done.json()["status"], "blocked");
    // Write-once: a second finish with the right epoch is refused too.
    rc.post_json(
        &path("finish"),
        &json!({"runnerId": "manual-runner", "leaseEpoch": epoch, "status": "completed"}),
    )
    .assert_refusal(409, "lease_lost");
    let book = ledger(&task);
    assert_eq!(book.len(), 2);
    assert_eq!(book[1]["type"], "done");
    assert_eq!(
        book[1]["data"],
        json!({"status": "blocked", "error": "needs a human"})
    );
}

#[test]
fn runner_routes_need_a_runner_credential_and_valid_bodies() {
    client()
        .post_json("/v1/runner/lease", &json!({"runnerId": "r"}))
        .assert_refusal(403, "forbidden");
    let rc = runner_client();
    rc.post_json("/v1/runner/lease", &json!({"runnerId": "bad id"}))
        .assert_refusal(400, "invalid_request");
    let (task, _) = submit("manual");
    let l = lease("validator").expect("a lease");
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let path = format!("/v1/runs/{task}/events");
    for body in [
        json!({"runnerId": "validator", "leaseEpoch": epoch, "events": []}),
        json!({"runnerId": "validator", "leaseEpoch": epoch, "events": [{"type": "done"}]}),
        json!({"runnerId": "validator", "leaseEpoch": epoch, "events": [{"type": "ok", "extra": 1}]}),
        json!({"runnerId": "validator", "events": [{"type": "ok"}]}),
    ] {
        rc.post_json(&path, &body)
            .assert_refusal(400, "invalid_request");
    }
    let too_many: Vec<_> = (0..501).map(|_| json!({"type": "t"})).collect();
    rc.post_json(
        &path,
        &json!({"runnerId": "validator", "leaseEpoch": epoch, "events": too_many}),
    )
    .assert_refusal(400, "invalid_request");
    let dup = json!({"runnerId": "validator", "leaseEpoch": epoch, "events": [{"type": "t", "eventId": "same"}]});
    assert_eq!(rc.post_json(&path, &dup).status, 200);
    rc.post_json(&path, &dup)
        .assert_refusal(409, "conflict.duplicate_event_id");
    rc.post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "validator", "leaseEpoch": epoch, "status": "running"}),
    )
    .assert_refusal(400, "invalid_request");
    let done = rc.post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "validator", "leaseEpoch": epoch, "status": "completed"}),
    );
    assert_eq!(done.status, 200);
    assert_eq!(
        ledger(&task).len(),
        2,
        "only the first duplicate-id event and done were written"
    );
}

#[test]
fn an_idle_lease_request_long_polls_then_answers_204() {
    let start = std::time::Instant::now();
    let r = runner_client().post_json(
        "/v1/runner/lease",
        &json!({"runnerId": "idle", "waitMs": 600}),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(500),
        "answered before waiting"
    );
}

#[test]
fn an_appends_answer_tells_its_runner_of_a_cancel_request_and_of_steer_messages_waiting() {
    let (task, _) = submit("told by its appends");
    let l = lease("told-runner").expect("a lease");
    assert_eq!(l["taskId"], task.as_str());
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let rc = runner_client();
    let append = || {
        let r = rc.post_json(
            &format!("/v1/runs/{task}/events"),
            &json!({"runnerId": "told-runner", "leaseEpoch": epoch, "events": [{"type": "x"}]}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        (v["cancelRequested"].clone(), v["steerPending"].clone())
    };
    assert_eq!(append(), (json!(false), json!(0)), "nothing waits");
    for m in ["left", "right"] {
        let r = client().post_json(&format!("/v1/runs/{task}/steer"), &json!({"message": m}));
        assert_eq!(r.status, 202, "{}", r.body);
    }
    assert_eq!(append(), (json!(false), json!(2)));
    let beat = rc.post_json(
        &format!("/v1/runs/{task}/heartbeat"),
        &json!({"runnerId": "told-runner", "leaseEpoch": epoch}),
    );
    assert_eq!(beat.json()["steer"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        append(),
        (json!(false), json!(0)),
        "the heartbeat took them"
    );
    let c = client().cancel(&task);
    assert_eq!(c.json()["cancelRequested"], true, "{}", c.body);
    assert_eq!(append(), (json!(true), json!(0)), "a held run is flagged");
    let done = rc.post_json(
        &format!("/v1/runs/{task}/finish"),
        &json!({"runnerId": "told-runner", "leaseEpoch": epoch, "status": "cancelled"}),
    );
    assert_eq!(done.json()["status"], "cancelled", "{}", done.body);
    assert_eq!(ledger(&task).len(), 5, "four events and done");
}

#[test]
fn a_runners_session_hint_spares_the_runs_lookup_and_a_wrong_one_still_reaches_the_runs_own_session(
) {
    let rc = runner_client();
    let write = |task: &str, verb: &str, body: serde_json::Value| {
        let r = rc.post_json(&format!("/v1/runs/{task}/{verb}"), &body);
        assert_eq!(r.status, 200, "{verb}: {}", r.body);
        r
    };
    let leased = |objective: &str| {
        let (task, session) = submit(objective);
        let l = lease("hint-runner").expect("a lease");
        assert_eq!(
            (l["taskId"].as_str(), l["sessionId"].as_str()),
            (Some(task.as_str()), Some(session.as_str()))
        );
        (task, session, l["leaseEpoch"].as_i64().unwrap())
    };
    let holder = |epoch: i64| json!({"runnerId": "hint-runner", "leaseEpoch": epoch});
    let with = |mut body: serde_json::Value, extra: serde_json::Value| {
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let hinted = |body, session: &str| with(body, json!({"sessionId": session}));
    let one_event = json!({"events": [{"type": "x"}]});
    let completed = json!({"status": "completed"});
    let submit_into = |session: &str| {
        client().post_json(
            "/v1/runs",
            &json!({"sessionId": session, "objective": "into a session just freed"}),
        )
    };

    // Each run's first write is the one under test: this isolate has never routed a write of it.
    // The right hint: the write costs its own batch alone (no read of the run's row).
    let (right, right_session, epoch) = leased("hinted rightly");
    let first = write(
        &right,
        "events",
        hinted(with(holder(epoch), one_event.clone()), &right_session),
    );
    assert_eq!(first.round_trips(), 1, "the hint spared the lookup");
    write(&right, "finish", with(holder(epoch), completed.clone()));
    // No hint: the first write looks the run's session up, one round trip more.
    let (plain, _, epoch) = leased("not hinted");
    let first = write(&plain, "events", with(holder(epoch), one_event.clone()));
    assert_eq!(first.round_trips(), 2, "the lookup, then the append");
    write(&plain, "finish", with(holder(epoch), completed.clone()));

    // A finish hinted at a session no one ever used still ends the run in its own session's
    // object: that object lets the claim go, so a submit into the session is admitted at once.
    let (lone, lone_session, epoch) = leased("finished under a wrong hint");
    let done = write(
        &lone,
        "finish",
        hinted(with(holder(epoch), completed.clone()), "no-such-session"),
    );
    assert_eq!(done.json()["status"], "completed");
    let again = submit_into(&lone_session);
    assert_eq!(again.status, 202, "{}", again.body);
    client().cancel(&again.admitted());

    // An append hinted at another held session reaches a subscriber of the run live, through the
    // run's own session's object (subscribed before the write), and leaves the other alone.
    let (task, session, epoch) = leased("appended under a wrong hint");
    let (other, other_session) = submit("holds another session");
    let reader = std::thread::spawn({
        let path = format!("/v1/runs/{task}/events");
        move || read_sse(&path, None, 10).0
    });
    let operator = client().with_role("operator");
    let stats = format!("/v1/admin/sessions/{session}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while operator.get(&stats).json()["streams"] != 1 {
        assert!(Instant::now() < deadline, "the stream never subscribed");
        std::thread::sleep(Duration::from_millis(50));
    }
    write(
        &task,
        "events",
        hinted(with(holder(epoch), one_event), &other_session),
    );
    write(&task, "finish", with(holder(epoch), completed));
    let frames = reader.join().unwrap();
    let kinds: Vec<&str> = frames.iter().map(|f| f.kind()).collect();
    assert_eq!(kinds, ["x", "done"], "{frames:?}");
    assert_eq!(run(&other)["status"], "running");
    assert!(ledger(&other).is_empty());
    assert_eq!(submit_into(&other_session).status, 409, "still held");
    client().cancel(&other);
}
