//! The Worker's side of the session-object protocol: send a typed call to the object of a session,
//! get back its typed reply or the stream it opened.

use crate::object_reply::{rpc, Target};
use crate::{cx::Cx, d1::METER_HEADER, failure::Failure};
use sema_core::session_protocol::{
    object_name, SessionCall, SessionReply, BINDING, CALL_URL, REPLY_HEADER, RPC_METHOD,
};
use worker::Response;

/// What a session object answered.
pub enum Answer {
    Reply(SessionReply),
    /// An SSE stream, passed through to the client as it is.
    Stream(Response),
}

/// Sends `call` to the object of `session_id`: by RPC unless it may open a stream.
pub async fn call(cx: &Cx, session_id: &str, call: &SessionCall) -> Result<Answer, Failure> {
    let name = object_name(session_id);
    let body = sema_core::object_codec::encode(call);
    if !call.may_stream() {
        let to = Target {
            binding: BINDING,
            name,
            method: RPC_METHOD,
        };
        let reply = rpc(&cx.env, &cx.meter, to, &body, cx.fail.forward()).await?;
        return Ok(Answer::Reply(sema_core::object_codec::decode(&reply)?));
    }
    let stub = cx.env.durable_object(BINDING)?.get_by_name(name)?;
    let headers = match cx.fail.forward() {
        Some(name) => {
            // A test's failpoint travels with the call (see `failpoint.rs`).
            let headers = worker::Headers::new();
            headers.set(crate::failpoint::HEADER, name)?;
            Some(headers)
        }
        None => None,
    };
    let req = crate::object_request::new("POST", CALL_URL, headers.as_ref(), Some(&body))?;
    let resp = stub.fetch_with_request(req).await?;
    // The object's D1 cost is part of this request's.
    if let Ok(Some(share)) = resp.headers().get(METER_HEADER) {
        cx.meter.add_header(&share);
    }
    if resp.headers().has(REPLY_HEADER).unwrap_or(false) {
        let text = crate::object_reply::text(resp).await?;
        return Ok(Answer::Reply(sema_core::object_codec::decode(&text)?));
    }
    Ok(Answer::Stream(resp))
}

/// The notice of `lease`, written at `now`, to its session's object, owed when its run waited
/// longer than one cutoff, so the object's looks may have backed off meanwhile
/// (`liveness::Staleness::lease_told`): a call for the lease's writer to run after the hand-over,
/// not awaited by it. `None`: no notice is owed.
pub fn lease_notice(
    env: &worker::Env,
    lease: &sema_core::store::Lease,
    now: i64,
) -> Option<impl std::future::Future<Output = ()> + 'static> {
    let staleness = crate::config::settings(env).staleness;
    if !staleness.lease_told(lease.created_at, now) {
        return None;
    }
    let cx = Cx::new(env.clone());
    let (session, task) = (lease.session_id.clone(), lease.task_id.clone());
    Some(async move { tell_leased(&cx, &session, &task).await })
}

/// Tells the object of `session_id` that `task_id` was leased (`SessionCall::Leased`), after the
/// lease was handed over. A notice not taken (the call failed, or the object refused or failed it)
/// is logged: the cron's reapers are the backstop for a runner that goes silent.
async fn tell_leased(cx: &Cx, session_id: &str, task_id: &str) {
    let notice = SessionCall::Leased {
        task_id: task_id.to_owned(),
    };
    match call(cx, session_id, &notice).await {
        Ok(Answer::Reply(SessionReply::Noted { .. })) => {}
        Ok(Answer::Reply(other)) => worker::console_error!(
            "lease notice for {task_id}: reply {}",
            sema_core::object_codec::encode(&other)
        ),
        Ok(Answer::Stream(_)) => {
            worker::console_error!("lease notice for {task_id}: answered with a stream")
        }
        Err(f) => worker::console_error!("lease notice for {task_id}: {f}"),
    }
}
