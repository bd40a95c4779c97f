//! The 409 `conflict.session_active_run` body (SPEC-core §4).
//!
//! The texts are wire contracts, byte for byte (U+2014 dashes; `{activeTaskId}` is literal text,
//! never substituted). Building the body never fails: whatever is unknown about the holder falls back
//! to the base text.

use crate::{
    error::{ApiError, ErrorCode},
    gate, status,
};
use serde::{Deserialize, Serialize};

pub const BASE_TEXT: &str = "session already has an active run \u{2014} POST /v1/runs/{activeTaskId}/cancel stops it (same-instance interactive runs abort immediately)";

pub const RUNNING_TEXT: &str = "session already has an active run \u{2014} POST /v1/runs/{activeTaskId}/steer injects a message into the running turn (queued, applied at the next turn boundary), or POST /v1/runs/{activeTaskId}/cancel stops it (same-instance interactive runs abort immediately)";

/// Parked holder whose gate was located.
pub fn parked_with_gate_text(status: &str, decide_path: &str) -> String {
    format!("session already has an active run \u{2014} it is parked waiting for a decision ({status}); resolve it via POST {decide_path}, or POST /v1/runs/{{activeTaskId}}/cancel abandons it")
}

/// Parked holder whose gate could not be located (or has an unknown kind).
pub fn parked_without_gate_text(status: &str) -> String {
    format!("session already has an active run \u{2014} it is parked ({status}); POST /v1/runs/{{activeTaskId}}/cancel abandons it (its pending decision could not be located on this instance)")
}

/// What is known about the claim holder when the conflict is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The holder's row could not be read (missing, or the read failed).
    Unknown,
    /// The holder's row, with the kind of its pending gate when it is parked and one was found.
    Row {
        status: String,
        pending_gate_kind: Option<String>,
    },
}

/// `{kind, decidePath}` of a parked holder's pending gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingGate {
    pub kind: String,
    #[serde(rename = "decidePath")]
    pub decide_path: String,
}

/// The conflict materials, in the order they go on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub error: String,
    #[serde(rename = "activeTaskId")]
    pub active_task_id: Option<String>,
    #[serde(rename = "activeTaskStatus", skip_serializing_if = "Option::is_none")]
    pub active_task_status: Option<String>,
    #[serde(rename = "pendingGate", skip_serializing_if = "Option::is_none")]
    pub pending_gate: Option<PendingGate>,
}

impl Conflict {
    /// Builds the materials for a conflicting submit to `session_id` held by `active_task_id`.
    pub fn build(session_id: &str, active_task_id: Option<&str>, holder: &Holder) -> Self {
        let base = Self {
            error: BASE_TEXT.to_owned(),
            active_task_id: active_task_id.map(str::to_owned),
            active_task_status: None,
            pending_gate: None,
        };
        let Some(task_id) = active_task_id.filter(|t| !t.is_empty()) else {
            return base;
        };
        let Holder::Row {
            status,
            pending_gate_kind,
        } = holder
        else {
            return base;
        };
        if status == status::RUNNING {
            return Self {
                error: RUNNING_TEXT.to_owned(),
                active_task_status: Some(status.clone()),
                ..base
            };
        }
        if !status::is_parked(status) {
            return base;
        }
        let gate = pending_gate_kind.as_deref().and_then(|kind| {
            gate::decide_path(kind, session_id, task_id).map(|decide_path| PendingGate {
                kind: kind.to_owned(),
                decide_path,
            })
        });
        let error = match &gate {
            Some(g) => parked_with_gate_text(status, &g.decide_path),
            None => parked_without_gate_text(status),
        };
        Self {
            error,
            active_task_status: Some(status.clone()),
            pending_gate: gate,
            ..base
        }
    }

    /// The 409 refusal carrying these materials.
    pub fn to_api_error(&self) -> ApiError {
        let mut e = ApiError::new(ErrorCode::SessionActiveRun, self.error.clone())
            .with("activeTaskId", &self.active_task_id);
        if let Some(s) = &self.active_task_status {
            e = e.with("activeTaskStatus", s);
        }
        if let Some(g) = &self.pending_gate {
            e = e.with("pendingGate", g);
        }
        e
    }

    /// The SSE `done` result for a conflicting stream submit:
    /// `{status:"failed", errorMessage, activeTaskId, [activeTaskStatus], [pendingGate]}`.
    pub fn done_result(&self) -> DoneConflict<'_> {
        DoneConflict {
            status: "failed",
            error_message: &self.error,
            active_task_id: &self.active_task_id,
            active_task_status: &self.active_task_status,
            pending_gate: &self.pending_gate,
        }
    }
}

/// The conflict `done` result, key order: status, errorMessage, activeTaskId, activeTaskStatus, pendingGate.
#[derive(Debug, Serialize)]
pub struct DoneConflict<'a> {
    pub status: &'static str,
    #[serde(rename = "errorMessage")]
    pub error_message: &'a str,
    #[serde(rename = "activeTaskId")]
    pub active_task_id: &'a Option<String>,
    #[serde(rename = "activeTaskStatus", skip_serializing_if = "Option::is_none")]
    pub active_task_status: &'a Option<String>,
    #[serde(rename = "pendingGate", skip_serializing_if = "Option::is_none")]
    pub pending_gate: &'a Option<PendingGate>,
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_struct!(Conflict {
    error,
    active_task_id,
    active_task_status,
    pending_gate
});
crate::codec_struct!(PendingGate { kind, decide_path });

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, gate: Option<&str>) -> Holder {
        Holder::Row {
            status: status.into(),
            pending_gate_kind: gate.map(Into::into),
        }
    }

    #[test]
    fn the_base_text_is_byte_exact_with_em_dash_and_literal_placeholder() {
        let expected = "session already has an active run \u{2014} POST /v1/runs/{activeTaskId}/cancel stops it (same-instance interactive runs abort immediately)";
        assert_eq!(BASE_TEXT, expected);
        assert!(BASE_TEXT
            .as_bytes()
            .windows(3)
            .any(|w| w == [0xE2, 0x80, 0x94]));
        assert!(!BASE_TEXT.contains(" - "));
    }

    #[test]
    fn no_holder_id_gives_the_base_body_with_null_id() {
        let c = Conflict::build("S", None, &Holder::Unknown);
        assert_eq!(
            c.to_api_error().body(),
            format!(
                r#"{{"error":"{BASE_TEXT}","errorCode":"conflict.session_active_run","activeTaskId":null}}"#
            )
        );
    }

    #[test]
    fn an_empty_holder_id_stays_an_empty_string() {
        let c = Conflict::build("S", Some(""), &row("running", None));
        assert_eq!(c.active_task_id.as_deref(), Some(""));
        assert_eq!(c.error, BASE_TEXT);
        assert!(c.active_task_status.is_none());
    }

    #[test]
    fn a_running_holder_gets_the_steer_text_and_no_gate() {
        let c = Conflict::build("S", Some("T"), &row("running", Some("tool_approval")));
        assert_eq!(
            c.to_api_error().body(),
            format!(
                r#"{{"error":"{RUNNING_TEXT}","errorCode":"conflict.session_active_run","activeTaskId":"T","activeTaskStatus":"running"}}"#
            )
        );
    }

    #[test]
    fn the_running_text_is_byte_exact() {
        assert_eq!(RUNNING_TEXT, "session already has an active run \u{2014} POST /v1/runs/{activeTaskId}/steer injects a message into the running turn (queued, applied at the next turn boundary), or POST /v1/runs/{activeTaskId}/cancel stops it (same-instance interactive runs abort immediately)");
    }

    #[test]
    fn a_parked_holder_with_a_known_gate_names_its_decide_path() {
        for (status, kind, path) in [
            ("suspended", "tool_approval", "/v1/approvals/S/decide"),
            ("needs_review", "human", "/v1/approvals/S/decide"),
            ("suspended", "irreversible_ask", "/v1/approvals/S/decide"),
            ("suspended", "policy_ask", "/v1/approvals/S/decide"),
            (
                "needs_review",
                "plan_review",
                "/v1/assistant/tasks/T/plan_review",
            ),
            (
                "suspended",
                "resource_limit",
                "/v1/assistant/tasks/T/resume",
            ),
            ("suspended", "task_done", "/v1/sessions/S/wake"),
        ] {
            let c = Conflict::build("S", Some("T"), &row(status, Some(kind)));
            let text = format!("session already has an active run \u{2014} it is parked waiting for a decision ({status}); resolve it via POST {path}, or POST /v1/runs/{{activeTaskId}}/cancel abandons it");
            assert_eq!(c.error, text);
            assert_eq!(
                c.to_api_error().body(),
                format!(
                    r#"{{"error":"{text}","errorCode":"conflict.session_active_run","activeTaskId":"T","activeTaskStatus":"{status}","pendingGate":{{"kind":"{kind}","decidePath":"{path}"}}}}"#
                )
            );
        }
    }

    #[test]
    fn a_parked_holder_without_a_located_gate_gets_the_could_not_be_located_text() {
        for gate in [None, Some("verifier_pause")] {
            let c = Conflict::build("S", Some("T"), &row("needs_review", gate));
            assert_eq!(c.error, "session already has an active run \u{2014} it is parked (needs_review); POST /v1/runs/{activeTaskId}/cancel abandons it (its pending decision could not be located on this instance)");
            assert_eq!(c.active_task_status.as_deref(), Some("needs_review"));
            assert!(c.pending_gate.is_none());
        }
    }

    #[test]
    fn a_terminal_or_unknown_holder_gets_the_base_body_without_status() {
        for h in [
            row("completed", None),
            row("timeout", None),
            Holder::Unknown,
        ] {
            let c = Conflict::build("S", Some("T"), &h);
            assert_eq!(c.error, BASE_TEXT);
            assert_eq!(c.active_task_id.as_deref(), Some("T"));
            assert!(c.active_task_status.is_none() && c.pending_gate.is_none());
        }
    }

    #[test]
    fn the_done_result_has_fixed_key_order_and_no_absent_keys() {
        let c = Conflict::build("S", Some("T"), &row("running", None));
        let json = crate::json::to_text(&c.done_result()).unwrap();
        assert_eq!(
            json,
            format!(
                r#"{{"status":"failed","errorMessage":"{RUNNING_TEXT}","activeTaskId":"T","activeTaskStatus":"running"}}"#
            )
        );
    }
}
