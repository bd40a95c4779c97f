//! The one refusal shape: `{"error": <sentence>, "errorCode": <stable code>, ...details}` with a status,
//! and the one catalogue of error codes ([`ErrorCode`]): every code the API can answer is a variant
//! here, with its HTTP status. Nothing else mints a code, so `docs/ARCHITECTURE.md`'s error table can be
//! checked against [`ErrorCode::ALL`] by a test.
//!
//! Every caller mistake maps to a 4xx `ApiError`; infrastructure failures become [`ApiError::internal`],
//! an opaque 500 whose cause is logged once by the adapter and never sent to the client.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Every error code of the API, with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidJson,
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    SessionActiveRun,
    TaskIdTaken,
    DuplicateEventId,
    RunNotRunning,
    LeaseLost,
    PayloadTooLarge,
    UnsupportedMediaType,
    KeyReused,
    Internal,
    AuthNotConfigured,
    TooManyStreams,
    SteerQueueFull,
    HeaderTooLarge,
    GateNotToolApproval,
    GateNotPlanReview,
    GateNotResumable,
    WakeGatePending,
    GateExpired,
    NotResumable,
    GatePending,
    LeaderDisabled,
    TooManyWaiting,
    UpgradeRequired,
    SessionLeaderRunning,
    StoreSchemaMismatch,
}

impl ErrorCode {
    /// The whole catalogue, in the order of the documented table.
    pub const ALL: [ErrorCode; 31] = [
        Self::InvalidJson,
        Self::InvalidRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::SessionActiveRun,
        Self::TaskIdTaken,
        Self::DuplicateEventId,
        Self::RunNotRunning,
        Self::LeaseLost,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::KeyReused,
        Self::Internal,
        Self::AuthNotConfigured,
        Self::TooManyStreams,
        Self::SteerQueueFull,
        Self::HeaderTooLarge,
        Self::GateNotToolApproval,
        Self::GateNotPlanReview,
        Self::GateNotResumable,
        Self::WakeGatePending,
        Self::GateExpired,
        Self::NotResumable,
        Self::GatePending,
        Self::LeaderDisabled,
        Self::TooManyWaiting,
        Self::UpgradeRequired,
        Self::SessionLeaderRunning,
        Self::StoreSchemaMismatch,
    ];

    /// The stable wire code (`errorCode`).
    pub const fn code(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidRequest => "invalid_request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::SessionActiveRun => "conflict.session_active_run",
            Self::TaskIdTaken => "conflict.task_id_taken",
            Self::DuplicateEventId => "conflict.duplicate_event_id",
            Self::RunNotRunning => "conflict.run_not_running",
            Self::LeaseLost => "lease_lost",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::KeyReused => "idempotency.key_reused",
            Self::Internal => "internal",
            Self::AuthNotConfigured => "auth.not_configured",
            Self::TooManyStreams => "too_many_streams",
            Self::SteerQueueFull => "steer.queue_full",
            Self::HeaderTooLarge => "header_too_large",
            Self::GateNotToolApproval => "gate_not_tool_approval",
            Self::GateNotPlanReview => "gate_not_plan_review",
            Self::GateNotResumable => "gate_not_resumable",
            Self::WakeGatePending => "wake.gate_pending",
            Self::GateExpired => "gate_expired",
            Self::NotResumable => "not_resumable",
            Self::GatePending => "gate.pending",
            Self::LeaderDisabled => "leader.disabled",
            Self::TooManyWaiting => "runner.too_many_waiting",
            Self::UpgradeRequired => "runner.upgrade_required",
            Self::SessionLeaderRunning => "conflict.session_leader_running",
            Self::StoreSchemaMismatch => "store.schema_mismatch",
        }
    }

    /// The HTTP status every answer with this code carries.
    pub const fn status(self) -> u16 {
        match self {
            Self::InvalidJson | Self::InvalidRequest => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::NotFound | Self::LeaderDisabled => 404,
            Self::MethodNotAllowed => 405,
            Self::SessionActiveRun
            | Self::TaskIdTaken
            | Self::DuplicateEventId
            | Self::RunNotRunning
            | Self::LeaseLost
            | Self::GateNotToolApproval
            | Self::GateNotPlanReview
            | Self::GateNotResumable
            | Self::WakeGatePending
            | Self::NotResumable
            | Self::GatePending
            | Self::SessionLeaderRunning
            | Self::GateExpired => 409,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::KeyReused => 422,
            Self::Internal => 500,
            Self::AuthNotConfigured | Self::StoreSchemaMismatch => 503,
            Self::TooManyStreams | Self::SteerQueueFull | Self::TooManyWaiting => 429,
            Self::HeaderTooLarge => 431,
            Self::UpgradeRequired => 426,
        }
    }

    /// The variant of a wire code.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// A refusal with its code (and so its HTTP status). Details keep their insertion order on the wire.
/// Boxed: it travels in most `Result`s of the program, and a pointer keeps them narrow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(Box<Refusal>);

/// What an [`ApiError`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    kind: ErrorCode,
    pub message: String,
    /// `(key, value as JSON text)`.
    details: Vec<(String, String)>,
}

impl std::ops::Deref for ApiError {
    type Target = Refusal;

    fn deref(&self) -> &Refusal {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut Refusal {
        &mut self.0
    }
}

impl ApiError {
    pub fn new(kind: ErrorCode, message: impl Into<String>) -> Self {
        Self::of(kind, message.into(), Vec::new())
    }

    fn of(kind: ErrorCode, message: String, details: Vec<(String, String)>) -> Self {
        Self(Box::new(Refusal {
            kind,
            message,
            details,
        }))
    }

    pub fn kind(&self) -> ErrorCode {
        self.kind
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.kind.status()
    }

    /// The wire code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// Adds a detail key; `value` is serialised to JSON now so the body keeps a fixed key order.
    pub fn with<T: Serialize + ?Sized>(mut self, key: &str, value: &T) -> Self {
        let json = crate::json::to_text(value).unwrap_or_else(|_| "null".to_owned());
        self.details.push((key.to_owned(), json));
        self
    }

    /// The value of a detail key, as JSON text.
    pub fn detail(&self, key: &str) -> Option<&str> {
        self.details
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The response body, keys in order: `error`, `errorCode`, then details as added.
    pub fn body(&self) -> String {
        let mut out = String::with_capacity(64 + self.message.len());
        out.push_str("{\"error\":");
        out.push_str(&json_string(&self.message));
        out.push_str(",\"errorCode\":");
        out.push_str(&json_string(self.code()));
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
            ErrorCode::InvalidJson,
            format!("request body is not valid JSON: {reason}"),
        )
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// A field-level validation failure; `field` names the offending field.
    pub fn invalid_field(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidRequest, format!("{field}: {message}")).with("field", field)
    }

    pub fn unsupported_media_type() -> Self {
        Self::new(
            ErrorCode::UnsupportedMediaType,
            "request body must be JSON (Content-Type: application/json)",
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
        .with("limitBytes", &limit)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// The one "not found" answer; also given to principals who do not own the thing (no oracle).
    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn method_not_allowed(allowed: &str) -> Self {
        Self::new(
            ErrorCode::MethodNotAllowed,
            format!("method not allowed; this route accepts {allowed}"),
        )
        .with("allow", allowed)
    }

    pub fn route_not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such route")
    }

    /// A lease holder's write whose epoch no longer matches: nothing was written.
    pub fn lease_lost() -> Self {
        Self::new(
            ErrorCode::LeaseLost,
            "lease lost: this lease epoch no longer holds the run; nothing was written, stop driving it",
        )
    }

    /// A batch of events repeating an `eventId` already in the run's ledger: nothing was written.
    pub fn duplicate_event_id() -> Self {
        Self::new(
            ErrorCode::DuplicateEventId,
            "an event with one of these eventIds is already in this run's ledger; nothing from this batch was written",
        )
    }

    /// A steer message for a run that is not running.
    pub fn run_not_running() -> Self {
        Self::new(
            ErrorCode::RunNotRunning,
            "the run is not running; steer messages are accepted only while a run is running",
        )
    }

    /// A client `taskId` that names somebody else's run (or one in another session).
    pub fn task_id_taken() -> Self {
        Self::new(
            ErrorCode::TaskIdTaken,
            "taskId is already used by another run; submit with a different taskId",
        )
    }

    /// A stream refused because the run, or its session, already has as many open streams as one
    /// object serves.
    pub fn too_many_streams(limit: usize, of: &str) -> Self {
        Self::new(
            ErrorCode::TooManyStreams,
            format!("{of} already has {limit} open event streams; close one or retry later"),
        )
        .with("limit", &limit)
    }

    /// A steer refused because the run's queue of undelivered messages is full (`max_messages`
    /// messages or `max_bytes` bytes); nothing was queued, and nothing already queued was dropped.
    pub fn steer_queue_full(max_messages: i64, max_bytes: i64) -> Self {
        Self::new(
            ErrorCode::SteerQueueFull,
            format!(
                "the run's steer queue is full (at most {max_messages} undelivered messages and {max_bytes} bytes); nothing was queued, retry after the runner's next heartbeat takes messages"
            ),
        )
        .with("maxMessages", &max_messages)
        .with("maxBytes", &max_bytes)
    }

    /// A request header longer than the API reads.
    pub fn header_too_large(name: &str, max: usize) -> Self {
        Self::new(
            ErrorCode::HeaderTooLarge,
            format!("header {name} exceeds {max} bytes"),
        )
        .with("header", &name)
        .with("limit", &max)
    }

    /// A park refused because the session already has a pending gate (one decision at a time).
    pub fn gate_pending() -> Self {
        Self::new(
            ErrorCode::GatePending,
            "this session already has a pending gate; a run parks only when no decision is pending in its session",
        )
    }

    /// An infrastructure failure: opaque to the caller.
    /// A delete of a session that is a child of a leader run still running: its run is part of
    /// the leader's bookkeeping until the leader settles.
    pub fn session_leader_running(leader_run_id: &str) -> Self {
        Self::new(
            ErrorCode::SessionLeaderRunning,
            format!("session is a child of leader run {leader_run_id}, which is still running; nothing was deleted \u{2014} delete it once the leader run has settled (GET /v1/leader/runs/{leader_run_id}), or cancel the leader run first"),
        )
        .with("leaderRunId", leader_run_id)
    }

    /// The store of record is not at the schema version the code expects: nothing is served from
    /// it until the migrations are applied (a deployment's fault, never the caller's; retryable).
    pub fn schema_mismatch(expected: i64, found: i64) -> Self {
        Self::new(
            ErrorCode::StoreSchemaMismatch,
            format!(
                "the database schema is at version {found}, this deployment needs version {expected}: apply the migrations"
            ),
        )
        .with("expectedVersion", &expected)
        .with("foundVersion", &found)
    }

    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error")
    }
}

fn json_string(s: &str) -> String {
    crate::json::to_text(s).unwrap_or_else(|_| "\"\"".to_owned())
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status(), self.code(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// How an `ApiError` crosses an internal boundary (the session object's replies): its code, message
/// and details; the status follows from the code.
#[derive(Serialize, Deserialize)]
struct ApiErrorWire {
    code: String,
    message: String,
    details: Vec<(String, String)>,
}

impl Serialize for ApiError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ApiErrorWire {
            code: self.code().to_owned(),
            message: self.message.clone(),
            details: self.details.clone(),
        }
        .serialize(s)
    }
}

/// Between the Worker and its objects (`object_codec`): the code, the message, the details.
impl crate::object_codec::Codec for ApiError {
    fn put(&self, out: &mut String) {
        crate::object_codec::put_str(self.code(), out);
        self.message.put(out);
        self.details.put(out);
    }
    fn take(r: &mut crate::object_codec::Reader<'_>) -> Self {
        let code = String::take(r);
        let kind = ErrorCode::from_code(&code).unwrap_or_else(|| {
            r.fail("a known error code");
            ErrorCode::InvalidRequest
        });
        Self::of(kind, String::take(r), Vec::take(r))
    }
}

impl<'de> Deserialize<'de> for ApiError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ApiErrorWire::deserialize(d)?;
        let kind = ErrorCode::from_code(&w.code).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown error code {}",
                crate::json::Quoted(&w.code)
            ))
        })?;
        Ok(Self::of(kind, w.message, w.details))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_puts_error_and_code_first_then_details_in_insertion_order() {
        let e = ApiError::new(ErrorCode::TaskIdTaken, "t \"q\"")
            .with("zeta", "z")
            .with("alpha", &1);
        assert_eq!(
            e.body(),
            r#"{"error":"t \"q\"","errorCode":"conflict.task_id_taken","zeta":"z","alpha":1}"#
        );
    }

    #[test]
    fn body_is_valid_json() {
        let e = ApiError::invalid_field("sessionId", "must match ^[A-Za-z0-9_.-]{1,64}$");
        let v: crate::json::Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["errorCode"], "invalid_request");
        assert_eq!(v["field"], "sessionId");
    }

    #[test]
    fn every_code_is_unique_and_reads_back_to_its_variant() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!((400..=599).contains(&c.status()));
        }
        assert_eq!(ErrorCode::from_code("nope"), None);
    }

    #[test]
    fn an_error_survives_a_serialisation_round_trip_with_its_details_in_order() {
        let e = ApiError::method_not_allowed("GET, POST").with("x", &[1, 2]);
        let back: ApiError = serde_json::from_str(&crate::json::to_text(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.body(), e.body());
        assert_eq!(back.status(), 405);
    }

    /// The error table of `docs/ARCHITECTURE.md` lists every code with its status, and nothing else.
    #[test]
    fn the_documented_error_table_lists_every_code_with_its_status() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/ARCHITECTURE.md"
        ))
        .expect("docs/ARCHITECTURE.md is readable");
        let table = doc
            .split("## Error codes")
            .nth(1)
            .expect("docs/ARCHITECTURE.md has an `## Error codes` section");
        let mut documented = std::collections::HashMap::new();
        for line in table.lines().skip_while(|l| !l.starts_with('|')) {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if let (Some(code), Some(status)) = (cells.get(1), cells.get(2)) {
                if let Some(code) = code.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                    documented.insert(code.to_owned(), status.parse::<u16>().ok());
                }
            }
        }
        for c in ErrorCode::ALL {
            assert_eq!(
                documented.get(c.code()),
                Some(&Some(c.status())),
                "`{}` ({}) is missing from, or has another status in, the error table of docs/ARCHITECTURE.md",
                c.code(),
                c.status()
            );
        }
        for code in documented.keys() {
            assert!(
                ErrorCode::from_code(code).is_some(),
                "docs/ARCHITECTURE.md documents `{code}`, which no ErrorCode has"
            );
        }
    }
}
