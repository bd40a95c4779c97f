//! Leader-run handlers: admit, read, list, cancel (`/v1/leader/runs`). Admission is one D1 batch
//! (the leader, its plan and every child, win or observe on the scoped key); the creating request
//! then drives it once, which starts the first children. Every later step is driven by the children's
//! own events and the cron (`leader_driver.rs`). A leader run that is not the caller's is the same
//! 404 as a missing one. The dispatcher has checked the role; `LEADER_ENABLED` is checked here.

use super::{body::json_body, error::json};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{config, cx::Cx, failure::Failure, leader_driver, platform};
use sema_core::{
    auth::Principal,
    error::ErrorCode,
    idempotency,
    ids::TaskId,
    json::JsonText,
    leader_wire::{self, LeaderListQuery, SubmitLeaderBody},
    list::{encode_cursor, next_page},
    sql::run_sql::ListScope,
    store::{LeaderDriveStore, LeaderRunStore, LeaderView, NewChild, NewLeader},
    ApiError,
};

fn enabled(cx: &Cx) -> Result<(), ApiError> {
    if config::settings(&cx.env).leader_enabled {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::LeaderDisabled,
        "leader runs are disabled on this deployment (LEADER_ENABLED=false)",
    ))
}

/// `POST /v1/leader/runs`: 201 `created: true` with the new leader run; with an `Idempotency-Key`
/// already bound to this same request, 200 `created: false` with the run it admitted, whatever its
/// status (never a second fan-out); bound to another request, 422.
pub async fn submit(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    enabled(cx)?;
    let raw_key = req.header("idempotency-key");
    let (value, body): (_, SubmitLeaderBody) = json_body(req).await?;
    let submit = body.validate()?;
    let owner = principal.id.as_deref();
    let (idem_key, fingerprint) = match raw_key.as_deref() {
        None => (None, None),
        Some(raw) => {
            let raw = idempotency::parse_raw_key(raw)?;
            (
                Some(idempotency::scoped_key(owner, raw)),
                Some(idempotency::fingerprint(leader_wire::SUBMIT_ROUTE, &value)),
            )
        }
    };
    let now = platform::now_ms();
    let id = TaskId::mint(now as u64, platform::random()?).into_string();
    let children: Vec<NewChild> = submit
        .subtasks
        .iter()
        .map(|s| NewChild {
            objective: &s.objective,
            meta_json: &s.meta_json,
        })
        .collect();
    let store = cx.store()?;
    let admission = store
        .create_leader_with_plan(&NewLeader {
            id: &id,
            objective: &submit.objective,
            owner,
            idem_key: idem_key.as_deref(),
            now,
            max_concurrency: submit.max_concurrency as i64,
            deadline_at: submit.deadline_ms.map(|ms| now + ms),
            children: &children,
            fingerprint: fingerprint.as_deref(),
        })
        .await?;
    let leader_id = admission.run.id.clone();
    if admission.created {
        // Start the first children now; if this fails the cron drives it on its next tick.
        if let Err(f) = leader_driver::drive(cx, &leader_id).await {
            worker::console_error!("leader {leader_id}: first drive failed: {f}");
        }
    }
    let view = read(cx, &leader_id).await?;
    if !admission.created && view.fingerprint != fingerprint {
        return Err(idempotency::key_reused().into());
    }
    let status = if admission.created { 201 } else { 200 };
    Ok(json(
        status,
        shown(&view, Some(("created", admission.created))),
    ))
}

/// `GET /v1/leader/runs/{id}`: the record with its plan and children.
pub async fn get(cx: &Cx, principal: &Principal, id: &TaskId) -> Result<Outgoing, Failure> {
    enabled(cx)?;
    let view = visible(cx, principal, id).await?;
    Ok(json(200, shown(&view, None)))
}

/// `GET /v1/leader/runs?status=&limit=&cursor=`: the caller's leader runs (operators: every one),
/// newest first, keyset-paginated (`nextCursor`); records only: no children, no `result`.
pub async fn list(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    enabled(cx)?;
    let url = req.url();
    let q = LeaderListQuery::parse(sema_core::list::query_of(url))?;
    let scope = ListScope::of(principal);
    let mut rows = cx
        .store()?
        .list_leader_runs(
            &scope,
            q.status.as_deref(),
            q.cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
            q.limit + 1,
        )
        .await?;
    let next = next_page(&mut rows, q.limit, |r| {
        encode_cursor(r.started_at_ms, &r.id)
    });
    // Records without `result`: a page stays small whatever its leaders reported (GET one for it).
    let shown: Vec<sema_core::json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = leader_wire::leader_json(r, None, None);
            if let Some(o) = v.as_object_mut() {
                o.remove("result");
            }
            v
        })
        .collect();
    let body = sema_core::json!({ "leaderRuns": shown, "nextCursor": next });
    Ok(json(200, body.json_text()))
}

/// `POST /v1/leader/runs/{id}/cancel`: a running leader is cancelled — no child starts again, its
/// running and parked children are cancelled, it settles `failed` — and shown with `cancelled: true`.
/// A leader already settled is shown as it is, `cancelled: false` (its status is write-once).
pub async fn cancel(cx: &Cx, principal: &Principal, id: &TaskId) -> Result<Outgoing, Failure> {
    enabled(cx)?;
    let view = visible(cx, principal, id).await?;
    let cancelled =
        view.record.status == "running" && leader_driver::cancel(cx, id.as_str()).await?;
    let view = read(cx, id.as_str()).await?;
    Ok(json(200, shown(&view, Some(("cancelled", cancelled)))))
}

async fn read(cx: &Cx, id: &str) -> Result<LeaderView, Failure> {
    cx.store()?
        .leader_view(id)
        .await?
        .ok_or_else(|| Failure::Infra(format!("leader run {id} vanished")))
}

/// The leader run if the principal may see it; anything else is the same 404.
async fn visible(cx: &Cx, principal: &Principal, id: &TaskId) -> Result<LeaderView, Failure> {
    let view = cx
        .store()?
        .leader_view(id.as_str())
        .await?
        .filter(|v| principal.may_access(v.record.owner.as_deref()))
        .ok_or_else(|| ApiError::not_found("leader run"))?;
    Ok(view)
}

/// The JSON body of a leader run, with one extra flag first when given.
fn shown(view: &LeaderView, flag: Option<(&str, bool)>) -> String {
    let mut v = leader_wire::leader_json(&view.record, view.drive.as_ref(), Some(&view.children));
    if let (Some(o), Some((k, b))) = (v.as_object_mut(), flag) {
        o.insert(k.to_owned(), sema_core::json::Value::Bool(b));
    }
    v.json_text()
}
