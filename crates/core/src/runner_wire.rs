//! Request bodies of the runner protocol, `steer` and `POST /v1/tasks`, with their validation.

use crate::{
    error::ApiError,
    ids::{is_safe_id, SessionId, SAFE_ID_RULE},
    json::JsonText,
    json::Value,
    status::{TerminalStatus, FINISH_STATUSES},
    wire::{SubmitRun, SubmitRunBody, OBJECTIVE_MAX},
};
use serde::{Deserialize, Serialize};

/// Longest long-poll a lease request may ask for.
pub const LEASE_WAIT_MAX_MS: u64 = 25_000;
/// Most events one append call may carry.
pub const EVENTS_PER_CALL_MAX: usize = 500;
/// Longest steer message, in bytes.
pub const STEER_MAX: usize = OBJECTIVE_MAX;
/// Most undelivered steer messages one run may hold; a steer beyond it is refused (429) and
/// nothing queued is dropped.
pub const STEER_QUEUE_MAX: i64 = 64;
/// Most undelivered steer bytes one run may hold (sum of message lengths), with the same refusal.
pub const STEER_QUEUE_MAX_BYTES: i64 = 1024 * 1024;
/// Most steer messages one heartbeat takes (so a heartbeat answer carries at most
/// `STEER_PAGE * STEER_MAX` = 1 MiB of messages); the rest wait for the next heartbeat.
pub const STEER_PAGE: i64 = 16;
/// Default and largest wait of a synchronous `/v1/tasks` call.
pub const TASK_WAIT_DEFAULT_MS: u64 = 60_000;
pub const TASK_WAIT_MAX_MS: u64 = 300_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    #[serde(rename = "waitMs", default)]
    pub wait_ms: Option<u64>,
    /// The one queue to lease from (a safe id); absent: [`crate::queue::DEFAULT_QUEUE`].
    #[serde(default)]
    pub queue: Option<String>,
}

crate::tree_struct!(LeaseBody strict {
    runner_id: "runnerId",
    wait_ms: "waitMs" = default,
    queue: "queue" = default,
});

/// A validated lease request: who asks, how long it may wait, and the one queue it leases from (a
/// runner serving several queues runs one lease loop per queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// A safe id.
    pub runner_id: String,
    /// The long-poll budget, capped at [`LEASE_WAIT_MAX_MS`].
    pub wait_ms: u64,
    /// A safe id; [`crate::queue::DEFAULT_QUEUE`] when the body named none.
    pub queue: String,
}

impl LeaseBody {
    /// The runner id (a safe id), the long-poll budget (capped at 25 s) and the queue (a safe id,
    /// `"default"` when absent); 400 naming `runnerId` or `queue` otherwise.
    pub fn validate(self) -> Result<LeaseRequest, ApiError> {
        if !is_safe_id(&self.runner_id) {
            return Err(ApiError::invalid_field("runnerId", SAFE_ID_RULE));
        }
        Ok(LeaseRequest {
            queue: crate::queue::parse_queue(self.queue.as_deref())?,
            runner_id: self.runner_id,
            wait_ms: self.wait_ms.unwrap_or(0).min(LEASE_WAIT_MAX_MS),
        })
    }
}

/// Who writes for a run: the runner that holds its lease (the `runnerId` it leased with) and the
/// lease's epoch. Every runner write carries both; the store fences on both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHolder {
    pub runner_id: String,
    pub lease_epoch: i64,
}

impl LeaseHolder {
    fn parse(runner_id: String, lease_epoch: i64) -> Result<Self, ApiError> {
        if !is_safe_id(&runner_id) {
            return Err(ApiError::invalid_field("runnerId", SAFE_ID_RULE));
        }
        if !(0..=crate::sql::JS_SAFE_INT).contains(&lease_epoch) {
            return Err(ApiError::invalid_field(
                "leaseEpoch",
                "must be an integer in 0..=2^53-1",
            ));
        }
        Ok(Self {
            runner_id,
            lease_epoch,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    #[serde(rename = "leaseEpoch")]
    pub lease_epoch: i64,
}

crate::tree_struct!(HeartbeatBody strict { runner_id: "runnerId", lease_epoch: "leaseEpoch" });

impl HeartbeatBody {
    pub fn validate(self) -> Result<LeaseHolder, ApiError> {
        LeaseHolder::parse(self.runner_id, self.lease_epoch)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventIn {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub data: Option<Value>,
    #[serde(rename = "eventId", default)]
    pub event_id: Option<String>,
}

crate::tree_struct!(EventIn strict {
    kind: "type",
    data: "data" = default,
    event_id: "eventId" = default,
});

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsBody {
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    #[serde(rename = "leaseEpoch")]
    pub lease_epoch: i64,
    pub events: Vec<EventIn>,
    /// See [`session_hint`].
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
}

crate::tree_struct!(EventsBody strict {
    runner_id: "runnerId",
    lease_epoch: "leaseEpoch",
    events: "events",
    session_id: "sessionId" = default,
});

/// A runner write's optional `sessionId`: the session its lease named, a routing hint that spares
/// the server looking the run's session up. It decides nothing: the session's object takes the
/// write only for the run it holds the claim of, and a wrong hint costs the lookup it would have
/// spared (a safe id, else 400 naming `sessionId`).
pub fn session_hint(hint: Option<String>) -> Result<Option<SessionId>, ApiError> {
    hint.map(|s| {
        SessionId::parse(&s).ok_or_else(|| ApiError::invalid_field("sessionId", SAFE_ID_RULE))
    })
    .transpose()
}

/// A validated append: who writes, the events, and the session hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Events {
    pub holder: LeaseHolder,
    pub events: Vec<ValidEvent>,
    pub session: Option<SessionId>,
}

/// A validated event: type, data as JSON text, optional runner event id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidEvent {
    pub kind: String,
    pub data: String,
    pub event_id: Option<String>,
}

fn event_type_ok(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 64
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'))
}

impl EventsBody {
    pub fn validate(self) -> Result<Events, ApiError> {
        let holder = LeaseHolder::parse(self.runner_id, self.lease_epoch)?;
        let session = session_hint(self.session_id)?;
        if self.events.is_empty() || self.events.len() > EVENTS_PER_CALL_MAX {
            return Err(ApiError::invalid_field(
                "events",
                format!("must hold 1..={EVENTS_PER_CALL_MAX} events"),
            ));
        }
        let mut out = Vec::with_capacity(self.events.len());
        for (i, e) in self.events.into_iter().enumerate() {
            if !event_type_ok(&e.kind) {
                return Err(ApiError::invalid_field(
                    &format!("events[{i}].type"),
                    "must be 1..64 characters of A-Z a-z 0-9 _ . - :",
                ));
            }
            if e.kind == "done" {
                return Err(ApiError::invalid_field(
                    &format!("events[{i}].type"),
                    "\"done\" is written by POST /v1/runs/{id}/finish",
                ));
            }
            if let Some(id) = &e.event_id {
                if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| (0x21..0x7f).contains(&b))
                {
                    return Err(ApiError::invalid_field(
                        &format!("events[{i}].eventId"),
                        "must be 1..128 printable ASCII characters",
                    ));
                }
            }
            out.push(ValidEvent {
                kind: e.kind,
                data: e
                    .data
                    .unwrap_or_else(|| Value::Object(Default::default()))
                    .json_text(),
                event_id: e.event_id,
            });
        }
        Ok(Events {
            holder,
            events: out,
            session,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishBody {
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    #[serde(rename = "leaseEpoch")]
    pub lease_epoch: i64,
    pub status: String,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(rename = "errorCode", default)]
    pub error_code: Option<String>,
    /// See [`session_hint`].
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
}

crate::tree_struct!(FinishBody strict {
    runner_id: "runnerId",
    lease_epoch: "leaseEpoch",
    status: "status",
    result: "result" = default,
    error: "error" = default,
    error_code: "errorCode" = default,
    session_id: "sessionId" = default,
});

/// A validated finish.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub holder: LeaseHolder,
    pub status: TerminalStatus,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub session: Option<SessionId>,
}

impl Finish {
    /// The `done` event's data: the run's terminal result as a client sees it.
    pub fn done_json(&self) -> String {
        let mut m = crate::json::Map::new();
        m.insert("status".into(), self.status.as_str().into());
        if let Some(r) = &self.result {
            m.insert("result".into(), r.clone());
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), e.clone().into());
        }
        if let Some(c) = &self.error_code {
            m.insert("errorCode".into(), c.clone().into());
        }
        Value::Object(m).json_text()
    }
}

impl FinishBody {
    pub fn validate(self) -> Result<Finish, ApiError> {
        let status = TerminalStatus::parse(&self.status).ok_or_else(|| {
            ApiError::invalid_field(
                "status",
                format!("must be one of {}", FINISH_STATUSES.join(", ")),
            )
        })?;
        if self.error.as_ref().is_some_and(|e| e.len() > OBJECTIVE_MAX) {
            return Err(ApiError::invalid_field(
                "error",
                format!("exceeds {OBJECTIVE_MAX} bytes"),
            ));
        }
        if let Some(c) = &self.error_code {
            if c.is_empty()
                || c.len() > 64
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
            {
                return Err(ApiError::invalid_field(
                    "errorCode",
                    "must be 1..64 characters of A-Z a-z 0-9 _ . -",
                ));
            }
        }
        Ok(Finish {
            holder: LeaseHolder::parse(self.runner_id, self.lease_epoch)?,
            status,
            result: self.result.filter(|r| !r.is_null()),
            error: self.error,
            error_code: self.error_code,
            session: session_hint(self.session_id)?,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerBody {
    pub message: String,
}

crate::tree_struct!(SteerBody strict { message: "message" });

impl SteerBody {
    pub fn validate(self) -> Result<String, ApiError> {
        if self.message.trim().is_empty() {
            return Err(ApiError::invalid_field("message", "must not be empty"));
        }
        if self.message.len() > STEER_MAX {
            return Err(ApiError::invalid_field(
                "message",
                format!("exceeds {STEER_MAX} bytes"),
            ));
        }
        Ok(self.message)
    }
}

/// `POST /v1/tasks`: a submission plus how to answer it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskBody {
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub objective: String,
    #[serde(rename = "taskId", default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub meta: Option<Value>,
    /// `false`: wait for the terminal result and answer with JSON. Default: stream SSE.
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(rename = "waitMs", default)]
    pub wait_ms: Option<u64>,
    /// The named task queue, as for `POST /v1/runs`.
    #[serde(default)]
    pub queue: Option<String>,
}

crate::tree_struct!(TaskBody strict {
    session_id: "sessionId",
    objective: "objective",
    task_id: "taskId" = default,
    meta: "meta" = default,
    stream: "stream" = default,
    wait_ms: "waitMs" = default,
    queue: "queue" = default,
});

/// How a task submission is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMode {
    Stream,
    /// Wait up to this many milliseconds for the terminal result.
    Wait(u64),
}

impl TaskBody {
    pub fn validate(self) -> Result<(SubmitRun, TaskMode), ApiError> {
        let mode = match self.stream {
            Some(false) => {
                let ms = self.wait_ms.unwrap_or(TASK_WAIT_DEFAULT_MS);
                if ms > TASK_WAIT_MAX_MS {
                    return Err(ApiError::invalid_field(
                        "waitMs",
                        format!("must be at most {TASK_WAIT_MAX_MS}"),
                    ));
                }
                TaskMode::Wait(ms)
            }
            _ => {
                if self.wait_ms.is_some() {
                    return Err(ApiError::invalid_field(
                        "waitMs",
                        "applies only with \"stream\": false",
                    ));
                }
                TaskMode::Stream
            }
        };
        let submit = SubmitRunBody {
            session_id: self.session_id,
            objective: self.objective,
            task_id: self.task_id,
            meta: self.meta,
            queue: self.queue,
        }
        .validate()?;
        Ok((submit, mode))
    }
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_struct!(LeaseHolder {
    runner_id,
    lease_epoch
});

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: crate::json::FromTree>(json: &str) -> Result<T, ApiError> {
        crate::wire::parse_body::<T>(json.as_bytes()).map(|(_, t)| t)
    }

    #[test]
    fn lease_waits_are_capped_at_25_seconds() {
        let r = parse::<LeaseBody>(r#"{"runnerId":"r1","waitMs":99999}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!((r.runner_id.as_str(), r.wait_ms), ("r1", 25_000));
        assert!(parse::<LeaseBody>(r#"{"runnerId":"r/1"}"#)
            .unwrap()
            .validate()
            .is_err());
    }

    #[test]
    fn a_lease_request_names_one_queue_and_defaults_to_the_default_queue() {
        let lease = |json: &str| parse::<LeaseBody>(json).unwrap().validate();
        assert_eq!(
            lease(r#"{"runnerId":"r1"}"#).unwrap(),
            LeaseRequest {
                runner_id: "r1".into(),
                wait_ms: 0,
                queue: "default".into()
            }
        );
        assert_eq!(
            lease(r#"{"runnerId":"r1","queue":"gpu","waitMs":5}"#).unwrap(),
            LeaseRequest {
                runner_id: "r1".into(),
                wait_ms: 5,
                queue: "gpu".into()
            }
        );
        for bad in [
            r#"{"runnerId":"r1","queue":"a/b"}"#,
            r#"{"runnerId":"r1","queue":""}"#,
            r#"{"runnerId":"r1","queue":".."}"#,
        ] {
            let e = lease(bad).unwrap_err();
            assert_eq!(
                (e.status(), e.detail("field")),
                (400, Some("\"queue\"")),
                "{bad}"
            );
        }
        let e = parse::<LeaseBody>(r#"{"runnerId":"r1","queue":["a","b"]}"#).unwrap_err();
        assert_eq!(e.status(), 400, "one queue per lease request");
    }

    #[test]
    fn event_batches_are_1_to_500_well_named_events_and_never_done() {
        let ok = parse::<EventsBody>(r#"{"runnerId":"r1","leaseEpoch":1,"events":[{"type":"text_delta","data":{"delta":"a"}},{"type":"x"}]}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(ok.events[1].data, "{}");
        assert_eq!(ok.session, None);
        for bad in [
            r#"{"runnerId":"r1","leaseEpoch":1,"events":[]}"#,
            r#"{"runnerId":"r1","leaseEpoch":1,"events":[{"type":"done"}]}"#,
            r#"{"runnerId":"r1","leaseEpoch":1,"events":[{"type":"a b"}]}"#,
            r#"{"runnerId":"r1","leaseEpoch":1,"events":[{"type":"a","eventId":""}]}"#,
        ] {
            assert_eq!(
                parse::<EventsBody>(bad)
                    .unwrap()
                    .validate()
                    .unwrap_err()
                    .status(),
                400,
                "{bad}"
            );
        }
        let many = format!(
            r#"{{"runnerId":"r1","leaseEpoch":1,"events":[{}]}}"#,
            vec![r#"{"type":"a"}"#; 501].join(",")
        );
        assert!(parse::<EventsBody>(&many).unwrap().validate().is_err());
    }

    #[test]
    fn finish_takes_only_terminal_words_and_builds_the_done_result() {
        let f = parse::<FinishBody>(
            r#"{"runnerId":"r1","leaseEpoch":2,"status":"failed","error":"boom","errorCode":"tool.crash"}"#,
        )
        .unwrap()
        .validate()
        .unwrap();
        assert_eq!(
            f.done_json(),
            r#"{"error":"boom","errorCode":"tool.crash","status":"failed"}"#
        );
        for bad in ["running", "suspended", "done", "COMPLETED"] {
            let json = format!(r#"{{"runnerId":"r1","leaseEpoch":1,"status":"{bad}"}}"#);
            assert!(
                parse::<FinishBody>(&json).unwrap().validate().is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn appends_and_finishes_may_name_their_session_as_a_safe_id_hint() {
        let e = parse::<EventsBody>(
            r#"{"runnerId":"r1","leaseEpoch":1,"sessionId":"s-1","events":[{"type":"x"}]}"#,
        )
        .unwrap()
        .validate()
        .unwrap();
        assert_eq!(e.session.as_ref().map(|s| s.as_str()), Some("s-1"));
        let f = parse::<FinishBody>(
            r#"{"runnerId":"r1","leaseEpoch":1,"sessionId":"s-1","status":"completed"}"#,
        )
        .unwrap()
        .validate()
        .unwrap();
        assert_eq!(f.session.as_ref().map(|s| s.as_str()), Some("s-1"));
        let bad_append = parse::<EventsBody>(
            r#"{"runnerId":"r1","leaseEpoch":1,"sessionId":"a/b","events":[{"type":"x"}]}"#,
        )
        .unwrap()
        .validate()
        .unwrap_err();
        let bad_finish = parse::<FinishBody>(
            r#"{"runnerId":"r1","leaseEpoch":1,"sessionId":"","status":"completed"}"#,
        )
        .unwrap()
        .validate()
        .unwrap_err();
        for e in [bad_append, bad_finish] {
            assert_eq!(e.status(), 400);
            assert!(e.to_string().contains("sessionId"), "{e}");
        }
    }

    #[test]
    fn runner_writes_name_their_runner_and_a_js_safe_epoch() {
        let h = parse::<HeartbeatBody>(r#"{"runnerId":"r1","leaseEpoch":3}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(
            h,
            LeaseHolder {
                runner_id: "r1".into(),
                lease_epoch: 3
            }
        );
        assert!(parse::<HeartbeatBody>(r#"{"leaseEpoch":3}"#).is_err());
        for bad in [
            r#"{"runnerId":"r 1","leaseEpoch":3}"#,
            r#"{"runnerId":"r1","leaseEpoch":-1}"#,
            r#"{"runnerId":"r1","leaseEpoch":9007199254740992}"#,
        ] {
            let e = parse::<HeartbeatBody>(bad).unwrap().validate().unwrap_err();
            assert_eq!(e.status(), 400, "{bad}");
        }
    }

    #[test]
    fn tasks_stream_by_default_and_wait_only_when_asked() {
        let (_, m) = parse::<TaskBody>(r#"{"sessionId":"s","objective":"o"}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(m, TaskMode::Stream);
        let (_, m) = parse::<TaskBody>(r#"{"sessionId":"s","objective":"o","stream":false}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(m, TaskMode::Wait(TASK_WAIT_DEFAULT_MS));
        assert!(
            parse::<TaskBody>(r#"{"sessionId":"s","objective":"o","waitMs":5}"#)
                .unwrap()
                .validate()
                .is_err()
        );
    }

    #[test]
    fn a_task_names_its_queue_as_a_run_submit_does() {
        let task = |json: &str| parse::<TaskBody>(json).unwrap().validate();
        let (s, _) = task(r#"{"sessionId":"s","objective":"o"}"#).unwrap();
        assert_eq!(s.queue, "default");
        let (s, _) = task(r#"{"sessionId":"s","objective":"o","queue":"gpu"}"#).unwrap();
        assert_eq!(s.queue, "gpu");
        let e = task(r#"{"sessionId":"s","objective":"o","queue":"a b"}"#).unwrap_err();
        assert_eq!((e.status(), e.detail("field")), (400, Some("\"queue\"")));
    }
}
