//! Server-sent-event framing.
//!
//! A ledger event is `id: <seq>` plus one `data:` line of JSON whose `type` is the event type; the id
//! is the event's seq, so the same event has the same id on every replay and after every restart, and
//! `Last-Event-ID` resumes exactly after it. The stream ends with one `done` frame, which has an id
//! too (the run's `done` event's seq, or `last_seq + 1`), so an `EventSource` that reconnects after it
//! sends that id and is answered `204 No Content` (see `sse_subscriber::reconnect`), which stops it
//! for good. `meta` and `heartbeat` frames carry an `event:` name and no id (they are not part of the
//! ledger), and neither does a refusal's `done`. No `retry:` field is sent (SPEC-api §3.1 has none):
//! a client keeps its own reconnection time.

use crate::{
    json::{Map, Value},
    run::RunRow,
};

/// Sent every 15 s while a stream is open.
pub const HEARTBEAT_FRAME: &str = "event: heartbeat\ndata: {}\n\n";
pub const HEARTBEAT_INTERVAL_MS: u64 = 15_000;

/// The JSON of a ledger event as streamed: the event's data object with `type` and `seq` (and
/// `eventId` when the runner gave one) set on it; a non-object payload sits under `data`.
pub fn event_json(seq: i64, kind: &str, data: &str, event_id: Option<&str>) -> Value {
    let parsed: Value = crate::json::parse(data).unwrap_or(Value::Null);
    let mut obj = match parsed {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("data".into(), other);
            m
        }
    };
    obj.insert("type".into(), kind.into());
    obj.insert("seq".into(), seq.into());
    if let Some(id) = event_id {
        obj.insert("eventId".into(), id.into());
    }
    Value::Object(obj)
}

/// One ledger event frame.
pub fn event_frame(seq: i64, kind: &str, data: &str, event_id: Option<&str>) -> String {
    format!(
        "id: {seq}\ndata: {}\n\n",
        event_json(seq, kind, data, event_id)
    )
}

/// The `meta` frame that opens a submit-and-stream response.
pub fn meta_frame(task_id: &str, session_id: &str) -> String {
    format!(
        "event: meta\ndata: {{\"type\":\"meta\",\"taskId\":{},\"sessionId\":{}}}\n\n",
        Value::from(task_id),
        Value::from(session_id)
    )
}

/// The terminal result of a run: `{status, result, error, errorCode}` (absent values omitted).
pub fn done_result(run: &RunRow) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), run.status.clone().into());
    if let Some(r) = run
        .result
        .as_deref()
        .and_then(|r| crate::json::parse(r).ok())
    {
        m.insert("result".into(), r);
    }
    if let Some(e) = &run.error {
        m.insert("error".into(), e.clone().into());
    }
    if let Some(c) = &run.error_code {
        m.insert("errorCode".into(), c.clone().into());
    }
    Value::Object(m)
}

/// The `done` frame with id `seq` (the `done` ledger event's seq, or `last_seq + 1` when the run ended
/// without a runner's `done`, e.g. cancelled or reaped; terminal runs take no further events, so the
/// id is stable).
pub fn done_frame(seq: i64, result: &Value) -> String {
    format!("id: {seq}\ndata: {{\"type\":\"done\",\"result\":{result}}}\n\n")
}

/// The `done` frame of an idempotent replay or of a keyed duplicate that joined the run in flight
/// (SPEC-api §3.5, §4): the run's own `done` frame (same id, same `result`) with `replay: true`.
pub fn replay_done_frame(seq: i64, result: &Value) -> String {
    format!("id: {seq}\ndata: {{\"type\":\"done\",\"result\":{result},\"replay\":true}}\n\n")
}

/// A `done` frame without an id (a refusal after the stream opened, e.g. the active-run conflict).
/// Exactly `data: {"type":"done","result":<result>}` and a blank line: no `replay`, and no id (the
/// refusal is nobody's ledger; a client that reconnects submits again).
pub fn refusal_done_frame<T: serde::Serialize>(result: &T) -> String {
    let result = crate::json::to_text(result).unwrap_or_else(|_| "null".into());
    format!("data: {{\"type\":\"done\",\"result\":{result}}}\n\n")
}

/// Parses a resume anchor (`Last-Event-ID` or `?after=`): a seq in 0..=2^53-1 (what D1 can bind
/// exactly); anything else is refused by the caller with a 400, never a 500 or an empty stream.
pub fn parse_anchor(raw: &str) -> Option<i64> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (0..=crate::sql::JS_SAFE_INT).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_frames_carry_the_seq_as_id_and_the_type_in_the_json() {
        let f = event_frame(7, "text_delta", r#"{"delta":"hi"}"#, Some("e-1"));
        assert_eq!(f, "id: 7\ndata: {\"delta\":\"hi\",\"eventId\":\"e-1\",\"seq\":7,\"type\":\"text_delta\"}\n\n");
    }

    #[test]
    fn non_object_payloads_sit_under_data_and_type_cannot_be_spoofed() {
        let v = event_json(1, "x", "[1,2]", None);
        assert_eq!(v, crate::json!({"type": "x", "seq": 1, "data": [1, 2]}));
        let v = event_json(2, "real", r#"{"type":"fake","seq":99}"#, None);
        assert_eq!(
            (v["type"].as_str(), v["seq"].as_i64()),
            (Some("real"), Some(2))
        );
    }

    #[test]
    fn meta_heartbeat_and_refusal_frames_have_no_id() {
        assert!(meta_frame("t", "s").starts_with("event: meta\ndata: {"));
        assert_eq!(HEARTBEAT_FRAME, "event: heartbeat\ndata: {}\n\n");
        let f = refusal_done_frame(&crate::json!({"status": "failed"}));
        assert_eq!(
            f,
            "data: {\"type\":\"done\",\"result\":{\"status\":\"failed\"}}\n\n"
        );
        assert_eq!(
            meta_frame("t", "s"),
            "event: meta\ndata: {\"type\":\"meta\",\"taskId\":\"t\",\"sessionId\":\"s\"}\n\n"
        );
    }

    #[test]
    fn a_replayed_done_is_the_runs_done_frame_with_replay_true() {
        let result = crate::json!({"status": "completed"});
        assert_eq!(
            done_frame(7, &result),
            "id: 7\ndata: {\"type\":\"done\",\"result\":{\"status\":\"completed\"}}\n\n"
        );
        assert_eq!(
            replay_done_frame(7, &result),
            "id: 7\ndata: {\"type\":\"done\",\"result\":{\"status\":\"completed\"},\"replay\":true}\n\n"
        );
        assert!(!refusal_done_frame(&result).contains("replay"));
    }

    #[test]
    fn anchors_are_non_negative_integers() {
        assert_eq!(parse_anchor("12"), Some(12));
        assert_eq!(parse_anchor("0"), Some(0));
        assert_eq!(parse_anchor("-1"), None);
        assert_eq!(parse_anchor("abc"), None);
        assert_eq!(
            parse_anchor("9007199254740991"),
            Some(9_007_199_254_740_991)
        );
        assert_eq!(parse_anchor("9007199254740992"), None);
        assert_eq!(parse_anchor("99999999999999999999"), None);
    }
}
