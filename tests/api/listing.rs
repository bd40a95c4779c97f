use crate::helpers::{unique, Client};
use serde_json::json;

#[test]
fn runs_page_newest_first_without_overlap_or_gaps() {
    let c = Client::as_principal(&unique("lister"));
    let session = unique("pages");
    let mut admitted = vec![];
    for _ in 0..5 {
        let task = c.submit(&session, json!({})).admitted();
        assert_eq!(c.cancel(&task).status, 200);
        admitted.push(task);
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    let mut seen = vec![];
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cur) => format!("/v1/runs?sessionId={session}&limit=2&cursor={cur}"),
            None => format!("/v1/runs?sessionId={session}&limit=2"),
        };
        let page = c.get(&path).json();
        pages += 1;
        for run in page["runs"].as_array().unwrap() {
            seen.push(run["taskId"].as_str().unwrap().to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 10, "pagination does not terminate");
    }
    admitted.reverse();
    assert_eq!(seen, admitted);
    assert_eq!(pages, 3);
}

#[test]
fn the_status_filter_keeps_only_matching_runs() {
    let c = Client::as_principal(&unique("filter"));
    let session = unique("filter");
    let first = c.submit(&session, json!({})).admitted();
    assert_eq!(c.cancel(&first).json()["status"], "cancelled");
    let second = c.submit(&session, json!({})).admitted();
    let running = c
        .get(&format!("/v1/runs?sessionId={session}&status=running"))
        .json();
    assert_eq!(running["runs"].as_array().unwrap().len(), 1);
    assert_eq!(running["runs"][0]["taskId"], second.as_str());
    let cancelled = c
        .get(&format!("/v1/runs?sessionId={session}&status=cancelled"))
        .json();
    assert_eq!(cancelled["runs"][0]["taskId"], first.as_str());
}

#[test]
fn listing_without_a_session_shows_the_callers_runs_across_sessions() {
    let c = Client::as_principal(&unique("across"));
    let a = c.submit(&unique("x1"), json!({})).admitted();
    let b = c.submit(&unique("x2"), json!({})).admitted();
    let all = c.get("/v1/runs").json();
    let ids: Vec<_> = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["taskId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, vec![b, a]);
}
