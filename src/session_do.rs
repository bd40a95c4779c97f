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
    d1::store,
    http::{
        error::{json, respond, Failure},
        runs::replayed,
    },
    platform,
};
use futures_util::lock::Mutex;
use sema_core::{
    admission::{self, AdmitDecision, AdmitInput, Claim, SessionOwner, SessionState},
    conflict::{Conflict, Holder},
    run::RunRow,
    sql::run_sql,
    status,
    store::{ClaimHolder, CreateRun, RunStore},
    wire::{objective_preview, Admitted},
    ApiError,
};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use wasm_bindgen::JsValue;
use worker::{durable_object, DurableObject, Env, Method, Request, RequestInit, Response, State};

/// A call from the Worker to a session's object.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Call {
    Admit(AdmitInput),
    Cancel { task_id: String, session_id: String },
}

/// Sends `call` to the object of `session_id` and returns its response as the client's response.
pub async fn call(env: &Env, session_id: &str, call: &Call) -> Result<Response, Failure> {
    let stub = env.durable_object("SESSION")?.get_by_name(session_id)?;
    let body = serde_json::to_string(call).map_err(|e| Failure::Infra(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(JsValue::from_str(&body)));
    let req = Request::new_with_init("https://session.internal/call", &init)?;
    Ok(stub.fetch_with_request(req).await?)
}

const STATE_KEY: &str = "state";

#[durable_object]
pub struct SessionDo {
    state: State,
    env: Env,
    lock: Mutex<()>,
    memory: RefCell<Option<SessionState>>,
}

impl DurableObject for SessionDo {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            lock: Mutex::new(()),
            memory: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let outcome = match req.json::<Call>().await {
            Ok(call) => {
                let _serialised = self.lock.lock().await;
                match call {
                    Call::Admit(input) => self.admit(input).await,
                    Call::Cancel {
                        task_id,
                        session_id,
                    } => self.cancel(&task_id, &session_id).await,
                }
            }
            Err(e) => Err(Failure::Infra(format!("session object call: {e}"))),
        };
        Ok(respond(outcome))
    }
}

impl SessionDo {
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

    async fn admit(&self, input: AdmitInput) -> Result<Response, Failure> {
        let state = self.load().await?;
        match admission::decide(&state, &input) {
            AdmitDecision::Write => self.write_run(state, &input, true).await,
            AdmitDecision::SameTask(admitted) => admitted_response(202, &admitted),
            AdmitDecision::Replay(r) => Ok(replayed(r.status, r.body)),
            AdmitDecision::Refuse(e) => Err(e.into()),
        }
    }

    /// Writes run + claim + key as one D1 batch, then remembers the claim. `heal` allows one retry
    /// after releasing a D1 claim whose holder is provably dead (terminal or missing row).
    async fn write_run(
        &self,
        mut state: SessionState,
        input: &AdmitInput,
        heal: bool,
    ) -> Result<Response, Failure> {
        let store = store(&self.env)?;
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
                            response_status: 202,
                            response_body: body.clone(),
                        }
                    }),
                });
                self.save(state).await?;
                Ok(json(202, body))
            }
            CreateRun::ForeignSession { owner } => {
                state.owner = Some(SessionOwner { id: owner });
                self.save(state).await?;
                Err(ApiError::not_found("session").into())
            }
            CreateRun::Held(holder) => self.adopt_d1_claim(state, input, holder, heal).await,
            CreateRun::TaskIdTaken(run) => task_id_taken(input, run),
            CreateRun::KeyBound(bound) => {
                let (_, fingerprint) = input
                    .idempotency
                    .as_ref()
                    .ok_or_else(|| Failure::Infra("key conflict without a key".into()))?;
                crate::http::runs::replay(&bound, fingerprint)
            }
        }
    }

    /// D1 holds a claim this object did not know: adopt a live holder (409), or release a dead one
    /// and try once more.
    async fn adopt_d1_claim(
        &self,
        mut state: SessionState,
        input: &AdmitInput,
        holder: Option<ClaimHolder>,
        heal: bool,
    ) -> Result<Response, Failure> {
        let Some(holder) = holder else {
            // Released between the batch and the read: the session is free now.
            return if heal {
                Box::pin(self.write_run(state, input, false)).await
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
                let refusal = admission::conflict_for(&input.session_id, &claim);
                state.owner = Some(SessionOwner {
                    id: input.owner.clone(),
                });
                state.claim = Some(claim);
                self.save(state).await?;
                Err(refusal.into())
            }
            _ if heal => {
                store(&self.env)?.release_claim_of(&holder.task_id).await?;
                Box::pin(self.write_run(state, input, false)).await
            }
            _ => Err(base_conflict(&input.session_id, Some(&holder.task_id))),
        }
    }

    async fn cancel(&self, task_id: &str, session_id: &str) -> Result<Response, Failure> {
        let outcome = store(&self.env)?
            .cancel(task_id, platform::now_ms())
            .await?;
        let mut state = self.load().await?;
        let holder_dead = outcome
            .run
            .as_ref()
            .is_none_or(|r| status::is_terminal(&r.status));
        if holder_dead && state.claim.as_ref().is_some_and(|c| c.task_id == task_id) {
            state.claim = None;
            self.save(state).await?;
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
fn task_id_taken(input: &AdmitInput, run: Option<RunRow>) -> Result<Response, Failure> {
    if let Some(run) = run {
        if input.client_task_id && run.owner == input.owner && run.session_id == input.session_id {
            let code = if status::is_active(&run.status) {
                202
            } else {
                200
            };
            return admitted_response(
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

fn admitted_response(code: u16, admitted: &Admitted) -> Result<Response, Failure> {
    let body = serde_json::to_string(admitted).map_err(|e| Failure::Infra(e.to_string()))?;
    Ok(json(code, body))
}

fn base_conflict(session_id: &str, holder: Option<&str>) -> Failure {
    Conflict::build(session_id, holder, &Holder::Unknown)
        .to_api_error()
        .into()
}

fn instance_id(env: &Env) -> String {
    env.var("INSTANCE_ID")
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "default".to_owned())
}
