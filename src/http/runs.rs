//! Run handlers: submit, read, list, cancel.
//!
//! Claim-changing work (admission, cancel-now) goes to the session's Durable Object, which answers
//! with the final response; reads go straight to D1.

use super::error::{json, Failure};
use crate::{d1::store, platform, session_do};
use sema_core::{
    admission::{AdmitInput, IdempotencyBinding},
    auth::{Principal, Role},
    idempotency,
    ids::TaskId,
    list::{encode_cursor, RunListQuery},
    run::RunRow,
    sql::run_sql::ListScope,
    status,
    store::RunStore,
    wire::{self, SubmitRunBody, BODY_MAX},
    ApiError,
};
use worker::{Env, Request, Response};

const SUBMIT_ROUTE: &str = "POST /v1/runs";

/// Runner credentials execute runs; they do not submit, read or cancel them as clients.
fn require_client_side(principal: &Principal) -> Result<(), Failure> {
    if principal.role == Role::Runner {
        return Err(ApiError::forbidden("runner credentials cannot use client routes").into());
    }
    Ok(())
}

/// Reads a JSON body of at most 1 MiB, refusing by declared length before reading when possible.
async fn read_json_body(req: &mut Request) -> Result<Vec<u8>, Failure> {
    let header = |name: &str| req.headers().get(name).ok().flatten();
    wire::require_json_content_type(header("content-type").as_deref())?;
    if let Some(len) = header("content-length").and_then(|l| l.trim().parse::<usize>().ok()) {
        if len > BODY_MAX {
            return Err(ApiError::payload_too_large(BODY_MAX).into());
        }
    }
    let bytes = req
        .bytes()
        .await
        .map_err(|_| ApiError::invalid_request("request body could not be read"))?;
    if bytes.len() > BODY_MAX {
        return Err(ApiError::payload_too_large(BODY_MAX).into());
    }
    Ok(bytes)
}

/// `POST /v1/runs`.
pub async fn submit(
    req: &mut Request,
    env: &Env,
    principal: &Principal,
) -> Result<Response, Failure> {
    require_client_side(principal)?;
    let raw_key = req.headers().get("idempotency-key").ok().flatten();
    let bytes = read_json_body(req).await?;
    let (value, body): (_, SubmitRunBody) = wire::parse_body(&bytes)?;
    let submit = body.validate()?;
    let owner = principal.id.clone();

    let idempotency = match raw_key.as_deref() {
        None => None,
        Some(raw) => {
            let raw = idempotency::parse_raw_key(raw)?;
            let key = idempotency::scoped_key(owner.as_deref(), raw);
            let fingerprint = idempotency::fingerprint(SUBMIT_ROUTE, &value);
            // A key already bound answers without touching the session.
            if let Some(bound) = store(env)?.idempotency(&key).await? {
                return replay(&bound, &fingerprint);
            }
            Some((key, fingerprint))
        }
    };

    let (task_id, client_task_id) = match submit.client_task_id {
        Some(id) => (id, true),
        None => (
            TaskId::mint(platform::now_ms() as u64, platform::random()?),
            false,
        ),
    };
    let input = AdmitInput {
        session_id: submit.session_id.into_string(),
        task_id: task_id.into_string(),
        client_task_id,
        owner,
        objective: submit.objective,
        meta: serde_json::Value::Object(submit.meta).to_string(),
        idempotency,
    };
    session_do::call(
        env,
        &input.session_id.clone(),
        &session_do::Call::Admit(input),
    )
    .await
}

/// Answers a request whose key is already bound: the original admission again, or 422.
pub fn replay(bound: &IdempotencyBinding, fingerprint: &str) -> Result<Response, Failure> {
    let replay = bound.answer(fingerprint)?;
    Ok(replayed(replay.status, replay.body))
}

/// A replayed admission: the original status and body, marked as a replay.
pub fn replayed(status: u16, body: String) -> Response {
    let resp = json(status, body);
    let _ = resp.headers().set("idempotency-replayed", "true");
    resp
}

/// Reads a run the principal may see; anything else is the same 404.
async fn visible_run(
    env: &Env,
    principal: &Principal,
    task_id: &TaskId,
) -> Result<RunRow, Failure> {
    let run = store(env)?
        .get_run(task_id.as_str())
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    if !principal.may_access(run.owner.as_deref()) {
        return Err(ApiError::not_found("run").into());
    }
    Ok(run)
}

fn face_json(status: u16, run: &RunRow) -> Result<Response, Failure> {
    let body = serde_json::to_string(&run.face()).map_err(|e| Failure::Infra(e.to_string()))?;
    Ok(json(status, body))
}

/// `GET /v1/runs/{id}`.
pub async fn get(env: &Env, principal: &Principal, task_id: &TaskId) -> Result<Response, Failure> {
    require_client_side(principal)?;
    face_json(200, &visible_run(env, principal, task_id).await?)
}

/// `GET /v1/runs?sessionId=&status=&limit=&cursor=`: newest first, keyset-paginated.
pub async fn list(req: &Request, env: &Env, principal: &Principal) -> Result<Response, Failure> {
    require_client_side(principal)?;
    let url = req.url()?;
    let q = RunListQuery::parse(url.query().unwrap_or(""))?;
    let scope = match principal.role {
        Role::Operator => ListScope::All,
        _ => ListScope::Owner(principal.id.as_deref()),
    };
    let mut runs = store(env)?
        .list_runs(
            &scope,
            q.session_id.as_deref(),
            q.status.as_deref(),
            q.cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
            q.limit + 1,
        )
        .await?;
    let more = runs.len() as i64 > q.limit;
    runs.truncate(q.limit as usize);
    let next = more
        .then(|| runs.last().map(|r| encode_cursor(r.created_at, &r.task_id)))
        .flatten();
    let faces: Vec<_> = runs.iter().map(RunRow::face).collect();
    let body = serde_json::json!({ "runs": faces, "nextCursor": next });
    Ok(json(200, body.to_string()))
}

/// `POST /v1/runs/{id}/cancel`: a run no runner drives (or a parked one) is cancelled now and its
/// claim released (200); a run a runner holds gets `cancelRequested` (202) and the runner finishes it.
pub async fn cancel(
    env: &Env,
    principal: &Principal,
    task_id: &TaskId,
) -> Result<Response, Failure> {
    require_client_side(principal)?;
    let store = store(env)?;
    let session_id = match store.get_run(task_id.as_str()).await? {
        Some(run) => {
            if !principal.may_access(run.owner.as_deref()) {
                return Err(ApiError::not_found("run").into());
            }
            if status::is_terminal(&run.status) {
                return face_json(200, &run); // terminal is write-once: nothing to do
            }
            run.session_id
        }
        None => {
            // No row: cancel still frees a claim that names this task (the self-rescue path).
            let (session_id, owner) = store
                .claim_by_task(task_id.as_str())
                .await?
                .ok_or_else(|| ApiError::not_found("run"))?;
            if !principal.may_access(owner.as_deref()) {
                return Err(ApiError::not_found("run").into());
            }
            session_id
        }
    };
    let call = session_do::Call::Cancel {
        task_id: task_id.as_str().to_owned(),
        session_id: session_id.clone(),
    };
    session_do::call(env, &session_id, &call).await
}
