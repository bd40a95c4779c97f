//! Stream tickets on the wire (`sema_core::stream_ticket`). `POST /v1/runs/{id}/stream-ticket`: a
//! caller who may read the run gets `{ticket, expiresAt}` from the run's session object.
//! `GET /v1/runs/{id}/events?ticket=`: the one request authenticated by a ticket instead of a header
//! (the dispatcher sends it here before resolving any principal): the run's session object says whom
//! the ticket stands for, and the stream opens as that principal's. Every failure before that — a
//! missing run included — is the same 401, so a ticket-bearing caller learns nothing else.

use super::{error::json, runs};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{cx::Cx, failure::Failure, session_do::client};
use sema_core::{
    auth::Principal,
    ids::TaskId,
    json::JsonText,
    session_protocol::{SessionCall, SessionReply},
    store::RunReadStore,
    stream_ticket,
};

/// `POST /v1/runs/{id}/stream-ticket` → 200 `{ticket, expiresAt}` (another principal's run: 404).
pub async fn issue(cx: &Cx, principal: &Principal, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let run = runs::visible_run(cx, principal, task_id).await?;
    let call = SessionCall::IssueTicket {
        task_id: run.task_id.clone(),
        principal: principal.id.clone(),
        role: principal.role,
    };
    match client::call(cx, &run.session_id, &call).await? {
        client::Answer::Reply(SessionReply::Ticket { ticket, expires_at }) => Ok(json(
            200,
            sema_core::json!({"ticket": ticket, "expiresAt": expires_at}).json_text(),
        )),
        client::Answer::Reply(SessionReply::Refused(e)) => Err(e.into()),
        client::Answer::Reply(SessionReply::Failed { cause }) => Err(Failure::Infra(cause)),
        _ => Err(Failure::Infra("unexpected answer to a ticket issue".into())),
    }
}

/// `GET /v1/runs/{id}/events?ticket=…`: the stream (or 401), as the ticket's principal.
pub async fn events(
    req: &Incoming,
    cx: &Cx,
    task_id: &TaskId,
    ticket: String,
) -> Result<Outgoing, Failure> {
    crate::auth::ensure_open(&cx.env)?;
    if !stream_ticket::well_formed(&ticket) {
        return Err(stream_ticket::refusal().into());
    }
    let run = cx
        .store()?
        .get_run(task_id.as_str())
        .await?
        .ok_or_else(stream_ticket::refusal)?;
    let call = SessionCall::CheckTicket {
        task_id: run.task_id.clone(),
        ticket,
        owner: run.owner.clone(),
    };
    // The object checked that the ticket's principal may read this run (`TicketBook::check`).
    match client::call(cx, &run.session_id, &call).await? {
        client::Answer::Reply(SessionReply::TicketHolder { .. }) => {}
        client::Answer::Reply(SessionReply::Refused(e)) => return Err(e.into()),
        client::Answer::Reply(SessionReply::Failed { cause }) => return Err(Failure::Infra(cause)),
        _ => return Err(Failure::Infra("unexpected answer to a ticket check".into())),
    }
    runs::events_of(req, cx, run, true).await
}
