//! Shared helpers for the black-box API tests: a tiny blocking HTTP client bound to the Worker under
//! test (`SEMA_URL`, set by scripts/test), unique names, and JSON accessors.

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Base URL of the running Worker, e.g. `http://127.0.0.1:8799`.
/// Runs `sql` through psql against `url` (a test's out-of-band look at, or edit of, a PostgreSQL
/// Worker's rows) and returns psql's unaligned, tuples-only output; panics with the server's error.
pub fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `sql` against the local D1 of a Worker whose state is under `state` (`wrangler d1 execute
/// --local --persist-to`, as an operator's manual SQL would) and returns the first statement's rows.
pub fn d1_execute(state: &str, sql: &str) -> Vec<Value> {
    let out = std::process::Command::new("npx")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "wrangler",
            "d1",
            "execute",
            "DB",
            "--local",
            "--persist-to",
            state,
        ])
        .args(["--json", "--command", sql])
        .output()
        .expect("npx wrangler d1 execute");
    assert!(
        out.status.success(),
        "{sql}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("wrangler --json output");
    v[0]["results"].as_array().cloned().unwrap_or_default()
}

pub fn base_url() -> String {
    std::env::var("SEMA_URL").expect(
        "SEMA_URL is not set: run these tests through scripts/test, which starts wrangler dev",
    )
}

/// A fresh id that no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{nanos:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// A response, fully read.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", self.body))
    }

    /// The `taskId` of an admission; panics with the body when there is none.
    pub fn task_id(&self) -> String {
        self.json()["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no taskId in {} {}", self.status, self.body))
            .to_owned()
    }

    /// The `taskId` of a fresh admission, asserting the 202 first: a test's setup that was refused
    /// (or replayed) must fail the test, not let it check listings or states of runs that are not there.
    #[track_caller]
    pub fn admitted(&self) -> String {
        assert_eq!(
            self.status, 202,
            "setup: expected an admission (202); body: {}",
            self.body
        );
        self.task_id()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The D1 round trips the response reports (`x-sema-d1: round-trips=N; statements=M`).
    #[track_caller]
    pub fn round_trips(&self) -> u32 {
        let header = self.header("x-sema-d1").expect("an x-sema-d1 header");
        header
            .split(';')
            .find_map(|p| p.trim().strip_prefix("round-trips="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("x-sema-d1 without round-trips: {header}"))
    }

    /// Asserts a refusal: the status, the code, and the `{error, errorCode}` shape.
    pub fn assert_refusal(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        let v = self.json();
        assert_eq!(v["errorCode"], code, "body: {}", self.body);
        assert!(
            v["error"].as_str().is_some_and(|s| !s.is_empty()),
            "refusal without an error sentence: {}",
            self.body
        );
        v
    }
}

/// A client speaking as one principal (local mode: `X-Sema-Principal` / `X-Sema-Role`).
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    principal: Option<String>,
    role: Option<String>,
}

impl Client {
    pub fn anonymous() -> Self {
        Self {
            agent: ureq::AgentBuilder::new()
                .timeout(std::time::Duration::from_secs(30))
                .build(),
            base: base_url(),
            principal: None,
            role: None,
        }
    }

    pub fn as_principal(name: &str) -> Self {
        Self {
            principal: Some(name.to_owned()),
            ..Self::anonymous()
        }
    }

    /// The same client against another server.
    pub fn at(mut self, base: &str) -> Self {
        self.base = base.to_owned();
        self
    }

    pub fn with_role(mut self, role: &str) -> Self {
        self.role = Some(role.to_owned());
        self
    }

    /// Sends a request with optional raw body and extra headers; never panics on HTTP status.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = self
            .agent
            .request(method, &format!("{}{}", self.base, path));
        if let Some(p) = &self.principal {
            req = req.set("X-Sema-Principal", p);
        }
        if let Some(r) = &self.role {
            req = req.set("X-Sema-Role", r);
        }
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = match body {
            Some(b) => req.send_bytes(b),
            None => req.call(),
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: transport error: {e}"),
        };
        let status = resp.status();
        let headers = resp
            .headers_names()
            .into_iter()
            .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_owned())))
            .collect();
        let body = resp.into_string().expect("response body");
        Resp {
            status,
            headers,
            body,
        }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None, &[])
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.post_json_with(path, body, &[])
    }

    pub fn post_json_with(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        self.send("POST", path, Some(body.to_string().as_bytes()), &all)
    }

    /// `POST /v1/runs` with `{sessionId, objective}` plus `extra` fields.
    pub fn submit(&self, session: &str, extra: Value) -> Resp {
        let mut body = serde_json::json!({ "sessionId": session, "objective": "write a haiku" });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.post_json("/v1/runs", &body)
    }

    pub fn cancel(&self, task_id: &str) -> Resp {
        self.send("POST", &format!("/v1/runs/{task_id}/cancel"), None, &[])
    }
}

/// The 409 texts, written out here independently of the server's code (U+2014 dashes; the
/// `{activeTaskId}` placeholder is literal).
pub const CONFLICT_RUNNING_TEXT: &str = "session already has an active run \u{2014} POST /v1/runs/{activeTaskId}/steer injects a message into the running turn (queued, applied at the next turn boundary), or POST /v1/runs/{activeTaskId}/cancel stops it (same-instance interactive runs abort immediately)";

/// The exact 409 body for a session whose running holder is `task_id`.
pub fn running_conflict_body(task_id: &str) -> String {
    format!(
        "{{\"error\":\"{CONFLICT_RUNNING_TEXT}\",\"errorCode\":\"conflict.session_active_run\",\"activeTaskId\":\"{task_id}\",\"activeTaskStatus\":\"running\"}}"
    )
}

/// The exact 409 body for a session whose holder `task_id` is parked (`status`: `suspended` or
/// `needs_review`) on a pending gate of `kind` that `decide_path` resolves (SPEC-core §4.3: the
/// path is substituted, `{activeTaskId}` stays literal).
#[allow(dead_code)] // used by the runner tests (tests/runner/gates.rs)
pub fn parked_conflict_body(task_id: &str, status: &str, kind: &str, decide_path: &str) -> String {
    format!(
        "{{\"error\":\"session already has an active run \u{2014} it is parked waiting for a decision ({status}); resolve it via POST {decide_path}, or POST /v1/runs/{{activeTaskId}}/cancel abandons it\",\"errorCode\":\"conflict.session_active_run\",\"activeTaskId\":\"{task_id}\",\"activeTaskStatus\":\"{status}\",\"pendingGate\":{{\"kind\":\"{kind}\",\"decidePath\":\"{decide_path}\"}}}}"
    )
}
