//! Human gates, as pure decisions: which gate kinds exist and which endpoint resolves each (the single
//! source of truth for `decidePath`, SPEC-core §4.4), the park word of a kind, the validation of a
//! runner's park body and of a decision body, what each decision does to the run, and the
//! classification of a decide attempt from what the store read.
//!
//! Nothing here reads the clock or draws randomness: callers pass `now` and the token's bytes. The
//! store ([`crate::store::GateStore`]) carries the decisions out in one batch each; the session
//! object turns a [`Refusal`] into its answer with [`Refusal::api_error`].
//!
//! **Decisions.** Approvals take `approve | deny`, plan reviews `approve | revise`, resource limits
//! `continue | stop`, and a finished task is woken (`wake`). `approve`, `revise` and `continue` resume
//! the run (it is leased again with the decision); `deny` and `stop` end it `cancelled`
//! (`approval.denied`, `resource_limit.stopped`); `wake` ends the parked run `completed` with its
//! card as the result (the session object then admits the new run).

use crate::{
    error::{ApiError, ErrorCode},
    ids::{is_safe_id, SAFE_ID_RULE},
    json::JsonText,
    json::{Map, Value},
    runner_wire::LeaseHolder,
    status::{ParkStatus, TerminalStatus},
};
use serde::Deserialize;

/// Every gate kind this build parks on.
pub const KINDS: [&str; 7] = [
    "tool_approval",
    "human",
    "irreversible_ask",
    "policy_ask",
    "plan_review",
    "resource_limit",
    "task_done",
];

/// Largest card, in bytes of its compact JSON.
pub const CARD_MAX_BYTES: usize = 64 * 1024;
/// Longest `expiresInSec` a park may ask for (30 days); `APPROVAL_TIMEOUT_SEC` may bound it further.
pub const EXPIRES_IN_MAX_SEC: u64 = 30 * 24 * 3600;
/// Longest reason or feedback a decision may carry, in bytes.
pub const NOTE_MAX_BYTES: usize = 16 * 1024;

/// The endpoint family that resolves a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidePath {
    /// `POST /v1/approvals/{sessionId}/decide`: tool approvals and human asks.
    Approvals,
    /// `POST /v1/assistant/tasks/{taskId}/plan_review`.
    PlanReview,
    /// `POST /v1/assistant/tasks/{taskId}/resume`: a resource limit.
    Resume,
    /// `POST /v1/sessions/{sessionId}/wake`: a finished task.
    Wake,
}

impl DecidePath {
    pub const ALL: [DecidePath; 4] = [Self::Approvals, Self::PlanReview, Self::Resume, Self::Wake];

    /// The family that resolves `kind`; `None` for a kind this build does not know.
    pub fn for_kind(kind: &str) -> Option<Self> {
        match kind {
            "tool_approval" | "human" | "irreversible_ask" | "policy_ask" => Some(Self::Approvals),
            "plan_review" => Some(Self::PlanReview),
            "resource_limit" => Some(Self::Resume),
            "task_done" => Some(Self::Wake),
            _ => None,
        }
    }

    /// The gate kinds this path resolves.
    pub fn kinds(self) -> &'static [&'static str] {
        match self {
            Self::Approvals => &KINDS[0..4],
            Self::PlanReview => &KINDS[4..5],
            Self::Resume => &KINDS[5..6],
            Self::Wake => &KINDS[6..7],
        }
    }

    pub fn accepts_kind(self, kind: &str) -> bool {
        self.kinds().contains(&kind)
    }

    /// The path, ids inserted raw (SPEC-core §4.4).
    pub fn path(self, session_id: &str, task_id: &str) -> String {
        match self {
            Self::Approvals => format!("/v1/approvals/{session_id}/decide"),
            Self::PlanReview => format!("/v1/assistant/tasks/{task_id}/plan_review"),
            Self::Resume => format!("/v1/assistant/tasks/{task_id}/resume"),
            Self::Wake => format!("/v1/sessions/{session_id}/wake"),
        }
    }

    /// Whether the path names the gate by session (`true`) or by task.
    pub fn by_session(self) -> bool {
        matches!(self, Self::Approvals | Self::Wake)
    }

    /// The decisions a client may send to this path.
    pub fn decisions(self) -> &'static [Decision] {
        match self {
            Self::Approvals => &[Decision::Approve, Decision::Deny],
            Self::PlanReview => &[Decision::Approve, Decision::Revise],
            Self::Resume => &[Decision::Continue, Decision::Stop],
            Self::Wake => &[Decision::Wake],
        }
    }

    /// The body key of the decision's free text: a plan review's `feedback`, otherwise `reason`.
    pub fn note_key(self) -> &'static str {
        match self {
            Self::PlanReview => "feedback",
            _ => "reason",
        }
    }

    /// The code refusing a decision at this path while the pending gate is of another kind.
    pub fn wrong_kind_code(self) -> ErrorCode {
        match self {
            Self::Approvals => ErrorCode::GateNotToolApproval,
            Self::PlanReview => ErrorCode::GateNotPlanReview,
            Self::Resume => ErrorCode::GateNotResumable,
            Self::Wake => ErrorCode::WakeGatePending,
        }
    }

    /// What this path resolves, as the refusal sentences name it.
    fn resolves(self) -> &'static str {
        match self {
            Self::Approvals => "a tool approval or a human ask",
            Self::PlanReview => "a plan review",
            Self::Resume => "a resource limit to resume",
            Self::Wake => "a finished task to wake",
        }
    }
}

/// The path that resolves a pending gate of `kind`, with ids inserted raw; `None` for a kind this
/// build does not know (a gate is never invented).
pub fn decide_path(kind: &str, session_id: &str, task_id: &str) -> Option<String> {
    DecidePath::for_kind(kind).map(|p| p.path(session_id, task_id))
}

/// The park word of a gate kind: `needs_review` for a plan review, `suspended` for every other known
/// kind; `None` for an unknown kind (a run never parks on it).
pub fn park_status(kind: &str) -> Option<ParkStatus> {
    match DecidePath::for_kind(kind)? {
        DecidePath::PlanReview => Some(ParkStatus::NeedsReview),
        _ => Some(ParkStatus::Suspended),
    }
}

/// A decision on a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
    Revise,
    Continue,
    Stop,
    Wake,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
            Self::Revise => "revise",
            Self::Continue => "continue",
            Self::Stop => "stop",
            Self::Wake => "wake",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        [
            Self::Approve,
            Self::Deny,
            Self::Revise,
            Self::Continue,
            Self::Stop,
            Self::Wake,
        ]
        .into_iter()
        .find(|d| d.as_str() == word)
    }

    /// How the run ends on this decision, or `None`: it resumes.
    pub fn ending(self) -> Option<Ending> {
        match self {
            Self::Approve | Self::Revise | Self::Continue => None,
            Self::Deny => Some(Ending {
                status: TerminalStatus::Cancelled,
                error: Some(DENIED_ERROR),
                error_code: Some(DENIED_CODE),
            }),
            Self::Stop => Some(Ending {
                status: TerminalStatus::Cancelled,
                error: Some(STOPPED_ERROR),
                error_code: Some(STOPPED_CODE),
            }),
            Self::Wake => Some(Ending {
                status: TerminalStatus::Completed,
                error: None,
                error_code: None,
            }),
        }
    }
}

pub const DENIED_ERROR: &str =
    "the pending approval was denied; the run ended without the gated action";
pub const DENIED_CODE: &str = "approval.denied";
pub const STOPPED_ERROR: &str = "stopped at its resource limit by the decision on its gate";
pub const STOPPED_CODE: &str = "resource_limit.stopped";

/// The terminal write of a decision that ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    pub status: TerminalStatus,
    pub error: Option<&'static str>,
    pub error_code: Option<&'static str>,
}

/// Everything the store writes when a decision ends a run: the row's terminal fields and the `done`
/// event's data (the run's terminal result as a client sees it, `{status, result?, error?, errorCode?}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRun {
    pub status: TerminalStatus,
    /// JSON text.
    pub result_json: Option<String>,
    pub error: Option<&'static str>,
    pub error_code: Option<&'static str>,
    /// JSON text.
    pub done_json: String,
}

/// The end of a run on `decision` at a gate of `kind` whose card is `card_json`: a woken task's
/// result is its card; a denial or a stop records the gate, the decision and the reason as the result.
pub fn end_run(
    ending: Ending,
    kind: &str,
    decision: Decision,
    reason: Option<&str>,
    card_json: &str,
) -> EndRun {
    let result = if decision == Decision::Wake {
        crate::json::parse(card_json).unwrap_or(Value::Null)
    } else {
        let mut m = Map::new();
        m.insert("gate".into(), kind.into());
        m.insert("decision".into(), decision.as_str().into());
        if let Some(r) = reason {
            m.insert("reason".into(), r.into());
        }
        Value::Object(m)
    };
    let mut done = Map::new();
    done.insert("status".into(), ending.status.as_str().into());
    done.insert("result".into(), result.clone());
    if let Some(e) = ending.error {
        done.insert("error".into(), e.into());
    }
    if let Some(c) = ending.error_code {
        done.insert("errorCode".into(), c.into());
    }
    EndRun {
        status: ending.status,
        result_json: Some(result.json_text()),
        error: ending.error,
        error_code: ending.error_code,
        done_json: Value::Object(done).json_text(),
    }
}

/// The checkpoint id of a token: its sha256, lowercase hex. The token is a secret capability that never
/// leaves the server; only this digest is stored.
pub fn checkpoint_id(token: &[u8]) -> String {
    crate::hex::sha256(token)
}

/// When a park expires: `expires_in_sec` and `APPROVAL_TIMEOUT_SEC` (0 = no time limit, SPEC-api
/// §5.11), whichever is sooner; `None` = never.
pub fn expires_at(now: i64, expires_in_sec: Option<u64>, approval_timeout_sec: u64) -> Option<i64> {
    let timeout = (approval_timeout_sec > 0).then_some(approval_timeout_sec);
    let secs = match (expires_in_sec, timeout) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some(now.saturating_add(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)))
}

/// The park event's data: `{"gate":{"kind","card"},"expiresAt"?}` (its type is the park word).
pub fn park_event_data(kind: &str, card: &Value, expires_at: Option<i64>) -> String {
    let mut gate = Map::new();
    gate.insert("kind".into(), kind.into());
    gate.insert("card".into(), card.clone());
    let mut m = Map::new();
    m.insert("gate".into(), Value::Object(gate));
    if let Some(at) = expires_at {
        m.insert("expiresAt".into(), at.into());
    }
    Value::Object(m).json_text()
}

/// The `resumed` event's data: `{"gate":{"kind"},"decision","reason"?}`.
pub fn resumed_event_data(kind: &str, decision: Decision, reason: Option<&str>) -> String {
    let mut m = Map::new();
    m.insert("gate".into(), crate::json!({ "kind": kind }));
    m.insert("decision".into(), decision.as_str().into());
    if let Some(r) = reason {
        m.insert("reason".into(), r.into());
    }
    Value::Object(m).json_text()
}

/// A runner's park request: `{runnerId, leaseEpoch, gate:{kind, card}, expiresInSec?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParkBody {
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    #[serde(rename = "leaseEpoch")]
    pub lease_epoch: i64,
    pub gate: GateBody,
    #[serde(rename = "expiresInSec", default)]
    pub expires_in_sec: Option<u64>,
}

crate::tree_struct!(ParkBody strict {
    runner_id: "runnerId",
    lease_epoch: "leaseEpoch",
    gate: "gate",
    expires_in_sec: "expiresInSec" = default,
});

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateBody {
    pub kind: String,
    pub card: Value,
}

crate::tree_struct!(GateBody strict { kind: "kind", card: "card" });

/// A validated park.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidPark {
    pub holder: LeaseHolder,
    pub kind: String,
    pub status: ParkStatus,
    pub card: Value,
    /// The card's compact JSON (at most [`CARD_MAX_BYTES`]).
    pub card_json: String,
    pub expires_in_sec: Option<u64>,
}

impl ParkBody {
    /// Known kind, a card that is a JSON object of at most 64 KiB, `expiresInSec` in 1..=30 days.
    pub fn validate(self) -> Result<ValidPark, ApiError> {
        if !is_safe_id(&self.runner_id) {
            return Err(ApiError::invalid_field("runnerId", SAFE_ID_RULE));
        }
        let holder = LeaseHolder {
            runner_id: self.runner_id,
            lease_epoch: self.lease_epoch,
        };
        if !(0..=crate::sql::JS_SAFE_INT).contains(&holder.lease_epoch) {
            return Err(ApiError::invalid_field(
                "leaseEpoch",
                "must be an integer in 0..=2^53-1",
            ));
        }
        let Some(status) = park_status(&self.gate.kind) else {
            return Err(ApiError::invalid_field(
                "gate.kind",
                format!("must be one of {}", KINDS.join(", ")),
            ));
        };
        if !self.gate.card.is_object() {
            return Err(ApiError::invalid_field(
                "gate.card",
                "must be a JSON object",
            ));
        }
        let card_json = self.gate.card.json_text();
        if card_json.len() > CARD_MAX_BYTES {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("gate.card: exceeds {CARD_MAX_BYTES} bytes"),
            )
            .with("field", "gate.card")
            .with("limitBytes", &CARD_MAX_BYTES));
        }
        if let Some(s) = self.expires_in_sec {
            if !(1..=EXPIRES_IN_MAX_SEC).contains(&s) {
                return Err(ApiError::invalid_field(
                    "expiresInSec",
                    format!("must be an integer in 1..={EXPIRES_IN_MAX_SEC}"),
                ));
            }
        }
        Ok(ValidPark {
            holder,
            kind: self.gate.kind,
            status,
            card: self.gate.card,
            card_json,
            expires_in_sec: self.expires_in_sec,
        })
    }
}

/// A client's decision body: `{decision, reason?}` (a plan review's text is `feedback`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    pub decision: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub feedback: Option<String>,
}

crate::tree_struct!(DecideBody strict {
    decision: "decision",
    reason: "reason" = default,
    feedback: "feedback" = default,
});

impl DecideBody {
    /// The decision, if `path` accepts it, and its free text (`feedback` at a plan review, `reason`
    /// elsewhere; the other key is refused), at most [`NOTE_MAX_BYTES`].
    pub fn validate(self, path: DecidePath) -> Result<(Decision, Option<String>), ApiError> {
        let words: Vec<&str> = path.decisions().iter().map(|d| d.as_str()).collect();
        let decision = Decision::parse(&self.decision)
            .filter(|d| path.decisions().contains(d))
            .ok_or_else(|| {
                ApiError::invalid_field("decision", format!("must be one of {}", words.join(", ")))
            })?;
        let (note, other) = match path {
            DecidePath::PlanReview => (self.feedback, self.reason.map(|_| "reason")),
            _ => (self.reason, self.feedback.map(|_| "feedback")),
        };
        if let Some(key) = other {
            return Err(ApiError::invalid_field(
                key,
                format!("is not accepted here; use {}", path.note_key()),
            ));
        }
        if note.as_ref().is_some_and(|n| n.len() > NOTE_MAX_BYTES) {
            return Err(ApiError::invalid_field(
                path.note_key(),
                format!("must be at most {NOTE_MAX_BYTES} bytes"),
            ));
        }
        Ok((decision, note))
    }
}

/// A checkpoint's status, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointStatus {
    Pending,
    Resolved,
    /// Its deadline passed and the reaper ended the run.
    Expired,
    /// The run was cancelled (or otherwise ended) while it waited.
    Voided,
}

impl CheckpointStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Resolved => "resolved",
            Self::Expired => "expired",
            Self::Voided => "voided",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        [Self::Pending, Self::Resolved, Self::Expired, Self::Voided]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// The latest gate in a decide attempt's scope (the session's, or the task's), as the store read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSeen {
    pub session_id: String,
    pub task_id: String,
    pub kind: String,
    pub status: CheckpointStatus,
    pub expires_at: Option<i64>,
    /// The decision, once resolved.
    pub decision: Option<String>,
    /// The run's status (`None`: no row).
    pub run_status: Option<String>,
}

/// Why a decide attempt changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No gate of this path's kinds waits in scope (never parked, cancelled, or long settled). 404.
    NothingPending,
    /// The pending gate is of another kind: its own path resolves it. 409 with the path's guard code.
    WrongKind {
        kind: String,
        /// `None` for a kind this build does not know.
        decide_path: Option<String>,
    },
    /// The gate's deadline passed before the decision: `gate_expired` (409); the run ends (or ended)
    /// `approval.expired`.
    Expired,
    /// The gate was already decided and that decision still stands (a concurrent decider won, or this
    /// is a repeat): `not_resumable` (409).
    LostRace,
}

/// Judges a decide attempt at `path` from the latest gate in scope, before (or after) the
/// compare-and-set: `Ok(())` = a pending gate of this path's kinds, not expired at `now`, so the
/// attempt may resolve it (the store's compare-and-set then has the last word: if it changes nothing,
/// the attempt is judged again on a fresh read, and a gate still judged `Ok` is a lost race).
///
/// The order matters: a pending gate of another kind is named before its deadline is looked at
/// (the client learns where to go), and a settled gate of another kind is nothing pending here.
pub fn judge(path: DecidePath, seen: Option<&GateSeen>, now: i64) -> Result<(), Refusal> {
    let Some(g) = seen else {
        return Err(Refusal::NothingPending);
    };
    let ours = path.accepts_kind(&g.kind);
    match g.status {
        CheckpointStatus::Pending if !ours => Err(Refusal::WrongKind {
            kind: g.kind.clone(),
            decide_path: decide_path(&g.kind, &g.session_id, &g.task_id),
        }),
        CheckpointStatus::Pending if g.expires_at.is_some_and(|at| at <= now) => {
            Err(Refusal::Expired)
        }
        CheckpointStatus::Pending => Ok(()),
        _ if !ours => Err(Refusal::NothingPending),
        CheckpointStatus::Expired => Err(Refusal::Expired),
        CheckpointStatus::Resolved => {
            let run_active = g
                .run_status
                .as_deref()
                .is_some_and(crate::status::is_active);
            let ended_by_it = g
                .decision
                .as_deref()
                .and_then(Decision::parse)
                .is_some_and(|d| d.ending().is_some());
            if run_active || ended_by_it {
                Err(Refusal::LostRace)
            } else {
                Err(Refusal::NothingPending)
            }
        }
        CheckpointStatus::Voided => Err(Refusal::NothingPending),
    }
}

impl Refusal {
    /// The answer to a refused decide at `path`, for the gate addressed by `session_id` / `task_id`.
    pub fn api_error(&self, path: DecidePath) -> ApiError {
        match self {
            Self::NothingPending => ApiError::new(
                ErrorCode::NotFound,
                if path.by_session() {
                    format!("no pending gate for {} in this session", path.resolves())
                } else {
                    format!("no pending gate for {} on this run", path.resolves())
                },
            ),
            Self::WrongKind { kind, decide_path } => {
                let e = match decide_path {
                    Some(p) => ApiError::new(
                        path.wrong_kind_code(),
                        wrong_kind_text(path, kind, p),
                    ),
                    None => ApiError::new(
                        path.wrong_kind_code(),
                        format!(
                            "the pending gate is a {kind} gate, not {}, and this server has no endpoint that resolves it; cancelling the run abandons it",
                            path.resolves()
                        ),
                    ),
                };
                e.with(
                    "pendingGate",
                    &crate::json!({ "kind": kind, "decidePath": decide_path }),
                )
            }
            Self::Expired => ApiError::new(ErrorCode::GateExpired, GATE_EXPIRED_TEXT),
            Self::LostRace => ApiError::new(ErrorCode::NotResumable, NOT_RESUMABLE_TEXT),
        }
    }
}

/// The guard sentence of a decide at `path` while a gate of `kind` is pending; names the path that
/// resolves it (it must agree with [`decide_path`]: tested).
pub fn wrong_kind_text(path: DecidePath, kind: &str, decide_path: &str) -> String {
    format!(
        "the pending gate is a {kind} gate, not {} \u{2014} resolve it via POST {decide_path}",
        path.resolves()
    )
}

pub const GATE_EXPIRED_TEXT: &str = "the gate expired before this decision arrived; the decision was not recorded and the run ends with approval.expired";
pub const NOT_RESUMABLE_TEXT: &str =
    "the gate was already decided (another decision won); this decision was not recorded";

/// The outcome of a decide attempt ([`crate::store::GateStore::resolve_gate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The gate is resolved and the run is `running` again, unheld, under `lease_epoch` (its next
    /// lease carries the decision): leasable again from `queue`.
    Resumed {
        session_id: String,
        task_id: String,
        kind: String,
        lease_epoch: i64,
        /// The run's queue (whose dispatcher may hand it over now).
        queue: String,
    },
    /// The gate is resolved and the run ended (`done` appended, claim released), one batch.
    Ended {
        session_id: String,
        task_id: String,
        kind: String,
        status: TerminalStatus,
        /// The `done` event's seq.
        done_seq: i64,
        /// The ended run's queue (a wake's new run is admitted into it).
        queue: String,
    },
    /// Nothing was written.
    Refused(Refusal),
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_enum!(Decision {
    0 => Approve,
    1 => Deny,
    2 => Revise,
    3 => Continue,
    4 => Stop,
    5 => Wake,
});
crate::codec_enum!(DecidePath {
    0 => Approvals,
    1 => PlanReview,
    2 => Resume,
    3 => Wake,
});

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(kind: &str, status: CheckpointStatus) -> GateSeen {
        GateSeen {
            session_id: "S".into(),
            task_id: "T".into(),
            kind: kind.into(),
            status,
            expires_at: None,
            decision: None,
            run_status: Some("suspended".into()),
        }
    }

    #[test]
    fn every_known_gate_kind_maps_to_its_endpoint() {
        for k in ["tool_approval", "human", "irreversible_ask", "policy_ask"] {
            assert_eq!(decide_path(k, "S", "T").unwrap(), "/v1/approvals/S/decide");
        }
        assert_eq!(
            decide_path("plan_review", "S", "T").unwrap(),
            "/v1/assistant/tasks/T/plan_review"
        );
        assert_eq!(
            decide_path("resource_limit", "S", "T").unwrap(),
            "/v1/assistant/tasks/T/resume"
        );
        assert_eq!(
            decide_path("task_done", "S", "T").unwrap(),
            "/v1/sessions/S/wake"
        );
    }

    #[test]
    fn unknown_kinds_have_no_path_and_no_park_word() {
        assert_eq!(decide_path("verifier_pause", "S", "T"), None);
        assert_eq!(decide_path("", "S", "T"), None);
        assert_eq!(park_status("verifier_pause"), None);
    }

    #[test]
    fn every_kind_belongs_to_exactly_one_path() {
        for k in KINDS {
            let owners: Vec<_> = DecidePath::ALL
                .into_iter()
                .filter(|p| p.accepts_kind(k))
                .collect();
            assert_eq!(owners, vec![DecidePath::for_kind(k).unwrap()], "{k}");
        }
    }

    #[test]
    fn a_plan_review_parks_as_needs_review_and_every_other_kind_as_suspended() {
        for k in KINDS {
            let want = if k == "plan_review" {
                ParkStatus::NeedsReview
            } else {
                ParkStatus::Suspended
            };
            assert_eq!(park_status(k), Some(want), "{k}");
        }
    }

    fn park(kind: &str, card: Value, expires: Option<u64>) -> Result<ValidPark, ApiError> {
        ParkBody {
            runner_id: "r1".into(),
            lease_epoch: 3,
            gate: GateBody {
                kind: kind.into(),
                card,
            },
            expires_in_sec: expires,
        }
        .validate()
    }

    #[test]
    fn a_park_needs_a_known_kind_an_object_card_and_a_sane_expiry() {
        let ok = park("plan_review", crate::json!({"plan": "x"}), Some(60)).unwrap();
        assert_eq!(ok.status, ParkStatus::NeedsReview);
        assert_eq!(ok.card_json, r#"{"plan":"x"}"#);
        assert_eq!(ok.holder.lease_epoch, 3);
        let field = |e: ApiError| e.detail("field").map(str::to_owned);
        assert_eq!(
            field(park("nope", crate::json!({}), None).unwrap_err()).as_deref(),
            Some("\"gate.kind\"")
        );
        assert_eq!(
            field(park("human", crate::json!([1]), None).unwrap_err()).as_deref(),
            Some("\"gate.card\"")
        );
        for bad in [0, EXPIRES_IN_MAX_SEC + 1] {
            let e = park("human", crate::json!({}), Some(bad)).unwrap_err();
            assert_eq!(field(e).as_deref(), Some("\"expiresInSec\""));
        }
        assert!(park("human", crate::json!({}), Some(EXPIRES_IN_MAX_SEC)).is_ok());
    }

    #[test]
    fn a_card_of_64_kib_is_accepted_and_one_byte_more_is_too_large() {
        // {"a":"…"} is 8 bytes of framing around the text.
        let fits = crate::json!({ "a": "x".repeat(CARD_MAX_BYTES - 8) });
        assert_eq!(fits.to_string().len(), CARD_MAX_BYTES);
        assert!(park("human", fits, None).is_ok());
        let over = crate::json!({ "a": "x".repeat(CARD_MAX_BYTES - 7) });
        let e = park("human", over, None).unwrap_err();
        assert_eq!((e.status(), e.code()), (413, "payload_too_large"));
        assert_eq!(e.detail("limitBytes"), Some("65536"));
    }

    #[test]
    fn expiry_is_the_sooner_of_the_request_and_the_approval_timeout_and_zero_means_none() {
        assert_eq!(expires_at(1_000, None, 0), None);
        assert_eq!(expires_at(1_000, Some(5), 0), Some(6_000));
        assert_eq!(expires_at(1_000, None, 7), Some(8_000));
        assert_eq!(expires_at(1_000, Some(5), 7), Some(6_000));
        assert_eq!(expires_at(1_000, Some(9), 7), Some(8_000));
    }

    #[test]
    fn each_path_takes_only_its_own_decisions_and_its_own_note_key() {
        let body = |d: &str, reason: Option<&str>, feedback: Option<&str>| DecideBody {
            decision: d.into(),
            reason: reason.map(Into::into),
            feedback: feedback.map(Into::into),
        };
        assert_eq!(
            body("deny", Some("no"), None).validate(DecidePath::Approvals),
            Ok((Decision::Deny, Some("no".into())))
        );
        assert_eq!(
            body("revise", None, Some("shorter")).validate(DecidePath::PlanReview),
            Ok((Decision::Revise, Some("shorter".into())))
        );
        assert_eq!(
            body("continue", None, None).validate(DecidePath::Resume),
            Ok((Decision::Continue, None))
        );
        for (path, wrong) in [
            (DecidePath::Approvals, "continue"),
            (DecidePath::PlanReview, "deny"),
            (DecidePath::Resume, "approve"),
            (DecidePath::Approvals, "Approve"),
        ] {
            let e = body(wrong, None, None).validate(path).unwrap_err();
            assert_eq!(e.detail("field"), Some("\"decision\""), "{path:?} {wrong}");
        }
        let e = body("approve", Some("x"), None)
            .validate(DecidePath::PlanReview)
            .unwrap_err();
        assert_eq!(e.detail("field"), Some("\"reason\""));
        let e = body("approve", Some(&"x".repeat(NOTE_MAX_BYTES + 1)), None)
            .validate(DecidePath::Approvals)
            .unwrap_err();
        assert_eq!(e.detail("field"), Some("\"reason\""));
    }

    #[test]
    fn deny_and_stop_end_the_run_cancelled_and_wake_completes_it() {
        assert_eq!(Decision::Approve.ending(), None);
        assert_eq!(Decision::Revise.ending(), None);
        assert_eq!(Decision::Continue.ending(), None);
        let deny = Decision::Deny.ending().unwrap();
        assert_eq!(
            (deny.status, deny.error_code),
            (TerminalStatus::Cancelled, Some("approval.denied"))
        );
        let stop = Decision::Stop.ending().unwrap();
        assert_eq!(
            (stop.status, stop.error_code),
            (TerminalStatus::Cancelled, Some("resource_limit.stopped"))
        );
        let wake = Decision::Wake.ending().unwrap();
        assert_eq!(
            (wake.status, wake.error_code),
            (TerminalStatus::Completed, None)
        );
    }

    #[test]
    fn a_woken_task_ends_with_its_card_as_result_and_a_denial_records_its_reason() {
        let woke = end_run(
            Decision::Wake.ending().unwrap(),
            "task_done",
            Decision::Wake,
            None,
            r#"{"summary":"done"}"#,
        );
        assert_eq!(woke.result_json.as_deref(), Some(r#"{"summary":"done"}"#));
        assert_eq!(
            crate::json::parse(&woke.done_json).unwrap(),
            crate::json!({"status":"completed","result":{"summary":"done"}})
        );
        let denied = end_run(
            Decision::Deny.ending().unwrap(),
            "tool_approval",
            Decision::Deny,
            Some("too risky"),
            "{}",
        );
        assert_eq!(
            crate::json::parse(&denied.done_json).unwrap(),
            crate::json!({
                "status": "cancelled",
                "result": {"gate": "tool_approval", "decision": "deny", "reason": "too risky"},
                "error": DENIED_ERROR,
                "errorCode": "approval.denied"
            })
        );
    }

    #[test]
    fn a_checkpoint_id_is_the_sha256_of_the_token_and_never_the_token() {
        let id = checkpoint_id(b"secret-token");
        assert_eq!(id.len(), 64);
        assert!(!id.contains("secret"));
        assert_eq!(id, crate::hex::sha256(b"secret-token"));
    }

    #[test]
    fn nothing_in_scope_is_nothing_pending() {
        assert_eq!(
            judge(DecidePath::Approvals, None, 0),
            Err(Refusal::NothingPending)
        );
    }

    #[test]
    fn a_pending_gate_of_this_paths_kind_may_be_resolved_until_its_deadline() {
        let mut g = seen("human", CheckpointStatus::Pending);
        assert_eq!(judge(DecidePath::Approvals, Some(&g), 100), Ok(()));
        g.expires_at = Some(101);
        assert_eq!(judge(DecidePath::Approvals, Some(&g), 100), Ok(()));
        assert_eq!(
            judge(DecidePath::Approvals, Some(&g), 101),
            Err(Refusal::Expired)
        );
    }

    #[test]
    fn a_pending_gate_of_another_kind_names_its_own_path_even_past_its_deadline() {
        let mut g = seen("plan_review", CheckpointStatus::Pending);
        g.expires_at = Some(1);
        assert_eq!(
            judge(DecidePath::Approvals, Some(&g), 100),
            Err(Refusal::WrongKind {
                kind: "plan_review".into(),
                decide_path: Some("/v1/assistant/tasks/T/plan_review".into()),
            })
        );
    }

    #[test]
    fn an_expired_gate_is_expired_and_a_voided_one_is_nothing_pending() {
        assert_eq!(
            judge(
                DecidePath::Resume,
                Some(&seen("resource_limit", CheckpointStatus::Expired)),
                0
            ),
            Err(Refusal::Expired)
        );
        assert_eq!(
            judge(
                DecidePath::Resume,
                Some(&seen("resource_limit", CheckpointStatus::Voided)),
                0
            ),
            Err(Refusal::NothingPending)
        );
        // A settled gate of another kind is not this path's business.
        assert_eq!(
            judge(
                DecidePath::Approvals,
                Some(&seen("resource_limit", CheckpointStatus::Expired)),
                0
            ),
            Err(Refusal::NothingPending)
        );
    }

    #[test]
    fn a_resolved_gate_whose_decision_still_stands_is_a_lost_race() {
        let mut g = seen("tool_approval", CheckpointStatus::Resolved);
        g.decision = Some("approve".into());
        g.run_status = Some("running".into());
        assert_eq!(
            judge(DecidePath::Approvals, Some(&g), 0),
            Err(Refusal::LostRace)
        );
        // A denial ended the run: a second decider lost to it.
        g.decision = Some("deny".into());
        g.run_status = Some("cancelled".into());
        assert_eq!(
            judge(DecidePath::Approvals, Some(&g), 0),
            Err(Refusal::LostRace)
        );
        // Approved long ago and the run has since completed: nothing is pending.
        g.decision = Some("approve".into());
        g.run_status = Some("completed".into());
        assert_eq!(
            judge(DecidePath::Approvals, Some(&g), 0),
            Err(Refusal::NothingPending)
        );
    }

    #[test]
    fn the_guard_sentences_name_the_path_of_the_pending_gate() {
        for path in DecidePath::ALL {
            for kind in KINDS {
                if path.accepts_kind(kind) {
                    continue;
                }
                let want = decide_path(kind, "S", "T").unwrap();
                let e = Refusal::WrongKind {
                    kind: kind.into(),
                    decide_path: Some(want.clone()),
                }
                .api_error(path);
                assert_eq!(e.kind(), path.wrong_kind_code());
                assert!(
                    e.message.ends_with(&format!("resolve it via POST {want}")),
                    "{path:?} {kind}: {}",
                    e.message
                );
                assert!(e.message.contains(&format!("a {kind} gate")));
            }
        }
        let codes: Vec<&str> = DecidePath::ALL
            .iter()
            .map(|p| p.wrong_kind_code().code())
            .collect();
        assert_eq!(
            codes,
            [
                "gate_not_tool_approval",
                "gate_not_plan_review",
                "gate_not_resumable",
                "wake.gate_pending"
            ]
        );
    }

    #[test]
    fn refusals_map_to_their_codes_and_statuses() {
        let p = DecidePath::Approvals;
        let cases = [
            (Refusal::NothingPending, "not_found", 404),
            (Refusal::Expired, "gate_expired", 409),
            (Refusal::LostRace, "not_resumable", 409),
        ];
        for (r, code, status) in cases {
            let e = r.api_error(p);
            assert_eq!((e.code(), e.status()), (code, status), "{r:?}");
        }
    }

    #[test]
    fn park_and_resume_events_carry_the_gate_but_never_a_token() {
        let data = park_event_data("human", &crate::json!({"q": "ok?"}), Some(9));
        assert_eq!(
            crate::json::parse(&data).unwrap(),
            crate::json!({"gate": {"kind": "human", "card": {"q": "ok?"}}, "expiresAt": 9})
        );
        assert_eq!(
            crate::json::parse(&resumed_event_data(
                "plan_review",
                Decision::Revise,
                Some("more tests")
            ))
            .unwrap(),
            crate::json!({"gate": {"kind": "plan_review"}, "decision": "revise", "reason": "more tests"})
        );
    }
}
