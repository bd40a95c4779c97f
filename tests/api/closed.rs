//! Closed by default: Workers started from the repository's own configuration with nothing added,
//! and with an empty token table (`SEMA_CLOSED_URLS`, space-separated). Every route but `/health` (and
//! the static console page, which holds no data: `console.rs`) is
//! refused with 503 `auth.not_configured` naming what to configure, whatever identity headers or
//! tokens a caller sends — never an open API.

use crate::helpers::Client;

fn servers() -> Vec<String> {
    std::env::var("SEMA_CLOSED_URLS")
        .expect("SEMA_CLOSED_URLS is not set: run through scripts/test")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

const ROUTES: [(&str, &str); 21] = [
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/runs/some-run"),
    ("POST", "/v1/runs/some-run/cancel"),
    ("GET", "/v1/runs/some-run/events"),
    ("POST", "/v1/runs/some-run/steer"),
    ("POST", "/v1/tasks"),
    ("POST", "/v1/runner/lease"),
    ("POST", "/v1/runs/some-run/heartbeat"),
    ("POST", "/v1/runs/some-run/events"),
    ("POST", "/v1/runs/some-run/finish"),
    ("GET", "/v1/admin/reapers"),
    ("GET", "/v1/admin/sessions/some-session"),
    ("POST", "/v1/leader/runs"),
    ("GET", "/v1/leader/runs"),
    ("GET", "/v1/leader/runs/some-leader"),
    ("POST", "/v1/leader/runs/some-leader/cancel"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/some-session"),
    ("DELETE", "/v1/sessions/some-session"),
    ("POST", "/v1/runs/some-run/stream-ticket"),
];

#[test]
fn a_deployment_without_credentials_refuses_every_route_but_health() {
    let servers = servers();
    assert_eq!(servers.len(), 2, "the closed and the empty-table Workers");
    for base in servers {
        assert_eq!(Client::anonymous().at(&base).get("/health").status, 200);
        for role in ["client", "runner", "operator"] {
            let c = Client::as_principal("mallory").with_role(role).at(&base);
            for (method, path) in ROUTES {
                let body =
                    (method == "POST").then_some(&b"{\"sessionId\":\"s\",\"objective\":\"o\"}"[..]);
                let headers = [
                    ("Content-Type", "application/json"),
                    ("Authorization", "Bearer guess"),
                ];
                let r = c.send(method, path, body, &headers);
                let v = r.assert_refusal(503, "auth.not_configured");
                let text = v["error"].as_str().unwrap();
                assert!(
                    text.contains("SEMA_TOKENS") && text.contains("SEMA_AUTH"),
                    "{method} {path} on {base}: {text}"
                );
            }
        }
    }
}
