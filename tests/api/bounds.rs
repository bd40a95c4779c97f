//! Bounded memory in the session object under hostile clients, observed through the operators'
//! diagnostics route (`GET /v1/admin/sessions/{id}`).

use crate::helpers::{unique, Client};
use serde_json::json;

fn stats(session: &str) -> serde_json::Value {
    let r = Client::anonymous()
        .with_role("operator")
        .get(&format!("/v1/admin/sessions/{session}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn ten_thousand_refused_sync_submits_into_a_busy_session_leave_no_waiter_behind() {
    let session = unique("waiters");
    let c = Client::anonymous();
    let holder = c.submit(&session, json!({})).admitted();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (c, session) = (c.clone(), session.clone());
            std::thread::spawn(move || {
                for _ in 0..1_250 {
                    let r = c.post_json(
                        "/v1/tasks",
                        &json!({"sessionId": session, "objective": "again", "stream": false}),
                    );
                    assert_eq!(r.status, 409, "{}", r.body);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let s = stats(&session);
    assert_eq!(
        (s["waiters"].as_u64(), s["streams"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    assert_eq!(s["claimTaskId"], holder.as_str());
    c.cancel(&holder);
}

#[test]
fn a_sync_wait_that_times_out_leaves_no_waiter_behind() {
    let session = unique("timeout");
    let c = Client::anonymous();
    let r = c.post_json(
        "/v1/tasks",
        &json!({"sessionId": session, "objective": "no runner here", "stream": false, "waitMs": 1}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let task = r.json()["taskId"].as_str().unwrap().to_owned();
    let s = stats(&session);
    assert_eq!(s["waiters"], 0, "{s}");
    c.cancel(&task);
}

#[test]
fn a_run_serves_at_most_256_streams_and_refuses_more_with_429() {
    let c = Client::anonymous();
    let task = c.submit(&unique("streams"), json!({})).admitted();
    let url = format!("{}/v1/runs/{task}/events", crate::helpers::base_url());
    let open = || match ureq::get(&url).set("Accept", "text/event-stream").call() {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(code, r)) => Err((code, r.into_string().unwrap_or_default())),
        Err(e) => panic!("transport error: {e}"),
    };
    let mut streams = Vec::new();
    for i in 0..256 {
        streams.push(open().unwrap_or_else(|e| panic!("stream {i} refused: {e:?}")));
    }
    let (code, body) = open().expect_err("the 257th stream was accepted");
    assert_eq!(code, 429, "{body}");
    assert!(body.contains("too_many_streams"), "{body}");
    // Readers that went away free their places.
    drop(streams);
    let start = std::time::Instant::now();
    loop {
        match open() {
            Ok(_) => break,
            Err((429, _)) if start.elapsed() < std::time::Duration::from_secs(30) => {
                std::thread::sleep(std::time::Duration::from_millis(500))
            }
            Err(e) => panic!("places never freed: {e:?}"),
        }
    }
    c.cancel(&task);
}
