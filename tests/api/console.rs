//! The operator console's page and its way into a run's stream, on the Worker with bearer tokens
//! (`SEMA_TOKEN_URL`, started with `STREAM_TICKET_TTL_SEC=2` so expiry is seen within the test):
//! the page is static and needs no token; a stream ticket opens its own run's SSE stream in place
//! of a bearer, for that run only, until it expires; nobody gets a ticket for a run they may not
//! read; and nothing the console reads may be cached.

use crate::helpers::{unique, Client, Resp};
use crate::tokens::{ALICE, BOB, OPS, RUNNER};
use serde_json::json;

/// The tokens Worker's configured ticket lifetime (scripts/test passes `STREAM_TICKET_TTL_SEC:2`).
const TTL_MS: u64 = 2_000;

fn server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

fn call(token: Option<&str>, method: &str, path: &str, extra: &[(&str, &str)]) -> Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    headers.extend_from_slice(extra);
    Client::anonymous()
        .at(&server())
        .send(method, path, None, &headers)
}

/// A run of `token`'s principal, cancelled at once (no runner takes it), so its stream replays
/// and ends with `done`.
fn ended_run(token: &str) -> String {
    let body =
        json!({"sessionId": unique("console"), "objective": "say hi", "queue": "console-api"});
    let r = Client::anonymous().at(&server()).post_json_with(
        "/v1/runs",
        &body,
        &[("Authorization", &format!("Bearer {token}"))],
    );
    let task = r.admitted();
    let c = call(Some(token), "POST", &format!("/v1/runs/{task}/cancel"), &[]);
    assert_eq!(c.status, 200, "setup: cancel: {}", c.body);
    task
}

fn ticket(token: &str, task: &str) -> Resp {
    call(
        Some(token),
        "POST",
        &format!("/v1/runs/{task}/stream-ticket"),
        &[],
    )
}

fn issued(token: &str, task: &str) -> String {
    let r = ticket(token, task);
    assert_eq!(r.status, 200, "ticket: {}", r.body);
    let v = r.json();
    assert!(v["expiresAt"].as_i64().is_some(), "{}", r.body);
    v["ticket"].as_str().expect("ticket").to_owned()
}

/// `GET /v1/runs/{task}/events?ticket=…` as a browser's EventSource sends it: no Authorization.
fn stream(task: &str, ticket: &str) -> Resp {
    call(
        None,
        "GET",
        &format!("/v1/runs/{task}/events?ticket={ticket}"),
        &[("Accept", "text/event-stream")],
    )
}

#[track_caller]
fn assert_no_store(r: &Resp, what: &str) {
    assert_eq!(
        r.header("cache-control"),
        Some("no-store"),
        "{what}: {:?}",
        r.headers
    );
}

#[test]
fn the_console_page_and_its_assets_are_served_without_a_token_with_strict_headers() {
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let r = call(None, "GET", path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(
            r.header("content-type").unwrap_or("").starts_with(kind),
            "{path}"
        );
        assert_no_store(&r, path);
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        let csp = r.header("content-security-policy").unwrap_or("");
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
    }
    let page = call(None, "GET", "/console", &[]).body;
    // Nothing from elsewhere, nothing inline: the page only names its own two assets.
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(page.contains(r#"src="/console/console.js""#) && !page.contains("<script>"));
    assert!(!page.contains("style=\""));
    call(None, "GET", "/console/other.js", &[]).assert_refusal(404, "not_found");
    // The script keeps the token in memory: no web storage, no cookie.
    let script = call(None, "GET", "/console/console.js", &[]).body;
    for forbidden in [
        "localStorage",
        "sessionStorage",
        "document.cookie",
        "indexedDB",
    ] {
        assert!(!script.contains(forbidden), "console.js uses {forbidden}");
    }
}

#[test]
fn a_stream_ticket_opens_its_own_run_and_no_other() {
    let (mine, other) = (ended_run(ALICE), ended_run(ALICE));
    let t = issued(ALICE, &mine);
    assert!(t.starts_with("st1_"), "{t}");
    let s = stream(&mine, &t);
    assert_eq!(s.status, 200, "{}", s.body);
    assert!(s
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/event-stream"));
    assert_no_store(&s, "ticketed stream");
    assert!(
        s.body.contains(r#""type":"done""#) && s.body.contains("cancelled"),
        "{}",
        s.body
    );
    // Reusable while live (EventSource reconnects with the same URL), resuming after `after`.
    let again = call(
        None,
        "GET",
        &format!("/v1/runs/{mine}/events?ticket={t}&after=0"),
        &[("Accept", "text/event-stream")],
    );
    assert_eq!(again.status, 200, "{}", again.body);
    // The same ticket on another run of the same principal: refused.
    stream(&other, &t).assert_refusal(401, "unauthorized");
    // It opens the stream only, not the JSON page, and stands for no other route.
    let page = call(
        None,
        "GET",
        &format!("/v1/runs/{mine}/events?ticket={t}"),
        &[],
    );
    page.assert_refusal(400, "invalid_request");
    call(None, "GET", &format!("/v1/runs/{mine}?ticket={t}"), &[])
        .assert_refusal(401, "unauthorized");
    call(None, "GET", &format!("/v1/runs?ticket={t}"), &[]).assert_refusal(401, "unauthorized");
    call(
        None,
        "POST",
        &format!("/v1/runs/{mine}/cancel?ticket={t}"),
        &[],
    )
    .assert_refusal(401, "unauthorized");
}

#[test]
fn nobody_gets_a_ticket_for_a_run_they_may_not_read() {
    let task = ended_run(ALICE);
    ticket(BOB, &task).assert_refusal(404, "not_found");
    ticket(RUNNER, &task).assert_refusal(403, "forbidden");
    call(None, "POST", &format!("/v1/runs/{task}/stream-ticket"), &[])
        .assert_refusal(401, "unauthorized");
    ticket(ALICE, "no-such-run").assert_refusal(404, "not_found");
    // Operators read every run, so they may follow it.
    let t = issued(OPS, &task);
    assert_eq!(stream(&task, &t).status, 200);
    // A ticket of bob's own run does not open alice's.
    let bobs = ended_run(BOB);
    let b = issued(BOB, &bobs);
    assert_eq!(stream(&bobs, &b).status, 200);
    stream(&task, &b).assert_refusal(401, "unauthorized");
}

#[test]
fn forged_malformed_and_expired_tickets_are_refused_with_401() {
    let task = ended_run(ALICE);
    let forged = format!("st1_{}", "0f".repeat(32));
    for bad in [forged.as_str(), "st1_abc", "nope", "", "%ZZ"] {
        let r = stream(&task, bad);
        let want = if bad == "%ZZ" { 400 } else { 401 };
        assert_eq!(r.status, want, "{bad:?}: {}", r.body);
    }
    // A missing run answers the same 401: a ticket-bearing caller learns nothing about ids.
    stream("no-such-run", &forged).assert_refusal(401, "unauthorized");
    let t = issued(ALICE, &task);
    assert_eq!(stream(&task, &t).status, 200);
    std::thread::sleep(std::time::Duration::from_millis(TTL_MS + 700));
    let late = stream(&task, &t);
    late.assert_refusal(401, "unauthorized");
    assert_no_store(&late, "refusal");
    // A fresh ticket works again.
    assert_eq!(stream(&task, &issued(ALICE, &task)).status, 200);
}

#[test]
fn every_answer_the_console_reads_is_marked_no_store() {
    let task = ended_run(ALICE);
    for (token, path) in [
        (ALICE, "/v1/runs?limit=5".to_owned()),
        (OPS, "/v1/runs?limit=5".to_owned()),
        (ALICE, format!("/v1/runs/{task}")),
        (ALICE, "/v1/approvals?limit=5".to_owned()),
        (ALICE, "/v1/leader/runs?limit=5".to_owned()),
        (OPS, "/v1/admin/reapers".to_owned()),
        (ALICE, "/v1/admin/reapers".to_owned()),
        (ALICE, "/v1/sessions?limit=5".to_owned()),
    ] {
        let r = call(Some(token), "GET", &path, &[]);
        assert!(r.status < 500, "{path}: {} {}", r.status, r.body);
        assert_no_store(&r, &path);
    }
    assert_no_store(&ticket(ALICE, &task), "ticket");
    let sse = call(
        Some(ALICE),
        "GET",
        &format!("/v1/runs/{task}/events"),
        &[("Accept", "text/event-stream")],
    );
    assert_no_store(&sse, "bearer stream");
}

#[test]
fn a_closed_deployment_serves_the_page_but_refuses_tickets_and_ticketed_streams() {
    let closed: Vec<String> = std::env::var("SEMA_CLOSED_URLS")
        .expect("SEMA_CLOSED_URLS is not set: run through scripts/test")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(!closed.is_empty());
    let forged = format!("st1_{}", "ab".repeat(32));
    for base in closed {
        let c = Client::anonymous().at(&base);
        assert_eq!(c.get("/console").status, 200, "{base}");
        c.send("POST", "/v1/runs/some-run/stream-ticket", None, &[])
            .assert_refusal(503, "auth.not_configured");
        c.send(
            "GET",
            &format!("/v1/runs/some-run/events?ticket={forged}"),
            None,
            &[("Accept", "text/event-stream")],
        )
        .assert_refusal(503, "auth.not_configured");
    }
}
