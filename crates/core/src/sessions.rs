//! Sessions as a whole: the read face of a session (its row, active run and pending gate), the
//! listing's query, the outcome of a deletion, and the retention cutoff.
//!
//! A session is owned by the principal of its first committed submit; its face is shown to that
//! principal and to operators, and anyone else gets the 404 of a missing session. `updatedAt` is the
//! last admission into it (the listing's order); `lastActivityAt` also counts its newest run's last
//! write and the active run's last sign of life.

use crate::{error::ApiError, gate, json, json::Value, list, wire::objective_preview};

/// A session with what holds it, as the store reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub session_id: String,
    pub owner: Option<String>,
    pub created_at: i64,
    /// The last admission into the session.
    pub updated_at: i64,
    /// The run holding the session's claim, when it is running or parked.
    pub active: Option<ActiveRun>,
    /// `updated_at` of the session's newest run.
    pub last_run_updated_at: Option<i64>,
    pub gate: Option<ViewGate>,
}

/// The run holding a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub task_id: String,
    pub status: String,
    pub heartbeat_at: i64,
    pub updated_at: i64,
}

/// A session's pending gate. `card` is JSON text: whole on a session's own read, cut to 400
/// characters in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewGate {
    pub task_id: String,
    pub kind: String,
    pub card: String,
    pub expires_at: Option<i64>,
    pub created_at: i64,
}

impl SessionView {
    /// The latest thing that happened in the session.
    pub fn last_activity_at(&self) -> i64 {
        let active = self
            .active
            .as_ref()
            .map_or(0, |a| a.heartbeat_at.max(a.updated_at));
        self.updated_at
            .max(self.last_run_updated_at.unwrap_or(0))
            .max(active)
    }

    /// The wire face: `{sessionId, owner, createdAt, updatedAt, lastActivityAt, activeRun, pendingGate}`.
    /// `activeRun` is `{taskId, status}` or null; `pendingGate` is `{taskId, kind, cardPreview,
    /// decidePath, expiresAt, createdAt}` or null, plus the whole `card` object when `full`.
    pub fn face(&self, full: bool) -> Value {
        let active = self
            .active
            .as_ref()
            .map(|a| json!({"taskId": a.task_id, "status": a.status}));
        let gate = self.gate.as_ref().map(|g| {
            let mut v = json!({
                "taskId": g.task_id,
                "kind": g.kind,
                "cardPreview": objective_preview(&g.card),
                "decidePath": gate::decide_path(&g.kind, &self.session_id, &g.task_id),
                "expiresAt": g.expires_at,
                "createdAt": g.created_at,
            });
            if full {
                v["card"] = crate::json::parse(&g.card).unwrap_or(Value::Null);
            }
            v
        });
        json!({
            "sessionId": self.session_id,
            "owner": self.owner,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "lastActivityAt": self.last_activity_at(),
            "activeRun": active,
            "pendingGate": gate,
        })
    }
}

/// How a deletion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionDeleted {
    /// Everything of the session is gone: this many runs.
    Deleted { runs: u64 },
    /// A run of the session is running or parked (the 409 materials' holder); nothing deleted.
    Active { task_id: String, status: String },
    /// The session is a child of this leader run, which is still running; nothing deleted.
    LeaderRunning { leader_run_id: String },
    /// No such session (or no longer the one the caller checked); nothing deleted.
    Missing,
}

/// What one retention page deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub runs: u64,
    pub events: u64,
}

/// Runs one tick's retention pass deletes at most (one read, one batch): with their events, a
/// run's rows can be many, so the page stays small; 50 a minute is 72,000 runs a day.
pub const RETENTION_PER_TICK: i64 = 50;

/// Events one tick's retention batch deletes at most, counted by the runs' `last_seq`: the runs
/// of a page are taken in order while their ledgers fit, so one batch never grows with the size of
/// the ledgers it meets. A single run whose ledger alone is larger still goes, alone in its batch.
pub const RETENTION_EVENTS_PER_TICK: i64 = 10_000;

/// The prefix of `candidates` (`(task_id, last_seq)`, in the order read) whose ledgers add up to at
/// most `budget` events; never empty when `candidates` is not (the first run always goes).
pub fn retention_page(candidates: Vec<(String, i64)>, budget: i64) -> Vec<String> {
    let mut used = 0i64;
    let mut out = Vec::new();
    for (id, events) in candidates {
        let events = events.max(0);
        if !out.is_empty() && used.saturating_add(events) > budget {
            break;
        }
        used = used.saturating_add(events);
        out.push(id);
    }
    out
}

/// The retention cutoff at `now` for `RETENTION_DAYS` = `days`: terminal runs last written before it
/// are deleted. `None` (off) for 0, a negative count, or one so large the cutoff would precede the
/// epoch.
pub fn retention_cutoff(now: i64, days: i64) -> Option<i64> {
    let span = days.checked_mul(86_400_000).filter(|_| days > 0)?;
    Some(now - span).filter(|c| *c > 0)
}

/// Parameters of `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionListQuery {
    pub limit: i64,
    /// `(updated_at, session_id)` of the last row of the previous page.
    pub cursor: Option<(i64, String)>,
}

impl SessionListQuery {
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let mut q = Self {
            limit: list::DEFAULT_LIMIT,
            cursor: None,
        };
        for (k, v) in list::parse_query(query)? {
            match k.as_str() {
                "limit" => q.limit = list::parse_limit(&v)?,
                "cursor" => {
                    q.cursor = Some(list::decode_cursor(&v)?);
                }
                other => {
                    return Err(ApiError::invalid_request(format!(
                        "unknown query parameter `{other}`; expected limit or cursor"
                    )))
                }
            }
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_retention_page_takes_runs_while_their_ledgers_fit_and_always_the_first() {
        let c = |v: &[(&str, i64)]| v.iter().map(|(i, n)| ((*i).to_owned(), *n)).collect();
        assert_eq!(
            retention_page(c(&[("a", 4), ("b", 5), ("c", 2)]), 10),
            ["a", "b"]
        );
        assert_eq!(retention_page(c(&[("a", 40), ("b", 1)]), 10), ["a"]);
        assert_eq!(
            retention_page(c(&[("a", 0), ("b", 10), ("c", 0)]), 10),
            ["a", "b", "c"]
        );
        assert!(retention_page(vec![], 10).is_empty());
    }
    use super::*;

    fn view() -> SessionView {
        SessionView {
            session_id: "s1".into(),
            owner: Some("alice".into()),
            created_at: 10,
            updated_at: 20,
            active: Some(ActiveRun {
                task_id: "t1".into(),
                status: "suspended".into(),
                heartbeat_at: 25,
                updated_at: 30,
            }),
            last_run_updated_at: Some(30),
            gate: Some(ViewGate {
                task_id: "t1".into(),
                kind: "tool_approval".into(),
                card: r#"{"ask":"deploy?"}"#.into(),
                expires_at: None,
                created_at: 30,
            }),
        }
    }

    #[test]
    fn a_sessions_face_names_its_active_run_and_how_to_decide_its_gate() {
        let v = view().face(false);
        assert_eq!(
            v["activeRun"],
            json!({"taskId": "t1", "status": "suspended"})
        );
        assert_eq!(v["pendingGate"]["decidePath"], "/v1/approvals/s1/decide");
        assert_eq!(v["pendingGate"]["cardPreview"], r#"{"ask":"deploy?"}"#);
        assert!(v["pendingGate"].get("card").is_none());
        assert_eq!(v["lastActivityAt"], 30);
        let full = view().face(true);
        assert_eq!(full["pendingGate"]["card"], json!({"ask": "deploy?"}));
    }

    #[test]
    fn a_free_session_has_null_active_run_and_gate() {
        let v = SessionView {
            active: None,
            gate: None,
            last_run_updated_at: None,
            ..view()
        }
        .face(true);
        assert!(v["activeRun"].is_null() && v["pendingGate"].is_null());
        assert_eq!(v["lastActivityAt"], 20);
    }

    #[test]
    fn retention_is_off_at_zero_and_never_reaches_before_the_epoch() {
        assert_eq!(retention_cutoff(1_000_000_000_000, 0), None);
        assert_eq!(retention_cutoff(1_000_000_000_000, -3), None);
        assert_eq!(retention_cutoff(1_000_000_000_000, i64::MAX), None);
        assert_eq!(
            retention_cutoff(1_000_000_000_000, 2),
            Some(1_000_000_000_000 - 2 * 86_400_000)
        );
    }

    #[test]
    fn session_list_queries_bound_the_limit_and_refuse_foreign_cursors() {
        assert_eq!(
            SessionListQuery::parse("").unwrap().limit,
            list::DEFAULT_LIMIT
        );
        let c = list::encode_cursor(5, "s-1");
        let q = SessionListQuery::parse(&format!("limit=3&cursor={c}")).unwrap();
        assert_eq!((q.limit, q.cursor), (3, Some((5, "s-1".into()))));
        for bad in [
            "limit=0",
            "limit=201",
            "limit=x",
            "cursor=zz",
            "sessionId=s",
            "cursor=",
        ] {
            let e = SessionListQuery::parse(bad).unwrap_err();
            assert_eq!((e.status(), e.code()), (400, "invalid_request"), "{bad}");
        }
    }
}
