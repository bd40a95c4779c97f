//! Run handlers: submit, read, list, cancel.
//!
//! Claim-changing work (admission, cancel-now) goes to the session's Durable Object as a typed call;
//! its reply is rendered by `reply.rs`. Reads go straight to D1. The dispatcher has checked the role.

use super::{body::json_body, error::json, reply};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{config, cx::Cx, failure::Failure, platform, session_do::client};
use sema_core::{
    admission::{AdmitInput, CommitPoint},
    answer,
    auth::Principal,
    idempotency::{self, Replay},
    ids::{self, TaskId},
    json::JsonText,
    list::{encode_cursor, next_page, RunListQuery},
    liveness,
    run::RunRow,
    runner_wire::TaskMode,
    session_protocol::{SessionCall, SessionReply},
    sql::{event_sql::EVENT_PAGE_MAX_BYTES, run_sql::ListScope},
    status,
    store::{AdmissionStore, RunReadStore},
    wire::SubmitRunBody,
    ApiError,
};

const SUBMIT_ROUTE: &str = "POST /v1/runs";

/// `POST /v1/runs`.
pub async fn submit(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    let raw_key = req.header("idempotency-key");
    let (value, body): (_, SubmitRunBody) = json_body(req).await?;
    let submit = body.validate()?;
    // A key with a server-minted task id is looked up by the session's object, only when its
    // answer is not a fresh admission (`AdmitInput::key_unread`): one D1 round trip fewer.
    let lookup = if submit.client_task_id.is_none() {
        KeyLookup::InObject
    } else {
        KeyLookup::InWorker
    };
    let input = match admit_input(
        cx,
        principal,
        submit,
        raw_key.as_deref(),
        SUBMIT_ROUTE,
        &value,
        lookup,
    )
    .await?
    {
        Ok(input) => input,
        Err(original) => return Ok(reply::replayed(original.status, original.body)),
    };
    ask(cx, &input.session_id.clone(), &SessionCall::Admit(input)).await
}

/// Who looks an `Idempotency-Key` up in D1 before its submission is answered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyLookup {
    /// The Worker, before calling the session's object: a bound key answers without touching it.
    InWorker,
    /// The session's object, only when its answer would not be a fresh admission (the admission's
    /// batch itself refuses a bound key): see `AdmitInput::key_unread`.
    InObject,
}

/// Builds the admission of a validated submit: mints the task id unless the client gave one, and
/// resolves the `Idempotency-Key` (`lookup`). `Err(replay)` when the Worker found the key already
/// bound to this same request (the caller answers with the original run); a key bound to a
/// different request is a 422.
pub async fn admit_input(
    cx: &Cx,
    principal: &Principal,
    submit: sema_core::wire::SubmitRun,
    raw_key: Option<&str>,
    route: &str,
    body: &sema_core::json::Value,
    lookup: KeyLookup,
) -> Result<Result<AdmitInput, Replay>, Failure> {
    let owner = principal.id.clone();
    let idempotency = match raw_key {
        None => None,
        Some(raw) => {
            let raw = idempotency::parse_raw_key(raw)?;
            let key = idempotency::scoped_key(owner.as_deref(), raw);
            let fingerprint = idempotency::fingerprint(route, body);
            // A key already bound answers without touching the session.
            if lookup == KeyLookup::InWorker {
                if let Some(bound) = cx.store()?.idempotency(&key).await? {
                    return Ok(Err(bound.answer(&fingerprint)?));
                }
            }
            Some((key, fingerprint))
        }
    };
    let key_unread = lookup == KeyLookup::InObject && idempotency.is_some();
    let (task_id, client_task_id) = match submit.client_task_id {
        Some(id) => (id, true),
        None => (
            TaskId::mint(platform::now_ms() as u64, platform::random()?),
            false,
        ),
    };
    Ok(Ok(AdmitInput {
        session_id: submit.session_id.into_string(),
        task_id: task_id.into_string(),
        client_task_id,
        owner,
        objective: submit.objective,
        meta: sema_core::json::Value::Object(submit.meta).json_text(),
        idempotency,
        queue: submit.queue,
        key_unread,
    }))
}

/// Reads a run the principal may see; anything else is the same 404.
pub async fn visible_run(
    cx: &Cx,
    principal: &Principal,
    task_id: &TaskId,
) -> Result<RunRow, Failure> {
    let run = find_run(cx, task_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    if !principal.may_access(run.owner.as_deref()) {
        return Err(ApiError::not_found("run").into());
    }
    Ok(run)
}

/// Reads run `task_id` from D1. Where admissions may commit in their session object first
/// (`SEMA_ADMIT_COMMIT=object`), a run the server minted moments ago may still be on its way
/// from the object's outbox: a miss is read again after short pauses until the id is older than
/// `ids::OUTBOX_WAIT_MS`, so a client that got its 202 reads its run (read-your-writes) while
/// an id that names nothing is answered 404 after at most that window.
pub async fn find_run(cx: &Cx, task_id: &TaskId) -> Result<Option<RunRow>, Failure> {
    let store = cx.store()?;
    let waits = config::settings(&cx.env).admit_commit == CommitPoint::Object;
    let mut waited = 0;
    loop {
        if let Some(run) = store.get_run(task_id.as_str()).await? {
            return Ok(Some(run));
        }
        let pause = match ids::outbox_retry_in(task_id, platform::now_ms(), waited) {
            Some(p) if waits => p,
            _ => return Ok(None),
        };
        worker::Delay::from(std::time::Duration::from_millis(pause as u64)).await;
        waited += pause;
    }
}

/// `GET /v1/runs/{id}`: the read face as of now (a silent running run reads `failed`, `run.stalled`).
pub async fn get(cx: &Cx, principal: &Principal, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let run = visible_run(cx, principal, task_id).await?;
    let (code, body) = (
        200,
        answer::face(
            &run,
            platform::now_ms(),
            &config::settings(&cx.env).staleness,
        ),
    );
    Ok(json(code, body))
}

/// `GET /v1/runs?sessionId=&status=&limit=&cursor=`: newest first, keyset-paginated.
pub async fn list(req: &Incoming, cx: &Cx, principal: &Principal) -> Result<Outgoing, Failure> {
    let url = req.url();
    let q = RunListQuery::parse(sema_core::list::query_of(url))?;
    if let Some(session) = q.session_id.as_deref() {
        // A session's own listing shows the run its object answered but has not yet written.
        if config::settings(&cx.env).admit_commit == CommitPoint::Object {
            client::call(cx, session, &SessionCall::Flush).await?;
        }
    }
    let scope = ListScope::of(principal);
    let mut runs = cx
        .store()?
        .list_runs(
            &scope,
            q.session_id.as_deref(),
            q.status.as_deref(),
            q.cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
            q.limit + 1,
        )
        .await?;
    let next = next_page(&mut runs, q.limit, |r| {
        encode_cursor(r.created_at, &r.task_id)
    });
    let (now, staleness) = (platform::now_ms(), config::settings(&cx.env).staleness);
    // Each face as a tree (its keys sorted, as every tree's are).
    let faces: Vec<sema_core::json::Value> = runs
        .iter()
        .map(|r| sema_core::json::to_value(liveness::read_face(r, now, &staleness)))
        .collect::<Result<_, _>>()?;
    let body = sema_core::json!({ "runs": faces, "nextCursor": next });
    Ok(json(200, body.json_text()))
}

/// `POST /v1/runs/{id}/cancel`: a run no runner drives (or a parked one) is cancelled now and its
/// claim released (200); a run a runner holds gets `cancelRequested` (202) and the runner finishes it.
/// A run that already ended is answered as it is (write-once) — by its session's object, which also
/// lets go of a claim it still remembers for it (a run ended out of band) and ends its streams.
pub async fn cancel(cx: &Cx, principal: &Principal, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let store = cx.store()?;
    let session_id = match find_run(cx, task_id).await? {
        Some(run) => {
            if !principal.may_access(run.owner.as_deref()) {
                return Err(ApiError::not_found("run").into());
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
    let call = SessionCall::Cancel {
        task_id: task_id.as_str().to_owned(),
        session_id: session_id.clone(),
    };
    ask_then_drive(cx, &session_id, &call).await
}

/// `GET /v1/runs/{id}/events`: with `Accept: text/event-stream`, SSE replay from `Last-Event-ID`
/// (or `?after=`) then the live tail until `done` — or `204 No Content` when the run has ended and
/// the anchor is at or past its `done` frame's id (judged from the row read here; a run still live
/// always gets a stream, which ends with `done`); otherwise a JSON page of events after `?after=`:
/// at most `limit` events and about 1 MiB of event data (a page ends after the event that reaches
/// it); `nextAfter` is the anchor of the next page and `done` says the ledger is read to its end.
pub async fn events(
    req: &Incoming,
    cx: &Cx,
    principal: &Principal,
    task_id: &TaskId,
) -> Result<Outgoing, Failure> {
    let run = visible_run(cx, principal, task_id).await?;
    events_of(req, cx, run, false).await
}

/// [`events`] of a run the caller may read; `ticketed`: the request came with a stream ticket
/// (its `ticket` parameter is accepted, and it opens the SSE stream only).
pub async fn events_of(
    req: &Incoming,
    cx: &Cx,
    run: RunRow,
    ticketed: bool,
) -> Result<Outgoing, Failure> {
    let task_id = &run.task_id;
    let url = req.url();
    let mut after: Option<i64> = None;
    let mut limit: i64 = 500;
    for (k, v) in sema_core::list::parse_query(sema_core::list::query_of(url))? {
        match k.as_str() {
            "after" => {
                after = Some(sema_core::sse::parse_anchor(&v).ok_or_else(|| {
                    ApiError::invalid_field("after", "must be a non-negative integer")
                })?)
            }
            "limit" => {
                limit = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid_field("limit", "must be an integer in 1..=1000")
                    })?
            }
            sema_core::stream_ticket::QUERY_KEY if ticketed => {}
            other => {
                return Err(ApiError::invalid_request(format!(
                    "unknown query parameter `{other}`; expected after or limit"
                ))
                .into())
            }
        }
    }
    let header = |name: &str| req.header(name);
    // A malformed Last-Event-ID is refused whichever form is asked for (the JSON page does not use
    // it, but a caller sending one expects it to mean something); blank is absent.
    let last_seen = last_event_id(req)?;
    let wants_sse = header("accept").is_some_and(|a| a.contains("text/event-stream"));
    if ticketed && !wants_sse {
        return Err(ApiError::invalid_request(
            "a stream ticket opens the event stream only (Accept: text/event-stream)",
        )
        .into());
    }
    if wants_sse {
        if last_seen.is_some() {
            after = last_seen;
        }
        let after = after.unwrap_or(0);
        if crate::ledger_read::past_done(cx, &run, after).await? {
            return Ok(reply::no_content());
        }
        let call = SessionCall::Subscribe {
            task_id: task_id.clone(),
            after,
            replay: false,
        };
        return ask(cx, &run.session_id, &call).await;
    }
    let after = after.unwrap_or(0);
    let page = cx
        .store()?
        .events_after(task_id, after, limit, EVENT_PAGE_MAX_BYTES)
        .await?;
    let next_after = page.last().map_or(after, |e| e.seq);
    let events: Vec<_> = page
        .iter()
        .map(|e| {
            sema_core::json!({
                "seq": e.seq,
                "type": e.kind,
                "data": sema_core::json::parse(&e.data).unwrap_or_default(),
                "eventId": e.event_id,
                "createdAt": e.created_at,
            })
        })
        .collect();
    let done = status::is_terminal(&run.status) && next_after >= run.last_seq;
    let body = sema_core::json!({
        "taskId": run.task_id,
        "status": run.status,
        "events": events,
        "nextAfter": next_after,
        "done": done,
    });
    Ok(json(200, body.json_text()))
}

/// The request's `Last-Event-ID` as a seq (absent or blank: `None`); anything else is a 400.
fn last_event_id(req: &Incoming) -> Result<Option<i64>, Failure> {
    let Some(raw) = req.header("last-event-id").filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let seq = sema_core::sse::parse_anchor(&raw).ok_or_else(|| {
        ApiError::invalid_request("Last-Event-ID must be a non-negative integer (an event seq)")
    })?;
    Ok(Some(seq))
}

/// `POST /v1/runs/{id}/steer`: the owner queues a message for the running turn (202); 409 if not
/// running; an operator steering someone else's run is 403.
pub async fn steer(
    req: &Incoming,
    cx: &Cx,
    principal: &Principal,
    task_id: &TaskId,
) -> Result<Outgoing, Failure> {
    let (_, body): (_, sema_core::runner_wire::SteerBody) = json_body(req).await?;
    let message = body.validate()?;
    let run = visible_run(cx, principal, task_id).await?;
    if !principal.owns(run.owner.as_deref()) {
        // An operator sees every run but speaks only into its own.
        return Err(ApiError::forbidden("only the run's owner may steer it").into());
    }
    let call = SessionCall::Steer {
        task_id: task_id.as_str().to_owned(),
        message,
    };
    ask(cx, &run.session_id, &call).await
}

/// `POST /v1/tasks`: admit and stream (SSE: `meta`, live events, `done`), or with `"stream": false`
/// wait for the terminal result (bounded by `waitMs`, then 202 with the run's state).
///
/// An `Idempotency-Key` already bound to a run answers for that run, which never runs twice: the
/// stream form is its replay (`x-task-id`, `meta`, `done` with `replay: true`) once it has ended, or
/// joins it in flight (`done` with `replay: true` when it ends). `Last-Event-ID` is read only there
/// (the key names the run the anchor belongs to; a fresh submission's stream starts at its start):
/// at or past the ended run's `done` frame's id it is `204 No Content`, as on `/v1/runs/{id}/events`.
/// A malformed one is a 400 on every form.
pub async fn submit_task(
    req: &Incoming,
    cx: &Cx,
    principal: &Principal,
) -> Result<Outgoing, Failure> {
    let raw_key = req.header("idempotency-key");
    // Checked on every form, before anything is admitted, though only a keyed replay reads it: a
    // malformed anchor is the caller's mistake whichever form it came with (found by the fuzz).
    let anchor = last_event_id(req)?;
    let (value, body): (_, sema_core::runner_wire::TaskBody) = json_body(req).await?;
    let (submit, mode) = body.validate()?;
    let input = admit_input(
        cx,
        principal,
        submit,
        raw_key.as_deref(),
        "POST /v1/tasks",
        &value,
        // A bound key's stream form (a replay or a join) is the Worker's to choose.
        KeyLookup::InWorker,
    )
    .await?;
    let input = match input {
        Ok(input) => input,
        Err(original) => {
            // A bound key: the original run, in the form asked for now.
            let task_id = original.task_id;
            let run = cx
                .store()?
                .get_run(&task_id)
                .await?
                .ok_or_else(|| ApiError::not_found("run"))?;
            let call = match mode {
                TaskMode::Stream => {
                    if let Some(after) = anchor {
                        if crate::ledger_read::past_done(cx, &run, after).await? {
                            return Ok(reply::no_content());
                        }
                    }
                    SessionCall::Subscribe {
                        task_id,
                        after: 0,
                        replay: true,
                    }
                }
                TaskMode::Wait(wait_ms) => SessionCall::Wait { task_id, wait_ms },
            };
            return ask(cx, &run.session_id, &call).await;
        }
    };
    attach(cx, input, mode).await
}

async fn attach(cx: &Cx, input: AdmitInput, mode: TaskMode) -> Result<Outgoing, Failure> {
    let session = input.session_id.clone();
    let call = match mode {
        TaskMode::Stream => SessionCall::AdmitStream(input),
        TaskMode::Wait(wait_ms) => SessionCall::AdmitWait { input, wait_ms },
    };
    ask(cx, &session, &call).await
}

/// [`ask`], then — when the call succeeded and the session is a leader's child — drive that leader:
/// the call may have ended, parked or resumed the child (`leader_driver.rs`).
pub(super) async fn ask_then_drive(
    cx: &Cx,
    session_id: &str,
    call: &SessionCall,
) -> Result<Outgoing, Failure> {
    drive_after(cx, session_id, ask(cx, session_id, call).await?).await
}

/// After a call to the session's object changed a run (`resp` a success), drives its leader.
pub(super) async fn drive_after(
    cx: &Cx,
    session_id: &str,
    resp: Outgoing,
) -> Result<Outgoing, Failure> {
    if (200..300).contains(&resp.status()) {
        crate::leader_driver::after_child_change(cx, session_id).await;
    }
    Ok(resp)
}

/// Sends `call` to the session's object and renders its answer.
pub(super) async fn ask(
    cx: &Cx,
    session_id: &str,
    call: &SessionCall,
) -> Result<Outgoing, Failure> {
    let answer = client::call(cx, session_id, call).await?;
    if matches!(&answer, client::Answer::Reply(SessionReply::Admitted(a)) if a.flush) {
        flush_after_answer(cx, session_id).await;
    }
    reply::render(cx, answer)
}

/// Asks the session's object, once this response is sent, to write the admission it answered
/// from its own storage into D1. Losing this call delays the write to the object's alarm.
async fn flush_after_answer(cx: &Cx, session_id: &str) {
    let mut later = Cx::new(cx.env.clone());
    later.fail = cx.fail.clone();
    let session = session_id.to_owned();
    cx.after_response(async move {
        later.fail.hit("admit.before_flush").await;
        if let Err(f) = client::call(&later, &session, &SessionCall::Flush).await {
            worker::console_error!("flush of session {session}: {f}");
        }
    })
    .await;
}
