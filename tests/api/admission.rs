use crate::helpers::{running_conflict_body, unique, Client};
use serde_json::json;
use std::sync::{Arc, Barrier};

#[test]
fn health_answers_ok() {
    let r = Client::anonymous().get("/health");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["ok"], true);
}

#[test]
fn a_new_run_is_admitted_with_a_server_minted_uuidv7() {
    let session = unique("adm");
    let r = Client::anonymous().submit(&session, json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = r.json();
    let task = v["taskId"].as_str().unwrap();
    assert_eq!(
        v,
        json!({"taskId": task, "sessionId": session, "status": "running"})
    );
    // 8-4-4-4-12 hex with version nibble 7 and variant 10xx.
    assert_eq!(task.len(), 36);
    assert_eq!(&task[14..15], "7", "{task}");
    assert!(matches!(&task[19..20], "8" | "9" | "a" | "b"), "{task}");
    assert_eq!(
        r.body,
        format!(r#"{{"taskId":"{task}","sessionId":"{session}","status":"running"}}"#)
    );
}

#[test]
fn the_read_face_shows_the_admitted_run() {
    let c = Client::as_principal("reader");
    let session = unique("face");
    let objective = "x".repeat(200);
    let r = c.post_json(
        "/v1/runs",
        &json!({"sessionId": session, "objective": objective, "meta": {"k": 1}}),
    );
    let task = r.admitted();
    let f = c.get(&format!("/v1/runs/{task}"));
    assert_eq!(f.status, 200, "{}", f.body);
    let v = f.json();
    assert_eq!(v["taskId"], task.as_str());
    assert_eq!(v["sessionId"], session.as_str());
    assert_eq!(v["status"], "running");
    assert_eq!(v["heldBy"], "default");
    assert_eq!(v["cancelRequested"], false);
    assert_eq!(v["objectivePreview"].as_str().unwrap().len(), 160);
    assert!(v["result"].is_null() && v["error"].is_null() && v["errorCode"].is_null());
    let (created, updated) = (
        v["createdAt"].as_i64().unwrap(),
        v["updatedAt"].as_i64().unwrap(),
    );
    assert!(created > 1_600_000_000_000 && updated >= created);
}

#[test]
fn a_second_submit_to_a_busy_session_gets_the_byte_exact_running_conflict() {
    let c = Client::anonymous();
    let session = unique("busy");
    let first = c.submit(&session, json!({}));
    let task = first.admitted();
    let second = c.submit(&session, json!({"objective": "another"}));
    assert_eq!(second.status, 409);
    assert_eq!(second.body, running_conflict_body(&task));
    // Answered from the session object's memory: no D1 round trip at all.
    assert_eq!(
        second.header("x-sema-d1"),
        Some("round-trips=0; statements=0")
    );
    assert_eq!(
        first.header("x-sema-d1"),
        Some("round-trips=1; statements=3")
    );
    assert!(second
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
}

#[test]
fn fifty_concurrent_submits_to_one_session_admit_exactly_one_over_twenty_sessions() {
    const SUBMITS: usize = 50;
    for round in 0..20 {
        let session = unique(&format!("race{round}"));
        let barrier = Arc::new(Barrier::new(SUBMITS));
        let handles: Vec<_> = (0..SUBMITS)
            .map(|i| {
                let (barrier, session) = (barrier.clone(), session.clone());
                std::thread::spawn(move || {
                    let c = Client::anonymous();
                    barrier.wait();
                    c.submit(&session, json!({"objective": format!("contender {i}")}))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<_> = results.iter().filter(|r| r.status == 202).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {:?}",
            results.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        let task = winners[0].task_id();
        let expected = running_conflict_body(&task);
        let losers: Vec<_> = results.iter().filter(|r| r.status != 202).collect();
        assert_eq!(losers.len(), SUBMITS - 1);
        for r in losers {
            assert_eq!(r.status, 409, "round {round}: {}", r.body);
            assert_eq!(r.body, expected, "round {round}");
        }
        // The D1 view agrees: one run in the session, and it is the winner.
        let list = Client::anonymous().get(&format!("/v1/runs?sessionId={session}"));
        let runs = list.json()["runs"].as_array().unwrap().clone();
        assert_eq!(runs.len(), 1, "round {round}: {}", list.body);
        assert_eq!(runs[0]["taskId"], task.as_str());
    }
}

#[test]
fn a_retry_with_the_active_runs_own_client_task_id_gets_202_with_that_run() {
    let c = Client::anonymous();
    let session = unique("retry");
    let task = unique("client-task");
    let first = c.submit(&session, json!({"taskId": task}));
    assert_eq!(first.status, 202, "{}", first.body);
    let again = c.submit(&session, json!({"taskId": task}));
    assert_eq!(again.status, 202, "{}", again.body);
    assert_eq!(
        again.body,
        format!(r#"{{"taskId":"{task}","sessionId":"{session}","status":"running"}}"#)
    );
    // A different client task id is a conflict naming the holder.
    let other = c.submit(&session, json!({"taskId": unique("other")}));
    assert_eq!(other.status, 409);
    assert_eq!(other.body, crate::helpers::running_conflict_body(&task));
}

#[test]
fn a_client_task_id_used_by_someone_elses_run_tells_only_that_the_id_is_taken() {
    let task = unique("taken");
    let a = Client::as_principal("taker-a");
    assert_eq!(a.submit(&unique("ta"), json!({"taskId": task})).status, 202);
    let b = Client::as_principal("taker-b");
    let theirs = b.submit(&unique("tb"), json!({"taskId": task}));
    theirs.assert_refusal(409, "conflict.task_id_taken");
    // The same bytes as the owner reusing its own id in another session: nothing says whose run,
    // which session, or in what state.
    let own = a.submit(&unique("ta2"), json!({"taskId": task}));
    assert_eq!(theirs.body, own.body);
    assert!(!theirs.body.contains("taker-a") && !theirs.body.contains(task.as_str()));
    // Every read of the taken id is the answer for a free one.
    let free = unique("free");
    for path in ["", "/events"] {
        let taken = b.get(&format!("/v1/runs/{task}{path}"));
        let missing = b.get(&format!("/v1/runs/{free}{path}"));
        assert_eq!(taken.status, 404);
        assert_eq!(
            taken.body.replace(task.as_str(), "ID"),
            missing.body.replace(free.as_str(), "ID")
        );
    }
}
