//! Bearer-token mode, against a second Worker started with `SEMA_TOKENS` configured
//! (`SEMA_TOKEN_URL`). The tokens below are the ones scripts/test configures.

use crate::helpers::{unique, Client};
use serde_json::json;

pub const ALICE: &str = "test-token-alice-client";
pub const BOB: &str = "test-token-bob-client";
pub const OPS: &str = "test-token-ops-operator";
pub const RUNNER: &str = "test-token-runner";

fn server() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

fn with_token(token: Option<&str>) -> (Client, Vec<(&'static str, String)>) {
    let headers = token
        .map(|t| vec![("Authorization", format!("Bearer {t}"))])
        .unwrap_or_default();
    (Client::anonymous().at(&server()), headers)
}

fn submit(token: Option<&str>, session: &str, extra: &[(&str, &str)]) -> crate::helpers::Resp {
    let (c, auth) = with_token(token);
    let mut headers: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.extend_from_slice(extra);
    c.post_json_with(
        "/v1/runs",
        &json!({"sessionId": session, "objective": "o"}),
        &headers,
    )
}

fn get(token: Option<&str>, path: &str) -> crate::helpers::Resp {
    let (c, auth) = with_token(token);
    let headers: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.send("GET", path, None, &headers)
}

#[test]
fn with_tokens_configured_a_request_without_a_valid_token_is_401() {
    submit(None, &unique("tok"), &[]).assert_refusal(401, "unauthorized");
    submit(Some("not-a-token"), &unique("tok"), &[]).assert_refusal(401, "unauthorized");
    // The local-mode header is not trusted once tokens exist.
    submit(None, &unique("tok"), &[("X-Sema-Principal", "alice")])
        .assert_refusal(401, "unauthorized");
    // Health stays open.
    assert_eq!(get(None, "/health").status, 200);
}

#[test]
fn a_token_acts_as_its_principal_whatever_headers_claim() {
    let session = unique("tok");
    let r = submit(Some(ALICE), &session, &[("X-Sema-Principal", "mallory")]);
    assert_eq!(r.status, 202, "{}", r.body);
    let task = r.task_id();
    assert_eq!(get(Some(ALICE), &format!("/v1/runs/{task}")).status, 200);
    // The operator sees it; the runner credential is kept off client routes.
    assert_eq!(get(Some(OPS), &format!("/v1/runs/{task}")).status, 200);
    get(Some(RUNNER), &format!("/v1/runs/{task}")).assert_refusal(403, "forbidden");
}
