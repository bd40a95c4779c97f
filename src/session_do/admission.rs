//! Admission in the session object: decide from memory (`admission::decide`); write the run, its
//! claim and its key as one D1 batch; and when the session looks held — in memory past its recheck
//! time, or in D1 — judge the holder from its row (`liveness::judge`) and carry the verdict out:
//! live → 409 (remembered, no D1 round trip until the recheck time); dead (row missing or terminal) →
//! release the claim and write; stale (running, silent past its cutoff) → one D1 batch that fails
//! the old row with the SPEC reason *guarded on the row as read*, moves the claim and admits, so a
//! heartbeat landing first wins and the batch changes nothing. At most [`ATTEMPTS`] judgements, so a
//! session that keeps changing under us ends in a 409, never a loop; never a 409 for a free session.

use super::SessionDo;
use crate::{config, cx::Cx, failure::Failure, platform};
use sema_core::{
    admission::{
        self, Admission, AdmitDecision, AdmitInput, Claim, CommitPoint, PendingAdmission,
        Reconcile, SessionOwner, SessionState,
    },
    conflict::Conflict,
    dispatch::Ready,
    error::ErrorCode,
    liveness::{self, Verdict},
    run::RunRow,
    session_protocol::SessionReply,
    status,
    store::{AdmissionStore, CreateRun, GateStore, RunReadStore, RunSnapshot, Takeover},
    wire::objective_preview,
    ApiError,
};

/// Judgements one admission may make (SPEC-core §2.4: one judgement, one re-mint after a takeover,
/// one re-judgement after losing a race).
const ATTEMPTS: u32 = 3;

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
    /// Judges a claim's holder from its row as read at `now`: a parked holder by its gate (SPEC-core
    /// §2.4 rule 6), whose kind the claim remembers for the 409's materials; any other by
    /// [`liveness::judge`]. Shared by admission and the alarm, so both reach the same verdict.
    pub(super) async fn judge_holder(
        &self,
        cx: &Cx,
        session_id: &str,
        row: Option<&RunRow>,
        now: i64,
    ) -> Result<(Verdict, Option<String>), Failure> {
        let verdict = liveness::judge(row, now, &self.staleness);
        let Some(parked) = row.filter(|r| status::is_parked(&r.status)) else {
            return Ok((verdict, None));
        };
        let gate = cx
            .store()?
            .pending_gate(session_id)
            .await?
            .filter(|g| g.task_id == parked.task_id);
        let kind = gate.as_ref().map(|g| g.kind.clone());
        Ok((
            liveness::judge_parked(parked, gate.is_some(), now).unwrap_or(verdict),
            kind,
        ))
    }
}

/// What one write attempt sends to D1.
enum Write<'a> {
    /// A plain admission: the session looked free.
    Fresh,
    /// Fail the silent holder (guarded on this snapshot) with `reason`, then admit.
    TakeOver {
        snapshot: &'a RunSnapshot,
        reason: &'a str,
    },
}

impl SessionDo {
    /// A submission as every form (plain, streamed, waited) makes it: answered from the remembered
    /// state when that settles it (`AdmitDecision::needs_lock`), else admitted under the lock.
    ///
    /// Why the unlocked answer is safe: memory changes only under the lock, after D1, so it holds
    /// what the last finished call left, and the answer is ordered before the call in flight, whose
    /// caller has no answer yet. Only memory is read here, never storage (a storage read racing
    /// the lock holder's write could put an older state back into memory). A free session, a claim
    /// due for a look and a session never seen by this instance all take the lock.
    ///
    /// `point`: where a submission that finds the session free may commit (see
    /// [`SessionDo::commit_in_object`]); D1 for every form but the plain one.
    ///
    /// A submission whose key the Worker did not look up (`AdmitInput::key_unread`) and whose
    /// answer is a refusal (a 409, a 404) is answered by its key instead when D1 has the key
    /// bound: a bound key's answer comes before any other, as when the Worker looks it up first.
    /// A fresh admission needs no look (its own batch inserted the key, which a bound key would
    /// have refused whole), nor does an answer that already is the key's (the holder's own key
    /// from memory, the binding the batch ran into, their 422). The look is one D1 read, outside
    /// the lock. What the object did before it (remembering a live holder or a foreign owner,
    /// releasing a dead holder's claim) is true whatever the key says; an infrastructure failure
    /// before it is answered as such (a 5xx where the Worker's read would have replayed).
    pub(super) async fn submit(
        &self,
        cx: &Cx,
        input: &AdmitInput,
        point: CommitPoint,
    ) -> Result<Admission, Refusal> {
        let outcome = match self.answer_from_memory(input) {
            Some(answer) => answer,
            None => {
                let _serialised = self.lock.lock().await;
                self.settle(cx).await?;
                self.admit_at(cx, input, point).await
            }
        };
        // A 422 already is the key's own answer (from memory, or from the binding its batch ran
        // into): nothing more to read.
        let refused = match &outcome {
            Err(Refusal::Conflict(_)) => true,
            Err(Refusal::Failed(Failure::Api(e))) => e.code() != ErrorCode::KeyReused.code(),
            _ => false,
        };
        match (refused, &input.idempotency) {
            (true, Some((key, fingerprint))) if input.key_unread => {
                match cx.store()?.idempotency(key).await? {
                    Some(bound) => Ok(bound.answer(fingerprint)?.into()),
                    None => outcome,
                }
            }
            _ => outcome,
        }
    }

    fn answer_from_memory(&self, input: &AdmitInput) -> Option<Result<Admission, Refusal>> {
        let memory = self.memory.borrow();
        let decision = admission::decide(memory.as_ref()?, input, platform::now_ms());
        if decision.needs_lock() {
            return None;
        }
        Some(Self::answer(decision))
    }

    /// Carries out a decision that needs no write or judgement.
    fn answer(decision: AdmitDecision) -> Result<Admission, Refusal> {
        match decision {
            AdmitDecision::SameTask(admitted) => Ok(Admission::of(202, &admitted)),
            AdmitDecision::Replay(r) => Ok(r.into()),
            AdmitDecision::Conflict(c) => Err(Refusal::Conflict(c)),
            AdmitDecision::Refuse(e) => Err(e.into()),
            AdmitDecision::Write | AdmitDecision::Verify(_) => {
                Err(Failure::Infra("a claim write answered from memory".into()).into())
            }
        }
    }

    /// Admits `input` with its commit in D1; the caller holds the lock.
    pub(super) async fn admit(&self, cx: &Cx, input: &AdmitInput) -> Result<Admission, Refusal> {
        self.admit_at(cx, input, CommitPoint::D1).await
    }

    async fn admit_at(
        &self,
        cx: &Cx,
        input: &AdmitInput,
        point: CommitPoint,
    ) -> Result<Admission, Refusal> {
        let state = self.load().await?;
        match admission::decide(&state, input, platform::now_ms()) {
            AdmitDecision::Write if admission::commits_in_object(point, &state, input) => {
                Ok(self.commit_in_object(cx, state, input).await?)
            }
            AdmitDecision::Write => {
                self.write_run(cx, state, input, Write::Fresh, ATTEMPTS)
                    .await
            }
            AdmitDecision::Verify(claim) => {
                self.adjudicate(cx, state, input, claim, ATTEMPTS).await
            }
            answered => Self::answer(answered),
        }
    }

    /// Judges the holder named by `claim` from its row as it is now, and acts on the verdict.
    async fn adjudicate(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
        mut claim: Claim,
        attempts: u32,
    ) -> Result<Admission, Refusal> {
        let store = cx.store()?;
        let row = store.get_run(&claim.task_id).await?;
        let now = platform::now_ms();
        let staleness = self.staleness;
        let retry = attempts > 1;
        let (verdict, gate_kind) = self
            .judge_holder(cx, &input.session_id, row.as_ref(), now)
            .await?;
        claim.gate_kind = gate_kind;
        match (verdict, row) {
            (Verdict::Live { deadline }, Some(row)) => {
                claim.recheck_at = staleness.recheck_at(Some(&row), deadline, now);
                claim.status = row.status;
                let conflict = admission::conflict_for(&input.session_id, &claim);
                state.owner = Some(SessionOwner {
                    id: input.owner.clone(),
                });
                state.claim = Some(claim);
                self.save(state).await?;
                self.arm_alarm().await?;
                Err(Refusal::Conflict(conflict))
            }
            (Verdict::Dead, _) if retry => {
                store.release_claim_of(&claim.task_id).await?;
                state.claim = None;
                self.write_run(cx, state, input, Write::Fresh, attempts - 1)
                    .await
            }
            (Verdict::Stale { reason }, Some(row)) if retry => {
                let snapshot = RunSnapshot::of(&row);
                let write = Write::TakeOver {
                    snapshot: &snapshot,
                    reason: &reason,
                };
                state.claim = None;
                self.write_run(cx, state, input, write, attempts - 1).await
            }
            _ => Err(Refusal::Conflict(admission::conflict_for(
                &input.session_id,
                &claim,
            ))),
        }
    }

    /// Writes run + claim + key as one D1 batch (after failing a silent holder, for a takeover),
    /// then remembers the claim; a refusal on the claim is judged again while attempts remain.
    async fn write_run(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
        write: Write<'_>,
        attempts: u32,
    ) -> Result<Admission, Refusal> {
        let store = cx.store()?;
        let body = admission::admitted_body(&input.task_id, &input.session_id);
        let preview = objective_preview(&input.objective);
        let instance = config::settings(&self.env).instance_id.clone();
        let now = platform::now_ms();
        let new_run = input.new_run(&instance, &preview, now, &body);
        let takeover = matches!(write, Write::TakeOver { .. });
        if !takeover {
            cx.fail.hit("admit.before_d1").await;
        }
        let outcome = match write {
            Write::Fresh => store.create_run(&new_run).await?,
            Write::TakeOver { snapshot, reason } => {
                store
                    .take_over_and_create(&Takeover {
                        snapshot,
                        reason,
                        new: &new_run,
                    })
                    .await?
            }
        };
        match outcome {
            CreateRun::Created => {
                let (committed, saved) = if takeover {
                    ("takeover.after_d1", "takeover.after_save")
                } else {
                    ("admit.after_d1", "admit.after_save")
                };
                cx.fail.hit(committed).await;
                self.remember_admitted(state, input, &body, now).await?;
                cx.fail.hit(saved).await;
                Ok(Admission {
                    status: 202,
                    body,
                    task_id: input.task_id.clone(),
                    replayed: false,
                    flush: false,
                })
            }
            CreateRun::ForeignSession { owner } => {
                state.owner = Some(SessionOwner { id: owner });
                self.save(state).await?;
                Err(ApiError::not_found("session").into())
            }
            CreateRun::Held(holder) => {
                match admission::reconcile(input, holder.as_ref(), attempts > 1) {
                    Reconcile::Retry => {
                        Box::pin(self.write_run(cx, state, input, Write::Fresh, attempts - 1)).await
                    }
                    Reconcile::ReleaseAndRetry { task_id } => {
                        store.release_claim_of(&task_id).await?;
                        Box::pin(self.write_run(cx, state, input, Write::Fresh, attempts - 1)).await
                    }
                    // D1 names a non-terminal holder: judge it from its row before answering.
                    Reconcile::Adopt { claim } => {
                        Box::pin(self.adjudicate(cx, state, input, claim, attempts)).await
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

impl SessionDo {
    /// After D1 admitted `input` at `now`: remember its claim (first look at one queued/held cutoff),
    /// arm the alarm that watches it, and announce the run to its queue's dispatcher.
    pub(super) async fn remember_admitted(
        &self,
        mut state: SessionState,
        input: &AdmitInput,
        body: &str,
        now: i64,
    ) -> Result<(), Failure> {
        let staleness = self.staleness;
        let recheck = now + staleness.held_ms.min(staleness.queued_ms);
        state.owner = Some(SessionOwner {
            id: input.owner.clone(),
        });
        state.claim = Some(admission::claim_of(input, body, recheck));
        state.confirmed = true;
        self.save_after_d1(state).await?;
        self.arm_alarm_after_d1().await?;
        self.announce(input, now);
        Ok(())
    }

    /// The run is leasable: its queue's dispatcher hands it to a waiting runner, after this
    /// answer (a lost notice is announced again by the cron's sweep).
    fn announce(&self, input: &AdmitInput, since: i64) {
        let env = self.env.clone();
        let queue = input.queue.clone();
        let runs = vec![Ready {
            since,
            task_id: input.task_id.clone(),
        }];
        self.state.wait_until(async move {
            crate::dispatch_do::announce(&env, &queue, runs).await;
        });
    }
}

/// How soon the object's alarm writes an answered admission into D1 if nothing else has (the
/// Worker's flush lost, or the runtime restarted).
const FLUSH_RETRY_MS: i64 = 1_000;

impl SessionDo {
    /// Commits `input` in the object's storage alone and answers 202 (`CommitPoint::Object`,
    /// allowed by `admission::commits_in_object`): the claim and the outbox entry holding the
    /// run's D1 batch are one storage write, and the runtime's output gate holds the answer until
    /// that write is durable, so no 202 goes out for an admission a restart could forget. D1
    /// gets the run from [`SessionDo::settle`]: the Worker asks for it right after answering,
    /// every later call under the lock settles first, and the alarm set here (within
    /// [`FLUSH_RETRY_MS`]) retries until D1 has it. Until then the claim in memory answers
    /// conflicting submits as for any claim, and readers by id wait for the row
    /// (`sema_core::ids::outbox_retry_in`).
    ///
    /// Why D1 will take the batch: the state is confirmed (this instance saw D1 commit this
    /// owner's admission), the session is free in memory, and every claim of a session is taken
    /// through its object under this lock, so D1 holds no claim the object does not know of;
    /// the task id is fresh and the submit carries no key, so nothing outside the session can
    /// collide with it. Should D1 refuse anyway, the entry stays pending and is tried again.
    async fn commit_in_object(
        &self,
        cx: &Cx,
        mut state: SessionState,
        input: &AdmitInput,
    ) -> Result<Admission, Failure> {
        let body = admission::admitted_body(&input.task_id, &input.session_id);
        let now = platform::now_ms();
        let staleness = self.staleness;
        let recheck = now + staleness.held_ms.min(staleness.queued_ms);
        state.claim = Some(admission::claim_of(input, &body, recheck));
        state.pending = Some(PendingAdmission {
            input: input.clone(),
            body: body.clone(),
            at: now,
            instance_id: config::settings(&self.env).instance_id.clone(),
        });
        self.save(state).await?;
        if self
            .alarm_at
            .get()
            .is_none_or(|at| at > now + FLUSH_RETRY_MS)
        {
            self.set_alarm_in(FLUSH_RETRY_MS).await?;
        }
        cx.fail.hit("admit.after_commit").await;
        Ok(Admission {
            status: 202,
            body,
            task_id: input.task_id.clone(),
            replayed: false,
            flush: true,
        })
    }

    /// Writes the admission pending in the outbox, if any, into D1 (the same batch a D1-first
    /// admission writes, built from what was stored), then forgets the entry, re-arms the alarm
    /// at the claim's recheck time and announces the run to its queue. The caller holds the
    /// lock. A batch D1 refuses leaves the entry for the next try (an error: the caller's call
    /// fails rather than act on a session whose D1 rows lag the object).
    pub(super) async fn settle(&self, cx: &Cx) -> Result<(), Failure> {
        let Some(pending) = self.load().await?.pending else {
            return Ok(());
        };
        cx.fail.hit("flush.before_d1").await;
        let preview = objective_preview(&pending.input.objective);
        let run = pending
            .input
            .new_run(&pending.instance_id, &preview, pending.at, &pending.body);
        let outcome = cx.store()?.create_run(&run).await?;
        if !pending.written_by(&outcome) {
            return Err(Failure::Infra(format!(
                "D1 refused the admission of {} pending in the object: {outcome}",
                pending.input.task_id
            )));
        }
        cx.fail.hit("flush.after_d1").await;
        let mut state = self.load().await?;
        state.pending = None;
        state.confirmed = true;
        let recheck = state.claim.as_ref().map(|c| c.recheck_at);
        self.save(state).await?;
        if let Some(at) = recheck {
            self.set_alarm_in(at - platform::now_ms()).await?;
        }
        self.announce(&pending.input, pending.at);
        Ok(())
    }
}
