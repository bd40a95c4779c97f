//! A run row as stored, and its read face (`GET /v1/runs/{id}`).

use crate::{
    sql::{Cols, Row},
    status,
};
use serde::{Deserialize, Serialize};

/// The columns of `task_run` the control plane reads (the session object's replies carry it in
/// `object_codec`'s text; serde builds the tests' rows from JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub task_id: String,
    pub session_id: String,
    pub owner: Option<String>,
    pub instance_id: String,
    pub status: String,
    pub objective_preview: String,
    /// JSON text, as stored.
    pub result: Option<String>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub held_by: Option<String>,
    pub lease_epoch: i64,
    /// The current lease was acknowledged: its holder heartbeat or appended since the lease.
    #[serde(default)]
    pub lease_acked: bool,
    pub cancel_requested: bool,
    pub heartbeat_at: Option<i64>,
    /// The highest event seq appended.
    pub last_seq: i64,
    pub created_at: i64,
    /// The last write to the row; while the run is `running` and unheld, when it became leasable
    /// (see [`crate::store::RunnerStore::unleased_since`]).
    pub updated_at: i64,
    /// The named task queue the run is leased from.
    #[serde(default = "crate::queue::default_queue")]
    pub queue: String,
}

impl RunRow {
    pub fn from_row(row: &Row) -> Result<Self, String> {
        Cols::read(row, |c| Self {
            task_id: c.str("task_id"),
            session_id: c.str("session_id"),
            owner: c.opt_str("owner"),
            instance_id: c.str("instance_id"),
            status: c.str("status"),
            objective_preview: c.opt_str("objective_preview").unwrap_or_default(),
            result: c.opt_str("result"),
            error: c.opt_str("error"),
            error_code: c.opt_str("error_code"),
            held_by: c.opt_str("held_by"),
            lease_epoch: c.i64("lease_epoch"),
            lease_acked: c.opt_i64("lease_acked").is_some_and(|v| v != 0),
            cancel_requested: c.i64("cancel_requested") != 0,
            heartbeat_at: c.opt_i64("heartbeat_at"),
            last_seq: match row.get("last_seq") {
                None => 0,
                Some(_) => c.i64("last_seq"),
            },
            created_at: c.i64("created_at"),
            updated_at: c.i64("updated_at"),
            queue: c.str("queue"),
        })
    }

    /// The read face.
    pub fn face(&self) -> RunFace<'_> {
        let held_by = if status::is_terminal(&self.status) {
            None
        } else {
            // The leasing runner while one drives the run; otherwise the instance that admitted it.
            Some(self.held_by.as_deref().unwrap_or(&self.instance_id))
        };
        RunFace {
            task_id: &self.task_id,
            session_id: &self.session_id,
            status: &self.status,
            queue: &self.queue,
            created_at: self.created_at,
            updated_at: self.updated_at,
            held_by,
            cancel_requested: self.cancel_requested,
            objective_preview: &self.objective_preview,
            result: self
                .result
                .as_deref()
                .and_then(|r| crate::json::parse(r).ok()),
            error: self.error.as_deref(),
            error_code: self.error_code.as_deref(),
            ms_since_last_activity: None,
        }
    }
}

/// What a guarded fail compares: a run's lease and evidence of life as read at one moment. A
/// heartbeat, append, lease or requeue after the read changes `heartbeat_at`, `lease_epoch` or
/// `held_by`, and then a guarded write made from this snapshot changes nothing. (Serde: a session
/// object keeps it in its storage between alarms.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSnapshot {
    pub task_id: String,
    pub lease_epoch: i64,
    /// Compared NULL-safely (the schema keeps it NOT NULL).
    pub heartbeat_at: Option<i64>,
    pub held_by: Option<String>,
    /// The status as read: `running`, or a park word (a parked run nothing can resume).
    pub status: String,
}

impl RunSnapshot {
    pub fn of(run: &RunRow) -> Self {
        Self {
            task_id: run.task_id.clone(),
            lease_epoch: run.lease_epoch,
            heartbeat_at: run.heartbeat_at,
            held_by: run.held_by.clone(),
            status: run.status.clone(),
        }
    }
}

/// `GET /v1/runs/{id}`: what a client may see of a run.
#[derive(Debug, Serialize)]
pub struct RunFace<'a> {
    #[serde(rename = "taskId")]
    pub task_id: &'a str,
    #[serde(rename = "sessionId")]
    pub session_id: &'a str,
    pub status: &'a str,
    /// The named task queue the run is leased from.
    pub queue: &'a str,
    #[serde(rename = "createdAt")]
    pub created_at: i64,
    #[serde(rename = "updatedAt")]
    pub updated_at: i64,
    /// `null` for terminal runs.
    #[serde(rename = "heldBy")]
    pub held_by: Option<&'a str>,
    #[serde(rename = "cancelRequested")]
    pub cancel_requested: bool,
    #[serde(rename = "objectivePreview")]
    pub objective_preview: &'a str,
    pub result: Option<crate::json::Value>,
    pub error: Option<&'a str>,
    #[serde(rename = "errorCode")]
    pub error_code: Option<&'a str>,
    /// Since the run was last heard from (non-terminal runs, on reads): never negative.
    #[serde(
        rename = "msSinceLastActivity",
        skip_serializing_if = "Option::is_none"
    )]
    pub ms_since_last_activity: Option<i64>,
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_struct!(RunRow {
    task_id,
    session_id,
    owner,
    instance_id,
    status,
    objective_preview,
    result,
    error,
    error_code,
    held_by,
    lease_epoch,
    lease_acked,
    cancel_requested,
    heartbeat_at,
    last_seq,
    created_at,
    updated_at,
    queue,
});

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, held_by: Option<&str>) -> RunRow {
        RunRow::from_row(stored(status, held_by).as_object().unwrap()).unwrap()
    }

    /// A row as the database returns it.
    fn stored(status: &str, held_by: Option<&str>) -> crate::json::Value {
        crate::json!({
            "task_id": "t", "session_id": "s", "owner": null, "instance_id": "default",
            "status": status, "objective_preview": "p", "result": "{\"ok\":true}", "error": null,
            "error_code": null, "held_by": held_by, "lease_epoch": 2, "cancel_requested": 1,
            "heartbeat_at": null, "created_at": 10.0, "updated_at": 11, "queue": "gpu"
        })
    }

    #[test]
    fn rows_decode_from_js_numbers_and_integer_flags() {
        let r = row("running", None);
        assert_eq!((r.created_at, r.updated_at, r.lease_epoch), (10, 11, 2));
        assert!(r.cancel_requested && r.heartbeat_at.is_none());
    }

    #[test]
    fn held_by_is_null_for_terminal_runs_and_names_the_holder_otherwise() {
        assert_eq!(row("completed", Some("r1")).face().held_by, None);
        assert_eq!(row("running", Some("r1")).face().held_by, Some("r1"));
        assert_eq!(row("suspended", None).face().held_by, Some("default"));
    }

    #[test]
    fn the_face_parses_the_stored_result_json() {
        let r = row("completed", None);
        let v = crate::json::to_value(r.face()).unwrap();
        assert_eq!(v["result"], crate::json!({"ok": true}));
        assert_eq!(v["taskId"], "t");
        assert_eq!(v["cancelRequested"], true);
    }

    #[test]
    fn the_queue_is_read_from_the_row_and_shown_on_the_face() {
        let r = row("running", None);
        assert_eq!(r.queue, "gpu");
        let v = crate::json::to_value(r.face()).unwrap();
        assert_eq!(v["queue"], "gpu");
        let mut json = crate::json::to_value(&r).unwrap();
        json.as_object_mut().unwrap().remove("queue");
        let old: RunRow = crate::json::serde_from_value(json).unwrap();
        assert_eq!(old.queue, "default", "a shape from before queues");
    }

    #[test]
    fn a_row_read_without_its_queue_column_is_refused() {
        let mut json = stored("running", None);
        let o = json.as_object_mut().unwrap();
        assert!(RunRow::from_row(o).is_ok());
        o.remove("queue");
        assert!(RunRow::from_row(o).is_err());
    }
}
