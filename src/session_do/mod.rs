//! `SessionDo`: one Durable Object per session, the serialisation point of its claim and the home of
//! its runs' live streams. It speaks the typed protocol of `sema_core::session_protocol` and renders
//! no HTTP: every call gets a `SessionReply`, except an opened SSE stream.
//!
//! Lock policy (`SessionCall::lock`): claim changes and ledger writes (admit, cancel, append, finish,
//! steer) run under the object's async mutex, so calls on one session never interleave even
//! while one awaits D1 (external I/O does not close the input gate), and live frames are published
//! under it right after their D1 commit, hence in seq order. A submit takes it only to write or
//! judge the claim: one the remembered state answers (a 409 within the claim's recheck time, a
//! replay) is answered at once, never queued behind a write (`admission.rs`). Streams and waits
//! hold it only while admitting.
//!
//! Ordering: D1 commits first, then the object's memory and storage follow; D1's unique key on
//! `task_active` is the final judge (see `admission.rs`).
//!
//! Parts: `admission.rs` (admit; judge a held claim, take over a silent holder), `alarm.rs` (the
//! alarm at the claim's recheck time), `ledger.rs` (append, finish, steer, cancel, runs ended elsewhere),
//! `streams.rs` (SSE and waits), `fanout.rs` (subscribers and waiters), `state.rs` (the remembered
//! claim), `tickets.rs` (stream tickets), `leader_child.rs` (a leader's child started in its own
//! session), `sessions.rs` (deleting the session and forgetting it), `client.rs` (the Worker's side
//! of the protocol).

mod admission;
mod alarm;
pub mod client;
mod fanout;
mod gates;
mod leader_child;
mod ledger;
mod sessions;
mod state;
mod streams;
mod tickets;

use crate::{cx::Cx, d1::METER_HEADER, failure::Failure, object_storage::ObjectStorage};
use fanout::Hub;
use sema_core::{
    admission::{CommitPoint, SessionState},
    fair_lock::FairLock,
    liveness::Staleness,
    session_protocol::{Lock, SessionCall, SessionReply, REPLY_HEADER},
};
use std::{
    cell::{Cell, RefCell},
    rc::Rc,
};
use worker::{durable_object, DurableObject, Env, Headers, Request, Response, State};

/// Exported with `fetch` and `alarm` only: the object holds no WebSockets and opens no sockets, so
/// worker's default handlers for those events are not compiled in.
#[durable_object(alarm)]
pub struct SessionDo {
    state: State,
    env: Env,
    /// Serialises the calls that change the claim or the ledger, first come first served: under a
    /// steady stream of calls none waits behind later arrivals (see `sema_core::fair_lock`).
    lock: FairLock,
    memory: RefCell<Option<SessionState>>,
    hub: Rc<Hub>,
    /// The stream tickets of this session's runs, as last read from or written to storage.
    tickets: RefCell<Option<sema_core::stream_ticket::TicketBook>>,
    /// The liveness knobs, read once: a deployment's vars do not change under a live object.
    staleness: Staleness,
    /// When the alarm this instance last set is due (`None`: none set since it started, or it
    /// fired, or it was deleted): while it names a time, an alarm due no later is pending
    /// (`alarm.rs`).
    alarm_at: Cell<Option<i64>>,
    /// Where a plain admission may commit (`SEMA_ADMIT_COMMIT`), read once.
    commit_point: CommitPoint,
    /// The object's storage, text values and the alarm (deleting the session clears it through
    /// worker's `Storage`).
    storage: ObjectStorage,
}

/// What a call produced: a reply, or a stream the object opened.
pub(crate) enum Outcome {
    Reply(SessionReply),
    Stream(Response),
}

impl DurableObject for SessionDo {
    fn new(state: State, env: Env) -> Self {
        let settings = crate::config::settings(&env);
        let (staleness, commit_point) = (settings.staleness, settings.admit_commit);
        let (state, storage) = ObjectStorage::of(state);
        Self {
            storage,
            state,
            env,
            lock: FairLock::new(),
            memory: RefCell::new(None),
            hub: Rc::new(Hub::default()),
            tickets: RefCell::new(None),
            staleness,
            alarm_at: Cell::new(None),
            commit_point,
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let cx = Cx::new(self.env.clone()).armed_by(&req);
        let outcome = match crate::object_reply::call::<SessionCall>(&mut req).await {
            Ok(call) => self.dispatch(&cx, call).await,
            Err(e) => Err(Failure::Infra(format!("session object call: {e}"))),
        };
        let resp = match outcome {
            Ok(Outcome::Stream(resp)) => resp,
            Ok(Outcome::Reply(reply)) => reply_response(&reply)?,
            Err(f) => reply_response(&f.into_reply())?,
        };
        // The object's D1 cost, added to the calling request's by the Worker.
        let _ = resp.headers().set(METER_HEADER, &cx.meter.header());
        Ok(resp)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(f) = self.on_alarm().await {
            worker::console_error!("session alarm: {f}");
            // Try again soon rather than leave the claim unwatched; the cron is the backstop.
            let _ = self.set_alarm_in(5_000).await;
        }
        Response::empty()
    }
}

/// The RPC entry of calls that never stream (`sema_core::session_protocol::RPC_METHOD`: the
/// js_name below and the Worker's import in `client.rs` are that constant's text). Same dispatch
/// as `fetch`, without a request or a response on either side: the call's text in, the framed
/// reply out (`object_reply::rpc_reply`). Every failure is a reply (`Failed`), as over `fetch`;
/// the promise rejects only when the runtime fails the call.
#[wasm_bindgen::prelude::wasm_bindgen]
impl SessionDo {
    #[wasm_bindgen(js_name = sessionCall)]
    pub async fn session_call(
        &self,
        call: String,
        failpoint: Option<String>,
    ) -> Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue> {
        let cx = Cx::new(self.env.clone()).armed_with(failpoint);
        let reply = match sema_core::object_codec::decode::<SessionCall>(&call) {
            Ok(call) => match self.dispatch(&cx, call).await {
                Ok(Outcome::Reply(reply)) => reply,
                Ok(Outcome::Stream(_)) => {
                    Failure::Infra("a streaming call arrived by RPC".into()).into_reply()
                }
                Err(f) => f.into_reply(),
            },
            Err(e) => Failure::Infra(format!("session object call: {e}")).into_reply(),
        };
        crate::object_reply::rpc_reply(&cx.meter, &reply)
    }
}

fn reply_response(reply: &SessionReply) -> worker::Result<Response> {
    let body = sema_core::object_codec::encode(reply);
    let headers = Headers::new();
    let _ = headers.set("content-type", "text/plain; charset=utf-8");
    let _ = headers.set(REPLY_HEADER, "1");
    Ok(Response::ok(body)?.with_headers(headers))
}

impl SessionDo {
    async fn dispatch(&self, cx: &Cx, call: SessionCall) -> Result<Outcome, Failure> {
        let _serialised = match call.lock() {
            Lock::Whole => {
                let guard = self.lock.lock().await;
                // An admission still in the outbox reaches D1 before any other write of the
                // session, so every call under the lock finds D1 as the object left it.
                self.settle(cx).await?;
                Some(guard)
            }
            Lock::Admission | Lock::Free => None,
        };
        // A write routed by the runner's hint is taken only for the run whose claim this object
        // holds (`SessionCall::Append`'s doc).
        if let Some(task_id) = call.hinted_task() {
            if !self.holds_claim_of(task_id).await? {
                return Ok(Outcome::Reply(SessionReply::Misrouted));
            }
        }
        let reply = match call {
            SessionCall::Admit(input) => match self.submit(cx, &input, self.commit_point).await {
                Ok(admission) => SessionReply::Admitted(admission),
                Err(refusal) => refusal.into_reply(),
            },
            SessionCall::AdmitStream(input) => {
                let admitted = self.submit(cx, &input, CommitPoint::D1).await;
                return self.stream_admission(cx, &input, admitted).await;
            }
            SessionCall::AdmitWait { input, wait_ms } => {
                // Registered before admitting, so a run that ends at once is not missed.
                let done = self.hub.wait_done(&input.task_id);
                let admitted = self.submit(cx, &input, CommitPoint::D1).await;
                match admitted {
                    Ok(a) => self.wait_for(cx, &a.task_id, done, wait_ms).await?,
                    Err(refusal) => refusal.into_reply(),
                }
            }
            SessionCall::Subscribe {
                task_id,
                after,
                replay,
            } => return self.subscribe_call(cx, &task_id, after, replay).await,
            SessionCall::Wait { task_id, wait_ms } => {
                let done = self.hub.wait_done(&task_id);
                self.wait_for(cx, &task_id, done, wait_ms).await?
            }
            SessionCall::Cancel {
                task_id,
                session_id,
            } => self.cancel(cx, task_id, session_id).await?,
            SessionCall::Append {
                task_id,
                holder,
                events,
                ..
            } => self.append(cx, &task_id, holder, events).await?,
            SessionCall::Finish {
                task_id, finish, ..
            } => self.finish(cx, &task_id, finish).await?,
            SessionCall::Steer { task_id, message } => self.steer(cx, task_id, &message).await?,
            SessionCall::RunEnded { task_id } => SessionReply::Noted {
                claim_released: self.reaped(cx, &task_id).await?,
            },
            SessionCall::Leased { task_id } => self.leased(&task_id).await?,
            SessionCall::Park { task_id, park } => self.park(cx, &task_id, park).await?,
            SessionCall::Decide { decide, wake } => self.decide(cx, decide, wake).await?,
            SessionCall::StartChild {
                leader_run_id,
                index,
                input,
            } => self.start_child(cx, &leader_run_id, index, &input).await?,
            SessionCall::DeleteSession {
                session_id,
                owner,
                marker,
            } => self.delete_session(cx, session_id, owner, &marker).await?,
            SessionCall::IssueTicket {
                task_id,
                principal,
                role,
            } => self.issue_ticket(&task_id, principal, role).await?,
            SessionCall::CheckTicket {
                task_id,
                ticket,
                owner,
            } => {
                self.check_ticket(&task_id, &ticket, owner.as_deref())
                    .await?
            }
            // Settled above, under the lock.
            SessionCall::Flush => SessionReply::Flushed {
                written: self.load().await?.pending.is_none(),
            },
            SessionCall::Stats => {
                let (waiters, streams) = self.hub.counts();
                SessionReply::Stats {
                    waiters,
                    streams,
                    claim: self.load().await?.claim.map(|c| c.task_id),
                    cut_off: self.hub.cut_off(),
                }
            }
        };
        Ok(Outcome::Reply(reply))
    }
}
