//! Runner protocol handlers: lease (waiting in the queue's dispatcher object), heartbeat (fenced, on D1), and the writes that
//! go through the session's Durable Object so subscribers see them live: events and finish.
//!
//! Every call after the lease carries `runnerId` and `leaseEpoch`; the store checks both in the WHERE
//! clause of each write, and a stale epoch or another runner answers `409 lease_lost` with nothing
//! written (epoch 0 never holds a run: a lease makes it at least 1).

use super::{body::json_body, error::json, reply};
use crate::incoming::Incoming;
use crate::outgoing::Outgoing;
use crate::{cx::Cx, dispatch_do, failure::Failure, platform, session_do::client};
use sema_core::{
    dispatch::{self, DispatchCall, DispatchReply},
    hex,
    ids::{SessionId, TaskId},
    json::JsonText,
    runner_wire::{Events, EventsBody, FinishBody, HeartbeatBody, LeaseBody},
    session_protocol::{SessionCall, SessionReply, WireEvent, WireFinish},
    store::{Heartbeat, RunReadStore, RunnerStore},
    ApiError,
};

/// `POST /v1/runner/lease` `{runnerId, queue?, waitMs?}`: the oldest leasable run of the queue, or
/// 204 after `waitMs` (`waitMs` 0: one indexed query, no wait). The runner waits in the queue's dispatcher (`dispatch_do.rs`), which offers it
/// a run the moment one is admitted and writes its lease (fenced compare-and-set), the answer to
/// this request's wait. A lost compare-and-set waits again for what is left of `waitMs`. Waiting
/// costs no D1 query; a lease costs its one write (charged to this request).
pub async fn lease(req: &Incoming, cx: &Cx) -> Result<Outgoing, Failure> {
    let (_, body): (_, LeaseBody) = json_body(req).await?;
    let r = body.validate()?;
    if r.wait_ms == 0 {
        // A poll, not a wait: one indexed query for the queue's oldest leasable run (a notice of a
        // run admitted a moment ago may still be on its way to the dispatcher).
        let now = platform::now_ms();
        let lease = cx
            .store()?
            .lease(&r.runner_id, &r.queue, now, LEASE_CANDIDATES)
            .await?;
        let Some(l) = lease else {
            return Ok(Outgoing::empty(204));
        };
        if let Some(notice) = client::lease_notice(&cx.env, &l, now) {
            cx.after_response(notice).await;
        }
        return Ok(json(200, dispatch::lease_body(&l)));
    }
    // The dispatcher writes the lease for this request and answers its wait with it; a lost
    // compare-and-set keeps the runner in line there, so one call covers the whole wait.
    let wait = DispatchCall::Wait {
        queue: r.queue.clone(),
        runner_id: r.runner_id.clone(),
        wait_ms: r.wait_ms,
    };
    match dispatch_do::call(cx, &r.queue, &wait).await? {
        // The lease's D1 cost, written on this request's behalf, is in the reply's meter line.
        DispatchReply::Leased { body } => Ok(json(200, body)),
        DispatchReply::Empty => Ok(Outgoing::empty(204)),
        DispatchReply::Refused(e) => Err(e.into()),
        DispatchReply::Failed { cause } => Err(Failure::Infra(cause)),
        other => Err(Failure::Infra(format!(
            "unexpected dispatch reply {}",
            sema_core::object_codec::encode(&other)
        ))),
    }
}

/// `GET /v1/runner/connect?queue=Q&runnerId=R` with `Upgrade: websocket`: the WebSocket on which
/// the queue's dispatcher pushes leases. The upgrade goes to the dispatcher object, which accepts
/// the socket with the hibernation API (an idle connection holds no isolate) and sees it close.
/// Frames: the runner sends `{"type":"ready"}` when it wants one run; the dispatcher writes the
/// lease itself and sends `{"type":"lease", ...the lease body}`. The query is validated first, like
/// a lease body (400 naming the field; a malformed percent-escape anywhere in it is a 400 too, as in
/// every listing's query); then, without the upgrade, `426 runner.upgrade_required`.
pub async fn connect(req: &Incoming, cx: &Cx) -> Result<Outgoing, Failure> {
    let pairs = sema_core::list::parse_query(sema_core::list::query_of(req.url()))?;
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let r = LeaseBody {
        runner_id: param("runnerId").unwrap_or_default(),
        wait_ms: None,
        queue: param("queue"),
    }
    .validate()?;
    // After the query: a malformed request is a 400 whatever it upgrades to.
    let upgrade = req.header("upgrade");
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::new(
            sema_core::error::ErrorCode::UpgradeRequired,
            "this route is a WebSocket: send Upgrade: websocket (or lease with POST /v1/runner/lease)",
        )
        .into());
    }
    let headers = worker::Headers::new();
    headers.set("upgrade", "websocket")?;
    let forward = crate::object_request::new(
        "GET",
        &dispatch::connect_url(&r.queue, &r.runner_id),
        Some(&headers),
        None,
    )?;
    let stub = cx
        .env
        .durable_object(dispatch::BINDING)?
        .get_by_name(&dispatch::object_name(&r.queue))?;
    Ok(stub.fetch_with_request(forward).await?.into())
}

/// How many candidates a poll (`waitMs` 0) tries.
const LEASE_CANDIDATES: i64 = 8;

/// `POST /v1/runs/{id}/heartbeat`: `{cancelRequested, steer:[{seq,message}], steerPending}`; each
/// steer message is delivered once, in order, at most `STEER_PAGE` per heartbeat (`steerPending`
/// says how many wait for the next one).
pub async fn heartbeat(req: &Incoming, cx: &Cx, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let (_, body): (_, HeartbeatBody) = json_body(req).await?;
    let holder = body.validate()?;
    let delivery_id = hex::encode(&platform::random::<16>()?);
    let beat = cx
        .store()?
        .heartbeat(&Heartbeat {
            task_id: task_id.as_str(),
            lease_epoch: holder.lease_epoch,
            runner_id: &holder.runner_id,
            delivery_id: &delivery_id,
            steer_page: sema_core::runner_wire::STEER_PAGE,
            now: platform::now_ms(),
        })
        .await?
        .ok_or_else(ApiError::lease_lost)?;
    let steer: Vec<_> = beat
        .steer
        .iter()
        .map(|(seq, message)| sema_core::json!({"seq": seq, "message": message}))
        .collect();
    let body = sema_core::json!({
        "cancelRequested": beat.cancel_requested,
        "steer": steer,
        "steerPending": beat.steer_pending,
    });
    Ok(json(200, body.json_text()))
}

/// Most task → session entries an isolate remembers before it starts over.
const SESSION_CACHE_MAX: usize = 10_000;

thread_local! {
    /// A run's session never changes, so this isolate-local memo can never be stale; it saves the
    /// D1 lookup on every append and finish after the first.
    static SESSION_OF: std::cell::RefCell<sema_core::text_map::TextMap<String>> =
        Default::default();
}

fn remembered(task_id: &TaskId) -> Option<String> {
    SESSION_OF.with(|m| m.borrow().get(task_id.as_str()).cloned())
}

fn remember(task_id: &TaskId, session: &str) {
    SESSION_OF.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= SESSION_CACHE_MAX {
            m.clear();
        }
        m.insert(task_id.as_str().to_owned(), session.to_owned());
    });
}

/// The session of a run a runner addresses (404 when the run does not exist).
pub(super) async fn session_of(cx: &Cx, task_id: &TaskId) -> Result<String, Failure> {
    if let Some(s) = remembered(task_id) {
        return Ok(s);
    }
    let session = cx
        .store()?
        .get_run(task_id.as_str())
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?
        .session_id;
    remember(task_id, &session);
    Ok(session)
}

/// Sends a runner's write to its run's session object: the one this isolate remembers, else the
/// one the runner's `sessionId` hint names (marked hinted: that object takes it only for the run it
/// holds the claim of, which proves the hint), else, or when the hint proved wrong, the one the
/// run's row names. A right hint spares the row's D1 read; a wrong one costs an object call more
/// (in that object: its lock, and the settling of an admission it may have pending) and changes
/// nothing of the run. Only a write the hinted object carried out (appended or finished) proves
/// the hint enough to remember it: any other answer may come before the object's claim check (a
/// failure settling, or reading its state), so it is returned as it is and nothing is remembered.
async fn to_session(
    cx: &Cx,
    task_id: &TaskId,
    hint: Option<SessionId>,
    mut call: SessionCall,
) -> Result<(String, client::Answer), Failure> {
    if let (None, Some(hint)) = (remembered(task_id), hint) {
        call.set_hinted(true);
        let answer = client::call(cx, hint.as_str(), &call).await?;
        match &answer {
            client::Answer::Reply(SessionReply::Misrouted) => {}
            client::Answer::Reply(SessionReply::Appended { .. } | SessionReply::Finished(_)) => {
                remember(task_id, hint.as_str());
                return Ok((hint.as_str().to_owned(), answer));
            }
            _ => return Ok((hint.as_str().to_owned(), answer)),
        }
        call.set_hinted(false);
    }
    let session = session_of(cx, task_id).await?;
    let answer = client::call(cx, &session, &call).await?;
    Ok((session, answer))
}

/// `POST /v1/runs/{id}/events`: appends 1..500 events atomically; `{seqs:[...], cancelRequested,
/// steerPending}` (what waits for the holder, read in the same batch).
pub async fn append(req: &Incoming, cx: &Cx, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let (_, body): (_, EventsBody) = json_body(req).await?;
    let Events {
        holder,
        events,
        session,
    } = body.validate()?;
    let call = SessionCall::Append {
        task_id: task_id.as_str().to_owned(),
        holder,
        events: events
            .into_iter()
            .map(|e| WireEvent {
                kind: e.kind,
                data: e.data,
                event_id: e.event_id,
            })
            .collect(),
        hinted: false,
    };
    let (_, answer) = to_session(cx, task_id, session, call).await?;
    reply::render(cx, answer)
}

/// `POST /v1/runs/{id}/finish`: terminal (write-once), `done` appended, claim released.
pub async fn finish(req: &Incoming, cx: &Cx, task_id: &TaskId) -> Result<Outgoing, Failure> {
    let (_, body): (_, FinishBody) = json_body(req).await?;
    let f = body.validate()?;
    let call = SessionCall::Finish {
        task_id: task_id.as_str().to_owned(),
        finish: WireFinish {
            holder: f.holder.clone(),
            status: f.status,
            result: f.result.as_ref().map(|r| r.json_text()),
            error: f.error.clone(),
            error_code: f.error_code.clone(),
            done_json: f.done_json(),
        },
        hinted: false,
    };
    let (session, answer) = to_session(cx, task_id, f.session, call).await?;
    super::runs::drive_after(cx, &session, reply::render(cx, answer)?).await
}
