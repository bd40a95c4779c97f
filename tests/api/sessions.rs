//! Sessions as a whole, black-box: `GET /v1/sessions` (keyset pages, ownership), `GET` and
//! `DELETE /v1/sessions/{id}`, and the cron's retention pass. The local Worker runs with
//! `RETENTION_DAYS=1`; a run is aged out of band through its local D1 (`wrangler d1 execute
//! --persist-to SEMA_LOCAL_STATE`, or psql on `SEMA_LOCAL_PG` for the PostgreSQL Worker, as an operator's
//! manual SQL would), then one cron tick runs.
//! Ownership across principals is checked on the bearer-token Worker (`SEMA_TOKEN_URL`).

use crate::helpers::{running_conflict_body, unique, Client, Resp};
use crate::tokens::{ALICE, BOB, OPS};
use serde_json::{json, Value};

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {page}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

fn delete(c: &Client, session: &str) -> Resp {
    c.send("DELETE", &format!("/v1/sessions/{session}"), None, &[])
}

#[test]
fn sessions_page_most_recent_first_with_their_active_run() {
    let c = Client::as_principal(&unique("sess-lister"));
    let (a, b, d) = (unique("sa"), unique("sb"), unique("sc"));
    let first = c.submit(&a, json!({})).admitted();
    assert_eq!(c.cancel(&first).status, 200);
    std::thread::sleep(std::time::Duration::from_millis(3));
    let second = c.submit(&b, json!({})).admitted();
    assert_eq!(c.cancel(&second).status, 200);
    std::thread::sleep(std::time::Duration::from_millis(3));
    let running = c.submit(&d, json!({})).admitted();

    let page = c.get("/v1/sessions?limit=2");
    assert_eq!(page.status, 200, "{}", page.body);
    let page = page.json();
    assert_eq!(ids(&page), [d.clone(), b.clone()]);
    let top = &page["sessions"][0];
    assert_eq!(
        top["activeRun"],
        json!({"taskId": running, "status": "running"})
    );
    assert!(top["pendingGate"].is_null());
    assert!(top["createdAt"].is_i64() && top["lastActivityAt"].is_i64());
    assert!(page["sessions"][1]["activeRun"].is_null());
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let rest = c
        .get(&format!("/v1/sessions?limit=2&cursor={cursor}"))
        .json();
    assert_eq!(ids(&rest), [a]);
    assert!(rest["nextCursor"].is_null());
    assert_eq!(c.cancel(&running).status, 200);
}

#[test]
fn a_session_reads_with_its_active_run_and_anyone_elses_is_the_404_of_a_missing_one() {
    let owner = Client::as_principal(&unique("sess-owner"));
    let session = unique("read");
    let task = owner.submit(&session, json!({})).admitted();
    let one = owner.get(&format!("/v1/sessions/{session}"));
    assert_eq!(one.status, 200, "{}", one.body);
    let v = one.json();
    assert_eq!(v["sessionId"], session.as_str());
    assert_eq!(v["activeRun"]["taskId"], task.as_str());
    let missing = owner.get(&format!("/v1/sessions/{}", unique("never")));
    missing.assert_refusal(404, "not_found");
    let other = Client::as_principal(&unique("sess-other"));
    let foreign = other.get(&format!("/v1/sessions/{session}"));
    assert_eq!(
        (foreign.status, foreign.body.as_str()),
        (404, missing.body.as_str())
    );
    let refused = delete(&other, &session);
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (404, missing.body.as_str())
    );
    assert!(!ids(&other.get("/v1/sessions").json()).contains(&session));
    // An operator sees it.
    let op = Client::as_principal(&unique("sess-op")).with_role("operator");
    assert_eq!(op.get(&format!("/v1/sessions/{session}")).status, 200);
    assert_eq!(owner.cancel(&task).status, 200);
}

#[test]
fn deleting_a_session_with_an_active_run_is_the_409_a_submit_gets_and_deletes_nothing() {
    let c = Client::as_principal(&unique("sess-busy"));
    let session = unique("busy");
    let task = c.submit(&session, json!({})).admitted();
    let refused = delete(&c, &session);
    assert_eq!(refused.status, 409);
    assert_eq!(refused.body, running_conflict_body(&task));
    assert_eq!(
        c.get(&format!("/v1/runs/{task}")).json()["status"],
        "running"
    );
    assert_eq!(c.get(&format!("/v1/sessions/{session}")).status, 200);
    assert_eq!(c.cancel(&task).status, 200);
    assert_eq!(delete(&c, &session).status, 200);
}

#[test]
fn deleting_a_finished_session_removes_it_and_a_new_submit_into_it_starts_fresh() {
    let c = Client::as_principal(&unique("sess-del"));
    let session = unique("gone");
    let key = unique("key");
    let body = json!({"sessionId": session, "objective": "write a haiku"});
    let old = c
        .post_json_with("/v1/runs", &body, &[("Idempotency-Key", &key)])
        .admitted();
    assert_eq!(c.cancel(&old).status, 200);
    let gone = delete(&c, &session);
    assert_eq!(gone.status, 200, "{}", gone.body);
    assert_eq!(
        gone.json(),
        json!({"sessionId": session, "deleted": true, "runsDeleted": 1})
    );
    c.get(&format!("/v1/runs/{old}"))
        .assert_refusal(404, "not_found");
    c.get(&format!("/v1/runs/{old}/events"))
        .assert_refusal(404, "not_found");
    c.get(&format!("/v1/sessions/{session}"))
        .assert_refusal(404, "not_found");
    assert!(!ids(&c.get("/v1/sessions?limit=200").json()).contains(&session));
    delete(&c, &session).assert_refusal(404, "not_found");
    // The same id and the same key: a fresh run, not a replay of the deleted one.
    let again = c.post_json_with("/v1/runs", &body, &[("Idempotency-Key", &key)]);
    let fresh = again.admitted();
    assert_ne!(fresh, old);
    assert_eq!(again.header("idempotency-replayed"), None);
    let runs = c.get(&format!("/v1/runs?sessionId={session}")).json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    assert_eq!(runs["runs"][0]["taskId"], fresh.as_str());
    // The session's object forgot the old claim and owner: the new run holds it.
    let busy = c.submit(&session, json!({}));
    assert_eq!(busy.body, running_conflict_body(&fresh));
    assert_eq!(c.cancel(&fresh).status, 200);
}

#[test]
fn session_routes_refuse_bad_input_with_4xx_json() {
    let c = Client::as_principal(&unique("sess-bad"));
    for path in [
        "/v1/sessions?limit=0",
        "/v1/sessions?limit=201",
        "/v1/sessions?limit=ten",
        "/v1/sessions?cursor=zz",
        "/v1/sessions?cursor=3a",
        "/v1/sessions?cursor=",
        "/v1/sessions?sessionId=x",
        "/v1/sessions?limit=%zz",
        "/v1/sessions/a%2Fb",
    ] {
        c.get(path).assert_refusal(400, "invalid_request");
    }
    c.send("PUT", "/v1/sessions/x", None, &[])
        .assert_refusal(405, "method_not_allowed");
    c.send("POST", "/v1/sessions", None, &[])
        .assert_refusal(405, "method_not_allowed");
    delete(&c, "a%2Fb").assert_refusal(400, "invalid_request");
    c.with_role("runner")
        .get("/v1/sessions")
        .assert_refusal(403, "forbidden");
}

fn token_server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

fn as_token(token: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let auth = format!("Bearer {token}");
    let c = Client::anonymous().at(&token_server());
    match body {
        Some(b) => c.post_json_with(path, b, &[("Authorization", &auth)]),
        None => c.send(method, path, None, &[("Authorization", &auth)]),
    }
}

#[test]
fn with_bearer_tokens_alice_neither_sees_nor_deletes_bobs_sessions() {
    let (sa, sb) = (unique("alice-s"), unique("bob-s"));
    let submit = |token, session: &str| {
        as_token(
            token,
            "POST",
            "/v1/runs",
            Some(&json!({"sessionId": session, "objective": "o"})),
        )
        .admitted()
    };
    let ta = submit(ALICE, &sa);
    let tb = submit(BOB, &sb);
    let mine = as_token(ALICE, "GET", "/v1/sessions?limit=200", None).json();
    assert!(ids(&mine).contains(&sa) && !ids(&mine).contains(&sb));
    assert!(mine["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["owner"] == "alice"));
    let missing = as_token(
        ALICE,
        "GET",
        &format!("/v1/sessions/{}", unique("none")),
        None,
    );
    let foreign = as_token(ALICE, "GET", &format!("/v1/sessions/{sb}"), None);
    assert_eq!((foreign.status, &foreign.body), (404, &missing.body));
    let refused = as_token(ALICE, "DELETE", &format!("/v1/sessions/{sb}"), None);
    assert_eq!((refused.status, &refused.body), (404, &missing.body));
    let op = as_token(OPS, "GET", &format!("/v1/sessions/{sb}"), None);
    assert_eq!(op.status, 200, "{}", op.body);
    assert_eq!(op.json()["activeRun"]["taskId"], tb.as_str());
    for (token, task, session) in [(ALICE, &ta, &sa), (BOB, &tb, &sb)] {
        let r = as_token(token, "POST", &format!("/v1/runs/{task}/cancel"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let d = as_token(token, "DELETE", &format!("/v1/sessions/{session}"), None);
        assert_eq!(d.status, 200, "{}", d.body);
    }
}

/// Runs one statement against the local Worker's store of record, out of band; the rows it returns
/// (only their number is read). PostgreSQL when `SEMA_LOCAL_PG` names the Worker's database (a psql
/// connection string), else the Worker's local D1 under `SEMA_LOCAL_STATE`.
fn store_sql(sql: &str) -> Vec<Value> {
    if let Ok(url) = std::env::var("SEMA_LOCAL_PG") {
        return pg(&url, sql);
    }
    let state = std::env::var("SEMA_LOCAL_STATE")
        .expect("SEMA_LOCAL_STATE is not set: run through scripts/test");
    crate::helpers::d1_execute(&state, sql)
}

/// [`store_sql`] on PostgreSQL through psql: one value per row, its columns joined by `|`.
fn pg(url: &str, sql: &str) -> Vec<Value> {
    crate::helpers::psql(url, sql)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| Value::String(l.to_owned()))
        .collect()
}

#[test]
fn the_retention_tick_deletes_old_terminal_runs_and_never_an_active_one() {
    let c = Client::as_principal(&unique("sess-retain"));
    let (old_session, live_session) = (unique("old"), unique("live"));
    let key = unique("key");
    let body = json!({"sessionId": old_session, "objective": "write a haiku"});
    let old = c
        .post_json_with("/v1/runs", &body, &[("Idempotency-Key", &key)])
        .admitted();
    assert_eq!(c.cancel(&old).status, 200);
    let live = c.submit(&live_session, json!({})).admitted();
    // Both last written two days ago (RETENTION_DAYS is 1); the live run's heartbeat stays fresh,
    // so no stale reaper fails it in the same tick.
    let two_days = 2 * 86_400_000;
    store_sql(&format!(
        "UPDATE task_run SET updated_at = updated_at - {two_days}, created_at = created_at - {two_days} \
         WHERE task_id IN ('{old}', '{live}')"
    ));
    let tick = c.get("/__scheduled?cron=*+*+*+*+*");
    assert_eq!(tick.status, 200, "scheduled route: {}", tick.body);
    c.get(&format!("/v1/runs/{old}"))
        .assert_refusal(404, "not_found");
    assert!(store_sql(&format!("SELECT 1 FROM run_event WHERE task_id = '{old}'")).is_empty());
    assert!(store_sql(&format!(
        "SELECT 1 FROM idempotency_key WHERE task_id = '{old}'"
    ))
    .is_empty());
    assert_eq!(
        c.get(&format!("/v1/runs/{live}")).json()["status"],
        "running"
    );
    let op = Client::as_principal(&unique("sess-op")).with_role("operator");
    let ticks = op.get("/v1/admin/reapers").json();
    let newest = &ticks["ticks"][0];
    assert_eq!(newest["retentionDays"], 1, "{newest}");
    assert!(
        newest["retentionRunsDeleted"].as_u64().unwrap() >= 1,
        "{newest}"
    );
    // The key is free again: a new submit with it is a fresh run.
    let again = c.post_json_with("/v1/runs", &body, &[("Idempotency-Key", &key)]);
    assert_ne!(again.admitted(), old);
    assert_eq!(again.header("idempotency-replayed"), None);
    assert_eq!(c.cancel(&again.task_id()).status, 200);
    assert_eq!(c.cancel(&live).status, 200);
}

#[test]
fn a_delete_racing_a_submit_never_deletes_the_run_that_submit_admitted() {
    let c = Client::as_principal(&unique("sess-race"));
    for round in 0..10 {
        let session = unique(&format!("race{round}"));
        let first = c.submit(&session, json!({})).admitted();
        assert_eq!(c.cancel(&first).status, 200);
        let (submitter, deleter) = (c.clone(), c.clone());
        let s1 = session.clone();
        let submit = std::thread::spawn(move || submitter.submit(&s1, json!({})));
        let s2 = session.clone();
        let del = std::thread::spawn(move || delete(&deleter, &s2));
        let (submitted, deleted) = (submit.join().unwrap(), del.join().unwrap());
        let task = submitted.admitted();
        match deleted.status {
            // The delete went first: the new run was admitted into a fresh session and survives.
            200 => {}
            // The submit went first: the delete names its run.
            409 => assert_eq!(deleted.body, running_conflict_body(&task)),
            other => panic!("round {round}: delete answered {other}: {}", deleted.body),
        }
        let run = c.get(&format!("/v1/runs/{task}"));
        assert_eq!(
            run.status, 200,
            "round {round}: the admitted run is gone: {}",
            run.body
        );
        assert_eq!(run.json()["status"], "running");
        let listed = c.get(&format!("/v1/sessions/{session}")).json();
        assert_eq!(
            listed["activeRun"]["taskId"],
            task.as_str(),
            "round {round}"
        );
        assert_eq!(c.cancel(&task).status, 200);
    }
}

#[test]
fn a_leader_runs_child_session_is_kept_until_the_leader_settles() {
    let leader = as_token(
        ALICE,
        "POST",
        "/v1/leader/runs",
        Some(
            &json!({"objective": "o", "subtasks": [{"objective": "a"}, {"objective": "b"}],
            "maxConcurrency": 1}),
        ),
    );
    assert_eq!(leader.status, 201, "{}", leader.body);
    let v = leader.json();
    let id = v["id"].as_str().unwrap().to_owned();
    let first = v["children"][0]["taskId"]
        .as_str()
        .expect("child 0 started")
        .to_owned();
    let child_session = format!("leader-{id}-0");
    // While the child runs, the session is held like any other.
    let busy = as_token(
        ALICE,
        "DELETE",
        &format!("/v1/sessions/{child_session}"),
        None,
    );
    assert_eq!(
        (busy.status, busy.body.clone()),
        (409, running_conflict_body(&first))
    );
    // Its run ended but the leader still runs (child 1 now): its run is the leader's bookkeeping.
    let r = as_token(ALICE, "POST", &format!("/v1/runs/{first}/cancel"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let kept = as_token(
        ALICE,
        "DELETE",
        &format!("/v1/sessions/{child_session}"),
        None,
    );
    let body = kept.assert_refusal(409, "conflict.session_leader_running");
    assert_eq!(body["leaderRunId"], id.as_str());
    assert_eq!(
        as_token(ALICE, "GET", &format!("/v1/runs/{first}"), None).status,
        200
    );
    // Once the leader settled, the child session goes; the leader's record keeps its reports.
    let r = as_token(ALICE, "POST", &format!("/v1/leader/runs/{id}/cancel"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let gone = as_token(
        ALICE,
        "DELETE",
        &format!("/v1/sessions/{child_session}"),
        None,
    );
    assert_eq!(gone.status, 200, "{}", gone.body);
    let after = as_token(ALICE, "GET", &format!("/v1/leader/runs/{id}"), None).json();
    assert_eq!(after["status"], "failed", "{after}");
    assert!(
        after["result"].as_array().is_some_and(|r| r.len() == 2),
        "{after}"
    );
}
