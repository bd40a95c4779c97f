//! The one refusal shape: `{"error": <sentence>, "errorCode": <stable code>, ...details}` with a status.
//!
//! Every caller mistake maps to a 4xx `ApiError`; infrastructure failures become [`ApiError::internal`],
//! an opaque 500 whose cause is logged once by the adapter and never sent to the client.

use serde::Serialize;

/// A refusal with its HTTP status. Details keep their insertion order on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    details: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// Adds a detail key; `value` is serialised to JSON now so the body keeps a fixed key order.
    pub fn with<T: Serialize + ?Sized>(mut self, key: &'static str, value: &T) -> Self {
        let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
        self.details.push((key, json));
        self
    }

    /// The value of a detail key, as JSON text.
    pub fn detail(&self, key: &str) -> Option<&str> {
        self.details
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The response body, keys in order: `error`, `errorCode`, then details as added.
    pub fn body(&self) -> String {
        let mut out = String::with_capacity(64 + self.message.len());
        out.push_str("{\"error\":");
        out.push_str(&json_string(&self.message));
        out.push_str(",\"errorCode\":");
        out.push_str(&json_string(self.code));
        for (key, value) in &self.details {
            out.push(',');
            out.push_str(&json_string(key));
            out.push(':');
            out.push_str(value);
        }
        out.push('}');
        out
    }

    pub fn invalid_json(reason: impl std::fmt::Display) -> Self {
        Self::new(
            400,
            "invalid_json",
            format!("request body is not valid JSON: {reason}"),
        )
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request", message)
    }

    /// A field-level validation failure; `field` names the offending field.
    pub fn invalid_field(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(400, "invalid_request", format!("{field}: {message}")).with("field", field)
    }

    pub fn unsupported_media_type() -> Self {
        Self::new(
            415,
            "unsupported_media_type",
            "request body must be JSON (Content-Type: application/json)",
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "payload_too_large",
            format!("request body exceeds {limit} bytes"),
        )
        .with("limitBytes", &limit)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "forbidden", message)
    }

    /// The one "not found" answer; also given to principals who do not own the thing (no oracle).
    pub fn not_found(what: &str) -> Self {
        Self::new(404, "not_found", format!("{what} not found"))
    }

    pub fn method_not_allowed(allowed: &str) -> Self {
        Self::new(
            405,
            "method_not_allowed",
            format!("method not allowed; this route accepts {allowed}"),
        )
        .with("allow", allowed)
    }

    pub fn route_not_found() -> Self {
        Self::new(404, "not_found", "no such route")
    }

    /// A lease holder's write whose epoch no longer matches: nothing was written.
    pub fn lease_lost() -> Self {
        Self::new(
            409,
            "lease_lost",
            "lease lost: this lease epoch no longer holds the run; nothing was written, stop driving it",
        )
    }

    /// An infrastructure failure: opaque to the caller.
    pub fn internal() -> Self {
        Self::new(500, "internal", "internal error")
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_puts_error_and_code_first_then_details_in_insertion_order() {
        let e = ApiError::new(409, "x.y", "t \"q\"")
            .with("zeta", "z")
            .with("alpha", &1);
        assert_eq!(
            e.body(),
            r#"{"error":"t \"q\"","errorCode":"x.y","zeta":"z","alpha":1}"#
        );
    }

    #[test]
    fn body_is_valid_json() {
        let e = ApiError::invalid_field("sessionId", "must match ^[A-Za-z0-9_.-]{1,64}$");
        let v: serde_json::Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["errorCode"], "invalid_request");
        assert_eq!(v["field"], "sessionId");
    }
}
