//! Rendering of the session object's answers: each typed reply becomes the response the core's
//! `answer` module describes; a stream the object opened passes through.

use super::error::json;
use crate::{
    config, cx::Cx, failure::Failure, outgoing::Outgoing, platform, session_do::client::Answer,
};
use sema_core::json::JsonText;
use sema_core::{answer, session_protocol::SessionReply};

/// The HTTP response for what a session object answered (faces judged as of now).
pub fn render(cx: &Cx, answer: Answer) -> Result<Outgoing, Failure> {
    // The knobs are read only for the replies that judge a face (not on admission or append).
    let judged = || (platform::now_ms(), config::settings(&cx.env).staleness);
    let reply = match answer {
        Answer::Stream(resp) => return Ok(resp.into()),
        Answer::Reply(reply) => reply,
    };
    let (status, body) = match reply {
        SessionReply::Admitted(a) if a.replayed => return Ok(replayed(a.status, a.body)),
        SessionReply::Admitted(a) => (a.status, a.body),
        SessionReply::Conflict(c) => return Err(c.to_api_error().into()),
        SessionReply::Cancelled(c) => {
            let (now, staleness) = judged();
            answer::cancelled(&c, now, &staleness)
        }
        SessionReply::Appended {
            seqs,
            cancel_requested,
            steer_pending,
        } => answer::appended(&seqs, cancel_requested, steer_pending),
        SessionReply::Finished(run) => answer::finished(&run),
        SessionReply::SteerQueued { task_id, seq } => answer::steer_queued(&task_id, seq),
        SessionReply::Waited(run) => {
            let (now, staleness) = judged();
            answer::waited(&run, now, &staleness)
        }
        SessionReply::Refused(e) => return Err(e.into()),
        // A hinted write is routed again before its answer is rendered (`runner::to_session`).
        SessionReply::Misrouted => {
            return Err(Failure::Infra("a misrouted runner write reached rendering".into()))
        }
        SessionReply::Failed { cause } => return Err(Failure::Infra(cause)),
        SessionReply::Stats {
            waiters,
            streams,
            claim,
            cut_off,
        } => answer::stats(waiters, streams, claim.as_deref(), cut_off),
        SessionReply::Parked {
            task_id,
            status,
            seq,
        } => (
            200,
            sema_core::json!({"taskId": task_id, "status": status, "seq": seq}).json_text(),
        ),
        SessionReply::Decided {
            woken: Some(admission),
            ..
        } => return render(cx, Answer::Reply(*admission)),
        SessionReply::Decided {
            task_id,
            session_id,
            kind,
            decision,
            status,
            woken: None,
        } => (
            200,
            sema_core::json!({
                "taskId": task_id,
                "sessionId": session_id,
                "gate": kind,
                "decision": decision.as_str(),
                "status": status,
            })
            .json_text(),
        ),
        SessionReply::SessionDeleted {
            session_id,
            runs_deleted,
        } => (
            200,
            sema_core::json!({"sessionId": session_id, "deleted": true, "runsDeleted": runs_deleted})
                .json_text(),
        ),
        SessionReply::Noted { .. }
        | SessionReply::Flushed { .. }
        | SessionReply::ChildStart { .. }
        | SessionReply::Ticket { .. }
        | SessionReply::TicketHolder { .. } => {
            return Err(Failure::Infra("a notice's reply is not an answer".into()))
        }
    };
    Ok(json(status, body))
}

/// A replayed admission: the original status and body, marked as a replay.
pub fn replayed(status: u16, body: String) -> Outgoing {
    json(status, body).with_header("idempotency-replayed", "true")
}

/// `204 No Content`: a stream request with nothing left to receive (its anchor is at or past the
/// ended run's `done`). Any status but 200 makes an `EventSource` stop reconnecting.
pub fn no_content() -> Outgoing {
    Outgoing::empty(204).with_header("cache-control", "no-store")
}
