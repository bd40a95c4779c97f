//! The leader-run surface (`/v1/leader/runs`): the admission body and its bounds, the list query,
//! and the record as the API shows it — its plan, its children, and (once settled) the worker
//! reports its `result` holds.

use crate::{
    error::{ApiError, ErrorCode},
    json,
    json::{JsonText, Map, Value},
    leader::{LeaderRunRecord, STATUSES},
    leader_drive::{ChildState, Drive, Report},
    list::{self, decode_cursor},
    store::LeaderChild,
    wire::{objective_preview, OBJECTIVE_MAX},
};
use serde::Deserialize;

/// Most subtasks one leader run may fan out to.
pub const MAX_SUBTASKS: usize = 100;
/// Largest `maxConcurrency` accepted.
pub const MAX_CONCURRENCY: usize = 16;
/// `maxConcurrency` when the body leaves it out (the seed's MVP value).
pub const DEFAULT_CONCURRENCY: usize = 2;
/// Largest `deadlineMs` accepted (24 h, the longest a leader run is expected to last).
pub const MAX_DEADLINE_MS: i64 = 24 * 3_600_000;
/// The route named in a keyed admission's fingerprint.
pub const SUBMIT_ROUTE: &str = "POST /v1/leader/runs";

/// `POST /v1/leader/runs` body as sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitLeaderBody {
    pub objective: String,
    pub subtasks: Vec<SubtaskBody>,
    #[serde(rename = "maxConcurrency", default)]
    pub max_concurrency: Option<i64>,
    #[serde(rename = "deadlineMs", default)]
    pub deadline_ms: Option<i64>,
}

crate::tree_struct!(SubmitLeaderBody strict {
    objective: "objective",
    subtasks: "subtasks",
    max_concurrency: "maxConcurrency" = default,
    deadline_ms: "deadlineMs" = default,
});

/// One subtask as sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubtaskBody {
    pub objective: String,
    #[serde(default)]
    pub meta: Option<Value>,
}

crate::tree_struct!(SubtaskBody strict { objective: "objective", meta: "meta" = default });

/// A validated leader admission.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitLeader {
    pub objective: String,
    pub subtasks: Vec<Subtask>,
    pub max_concurrency: usize,
    pub deadline_ms: Option<i64>,
}

/// A validated subtask: its objective and its meta as compact JSON object text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subtask {
    pub objective: String,
    pub meta_json: String,
}

fn objective(field: &str, text: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid_field(field, "must not be empty"));
    }
    if text.len() > OBJECTIVE_MAX {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("{field}: exceeds {OBJECTIVE_MAX} bytes"),
        )
        .with("field", field)
        .with("limitBytes", &OBJECTIVE_MAX));
    }
    Ok(())
}

impl SubmitLeaderBody {
    pub fn validate(self) -> Result<SubmitLeader, ApiError> {
        objective("objective", &self.objective)?;
        if self.subtasks.is_empty() || self.subtasks.len() > MAX_SUBTASKS {
            return Err(ApiError::invalid_field(
                "subtasks",
                format!("must hold 1..={MAX_SUBTASKS} subtasks"),
            )
            .with("limit", &MAX_SUBTASKS));
        }
        let mut subtasks = Vec::with_capacity(self.subtasks.len());
        for (i, s) in self.subtasks.into_iter().enumerate() {
            objective(&format!("subtasks[{i}].objective"), &s.objective)?;
            let meta = match s.meta {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(ApiError::invalid_field(
                        &format!("subtasks[{i}].meta"),
                        "must be a JSON object",
                    ))
                }
            };
            subtasks.push(Subtask {
                objective: s.objective,
                meta_json: Value::Object(meta).json_text(),
            });
        }
        let max_concurrency = match self.max_concurrency {
            None => DEFAULT_CONCURRENCY,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_CONCURRENCY).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "maxConcurrency",
                        format!("must be an integer in 1..={MAX_CONCURRENCY}"),
                    )
                    .with("limit", &MAX_CONCURRENCY)
                })?,
        };
        if let Some(ms) = self.deadline_ms {
            if !(1..=MAX_DEADLINE_MS).contains(&ms) {
                return Err(ApiError::invalid_field(
                    "deadlineMs",
                    format!("must be an integer in 1..={MAX_DEADLINE_MS}"),
                )
                .with("limit", &MAX_DEADLINE_MS));
            }
        }
        Ok(SubmitLeader {
            objective: self.objective,
            subtasks,
            max_concurrency,
            deadline_ms: self.deadline_ms,
        })
    }
}

/// Parameters of `GET /v1/leader/runs`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderListQuery {
    /// One of the closed status words.
    pub status: Option<String>,
    pub limit: i64,
    pub cursor: Option<(i64, String)>,
}

impl LeaderListQuery {
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let mut q = Self {
            limit: list::DEFAULT_LIMIT,
            ..Self::default()
        };
        for (k, v) in list::parse_query(query)? {
            match k.as_str() {
                "status" => {
                    if !STATUSES.contains(&v.as_str()) {
                        return Err(ApiError::invalid_field(
                            "status",
                            format!("must be one of {}", STATUSES.join(", ")),
                        ));
                    }
                    q.status = Some(v);
                }
                "limit" => q.limit = list::parse_limit(&v)?,
                "cursor" => q.cursor = Some(decode_cursor(&v)?),
                other => {
                    return Err(ApiError::invalid_request(format!(
                        "unknown query parameter `{other}`; expected status, limit or cursor"
                    )))
                }
            }
        }
        Ok(q)
    }
}

/// Longest child error a report carries, in bytes (cut at a character boundary), so a settled
/// leader's `result` stays bounded (at most [`MAX_SUBTASKS`] reports); the child run keeps it whole.
pub const REPORT_ERROR_MAX: usize = 1024;

fn bounded(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A child's worker id in reports (`worker-<index>`).
pub fn worker_id(index: usize) -> String {
    format!("worker-{index}")
}

/// The worker reports a settled leader's `result` holds, in child order:
/// `[{workerId, sessionId, taskId?, status, error?}]`.
pub fn worker_reports(children: &[LeaderChild], reports: &[Report]) -> Value {
    Value::Array(
        reports
            .iter()
            .map(|r| {
                let child = children.get(r.index);
                let mut o = Map::new();
                o.insert("workerId".into(), json!(worker_id(r.index)));
                if let Some(c) = child {
                    o.insert("sessionId".into(), json!(c.session_id));
                    if let Some(t) = &c.task_id {
                        o.insert("taskId".into(), json!(t));
                    }
                }
                o.insert("status".into(), json!(r.status.as_str()));
                if let Some(e) = &r.error {
                    o.insert("error".into(), json!(bounded(e, REPORT_ERROR_MAX)));
                }
                Value::Object(o)
            })
            .collect(),
    )
}

/// One child as `GET /v1/leader/runs/{id}` shows it.
fn child_json(c: &LeaderChild) -> Value {
    let mut o = Map::new();
    o.insert("index".into(), json!(c.index));
    o.insert("workerId".into(), json!(worker_id(c.index)));
    o.insert("sessionId".into(), json!(c.session_id));
    if let Some(t) = &c.task_id {
        o.insert("taskId".into(), json!(t));
    }
    o.insert(
        "objectivePreview".into(),
        json!(objective_preview(&c.objective)),
    );
    let state = match &c.state {
        ChildState::NotStarted => "not_started",
        ChildState::Running => "running",
        ChildState::Parked => "parked",
        ChildState::Ended { status, error } => {
            o.insert("runStatus".into(), json!(status));
            if let Some(e) = error {
                o.insert("error".into(), json!(e));
            }
            "ended"
        }
        ChildState::Skipped { report } => {
            o.insert("report".into(), json!(report.as_str()));
            "skipped"
        }
    };
    o.insert("state".into(), json!(state));
    Value::Object(o)
}

/// A leader run as the API shows it: the record (SPEC-core §5.2), its plan (`maxConcurrency`,
/// `deadlineAtMs?`, `cancelRequested`) and, when given, its children.
pub fn leader_json(
    record: &LeaderRunRecord,
    drive: Option<&Drive>,
    children: Option<&[LeaderChild]>,
) -> Value {
    let mut v = json::to_value(record).unwrap_or_else(|_| json!({}));
    if let (Some(o), Some(d)) = (v.as_object_mut(), drive) {
        o.insert("maxConcurrency".into(), json!(d.max_concurrency));
        if let Some(at) = d.deadline_at {
            o.insert("deadlineAtMs".into(), json!(at));
        }
        o.insert("cancelRequested".into(), json!(d.cancel_requested));
    }
    if let (Some(o), Some(children)) = (v.as_object_mut(), children) {
        o.insert(
            "children".into(),
            Value::Array(children.iter().map(child_json).collect()),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader_drive::ReportStatus;

    fn body(v: Value) -> Result<SubmitLeader, ApiError> {
        <SubmitLeaderBody as crate::json::FromTree>::from_tree(&v)
            .map_err(|e| ApiError::invalid_request(e.to_string()))?
            .validate()
    }

    #[test]
    fn a_minimal_body_takes_the_default_concurrency_and_no_deadline() {
        let s = body(json!({"objective": "o", "subtasks": [{"objective": "a"}]})).unwrap();
        assert_eq!(
            (s.max_concurrency, s.deadline_ms),
            (DEFAULT_CONCURRENCY, None)
        );
        assert_eq!(s.subtasks[0].meta_json, "{}");
    }

    #[test]
    fn every_bound_of_the_body_is_a_4xx_naming_its_field() {
        let sub = |n: usize| vec![json!({"objective": "a"}); n];
        let cases = [
            (
                json!({"objective": "", "subtasks": sub(1)}),
                400,
                "objective",
            ),
            (
                json!({"objective": "o", "subtasks": sub(0)}),
                400,
                "subtasks",
            ),
            (
                json!({"objective": "o", "subtasks": sub(MAX_SUBTASKS + 1)}),
                400,
                "subtasks",
            ),
            (
                json!({"objective": "o", "subtasks": [{"objective": " "}]}),
                400,
                "subtasks[0].objective",
            ),
            (
                json!({"objective": "o", "subtasks": [{"objective": "x".repeat(OBJECTIVE_MAX + 1)}]}),
                413,
                "subtasks[0].objective",
            ),
            (
                json!({"objective": "o", "subtasks": [{"objective": "a", "meta": [1]}]}),
                400,
                "subtasks[0].meta",
            ),
            (
                json!({"objective": "o", "subtasks": sub(1), "maxConcurrency": 0}),
                400,
                "maxConcurrency",
            ),
            (
                json!({"objective": "o", "subtasks": sub(1), "maxConcurrency": MAX_CONCURRENCY + 1}),
                400,
                "maxConcurrency",
            ),
            (
                json!({"objective": "o", "subtasks": sub(1), "deadlineMs": 0}),
                400,
                "deadlineMs",
            ),
            (
                json!({"objective": "o", "subtasks": sub(1), "deadlineMs": MAX_DEADLINE_MS + 1}),
                400,
                "deadlineMs",
            ),
        ];
        for (v, status, field) in cases {
            let e = body(v.clone()).unwrap_err();
            assert_eq!(e.status(), status, "{v}");
            assert_eq!(
                e.detail("field"),
                Some(format!("{field:?}").as_str()),
                "{v}"
            );
        }
        // Exactly at the bounds is accepted.
        let s = body(json!({"objective": "o", "subtasks": sub(MAX_SUBTASKS),
            "maxConcurrency": MAX_CONCURRENCY, "deadlineMs": MAX_DEADLINE_MS}))
        .unwrap();
        assert_eq!(s.subtasks.len(), MAX_SUBTASKS);
        // Unknown fields and wrong types are refused by the parser.
        for v in [
            json!({"objective": "o", "subtasks": sub(1), "extra": 1}),
            json!({"objective": "o", "subtasks": [{"objective": "a", "x": 1}]}),
            json!({"objective": "o", "subtasks": sub(1), "maxConcurrency": 1.5}),
        ] {
            assert_eq!(body(v).unwrap_err().status(), 400);
        }
    }

    #[test]
    fn a_report_cuts_a_long_child_error_at_a_character_boundary() {
        let long = "é".repeat(REPORT_ERROR_MAX);
        let r = worker_reports(
            &[],
            &[Report {
                index: 0,
                status: ReportStatus::Failed,
                error: Some(long),
            }],
        );
        let e = r[0]["error"].as_str().unwrap();
        assert!(e.len() <= REPORT_ERROR_MAX && e.len() >= REPORT_ERROR_MAX - 1);
        assert!(e.chars().all(|c| c == 'é'));
    }

    #[test]
    fn list_queries_take_only_closed_status_words() {
        let q = LeaderListQuery::parse("status=needs_human&limit=5").unwrap();
        assert_eq!((q.status.as_deref(), q.limit), (Some("needs_human"), 5));
        for bad in ["status=paused", "limit=0", "sessionId=s", "cursor=zz"] {
            assert_eq!(
                LeaderListQuery::parse(bad).unwrap_err().status(),
                400,
                "{bad}"
            );
        }
    }

    #[test]
    fn reports_name_each_worker_with_its_session_and_omit_what_it_never_had() {
        let children = vec![
            LeaderChild {
                index: 0,
                session_id: "leader-L-0".into(),
                task_id: Some("t0".into()),
                objective: "a".into(),
                meta_json: "{}".into(),
                state: ChildState::Ended {
                    status: "completed".into(),
                    error: None,
                },
            },
            LeaderChild {
                index: 1,
                session_id: "leader-L-1".into(),
                task_id: None,
                objective: "b".into(),
                meta_json: "{}".into(),
                state: ChildState::Skipped {
                    report: ReportStatus::Timeout,
                },
            },
        ];
        let reports = [
            Report {
                index: 0,
                status: ReportStatus::Completed,
                error: None,
            },
            Report {
                index: 1,
                status: ReportStatus::Timeout,
                error: Some("cancelled before start".into()),
            },
        ];
        assert_eq!(
            worker_reports(&children, &reports),
            json!([
                {"workerId": "worker-0", "sessionId": "leader-L-0", "taskId": "t0", "status": "completed"},
                {"workerId": "worker-1", "sessionId": "leader-L-1", "status": "timeout", "error": "cancelled before start"},
            ])
        );
        let shown = leader_json(
            &LeaderRunRecord {
                id: "L".into(),
                status: "running".into(),
                owner: None,
                objective_preview: "o".into(),
                result: None,
                error: None,
                started_at_ms: 1,
                finished_at_ms: None,
            },
            Some(&Drive {
                max_concurrency: 2,
                deadline_at: None,
                cancel_requested: false,
            }),
            Some(&children),
        );
        assert_eq!(shown["maxConcurrency"], 2);
        assert!(shown.get("deadlineAtMs").is_none());
        assert_eq!(shown["children"][0]["state"], "ended");
        assert_eq!(shown["children"][1]["report"], "timeout");
    }
}
