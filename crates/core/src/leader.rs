//! Leader runs: records, statuses, idempotency and the stale-sweep sentence (SPEC-core §5).

use crate::sql::{get_str, Cols, Row};
use serde::Serialize;

/// The closed status words of a leader run.
pub const STATUSES: [&str; 4] = ["running", "completed", "failed", "needs_human"];

/// Written into `error` by the stale reaper (exact text; one space after "died).").
pub const STALE_SWEEP_REASON: &str = "leader run went stale: no replica settled it within LEADER_RUN_STALE_MS (the replica driving it most likely died). The run was NOT taken over \u{2014} re-submit with a NEW Idempotency-Key to run it again.";

/// Width of the objective preview, in UTF-16 code units.
pub const OBJECTIVE_PREVIEW_CHARS: usize = 160;

/// The session of a leader run's child `idx`: `leader-<leaderRunId>-<idx>` (each child runs alone in it).
pub fn child_session_id(leader_run_id: &str, idx: usize) -> String {
    format!("leader-{leader_run_id}-{idx}")
}

/// The leader run whose child runs in `session_id`, if the name has a child session's shape
/// (`leader-<leaderRunId>-<idx>`). Only a hint for whom to drive: the driver reads the leader and
/// finds nothing to do for a name that merely looks like a child's.
pub fn leader_of_session(session_id: &str) -> Option<&str> {
    let rest = session_id.strip_prefix("leader-")?;
    let (id, idx) = rest.rsplit_once('-')?;
    (!id.is_empty() && !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// A leader run as read back. Optional fields are absent on the wire when unset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderRunRecord {
    pub id: String,
    pub status: String,
    pub owner: Option<String>,
    #[serde(rename = "objectivePreview")]
    pub objective_preview: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<crate::json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(rename = "startedAtMs")]
    pub started_at_ms: i64,
    #[serde(rename = "finishedAtMs", skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<i64>,
}

/// A row this build cannot interpret: refuses loudly rather than mapping the word to something else.
pub fn unknown_status_message(id: &str, status: &str) -> String {
    let quoted = crate::json::to_text(status).unwrap_or_default();
    format!("leader_run {id}: unknown status {quoted} (closed word table: running|completed|failed|needs_human) \u{2014} a newer replica wrote a word this build cannot interpret")
}

impl LeaderRunRecord {
    /// Decodes a row; an unknown status word is an error with [`unknown_status_message`].
    pub fn from_row(row: &Row) -> Result<Self, String> {
        let id = get_str(row, "leader_run_id")?;
        let status = get_str(row, "status")?;
        if !STATUSES.contains(&status.as_str()) {
            return Err(unknown_status_message(&id, &status));
        }
        Cols::read(row, |c| Self {
            status,
            owner: c.opt_str("owner"),
            objective_preview: c.opt_str("objective_preview").unwrap_or_default(),
            result: c
                .opt_str("result")
                .and_then(|r| crate::json::parse(&r).ok()),
            error: c.opt_str("error"),
            started_at_ms: c.i64("started_at_ms"),
            finished_at_ms: c.opt_i64("finished_at_ms"),
            id,
        })
    }
}

/// The terminal words a leader run may be finished with.
pub fn is_finish_status(status: &str) -> bool {
    LeaderFinish::parse(status).is_some()
}

/// How a leader run may be finished (typed: `running` cannot be passed as a terminal word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaderFinish {
    Completed,
    Failed,
    NeedsHuman,
}

impl LeaderFinish {
    pub const ALL: [LeaderFinish; 3] = [Self::Completed, Self::Failed, Self::NeedsHuman];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::NeedsHuman => "needs_human",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_finish_words_are_the_closed_table_minus_running() {
        for f in LeaderFinish::ALL {
            assert!(STATUSES.contains(&f.as_str()) && is_finish_status(f.as_str()));
        }
        assert!(!is_finish_status("running") && LeaderFinish::parse("paused").is_none());
    }

    #[test]
    fn a_child_session_names_its_leader_and_other_sessions_name_none() {
        let id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(leader_of_session(&child_session_id(id, 12)), Some(id));
        for other in [
            "s-1",
            "leader-",
            "leader-x",
            "leader--3",
            "leader-x-",
            "leader-x-1a",
        ] {
            assert_eq!(leader_of_session(other), None, "{other}");
        }
    }

    #[test]
    fn the_stale_sentence_is_exact() {
        assert_eq!(
            STALE_SWEEP_REASON,
            "leader run went stale: no replica settled it within LEADER_RUN_STALE_MS (the replica driving it most likely died). The run was NOT taken over \u{2014} re-submit with a NEW Idempotency-Key to run it again."
        );
        assert!(STALE_SWEEP_REASON.contains("died). The run"));
    }

    #[test]
    fn unknown_status_words_are_refused_with_the_closed_word_table_message() {
        let row: Row = serde_json::from_str(
            r#"{"leader_run_id":"L","owner":null,"objective_preview":null,"status":"paused","result":null,"error":null,"started_at_ms":1,"finished_at_ms":null}"#,
        )
        .unwrap();
        assert_eq!(
            LeaderRunRecord::from_row(&row).unwrap_err(),
            "leader_run L: unknown status \"paused\" (closed word table: running|completed|failed|needs_human) \u{2014} a newer replica wrote a word this build cannot interpret"
        );
    }

    #[test]
    fn absent_optional_fields_are_omitted_and_a_null_preview_is_empty() {
        let row: Row = serde_json::from_str(
            r#"{"leader_run_id":"L","owner":null,"objective_preview":null,"status":"running","result":"not json","error":null,"started_at_ms":5,"finished_at_ms":null}"#,
        )
        .unwrap();
        let r = LeaderRunRecord::from_row(&row).unwrap();
        assert_eq!(r.objective_preview, "");
        assert!(r.result.is_none());
        let json = crate::json::to_value(&r).unwrap();
        assert!(
            json.get("result").is_none()
                && json.get("finishedAtMs").is_none()
                && json.get("error").is_none()
        );
    }
}
