//! Session handlers: `GET /v1/sessions` (the caller's sessions, operators all; keyset-paginated),
//! `GET /v1/sessions/{id}` and `DELETE /v1/sessions/{id}`. Reads go straight to D1; the delete is
//! decided by the session's object (under its lock, so no submit slips between check and delete).
//! A session that is not the caller's answers exactly like a missing one (404).

use super::{error::json, runs::ask};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{cx::Cx, failure::Failure, platform};
use sema_core::{
    auth::Principal,
    ids::{SessionId, TaskId},
    json::JsonText,
    list::{encode_cursor, next_page},
    session_protocol::SessionCall,
    sessions::SessionListQuery,
    sql::run_sql::ListScope,
    store::{AdmissionStore, SessionStore},
    ApiError,
};

/// `GET /v1/sessions?limit=&cursor=`: `{sessions: [face], nextCursor}`, most recently admitted into
/// first.
pub async fn list(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    let url = req.url();
    let q = SessionListQuery::parse(sema_core::list::query_of(url))?;
    let scope = ListScope::of(principal);
    let mut rows = cx
        .store()?
        .list_session_views(
            &scope,
            q.cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
            q.limit + 1,
        )
        .await?;
    let next = next_page(&mut rows, q.limit, |r| {
        encode_cursor(r.updated_at, &r.session_id)
    });
    let faces: Vec<_> = rows.iter().map(|r| r.face(false)).collect();
    let body = sema_core::json!({ "sessions": faces, "nextCursor": next });
    Ok(json(200, body.json_text()))
}

/// `GET /v1/sessions/{id}`: the session's face with its pending gate's whole card.
pub async fn get(cx: &Cx, principal: &Principal, id: &SessionId) -> Result<Outgoing, Failure> {
    let view = cx
        .store()?
        .session_view(id.as_str())
        .await?
        .filter(|v| principal.may_access(v.owner.as_deref()))
        .ok_or_else(|| ApiError::not_found("session"))?;
    Ok(json(200, view.face(true).json_text()))
}

/// `DELETE /v1/sessions/{id}`: 200 `{sessionId, deleted: true, runsDeleted}`; 409
/// `conflict.session_active_run` (the submit's materials) while a run of it is running or parked;
/// 409 `conflict.session_leader_running` for a running leader run's child. Operators may delete any
/// session (the overseer's clean-up).
pub async fn delete(cx: &Cx, principal: &Principal, id: &SessionId) -> Result<Outgoing, Failure> {
    let session = cx
        .store()?
        .get_session(id.as_str())
        .await?
        .filter(|s| principal.may_access(s.owner.as_deref()))
        .ok_or_else(|| ApiError::not_found("session"))?;
    let marker = TaskId::mint(platform::now_ms() as u64, platform::random()?).into_string();
    let call = SessionCall::DeleteSession {
        session_id: session.session_id,
        owner: session.owner,
        marker,
    };
    ask(cx, id.as_str(), &call).await
}
