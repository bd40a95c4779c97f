//! The `listing` scenario (issue 15 item 4): the read faces a client pages through, timed on a store
//! seeded out of band (`bench/scale_seed.py`: sessions owned by 100 tenants `tenant-<i>`, sessions
//! `scale-s-<i>`), so the same figures at 1,000 and at 1,000,000 runs show whether a listing's cost
//! grows with the store.
//!
//! Per sample, as `tenant` (`X-Sema-Principal`, local mode), one request of each kind:
//! - `runs`: `GET /v1/runs?limit=50`, the tenant's newest runs;
//! - `runs-deep-page`: the page reached by following `nextCursor` `--pages` times from the first
//!   (only the last request is timed; keyset paging should cost the same at any depth);
//! - `runs-of-session`: `GET /v1/runs?sessionId=<session>&limit=50`;
//! - `runs-by-status`: `GET /v1/runs?status=completed&limit=50`;
//! - `sessions`: `GET /v1/sessions?limit=50`;
//! - `approvals`: `GET /v1/approvals` (the tenant's pending gates).
//!
//! Each kind reports p50/p99 latency, the rows its last answer listed (a seeded store must list
//! some: a kind that lists none at all is reported as an error), and non-200 answers as errors.

use crate::{emit, percentile};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Rows per page of every listing.
const PAGE: usize = 50;

/// One GET as `tenant`: status (0 = transport error), JSON body, milliseconds to the body read.
fn get(agent: &ureq::Agent, url: &str, tenant: &str) -> (u16, Value, f64) {
    let t = Instant::now();
    let (status, body) = match agent.get(url).set("x-sema-principal", tenant).call() {
        Ok(r) => (r.status(), r.into_json::<Value>().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json::<Value>().unwrap_or(Value::Null)),
        Err(_) => (0, Value::Null),
    };
    (status, body, t.elapsed().as_secs_f64() * 1000.0)
}

/// The rows of a listing answer (whichever array it carries).
fn rows(body: &Value) -> usize {
    ["runs", "sessions", "approvals"]
        .iter()
        .find_map(|k| body[*k].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// The scenario `listing`.
pub fn listing(url: &str, samples: usize, tenant: &str, session: &str, pages: usize) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build();
    let kinds: [(&str, String); 5] = [
        ("runs", format!("{url}/v1/runs?limit={PAGE}")),
        (
            "runs-of-session",
            format!("{url}/v1/runs?sessionId={session}&limit={PAGE}"),
        ),
        (
            "runs-by-status",
            format!("{url}/v1/runs?status=completed&limit={PAGE}"),
        ),
        ("sessions", format!("{url}/v1/sessions?limit={PAGE}")),
        ("approvals", format!("{url}/v1/approvals")),
    ];
    // The deep page's cursor, found once by walking from the first page.
    let mut cursor: Option<String> = None;
    let mut walked = 0;
    for _ in 0..pages {
        let page = match &cursor {
            Some(c) => format!("{url}/v1/runs?limit={PAGE}&cursor={c}"),
            None => format!("{url}/v1/runs?limit={PAGE}"),
        };
        let (status, body, _) = get(&agent, &page, tenant);
        match body["nextCursor"].as_str() {
            Some(next) if status == 200 => {
                cursor = Some(next.to_owned());
                walked += 1;
            }
            _ => break,
        }
    }
    let deep = cursor.map(|c| format!("{url}/v1/runs?limit={PAGE}&cursor={c}"));
    let mut all: Vec<(&str, &str)> = kinds.iter().map(|(k, u)| (*k, u.as_str())).collect();
    if let Some(d) = &deep {
        all.push(("runs-deep-page", d.as_str()));
    }
    for (kind, target) in all {
        let (mut lat, mut errors, mut listed) = (Vec::with_capacity(samples), 0, 0);
        for _ in 0..samples {
            let (status, body, ms) = get(&agent, target, tenant);
            if status == 200 {
                lat.push(ms);
                listed = rows(&body);
            } else {
                errors += 1;
            }
        }
        if listed == 0 {
            errors += 1;
        }
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        emit(json!({
            "scenario": "listing",
            "what": kind,
            "tenant": tenant,
            "pages_walked": (kind == "runs-deep-page").then_some(walked),
            "rows_listed": listed,
            "samples": lat.len(),
            "errors": errors,
            "p50_ms": (!lat.is_empty()).then(|| percentile(&lat, 50.0)),
            "p99_ms": (!lat.is_empty()).then(|| percentile(&lat, 99.0)),
        }));
    }
}
