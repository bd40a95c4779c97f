use crate::helpers::{unique, Client};
use serde_json::json;

fn keyed(c: &Client, key: &str, body: serde_json::Value) -> crate::helpers::Resp {
    c.post_json_with("/v1/runs", &body, &[("Idempotency-Key", key)])
}

#[test]
fn the_same_key_and_body_replays_the_original_admission() {
    let c = Client::as_principal("idem");
    let key = unique("key");
    let body = json!({"sessionId": unique("idem"), "objective": "once"});
    let first = keyed(&c, &key, body.clone());
    assert_eq!(first.status, 202);
    assert!(first.header("idempotency-replayed").is_none());
    let again = keyed(&c, &key, body.clone());
    assert_eq!(again.status, 202);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
}

#[test]
fn a_key_stays_bound_to_its_run_after_the_run_ended() {
    let c = Client::anonymous();
    let key = unique("key");
    let body = json!({"sessionId": unique("ended"), "objective": "once"});
    let first = keyed(&c, &key, body.clone());
    let task = first.admitted();
    assert_eq!(c.cancel(&task).json()["status"], "cancelled");
    let again = keyed(&c, &key, body);
    assert_eq!(
        (again.status, again.body.as_str()),
        (202, first.body.as_str())
    );
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
}

#[test]
fn the_same_key_with_a_different_body_is_422_key_reused() {
    let c = Client::anonymous();
    let key = unique("key");
    let session = unique("reuse");
    keyed(&c, &key, json!({"sessionId": session, "objective": "a"})).admitted();
    keyed(&c, &key, json!({"sessionId": session, "objective": "b"}))
        .assert_refusal(422, "idempotency.key_reused");
    // Also when the original run has ended (the binding lives in D1, not only in the session object).
    keyed(
        &c,
        &key,
        json!({"sessionId": unique("elsewhere"), "objective": "a"}),
    )
    .assert_refusal(422, "idempotency.key_reused");
}

#[test]
fn keys_are_scoped_to_the_principal() {
    let key = unique("shared-key");
    let a = keyed(
        &Client::as_principal("scope-a"),
        &key,
        json!({"sessionId": unique("sa"), "objective": "a"}),
    );
    let b = keyed(
        &Client::as_principal("scope-b"),
        &key,
        json!({"sessionId": unique("sb"), "objective": "a"}),
    );
    assert_eq!((a.status, b.status), (202, 202));
    assert_ne!(a.json()["taskId"], b.json()["taskId"]);
    assert!(b.header("idempotency-replayed").is_none());
}

#[test]
fn a_409_is_never_stored_under_a_key() {
    let c = Client::anonymous();
    let session = unique("no409");
    let holder = c.submit(&session, json!({})).admitted();
    let key = unique("key");
    let body = json!({"sessionId": session, "objective": "later"});
    assert_eq!(keyed(&c, &key, body.clone()).status, 409);
    assert_eq!(c.cancel(&holder).json()["status"], "cancelled");
    let retry = keyed(&c, &key, body);
    assert_eq!(retry.status, 202, "{}", retry.body);
    assert!(retry.header("idempotency-replayed").is_none());
}

#[test]
fn concurrent_submits_with_one_key_admit_one_run_and_replay_it() {
    let key = unique("key");
    let body = json!({"sessionId": unique("ckey"), "objective": "once"});
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let (key, body) = (key.clone(), body.clone());
            std::thread::spawn(move || keyed(&Client::anonymous(), &key, body))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        results.iter().all(|r| r.status == 202),
        "{:?}",
        results.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    assert!(results.iter().all(|r| r.body == results[0].body));
    let originals = results
        .iter()
        .filter(|r| r.header("idempotency-replayed").is_none())
        .count();
    assert_eq!(originals, 1);
}

/// One key raced from several sessions at once: each session object writes its admission batch
/// (run, claim, key) on its own, so when two get past the key lookup together the store itself must
/// refuse the later batch whole — on D1 one batch, on PostgreSQL one transaction — or a loser would
/// leave a run and a claim behind with no key pointing at them.
#[test]
fn a_key_raced_from_several_sessions_admits_one_run_and_the_losers_leave_nothing_behind() {
    const RACERS: usize = 8;
    for round in 0..3 {
        let key = unique("race-key");
        let sessions: Vec<String> = (0..RACERS).map(|_| unique("race")).collect();
        let handles: Vec<_> = sessions
            .iter()
            .map(|s| {
                let (key, body) = (key.clone(), json!({"sessionId": s, "objective": "once"}));
                std::thread::spawn(move || keyed(&Client::anonymous(), &key, body))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<usize> = (0..RACERS).filter(|&i| results[i].status == 202).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {:?}",
            results
                .iter()
                .map(|r| (r.status, &r.body))
                .collect::<Vec<_>>()
        );
        for (i, r) in results.iter().enumerate() {
            if i == winners[0] {
                continue;
            }
            r.assert_refusal(422, "idempotency.key_reused");
            // Nothing of the losing batch stayed: no run in its session, and the session is free.
            let list = Client::anonymous().get(&format!("/v1/runs?sessionId={}", sessions[i]));
            assert_eq!(list.status, 200, "{}", list.body);
            assert_eq!(
                list.json()["runs"],
                json!([]),
                "round {round}: {}",
                list.body
            );
            let again = Client::anonymous().post_json(
                "/v1/runs",
                &json!({"sessionId": sessions[i], "objective": "after the race"}),
            );
            assert_eq!(again.status, 202, "round {round}: {}", again.body);
        }
    }
}

#[test]
fn a_keyed_admission_costs_its_batch_alone_and_a_bound_key_still_answers_before_a_held_session() {
    let c = Client::anonymous();
    let key = unique("key");
    let session = unique("keyed");
    let body = json!({"sessionId": session, "objective": "once"});
    let first = keyed(&c, &key, body.clone());
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(
        first.round_trips(),
        1,
        "the key is written by the admission's batch, not looked up first"
    );
    // The holder's own key is answered from the session object's memory.
    let again = keyed(&c, &key, body.clone());
    assert_eq!(
        (again.status, again.body.as_str()),
        (202, first.body.as_str())
    );
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.round_trips(), 0, "from memory");
    // Once another run holds the session, the key still answers for its own run (a replay, or
    // 422 for another body), never with the other run's 409.
    assert_eq!(c.cancel(&first.admitted()).json()["status"], "cancelled");
    let holder = c.submit(&session, json!({})).admitted();
    let replay = keyed(&c, &key, body.clone());
    assert_eq!(
        (replay.status, replay.body.as_str()),
        (202, first.body.as_str())
    );
    assert_eq!(replay.header("idempotency-replayed"), Some("true"));
    keyed(
        &c,
        &key,
        json!({"sessionId": session, "objective": "other"}),
    )
    .assert_refusal(422, "idempotency.key_reused");
    // And before another principal's session, which is otherwise a 404.
    let foreign = unique("foreign");
    Client::as_principal("someone-else")
        .submit(&foreign, json!({}))
        .admitted();
    keyed(&c, &key, json!({"sessionId": foreign, "objective": "once"}))
        .assert_refusal(422, "idempotency.key_reused");
    // An unbound key into the held session is the holder's 409, and stays unbound.
    let fresh = unique("key");
    assert_eq!(keyed(&c, &fresh, body.clone()).status, 409);
    assert_eq!(c.cancel(&holder).json()["status"], "cancelled");
    let later = keyed(&c, &fresh, body);
    assert_eq!(later.status, 202, "{}", later.body);
    assert!(later.header("idempotency-replayed").is_none());
}
