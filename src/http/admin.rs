//! Operator diagnostics. `GET /v1/admin/reapers`: the last reaper ticks, newest first, each with what
//! it did (`reaper::TickSummary`). `GET /v1/admin/sessions/{id}`: what the session's object holds in
//! memory (waiters, open streams, the remembered claim) — the figures its memory bounds are about.
//! `GET /v1/admin/queues/{queue}`: what the queue's dispatcher holds (waiting runners, backlog).

use super::{error::json, reply};
use crate::outgoing::Outgoing;
use crate::{cx::Cx, failure::Failure, session_do::client};
use sema_core::{
    dispatch::{DispatchCall, DispatchReply},
    json::JsonText,
    session_protocol::SessionCall,
    store::ReaperStore,
};

/// How many ticks one answer shows.
const SHOWN: i64 = 20;

pub async fn reapers(cx: &Cx) -> Result<Outgoing, Failure> {
    let ticks = cx.store()?.recent_ticks(SHOWN).await?;
    let ticks: Vec<sema_core::json::Value> = ticks
        .iter()
        .map(|t| {
            sema_core::json::parse(&t.report_json)
                .unwrap_or_else(|_| sema_core::json!({"tickId": t.tick_id}))
        })
        .collect();
    Ok(json(200, sema_core::json!({ "ticks": ticks }).json_text()))
}

pub async fn session(cx: &Cx, session_id: &str) -> Result<Outgoing, Failure> {
    reply::render(cx, client::call(cx, session_id, &SessionCall::Stats).await?)
}

/// `GET /v1/admin/queues/{queue}`: `{queue, waiters, backlog, offered, cold, sockets}` of the queue's dispatcher.
pub async fn queue(cx: &Cx, queue: &str) -> Result<Outgoing, Failure> {
    match crate::dispatch_do::call(cx, queue, &DispatchCall::Stats).await? {
        DispatchReply::Stats {
            waiters,
            backlog,
            offered,
            cold,
            sockets,
        } => Ok(json(
            200,
            sema_core::json!({"queue": queue, "waiters": waiters, "backlog": backlog,
                "offered": offered, "cold": cold, "sockets": sockets})
            .json_text(),
        )),
        other => Err(Failure::Infra(format!(
            "unexpected dispatch reply {}",
            sema_core::object_codec::encode(&other)
        ))),
    }
}
