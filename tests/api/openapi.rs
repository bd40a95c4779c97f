//! The OpenAPI document and its page, as a caller meets them: public (no identity, and on closed
//! deployments too), the document as `crates/core/openapi.json` says it (compacted at build time),
//! the page under a
//! Content-Security-Policy that lets nothing run or load.

use crate::helpers::Client;

/// The committed document, which the served one says in fewer bytes.
const COMMITTED: &str = include_str!("../../crates/core/openapi.json");

fn closed_servers() -> Vec<String> {
    std::env::var("SEMA_CLOSED_URLS")
        .expect("SEMA_CLOSED_URLS is not set: run through scripts/test")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_document_is_served_as_committed_to_anyone_even_by_a_closed_deployment() {
    let mut bases = closed_servers();
    bases.push(crate::helpers::base_url());
    for base in bases {
        let r = Client::anonymous().at(&base).get("/openapi.json");
        assert_eq!(r.status, 200, "{base}: {}", r.body);
        assert_eq!(
            r.body,
            sema_core::openapi::DOCUMENT,
            "{base}: the document as built"
        );
        let (served, committed): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&r.body).unwrap(),
            serde_json::from_str(COMMITTED).unwrap(),
        );
        assert_eq!(served, committed, "{base}: the document as committed");
        assert!(r.body.len() < COMMITTED.len() && !r.body.contains('\n'));
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("application/json"));
        assert_eq!(r.header("cache-control"), Some("public, max-age=300"));
        assert!(r.header("x-sema-d1").is_some());
        assert_eq!(r.json()["openapi"], "3.1.0");
    }
}

#[test]
fn the_docs_page_lists_the_operations_and_may_run_nothing() {
    let mut bases = closed_servers();
    bases.push(crate::helpers::base_url());
    for base in bases {
        let r = Client::anonymous().at(&base).get("/docs");
        assert_eq!(r.status, 200, "{base}");
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        let csp = r.header("content-security-policy").expect("a CSP");
        assert!(csp.starts_with("default-src 'none';"), "{csp}");
        assert!(
            !csp.contains("script-src") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert!(r
            .body
            .contains("<span class=\"p\">/v1/runs/{taskId}/events</span>"));
        assert!(r.body.contains("<code>conflict.session_active_run</code>"));
        assert!(!r.body.contains("<script"));
    }
}

#[test]
fn the_public_routes_take_only_get() {
    let c = Client::anonymous();
    for path in ["/openapi.json", "/docs"] {
        let r = c.send(
            "POST",
            path,
            Some(b"{}"),
            &[("Content-Type", "application/json")],
        );
        r.assert_refusal(405, "method_not_allowed");
        assert_eq!(r.header("allow"), Some("GET"));
    }
}
