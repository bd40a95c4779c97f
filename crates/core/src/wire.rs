//! Request parsing and response bodies of the HTTP surface.
//!
//! Parsing is strict: unknown fields, wrong types and oversized values are refused with a 400 naming
//! the field, before anything is written.

use crate::{
    error::ApiError,
    ids::{SessionId, TaskId, SAFE_ID_RULE},
};
use serde::{Deserialize, Serialize};

/// Largest request body accepted, in bytes.
pub const BODY_MAX: usize = 1024 * 1024;
/// Largest objective accepted, in bytes of UTF-8.
pub const OBJECTIVE_MAX: usize = 64 * 1024;
/// Width of the objective preview, in UTF-16 code units (never splitting a surrogate pair).
pub const OBJECTIVE_PREVIEW_CHARS: usize = 160;

/// Checks the declared content type of a JSON request body.
pub fn require_json_content_type(content_type: Option<&str>) -> Result<(), ApiError> {
    let ok = content_type
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|mime| mime == "application/json");
    if ok {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type())
    }
}

/// Parses a JSON body that is at most [`BODY_MAX`] bytes into a generic value (kept for
/// fingerprinting) and the typed request.
pub fn parse_body<T: crate::json::FromTree>(
    bytes: &[u8],
) -> Result<(crate::json::Value, T), ApiError> {
    if bytes.len() > BODY_MAX {
        return Err(ApiError::payload_too_large(BODY_MAX));
    }
    // Checked as UTF-8 first, so one text parser serves every read (`crate::json`).
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::invalid_json(format_args!("invalid UTF-8 at byte {}", e.valid_up_to()))
    })?;
    let value: crate::json::Value = crate::json::parse(text).map_err(ApiError::invalid_json)?;
    if !value.is_object() {
        return Err(ApiError::invalid_request(
            "request body must be a JSON object",
        ));
    }
    let typed = T::from_tree(&value).map_err(|e| ApiError::invalid_request(e.to_string()))?;
    Ok((value, typed))
}

/// `POST /v1/runs` body as sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRunBody {
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub objective: String,
    #[serde(rename = "taskId", default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub meta: Option<crate::json::Value>,
    /// The named task queue (a safe id); absent: [`crate::queue::DEFAULT_QUEUE`].
    #[serde(default)]
    pub queue: Option<String>,
}

crate::tree_struct!(SubmitRunBody strict {
    session_id: "sessionId",
    objective: "objective",
    task_id: "taskId" = default,
    meta: "meta" = default,
    queue: "queue" = default,
});

/// A validated submission.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitRun {
    pub session_id: SessionId,
    pub objective: String,
    pub client_task_id: Option<TaskId>,
    /// A JSON object (`{}` when absent).
    pub meta: crate::json::Map,
    /// The named task queue the run is leased from ([`crate::queue::DEFAULT_QUEUE`] when unnamed).
    pub queue: String,
}

impl SubmitRunBody {
    pub fn validate(self) -> Result<SubmitRun, ApiError> {
        let session_id = SessionId::parse(&self.session_id)
            .ok_or_else(|| ApiError::invalid_field("sessionId", SAFE_ID_RULE))?;
        if self.objective.trim().is_empty() {
            return Err(ApiError::invalid_field("objective", "must not be empty"));
        }
        if self.objective.len() > OBJECTIVE_MAX {
            return Err(ApiError::new(
                crate::error::ErrorCode::PayloadTooLarge,
                format!("objective: exceeds {OBJECTIVE_MAX} bytes"),
            )
            .with("field", "objective")
            .with("limitBytes", &OBJECTIVE_MAX));
        }
        let client_task_id = match self.task_id {
            None => None,
            Some(t) => Some(
                TaskId::parse(&t).ok_or_else(|| ApiError::invalid_field("taskId", SAFE_ID_RULE))?,
            ),
        };
        let meta = match self.meta {
            None | Some(crate::json::Value::Null) => crate::json::Map::new(),
            Some(crate::json::Value::Object(m)) => m,
            Some(_) => return Err(ApiError::invalid_field("meta", "must be a JSON object")),
        };
        let queue = crate::queue::parse_queue(self.queue.as_deref())?;
        Ok(SubmitRun {
            session_id,
            objective: self.objective,
            client_task_id,
            meta,
            queue,
        })
    }
}

/// The first [`OBJECTIVE_PREVIEW_CHARS`] UTF-16 code units of `objective`, cut before a character
/// that would not fit whole.
pub fn objective_preview(objective: &str) -> String {
    let mut units = 0;
    let mut end = 0;
    for (i, c) in objective.char_indices() {
        units += c.len_utf16();
        if units > OBJECTIVE_PREVIEW_CHARS {
            break;
        }
        end = i + c.len_utf8();
    }
    objective[..end].to_owned()
}

/// `202 {"taskId","sessionId","status"}`: a run was admitted (or is being returned again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admitted {
    #[serde(rename = "taskId")]
    pub task_id: String,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submit(json: &str) -> Result<SubmitRun, ApiError> {
        let (_, body): (_, SubmitRunBody) = parse_body(json.as_bytes())?;
        body.validate()
    }

    #[test]
    fn a_minimal_submission_parses_with_empty_meta() {
        let s = submit(r#"{"sessionId":"s1","objective":"do it"}"#).unwrap();
        assert_eq!(s.session_id.as_str(), "s1");
        assert!(s.client_task_id.is_none() && s.meta.is_empty());
        assert_eq!(s.queue, crate::queue::DEFAULT_QUEUE);
    }

    #[test]
    fn a_submission_may_name_its_queue_and_null_is_the_default() {
        let s = submit(r#"{"sessionId":"s1","objective":"do it","queue":"gpu"}"#).unwrap();
        assert_eq!(s.queue, "gpu");
        let s = submit(r#"{"sessionId":"s1","objective":"do it","queue":null}"#).unwrap();
        assert_eq!(s.queue, "default");
    }

    #[test]
    fn unknown_fields_missing_fields_and_wrong_types_are_400() {
        for (json, needle) in [
            (
                r#"{"sessionId":"s","objective":"o","x":1}"#,
                "unknown field `x`",
            ),
            (r#"{"sessionId":"s"}"#, "missing field `objective`"),
            (r#"{"sessionId":5,"objective":"o"}"#, "invalid type"),
        ] {
            let e = submit(json).unwrap_err();
            assert_eq!((e.status(), e.code()), (400, "invalid_request"), "{json}");
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }

    #[test]
    fn malformed_json_and_non_objects_are_refused() {
        assert_eq!(submit("{").unwrap_err().code(), "invalid_json");
        assert_eq!(submit("[1]").unwrap_err().code(), "invalid_request");
    }

    #[test]
    fn unsafe_ids_empty_objectives_and_non_object_meta_are_refused_by_field() {
        for (json, field) in [
            (r#"{"sessionId":"a/b","objective":"o"}"#, "sessionId"),
            (
                r#"{"sessionId":"s","objective":"o","taskId":".."}"#,
                "taskId",
            ),
            (r#"{"sessionId":"s","objective":"  "}"#, "objective"),
            (r#"{"sessionId":"s","objective":"o","meta":[1]}"#, "meta"),
            (
                r#"{"sessionId":"s","objective":"o","queue":"a/b"}"#,
                "queue",
            ),
            (r#"{"sessionId":"s","objective":"o","queue":""}"#, "queue"),
            (
                r#"{"sessionId":"s","objective":"o","queue":"..","taskId":"t"}"#,
                "queue",
            ),
        ] {
            let e = submit(json).unwrap_err();
            assert_eq!(
                e.detail("field"),
                Some(format!("\"{field}\"").as_str()),
                "{json}"
            );
        }
    }

    #[test]
    fn an_objective_over_64_kib_is_413_and_exactly_64_kib_is_fine() {
        let ok = format!(
            r#"{{"sessionId":"s","objective":"{}"}}"#,
            "x".repeat(OBJECTIVE_MAX)
        );
        assert!(submit(&ok).is_ok());
        let big = format!(
            r#"{{"sessionId":"s","objective":"{}"}}"#,
            "x".repeat(OBJECTIVE_MAX + 1)
        );
        let e = submit(&big).unwrap_err();
        assert_eq!((e.status(), e.code()), (413, "payload_too_large"));
    }

    #[test]
    fn a_body_that_is_not_utf8_is_invalid_json_naming_the_byte() {
        let e = parse_body::<SubmitRunBody>(b"{\"sessionId\":\"s\xff\"}").unwrap_err();
        assert_eq!((e.status(), e.code()), (400, "invalid_json"));
        assert!(
            e.message.contains("invalid UTF-8 at byte 15"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_nested_object_sent_as_an_array_is_refused_not_read_by_position() {
        let e = parse_body::<crate::leader_wire::SubmitLeaderBody>(
            br#"{"objective":"o","subtasks":[["a"]]}"#,
        )
        .unwrap_err();
        assert_eq!((e.status(), e.code()), (400, "invalid_request"));
        assert!(
            e.message
                .contains("invalid type: sequence, expected struct"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_body_over_1_mib_is_413_before_parsing() {
        let e = parse_body::<SubmitRunBody>(&vec![b' '; BODY_MAX + 1]).unwrap_err();
        assert_eq!(e.status(), 413);
    }

    #[test]
    fn the_content_type_must_be_json_with_optional_parameters() {
        assert!(require_json_content_type(Some("application/json")).is_ok());
        assert!(require_json_content_type(Some("Application/JSON; charset=utf-8")).is_ok());
        for bad in [None, Some("text/plain"), Some("application/jsonx")] {
            assert_eq!(require_json_content_type(bad).unwrap_err().status(), 415);
        }
    }

    #[test]
    fn the_preview_keeps_160_utf16_units_without_splitting_a_pair() {
        assert_eq!(objective_preview(&"a".repeat(200)).len(), 160);
        assert_eq!(objective_preview("short"), "short");
        // 159 ASCII + an astral char (2 units) would be 161 units: the astral char is dropped.
        let s = format!("{}\u{1F600}tail", "a".repeat(159));
        assert_eq!(objective_preview(&s), "a".repeat(159));
        let t = format!("{}\u{e9}x", "a".repeat(159));
        assert_eq!(objective_preview(&t), format!("{}\u{e9}", "a".repeat(159)));
    }
}
