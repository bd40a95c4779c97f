//! Admission in the session object: decide from memory (`admission::decide`), else write the run,
//! its claim and its key as one D1 batch; when D1 refuses because it holds the claim, carry out the
//! core's `admission::reconcile` (adopt a live holder, release a provably dead one and retry once).

use super::SessionDo;
use crate::{cx::Cx, failure::Failure, platform};
use sema_core::{
    admission::{
        self, Admission, AdmitDecision, AdmitInput, Reconcile, SessionOwner, SessionState,
    },
    conflict::Conflict,
    session_protocol::SessionReply,
    sql::run_sql,
    store::{AdmissionStore, CreateRun},
    wire::objective_preview,
    ApiError,
};

/// Why a submission was not admitted: the session is held (the stream form turns the materials into
/// its `done` frame), or any other refusal or failure.
pub(super) enum Refusal {
    Conflict(Conflict),
    Failed(Failure),
}

impl Refusal {
    pub(super) fn into_reply(self) -> SessionReply {
        match self {
            Self::Conflict(c) => SessionReply::Conflict(c),
            Self::Failed(f) => f.into_reply(),
        }
    }
}

impl<E: Into<Failure>> From<E> for Refusal {
    fn from(e: E) -> Self {
        Self::Failed(e.into())
    }
}

impl SessionDo {
    pub(super) async fn admit(&self, cx: &Cx, input: &AdmitInput) -> Result<Admission, Refusal> {
        let state = self.load().await?;
        match admission::decide(&state, input) {
            AdmitDecision::Write => self.write_run(cx, state, input, true).await,
            AdmitDecision::SameTask(admitted) => Ok(Admission::of(202, &admitted)),
            AdmitDecision::Replay(r) => Ok(r.into()),
            AdmitDecision::Conflict(c) => Err(Refusal::Conflict(c)),
            AdmitDecision::Refuse(e) => Err(e.into()),
        }
    }

    /// Writes run + claim + key as one D1 batch, then remembers the claim. `retry_left` allows one
    /// more write after D1 showed the session free or its holder dead.
    async fn write_run(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
        retry_left: bool,
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
                state.claim = Some(admission::claim_of(input, &body));
                self.save(state).await?;
                Ok(Admission {
                    status: 202,
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
            CreateRun::Held(holder) => {
                match admission::reconcile(input, holder.as_ref(), retry_left) {
                    Reconcile::Retry => Box::pin(self.write_run(cx, state, input, false)).await,
                    Reconcile::ReleaseAndRetry { task_id } => {
                        store.release_claim_of(&task_id).await?;
                        Box::pin(self.write_run(cx, state, input, false)).await
                    }
                    Reconcile::Adopt { claim, conflict } => {
                        state.owner = Some(SessionOwner {
                            id: input.owner.clone(),
                        });
                        state.claim = Some(claim);
                        self.save(state).await?;
                        Err(Refusal::Conflict(conflict))
                    }
                    Reconcile::Foreign { owner } => {
                        state.owner = Some(SessionOwner { id: owner });
                        self.save(state).await?;
                        Err(ApiError::not_found("session").into())
                    }
                    Reconcile::Refuse(conflict) => Err(Refusal::Conflict(conflict)),
                }
            }
            CreateRun::TaskIdTaken(run) => Ok(admission::task_id_taken(input, run.as_ref())?),
            CreateRun::KeyBound(bound) => {
                let (_, fingerprint) = input
                    .idempotency
                    .as_ref()
                    .ok_or_else(|| Failure::Infra("key conflict without a key".into()))?;
                Ok(bound.answer(fingerprint)?.into())
            }
        }
    }
}

fn instance_id(env: &worker::Env) -> String {
    env.var("INSTANCE_ID")
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "default".to_owned())
}
