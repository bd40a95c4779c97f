//! The HTTP side of `sema`: one blocking agent, the credentials on every request, and the server's
//! answers sorted into what the exit codes distinguish.

use serde_json::Value;
use std::time::Duration;

/// Without a reply in this long a plain request is a network failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// An open event stream hears a heartbeat every 15 s; this long without a byte means it is dead.
pub const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(45);

/// The server and who speaks to it.
pub struct Api {
    agent: ureq::Agent,
    stream_agent: ureq::Agent,
    base: String,
    token: Option<String>,
    principal: Option<String>,
}

/// A request that did not get a 2xx.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with this status and body.
    Status(u16, String),
    /// No answer: connection refused or dropped, timeout, unreadable body.
    Network(String),
}

/// A 2xx answer.
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Result<Value, Failure> {
        serde_json::from_str(&self.body)
            .map_err(|e| Failure::Network(format!("the server's reply is not JSON ({e})")))
    }
}

/// Percent-encodes everything but the unreserved characters, so a user's id never changes a path's
/// shape or a query's parameters (the server refuses what is not a safe id with a 400).
pub fn encode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `?k=v&...` of the parameters that are set (values encoded); empty when none is.
pub fn query(params: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = params
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", encode(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

impl Api {
    pub fn new(base: &str, token: Option<String>, principal: Option<String>) -> Self {
        Self {
            agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(10))
                .timeout(REQUEST_TIMEOUT)
                .build(),
            stream_agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(10))
                .timeout_read(STREAM_READ_TIMEOUT)
                .build(),
            base: base.trim_end_matches('/').to_owned(),
            token,
            principal,
        }
    }

    fn request(&self, agent: &ureq::Agent, method: &str, path: &str) -> ureq::Request {
        let req = agent.request(method, &format!("{}{path}", self.base));
        match (&self.token, &self.principal) {
            (Some(t), _) => req.set("authorization", &format!("Bearer {t}")),
            // Local mode only (a dev server with SEMA_AUTH=local): the principal is a header.
            (None, Some(p)) => req.set("x-sema-principal", p),
            (None, None) => req,
        }
    }

    /// Sends a request (a JSON body when given) and reads the whole answer.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, Failure> {
        let mut req = self.request(&self.agent, method, path);
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = match body {
            Some(b) => req
                .set("content-type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        match result {
            Ok(r) => {
                let status = r.status();
                let body = r
                    .into_string()
                    .map_err(|e| Failure::Network(e.to_string()))?;
                Ok(Reply { status, body })
            }
            Err(ureq::Error::Status(code, r)) => {
                Err(Failure::Status(code, r.into_string().unwrap_or_default()))
            }
            Err(e) => Err(Failure::Network(e.to_string())),
        }
    }

    pub fn get(&self, path: &str) -> Result<Reply, Failure> {
        self.send("GET", path, None, &[])
    }

    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<Reply, Failure> {
        self.send("POST", path, body, &[])
    }

    /// Opens a run's event stream, resuming after `last_event_id` when given.
    pub fn open_stream(
        &self,
        task: &str,
        last_event_id: Option<i64>,
    ) -> Result<ureq::Response, Failure> {
        let path = format!("/v1/runs/{}/events", encode(task));
        let mut req = self
            .request(&self.stream_agent, "GET", &path)
            .set("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.set("last-event-id", &id.to_string());
        }
        match req.call() {
            Ok(r) => Ok(r),
            Err(ureq::Error::Status(code, r)) => {
                Err(Failure::Status(code, r.into_string().unwrap_or_default()))
            }
            Err(e) => Err(Failure::Network(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_encoded_so_they_cannot_change_a_paths_shape() {
        assert_eq!(encode("run-1_a.b~"), "run-1_a.b~");
        assert_eq!(encode("a/b?c=d&e"), "a%2Fb%3Fc%3Dd%26e");
        assert_eq!(encode("é "), "%C3%A9%20");
    }

    #[test]
    fn a_query_holds_only_the_parameters_that_are_set() {
        assert_eq!(query(&[("a", None)]), "");
        assert_eq!(
            query(&[
                ("sessionId", Some("s 1".into())),
                ("status", None),
                ("limit", Some("5".into()))
            ]),
            "?sessionId=s%201&limit=5"
        );
    }
}
