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
