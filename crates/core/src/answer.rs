//! What the answers to the session object's calls say: status and JSON body of a cancel, a wait, an
//! append, a steer, a finish; and what a cancel obliges the object to do. The adapter renders these,
//! so every body is decided (and tested) here once.

use crate::json;
use crate::{
    json::JsonText,
    liveness::{read_face, Staleness, STALLED_CODE, STALLED_ERROR},
    run::RunRow,
    session_protocol::CancelReply,
    sse, status,
};

/// A status and a JSON body (text: the face keeps its field order on the wire).
pub type Answer = (u16, String);

/// The read face of a run as of `now`, as JSON text (a silent running run reads `failed`).
pub fn face(run: &RunRow, now: i64, s: &Staleness) -> String {
    crate::json::to_text(&read_face(run, now, s)).unwrap_or_default()
}

/// `POST /v1/runs/{id}/cancel` after the object's batch: 200 with the face when the run is terminal
/// (cancelled now, or it had already ended), 202 when a runner holds it and was asked to stop; with no
/// row, 200 saying whether a claim naming the task was released (the self-rescue path).
pub fn cancelled(reply: &CancelReply, now: i64, s: &Staleness) -> Answer {
    match &reply.run {
        Some(run) if status::is_terminal(&run.status) => (200, face(run, now, s)),
        Some(run) => (202, face(run, now, s)),
        None => (
            200,
            json!({
                "taskId": reply.task_id,
                "sessionId": reply.session_id,
                "claimReleased": reply.claim_released,
            })
            .json_text(),
        ),
    }
}

/// What the end of a run (or a cancel that may have ended it) obliges the session object to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndEffects {
    /// Forget the claim if this task holds it: its row is terminal or gone, so nothing drives it.
    pub forget_claim: bool,
    /// End the run's open streams and waiters with this `done` frame `(seq, frame)`: the run ended
    /// without a runner's `done` event, so the frame is built from the row at `last_seq + 1` (the id
    /// every later reconnect also gets).
    pub done: Option<(i64, String)>,
}

/// From the run's row as read after a cancel, a reaper pass or an out-of-band end (`None`: no row).
pub fn end_effects(run: Option<&RunRow>) -> EndEffects {
    match run {
        None => EndEffects {
            forget_claim: true,
            done: None,
        },
        Some(run) if status::is_terminal(&run.status) => {
            let seq = run.last_seq + 1;
            EndEffects {
                forget_claim: true,
                done: Some((seq, sse::done_frame(seq, &sse::done_result(run)))),
            }
        }
        Some(_) => EndEffects {
            forget_claim: false,
            done: None,
        },
    }
}

/// A synchronous wait's answer: 200 with the terminal result plus `taskId` and `sessionId` once the
/// run ended (a silent running run counts as failed with `run.stalled`, as its read face says), else
/// 202 with the read face (the wait ran out).
pub fn waited(run: &RunRow, now: i64, s: &Staleness) -> Answer {
    let ended = status::is_terminal(&run.status) || s.is_stale(run, now);
    if ended {
        let mut body = if status::is_terminal(&run.status) {
            sse::done_result(run)
        } else {
            json!({"status": "failed", "error": STALLED_ERROR, "errorCode": STALLED_CODE})
        };
        if let Some(m) = body.as_object_mut() {
            m.insert("taskId".into(), run.task_id.clone().into());
            m.insert("sessionId".into(), run.session_id.clone().into());
        }
        (200, body.json_text())
    } else {
        (202, face(run, now, s))
    }
}

/// An append's answer: its seqs, and what waits for the lease holder as the append left the run (a
/// runner told nothing waits may skip its next heartbeat: the append was proof of life).
pub fn appended(seqs: &[i64], cancel_requested: bool, steer_pending: i64) -> Answer {
    (
        200,
        json!({ "seqs": seqs, "cancelRequested": cancel_requested, "steerPending": steer_pending })
            .json_text(),
    )
}

/// A queued steer message.
pub fn steer_queued(task_id: &str, seq: i64) -> Answer {
    (
        202,
        json!({"taskId": task_id, "seq": seq, "status": "queued"}).json_text(),
    )
}

/// What a session's object holds in memory (operators' diagnostics).
pub fn stats(waiters: usize, streams: usize, claim: Option<&str>, cut_off: u64) -> Answer {
    (
        200,
        json!({"waiters": waiters, "streams": streams, "claimTaskId": claim, "streamsCutOff": cut_off})
            .json_text(),
    )
}

/// A runner's finish: the run's face after it (terminal: nothing to judge).
pub fn finished(run: &RunRow) -> Answer {
    (200, crate::json::to_text(&run.face()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Value;

    const S: Staleness = Staleness {
        held_ms: 10,
        queued_ms: 10,
        lease_ack_ms: 10,
    };

    fn parsed((code, body): Answer) -> (u16, Value) {
        (code, serde_json::from_str(&body).unwrap())
    }

    fn run(status: &str, last_seq: i64) -> RunRow {
        crate::json::serde_from_value(json!({
            "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
            "status": status, "objective_preview": "p", "result": null,
            "error": if status == "cancelled" { Some("cancelled by user") } else { None },
            "error_code": null, "held_by": if status == "running" { Some("r1") } else { None },
            "lease_epoch": 1, "cancel_requested": true, "heartbeat_at": 1,
            "last_seq": last_seq, "created_at": 1, "updated_at": 2
        }))
        .unwrap()
    }

    fn reply(run: Option<RunRow>) -> CancelReply {
        CancelReply {
            task_id: "T".into(),
            session_id: "S".into(),
            run,
            claim_released: true,
        }
    }

    #[test]
    fn a_cancelled_run_answers_200_with_its_face_and_a_held_one_202() {
        let (code, body) = parsed(cancelled(&reply(Some(run("cancelled", 3))), 1, &S));
        assert_eq!((code, body["status"].as_str()), (200, Some("cancelled")));
        assert_eq!(body["heldBy"], Value::Null);
        let (code, body) = parsed(cancelled(&reply(Some(run("running", 3))), 1, &S));
        assert_eq!((code, body["cancelRequested"].as_bool()), (202, Some(true)));
    }

    #[test]
    fn a_cancel_without_a_row_says_whether_it_released_a_claim() {
        assert_eq!(
            parsed(cancelled(&reply(None), 1, &S)),
            (
                200,
                json!({"taskId": "T", "sessionId": "S", "claimReleased": true})
            )
        );
    }

    #[test]
    fn a_cancel_that_ended_the_run_forgets_the_claim_and_ends_streams_after_the_last_seq() {
        let e = end_effects(Some(&run("cancelled", 3)));
        assert!(e.forget_claim);
        let (seq, frame) = e.done.unwrap();
        assert_eq!(seq, 4);
        assert!(frame.starts_with("id: 4\ndata: {\"type\":\"done\",\"result\":{"));
        assert!(frame.contains("\"status\":\"cancelled\""));
    }

    #[test]
    fn a_cancel_of_a_held_run_changes_nothing_in_the_object_and_a_missing_row_frees_the_claim() {
        assert_eq!(
            end_effects(Some(&run("running", 3))),
            EndEffects {
                forget_claim: false,
                done: None
            }
        );
        assert_eq!(
            end_effects(None),
            EndEffects {
                forget_claim: true,
                done: None
            }
        );
    }

    #[test]
    fn a_wait_answers_the_result_once_the_run_ended_and_the_face_while_it_runs() {
        let (code, body) = parsed(waited(&run("cancelled", 0), 1, &S));
        assert_eq!(code, 200);
        assert_eq!(
            body,
            json!({"status": "cancelled", "error": "cancelled by user", "taskId": "T", "sessionId": "S"})
        );
        let (code, body) = parsed(waited(&run("running", 0), 1, &S));
        assert_eq!((code, body["heldBy"].as_str()), (202, Some("r1")));
    }

    #[test]
    fn the_face_keeps_its_wire_field_order() {
        assert!(face(&run("completed", 1), 1, &S)
            .starts_with("{\"taskId\":\"T\",\"sessionId\":\"S\",\"status\""));
    }

    #[test]
    fn a_wait_on_a_silent_running_run_answers_it_failed_as_stalled() {
        let (code, body) = parsed(waited(&run("running", 0), 12, &S));
        assert_eq!(code, 200);
        assert_eq!(
            body,
            json!({"status": "failed", "error": STALLED_ERROR, "errorCode": "run.stalled", "taskId": "T", "sessionId": "S"})
        );
    }

    #[test]
    fn appends_steers_and_finishes_have_fixed_bodies() {
        assert_eq!(
            parsed(appended(&[4, 5], true, 2)),
            (
                200,
                json!({"seqs": [4, 5], "cancelRequested": true, "steerPending": 2})
            )
        );
        assert_eq!(
            parsed(steer_queued("T", 2)),
            (202, json!({"taskId": "T", "seq": 2, "status": "queued"}))
        );
        assert_eq!(finished(&run("completed", 5)).0, 200);
    }
}
