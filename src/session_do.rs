//! `SessionDo`: one Durable Object per session, the serialisation point of its claim.
//!
//! Every claim-changing call (admit, cancel) runs under the object's async mutex, so calls on one
//! session never interleave, even while one awaits D1 (a D1 call is external I/O and does not close
//! the object's input gate). The object remembers the claim in its own storage and answers a
//! conflicting submit from memory, without a D1 round trip.
//!
//! Ordering: D1 commits first (run row, `task_active` mirror and idempotency binding in one batch),
//! then the object's memory and storage follow. If the object's storage is ever behind D1, the D1
//! batch refuses on `task_active`'s key and the holder is adopted from D1: D1's unique key is the
//! final judge, so the single-active invariant never depends on the object's storage.

use crate::{
    d1::METER_HEADER,
    http::{
        error::{json, respond, Failure},
        runs::replayed,
        Cx,
    },
    live::{self, Hub},
    platform,
};
use futures_util::lock::Mutex;
use sema_core::{
    admission::{self, AdmitDecision, AdmitInput, Claim, SessionOwner, SessionState},
    conflict::{Conflict, Holder},
    run::RunRow,
    sql::DbError,
    sql::{event_sql::NewEvent, run_sql},
    status,
    store::{Appended, ClaimHolder, CreateRun, EventRow, RunStore, StoreError},
    wire::{objective_preview, Admitted},
    ApiError,
};
use serde::{Deserialize, Serialize};
use std::{cell::RefCell, rc::Rc};
use wasm_bindgen::JsValue;
use worker::{durable_object, DurableObject, Env, Method, Request, RequestInit, Response, State};

/// A call from the Worker to a session's object. The Worker has authenticated the caller and checked
/// ownership (or the runner role) before it sends one.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Call {
    Admit(AdmitInput),
    /// Admit, then stream the run (`meta` first); a refusal becomes the stream's `done` frame.
    AdmitStream(AdmitInput),
    /// Admit, then wait up to `wait_ms` for the terminal result.
    AdmitWait {
        input: AdmitInput,
        wait_ms: u64,
    },
    Cancel {
        task_id: String,
        session_id: String,
    },
    /// SSE replay after `after`, then live tail until `done`.
    Subscribe {
        task_id: String,
        after: i64,
        meta: bool,
    },
    /// Wait up to `wait_ms` for an existing run to end.
    Wait {
        task_id: String,
        wait_ms: u64,
    },
    Append {
        task_id: String,
        lease_epoch: i64,
        events: Vec<WireEvent>,
    },
    Finish {
        task_id: String,
        finish: WireFinish,
    },
    Steer {
        task_id: String,
        message: String,
    },
}

/// An event as the Worker forwards it (validated).
#[derive(Debug, Serialize, Deserialize)]
pub struct WireEvent {
    pub kind: String,
    pub data: String,
    pub event_id: Option<String>,
}

/// A finish as the Worker forwards it (validated).
#[derive(Debug, Serialize, Deserialize)]
pub struct WireFinish {
    pub lease_epoch: i64,
    pub status: String,
    pub result: Option<String>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub done_json: String,
}

/// Sends `call` to the object of `session_id` and returns its response as the client's response.
pub async fn call(cx: &Cx, session_id: &str, call: &Call) -> Result<Response, Failure> {
    let stub = cx.env.durable_object("SESSION")?.get_by_name(session_id)?;
    let body = serde_json::to_string(call).map_err(|e| Failure::Infra(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(JsValue::from_str(&body)));
    let req = Request::new_with_init("https://session.internal/call", &init)?;
    let resp = stub.fetch_with_request(req).await?;
    // The object's D1 cost is part of this request's.
    if let Ok(Some(share)) = resp.headers().get(METER_HEADER) {
        cx.meter.add_header(&share);
    }
    Ok(resp)
}

const STATE_KEY: &str = "state";

#[durable_object]
pub struct SessionDo {
    state: State,
    env: Env,
    lock: Mutex<()>,
    memory: RefCell<Option<SessionState>>,
    hub: Rc<Hub>,
}

impl DurableObject for SessionDo {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            lock: Mutex::new(()),
            memory: RefCell::new(None),
            hub: Rc::new(Hub::default()),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let cx = Cx::new(self.env.clone());
        let outcome = match req.json::<Call>().await {
            Ok(call) => self.dispatch(&cx, call).await,
            Err(e) => Err(Failure::Infra(format!("session object call: {e}"))),
        };
        let resp = respond(outcome);
        let _ = resp.headers().set(METER_HEADER, &cx.meter.header());
        Ok(resp)
    }
}

impl SessionDo {
    async fn dispatch(&self, cx: &Cx, call: Call) -> Result<Response, Failure> {
        match call {
            // Streams and waits hold the mutex only while admitting, never while streaming.
            Call::Subscribe {
                task_id,
                after,
                meta,
            } => {
                let first = if meta {
                    let run = cx
                        .store()?
                        .get_run(&task_id)
                        .await?
                        .ok_or_else(|| ApiError::not_found("run"))?;
                    Some(sema_core::sse::meta_frame(&task_id, &run.session_id))
                } else {
                    None
                };
                self.subscribe(&task_id, after, first.map(|f| (f, task_id.as_str())))
            }
            Call::Wait { task_id, wait_ms } => {
                let done = self.hub.wait_done(&task_id);
                self.wait_for(cx, &task_id, done, wait_ms).await
            }
            Call::AdmitStream(input) => {
                let admitted = {
                    let _serialised = self.lock.lock().await;
                    self.admit(cx, &input).await
                };
                self.stream_admission(&input, admitted)
            }
            Call::AdmitWait { input, wait_ms } => {
                let (admitted, done) = {
                    let _serialised = self.lock.lock().await;
                    // Registered before admitting, so a run that ends at once is not missed.
                    let done = self.hub.wait_done(&input.task_id);
                    (self.admit(cx, &input).await, done)
                };
                let admission = admitted.map_err(Refusal::into_failure)?;
                self.wait_for(cx, &admission.task_id, done, wait_ms).await
            }
            other => {
                let _serialised = self.lock.lock().await;
                match other {
                    Call::Admit(input) => self
                        .admit(cx, &input)
                        .await
                        .map(Admission::into_response)
                        .map_err(Refusal::into_failure),
                    Call::Cancel {
                        task_id,
                        session_id,
                    } => self.cancel(cx, &task_id, &session_id).await,
                    Call::Append {
                        task_id,
                        lease_epoch,
                        events,
                    } => self.append(cx, &task_id, lease_epoch, events).await,
                    Call::Finish { task_id, finish } => self.finish(cx, &task_id, finish).await,
                    Call::Steer { task_id, message } => self.steer(cx, &task_id, &message).await,
                    Call::Subscribe { .. }
                    | Call::Wait { .. }
                    | Call::AdmitStream(_)
                    | Call::AdmitWait { .. } => Err(Failure::Infra("unreachable call".into())),
                }
            }
        }
    }

    /// Opens an SSE stream of `task_id` after seq `after`, optionally opening with `first`.
    fn subscribe(
        &self,
        task_id: &str,
        after: i64,
        first: Option<(String, &str)>,
    ) -> Result<Response, Failure> {
        let (sub, rx) = self.hub.subscribe(task_id, after);
        let mut extra = vec![];
        if let Some((frame, task_header)) = &first {
            live::prefix(&sub, frame);
            extra.push(("x-task-id", *task_header));
        }
        wasm_bindgen_futures::spawn_local(live::replay_then_tail(
            self.env.clone(),
            task_id.to_owned(),
            sub.clone(),
        ));
        wasm_bindgen_futures::spawn_local(live::heartbeats(sub));
        Ok(live::sse_response(rx, 200, &extra)?)
    }

    /// The stream form of a submit: the admitted (or replayed, or attached) run streamed from its
    /// first event after a `meta` frame; a conflict is the stream's one `done` frame.
    fn stream_admission(
        &self,
        input: &AdmitInput,
        admitted: Result<Admission, Refusal>,
    ) -> Result<Response, Failure> {
        match admitted {
            Ok(a) => {
                let meta = sema_core::sse::meta_frame(&a.task_id, &input.session_id);
                self.subscribe(&a.task_id, 0, Some((meta, &a.task_id)))
            }
            Err(Refusal::Conflict(c)) => {
                let frame = sema_core::sse::refusal_done_frame(&c.done_result());
                Ok(live::single_frame_response(frame)?)
            }
            Err(Refusal::Failed(f)) => Err(f),
        }
    }

    /// Waits up to `wait_ms` for `task_id` to end: its terminal result (200), or its state (202).
    async fn wait_for(
        &self,
        cx: &Cx,
        task_id: &str,
        done: futures_channel::oneshot::Receiver<()>,
        wait_ms: u64,
    ) -> Result<Response, Failure> {
        let task_id = task_id.to_owned();
        let store = cx.store()?;
        let ended = |run: &RunRow| status::is_terminal(&run.status);
        let current = store
            .get_run(&task_id)
            .await?
            .ok_or_else(|| Failure::Infra("admitted run vanished".into()))?;
        let run = if ended(&current) {
            current
        } else {
            let timeout = worker::Delay::from(std::time::Duration::from_millis(wait_ms));
            futures_util::future::select(done, Box::pin(timeout)).await;
            store
                .get_run(&task_id)
                .await?
                .ok_or_else(|| Failure::Infra("admitted run vanished".into()))?
        };
        if ended(&run) {
            let mut body = sema_core::sse::done_result(&run);
            if let Some(m) = body.as_object_mut() {
                m.insert("taskId".into(), run.task_id.clone().into());
                m.insert("sessionId".into(), run.session_id.clone().into());
            }
            Ok(json(200, body.to_string()))
        } else {
            let body =
                serde_json::to_string(&run.face()).map_err(|e| Failure::Infra(e.to_string()))?;
            Ok(json(202, body))
        }
    }

    async fn append(
        &self,
        cx: &Cx,
        task_id: &str,
        lease_epoch: i64,
        events: Vec<WireEvent>,
    ) -> Result<Response, Failure> {
        let new: Vec<NewEvent<'_>> = events
            .iter()
            .map(|e| NewEvent {
                kind: &e.kind,
                data: &e.data,
                event_id: e.event_id.as_deref(),
            })
            .collect();
        let now = platform::now_ms();
        let appended = match cx.store()?
            .append_events(task_id, lease_epoch, &new, now)
            .await
        {
            Err(StoreError::Db(DbError::Duplicate { .. })) => {
                return Err(ApiError::new(
                    409,
                    "conflict.duplicate_event_id",
                    "an event with one of these eventIds is already in this run's ledger; nothing from this batch was written",
                )
                .into())
            }
            other => other?,
        };
        match appended {
            Appended::LeaseLost => Err(ApiError::lease_lost().into()),
            Appended::Seqs(seqs) => {
                let rows: Vec<EventRow> = events
                    .into_iter()
                    .zip(&seqs)
                    .map(|(e, seq)| EventRow {
                        seq: *seq,
                        kind: e.kind,
                        data: e.data,
                        event_id: e.event_id,
                        created_at: now,
                    })
                    .collect();
                self.hub.publish_events(task_id, &rows);
                Ok(json(200, serde_json::json!({ "seqs": seqs }).to_string()))
            }
        }
    }

    async fn finish(&self, cx: &Cx, task_id: &str, f: WireFinish) -> Result<Response, Failure> {
        let store = cx.store()?;
        let done_seq = store
            .finish_run(
                task_id,
                f.lease_epoch,
                &f.status,
                f.result.as_deref(),
                f.error.as_deref(),
                f.error_code.as_deref(),
                &f.done_json,
                platform::now_ms(),
            )
            .await?
            .ok_or_else(ApiError::lease_lost)?;
        self.forget_claim_of(task_id).await?;
        let result: serde_json::Value = serde_json::from_str(&f.done_json).unwrap_or_default();
        self.hub.publish(
            task_id,
            done_seq,
            &sema_core::sse::done_frame(done_seq, &result),
            true,
        );
        let run = store
            .get_run(task_id)
            .await?
            .ok_or_else(|| Failure::Infra("finished run vanished".into()))?;
        let body = serde_json::to_string(&run.face()).map_err(|e| Failure::Infra(e.to_string()))?;
        Ok(json(200, body))
    }

    async fn steer(&self, cx: &Cx, task_id: &str, message: &str) -> Result<Response, Failure> {
        match cx
            .store()?
            .add_steer(task_id, message, platform::now_ms())
            .await?
        {
            Some(seq) => Ok(json(
                202,
                serde_json::json!({"taskId": task_id, "seq": seq, "status": "queued"}).to_string(),
            )),
            None => Err(ApiError::new(
                409,
                "conflict.run_not_running",
                "the run is not running; steer messages are accepted only while a run is running",
            )
            .into()),
        }
    }

    /// Drops the remembered claim if `task_id` holds it (its run just ended).
    async fn forget_claim_of(&self, task_id: &str) -> Result<(), Failure> {
        let mut state = self.load().await?;
        if state.claim.as_ref().is_some_and(|c| c.task_id == task_id) {
            state.claim = None;
            self.save(state).await?;
        }
        Ok(())
    }
    /// The session state: memory, else storage, else empty.
    async fn load(&self) -> Result<SessionState, Failure> {
        if let Some(s) = self.memory.borrow().as_ref() {
            return Ok(s.clone());
        }
        let stored: Option<String> = self.state.storage().get(STATE_KEY).await?;
        let state = match stored {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| Failure::Infra(format!("stored session state: {e}")))?,
            None => SessionState::default(),
        };
        *self.memory.borrow_mut() = Some(state.clone());
        Ok(state)
    }

    /// Persists `state`. Memory is updated first: if the storage write fails, this instance still
    /// knows the truth, and a later instance re-learns it from D1's refusal.
    async fn save(&self, state: SessionState) -> Result<(), Failure> {
        let text = serde_json::to_string(&state).map_err(|e| Failure::Infra(e.to_string()))?;
        *self.memory.borrow_mut() = Some(state);
        self.state.storage().put(STATE_KEY, text).await?;
        Ok(())
    }

    async fn admit(&self, cx: &Cx, input: &AdmitInput) -> Result<Admission, Refusal> {
        let state = self.load().await?;
        match admission::decide(&state, input) {
            AdmitDecision::Write => self.write_run(cx, state, input, true).await,
            AdmitDecision::SameTask(admitted) => Admission::of(202, &admitted),
            AdmitDecision::Replay(r) => Ok(Admission {
                code: r.status,
                body: r.body,
                task_id: r.task_id,
                replayed: true,
            }),
            AdmitDecision::Conflict(c) => Err(Refusal::Conflict(c)),
            AdmitDecision::Refuse(e) => Err(e.into()),
        }
    }

    /// Writes run + claim + key as one D1 batch, then remembers the claim. `heal` allows one retry
    /// after releasing a D1 claim whose holder is provably dead (terminal or missing row).
    async fn write_run(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
        heal: bool,
    ) -> Result<Admission, Refusal> {
        let store = cx.store()?;
        let body = admission::admitted_body(&input.task_id, &input.session_id);
        let preview = objective_preview(&input.objective);
        let instance = instance_id(&self.env);
        let new_run = run_sql::NewRun {
            task_id: &input.task_id,
            session_id: &input.session_id,
            owner: input.owner.as_deref(),
            instance_id: &instance,
            objective: &input.objective,
            objective_preview: &preview,
            meta_json: &input.meta,
            now: platform::now_ms(),
            idempotency: input
                .idempotency
                .as_ref()
                .map(|(key, fp)| (key.as_str(), fp.as_str(), 202, body.as_str())),
        };
        match store.create_run(&new_run).await? {
            CreateRun::Created => {
                state.owner = Some(SessionOwner {
                    id: input.owner.clone(),
                });
                state.claim = Some(Claim {
                    task_id: input.task_id.clone(),
                    owner: input.owner.clone(),
                    status: status::RUNNING.to_owned(),
                    gate_kind: None,
                    idempotency: input.idempotency.as_ref().map(|(key, fp)| {
                        admission::IdempotencyBinding {
                            scoped_key: key.clone(),
                            fingerprint: fp.clone(),
                            task_id: input.task_id.clone(),
                            response_status: 202,
                            response_body: body.clone(),
                        }
                    }),
                });
                self.save(state).await?;
                Ok(Admission {
                    code: 202,
                    body,
                    task_id: input.task_id.clone(),
                    replayed: false,
                })
            }
            CreateRun::ForeignSession { owner } => {
                state.owner = Some(SessionOwner { id: owner });
                self.save(state).await?;
                Err(ApiError::not_found("session").into())
            }
            CreateRun::Held(holder) => self.adopt_d1_claim(cx, state, input, holder, heal).await,
            CreateRun::TaskIdTaken(run) => task_id_taken(input, run),
            CreateRun::KeyBound(bound) => {
                let (_, fingerprint) = input
                    .idempotency
                    .as_ref()
                    .ok_or_else(|| Failure::Infra("key conflict without a key".into()))?;
                let r = bound.answer(fingerprint)?;
                Ok(Admission {
                    code: r.status,
                    body: r.body,
                    task_id: r.task_id,
                    replayed: true,
                })
            }
        }
    }

    /// D1 holds a claim this object did not know: adopt a live holder (409), or release a dead one
    /// and try once more.
    async fn adopt_d1_claim(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
        holder: Option<ClaimHolder>,
        heal: bool,
    ) -> Result<Admission, Refusal> {
        let Some(holder) = holder else {
            // Released between the batch and the read: the session is free now.
            return if heal {
                Box::pin(self.write_run(cx, state, input, false)).await
            } else {
                Err(base_conflict(&input.session_id, None))
            };
        };
        if holder.session_owner != input.owner {
            state.owner = Some(SessionOwner {
                id: holder.session_owner,
            });
            self.save(state).await?;
            return Err(ApiError::not_found("session").into());
        }
        match holder.status {
            Some(s) if status::is_active(&s) => {
                let claim = Claim {
                    task_id: holder.task_id,
                    owner: holder.owner,
                    status: s,
                    gate_kind: None,
                    idempotency: None,
                };
                let conflict = admission::conflict_for(&input.session_id, &claim);
                state.owner = Some(SessionOwner {
                    id: input.owner.clone(),
                });
                state.claim = Some(claim);
                self.save(state).await?;
                Err(Refusal::Conflict(conflict))
            }
            _ if heal => {
                cx.store()?.release_claim_of(&holder.task_id).await?;
                Box::pin(self.write_run(cx, state, input, false)).await
            }
            _ => Err(base_conflict(&input.session_id, Some(&holder.task_id))),
        }
    }

    async fn cancel(&self, cx: &Cx, task_id: &str, session_id: &str) -> Result<Response, Failure> {
        let outcome = cx.store()?.cancel(task_id, platform::now_ms()).await?;
        let holder_dead = outcome
            .run
            .as_ref()
            .is_none_or(|r| status::is_terminal(&r.status));
        if holder_dead {
            self.forget_claim_of(task_id).await?;
        }
        if let Some(run) = outcome
            .run
            .as_ref()
            .filter(|r| status::is_terminal(&r.status))
        {
            // Open streams and waiters of the run end with the done frame built from the row.
            let seq = run.last_seq + 1;
            let frame = sema_core::sse::done_frame(seq, &sema_core::sse::done_result(run));
            self.hub.publish(task_id, seq, &frame, true);
        }
        match outcome.run {
            Some(run) => {
                let code = if status::is_terminal(&run.status) {
                    200
                } else {
                    202
                };
                let body = serde_json::to_string(&run.face())
                    .map_err(|e| Failure::Infra(e.to_string()))?;
                Ok(json(code, body))
            }
            None => Ok(json(
                200,
                serde_json::json!({
                    "taskId": task_id,
                    "sessionId": session_id,
                    "claimReleased": outcome.claim_released,
                })
                .to_string(),
            )),
        }
    }
}

/// A client task id that names an existing run: the caller's own run in this session is returned
/// again (202 while it is active, 200 once it ended); anyone else's is a conflict.
fn task_id_taken(input: &AdmitInput, run: Option<RunRow>) -> Result<Admission, Refusal> {
    if let Some(run) = run {
        if input.client_task_id && run.owner == input.owner && run.session_id == input.session_id {
            let code = if status::is_active(&run.status) {
                202
            } else {
                200
            };
            return Admission::of(
                code,
                &Admitted {
                    task_id: run.task_id,
                    session_id: run.session_id,
                    status: run.status,
                },
            );
        }
    }
    Err(ApiError::new(
        409,
        "conflict.task_id_taken",
        "taskId is already used by another run; submit with a different taskId",
    )
    .into())
}

/// An accepted submission: the answer and the run it names.
struct Admission {
    code: u16,
    body: String,
    task_id: String,
    /// An idempotency key's original answer, sent again.
    replayed: bool,
}

impl Admission {
    fn of(code: u16, admitted: &Admitted) -> Result<Self, Refusal> {
        let body = serde_json::to_string(admitted).map_err(|e| Failure::Infra(e.to_string()))?;
        Ok(Self {
            code,
            body,
            task_id: admitted.task_id.clone(),
            replayed: false,
        })
    }

    fn into_response(self) -> Response {
        if self.replayed {
            replayed(self.code, self.body)
        } else {
            json(self.code, self.body)
        }
    }
}

/// Why a submission was not accepted: the session is held (the stream form turns the materials into
/// its `done` frame), or any other refusal or failure.
enum Refusal {
    Conflict(Conflict),
    Failed(Failure),
}

impl Refusal {
    fn into_failure(self) -> Failure {
        match self {
            Refusal::Conflict(c) => c.to_api_error().into(),
            Refusal::Failed(f) => f,
        }
    }
}

impl<E: Into<Failure>> From<E> for Refusal {
    fn from(e: E) -> Self {
        Refusal::Failed(e.into())
    }
}

fn base_conflict(session_id: &str, holder: Option<&str>) -> Refusal {
    Refusal::Conflict(Conflict::build(session_id, holder, &Holder::Unknown))
}

fn instance_id(env: &Env) -> String {
    env.var("INSTANCE_ID")
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "default".to_owned())
}
