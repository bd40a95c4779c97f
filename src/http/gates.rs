//! Human gates on the wire: the runner's park, the four decide paths, and the pending cards. The
//! Worker validates, resolves the session and checks ownership; the session's object serialises the
//! park and the decision (compare-and-set in D1) with its claim and its live streams.

use super::{
    body::json_body,
    error::json,
    runner::session_of,
    runs::{admit_input, ask_then_drive, visible_run, KeyLookup},
};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{config, cx::Cx, failure::Failure, platform};
use sema_core::{
    auth::Principal,
    gate::{self, DecideBody, DecidePath, ParkBody},
    ids::{SessionId, TaskId},
    json::JsonText,
    list::{decode_cursor, encode_cursor, parse_query},
    session_protocol::{SessionCall, WireDecide, WirePark},
    sql::run_sql::ListScope,
    store::{AdmissionStore, GateStore, RunReadStore},
    wire::SubmitRunBody,
    ApiError,
};

/// Most cards one page of `GET /v1/approvals` lists, and its default.
const APPROVALS_PAGE_MAX: i64 = 100;
const APPROVALS_PAGE_DEFAULT: i64 = 50;

/// `POST /v1/runs/{id}/park`: the lease holder parks its run on a gate (fenced in the object).
pub async fn park(req: &Incoming, cx: &Cx, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let (_, body): (_, ParkBody) = json_body(req).await?;
    let park = body.validate()?;
    let session = session_of(cx, task_id).await?;
    let call = SessionCall::Park {
        task_id: task_id.as_str().to_owned(),
        park: WirePark {
            holder: park.holder,
            kind: park.kind,
            status: park.status,
            card_json: park.card_json,
            expires_in_sec: park.expires_in_sec,
            approval_timeout_sec: config::settings(&cx.env).approval_timeout_sec,
        },
    };
    ask_then_drive(cx, &session, &call).await
}

/// The session a decide path addresses and whether the caller may decide there: only the owner of
/// the gated run (or session). Anyone else who may not see it gets the 404 of a missing gate; an
/// operator, who sees everything, is refused with 403 (operators do not act in others' runs).
async fn decide_scope(
    cx: &Cx,
    principal: &Principal,
    path: DecidePath,
    id: &str,
) -> Result<String, Failure> {
    let nothing = || ApiError::not_found("pending gate");
    let (session_id, owner) = if path.by_session() {
        let store = cx.store()?;
        let owner = match store.pending_gate(id).await? {
            Some(g) => store.get_run(&g.task_id).await?.and_then(|r| r.owner),
            None => store.get_session(id).await?.ok_or_else(nothing)?.owner,
        };
        (id.to_owned(), owner)
    } else {
        let task = TaskId::parse(id).ok_or_else(nothing)?;
        // A run the caller may not see is the same 404 as a missing one.
        let run = visible_run(cx, principal, &task).await?;
        (run.session_id, run.owner)
    };
    if !principal.may_access(owner.as_deref()) {
        return Err(nothing().into());
    }
    if !principal.owns(owner.as_deref()) {
        return Err(ApiError::forbidden("only the run's owner may decide its gate").into());
    }
    Ok(session_id)
}

/// The three decide paths: validate the decision for the path, check ownership, and let the
/// session's object resolve the gate (one winner among concurrent deciders).
pub async fn decide(
    req: &Incoming,
    cx: &Cx,
    principal: &Principal,
    path: DecidePath,
    id: &str,
) -> Result<Outgoing, Failure> {
    let (_, body): (_, DecideBody) = json_body(req).await?;
    let (decision, reason) = body.validate(path)?;
    let session_id = decide_scope(cx, principal, path, id).await?;
    let call = SessionCall::Decide {
        decide: WireDecide {
            path,
            scope_id: id.to_owned(),
            decision,
            reason,
            resolution_id: resolution_id()?,
        },
        wake: None,
    };
    ask_then_drive(cx, &session_id, &call).await
}

/// `POST /v1/sessions/{id}/wake` `{objective, meta?}`: resolves the session's `task_done` gate (its
/// run ends `completed`) and admits a new run in the session, as `POST /v1/runs` would.
pub async fn wake(
    req: &Incoming,
    cx: &Cx,
    principal: &Principal,
    session_id: &SessionId,
) -> Result<Outgoing, Failure> {
    let (_, mut body): (_, sema_core::json::Value) = json_body(req).await?;
    let fields = body
        .as_object_mut()
        .ok_or_else(|| ApiError::invalid_request("the body must be a JSON object"))?;
    if let Some(other) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "objective" | "meta"))
    {
        return Err(ApiError::invalid_request(format!(
            "unknown field `{other}`; a wake takes objective and meta"
        ))
        .into());
    }
    fields.insert("sessionId".into(), session_id.as_str().into());
    let submit = <SubmitRunBody as sema_core::json::FromTree>::from_tree(&body)
        .map_err(|e| ApiError::invalid_request(format!("invalid wake body: {e}")))?;
    let submit = submit.validate()?;
    let scope = decide_scope(cx, principal, DecidePath::Wake, session_id.as_str()).await?;
    let Ok(input) = admit_input(
        cx,
        principal,
        submit,
        None,
        "POST wake",
        &body,
        KeyLookup::InWorker,
    )
    .await?
    else {
        return Err(Failure::Infra("a wake carries no idempotency key".into()));
    };
    let call = SessionCall::Decide {
        decide: WireDecide {
            path: DecidePath::Wake,
            scope_id: session_id.as_str().to_owned(),
            decision: gate::Decision::Wake,
            reason: None,
            resolution_id: resolution_id()?,
        },
        wake: Some(input),
    };
    ask_then_drive(cx, &scope, &call).await
}

fn resolution_id() -> Result<String, Failure> {
    Ok(TaskId::mint(platform::now_ms() as u64, platform::random()?).into_string())
}

/// `GET /v1/approvals?sessionId=&limit=&cursor=`: pending cards, oldest first; a client sees its
/// own, an operator every principal's. Never a checkpoint id or token.
pub async fn list(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    let url = req.url();
    let (mut session, mut limit, mut cursor) = (None, APPROVALS_PAGE_DEFAULT, None);
    for (k, v) in parse_query(sema_core::list::query_of(url))? {
        match k.as_str() {
            "sessionId" => {
                session = Some(SessionId::parse(&v).ok_or_else(|| {
                    ApiError::invalid_field("sessionId", sema_core::ids::SAFE_ID_RULE)
                })?)
            }
            "limit" => {
                limit = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=APPROVALS_PAGE_MAX).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid_field(
                            "limit",
                            format!("must be an integer in 1..={APPROVALS_PAGE_MAX}"),
                        )
                    })?
            }
            "cursor" => cursor = Some(decode_cursor(&v)?),
            other => {
                return Err(ApiError::invalid_request(format!(
                    "unknown query parameter `{other}`; expected sessionId, limit or cursor"
                ))
                .into())
            }
        }
    }
    let scope = ListScope::of(principal);
    let page = cx
        .store()?
        .list_pending_gates(
            &scope,
            session.as_ref().map(|s| s.as_str()),
            cursor.as_ref().map(|(at, s)| (*at, s.as_str())),
            limit + 1,
        )
        .await?;
    let more = page.len() as i64 > limit;
    let shown = &page[..page.len().min(limit as usize)];
    let approvals: Vec<_> = shown
        .iter()
        .map(|g| {
            sema_core::json!({
                "sessionId": g.session_id,
                "taskId": g.task_id,
                "kind": g.kind,
                "card": sema_core::json::parse(&g.card).unwrap_or_default(),
                "decidePath": gate::decide_path(&g.kind, &g.session_id, &g.task_id),
                "expiresAt": g.expires_at,
                "createdAt": g.created_at,
            })
        })
        .collect();
    let next = more
        .then(|| {
            shown
                .last()
                .map(|g| encode_cursor(g.created_at, &g.session_id))
        })
        .flatten();
    let body = sema_core::json!({"approvals": approvals, "nextCursor": next});
    Ok(json(200, body.json_text()))
}
