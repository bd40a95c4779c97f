//! Writes to a run's ledger and claim that subscribers must see live: append, finish, steer, cancel.
//! Each runs under the object's lock; frames are published right after the D1 commit (seq order).

use super::SessionDo;
use crate::{cx::Cx, failure::Failure, platform};
use sema_core::{
    answer,
    runner_wire::{LeaseHolder, STEER_QUEUE_MAX, STEER_QUEUE_MAX_BYTES},
    session_protocol::{CancelReply, SessionReply, WireEvent, WireFinish},
    sql::{event_sql::NewEvent, DbError},
    sse_subscriber::Done,
    store::{
        AdmissionStore, Append, Appended, EventRow, Finish, LedgerStore, NewSteer, RunReadStore,
        Steered, StoreError,
    },
    ApiError,
};

impl SessionDo {
    pub(super) async fn append(
        &self,
        cx: &Cx,
        task_id: &str,
        holder: LeaseHolder,
        events: Vec<WireEvent>,
    ) -> Result<SessionReply, Failure> {
        let new: Vec<NewEvent<'_>> = events
            .iter()
            .map(|e| NewEvent {
                kind: &e.kind,
                data: &e.data,
                event_id: e.event_id.as_deref(),
            })
            .collect();
        let now = platform::now_ms();
        let appended = match cx
            .store()?
            .append_events(&Append {
                task_id,
                lease_epoch: holder.lease_epoch,
                runner_id: &holder.runner_id,
                events: &new,
                now,
            })
            .await
        {
            Err(StoreError::Db(DbError::Duplicate { .. })) => {
                return Err(ApiError::duplicate_event_id().into())
            }
            other => other?,
        };
        let Appended::Seqs(seqs, waiting) = appended else {
            return Err(ApiError::lease_lost().into());
        };
        cx.fail.hit("append.after_d1").await;
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
        self.heard_from(task_id, now, self.staleness.held_ms);
        Ok(SessionReply::Appended {
            seqs,
            cancel_requested: waiting.cancel_requested,
            steer_pending: waiting.steer_pending,
        })
    }

    pub(super) async fn finish(
        &self,
        cx: &Cx,
        task_id: &str,
        f: WireFinish,
    ) -> Result<SessionReply, Failure> {
        let store = cx.store()?;
        // The finished run comes back from the finish's own batch: its answer costs no read.
        let run = store
            .finish_run(&Finish {
                task_id,
                lease_epoch: f.holder.lease_epoch,
                runner_id: &f.holder.runner_id,
                status: f.status,
                result_json: f.result.as_deref(),
                error: f.error.as_deref(),
                error_code: f.error_code.as_deref(),
                done_json: &f.done_json,
                now: platform::now_ms(),
            })
            .await?
            .ok_or_else(ApiError::lease_lost)?;
        cx.fail.hit("finish.after_d1").await;
        self.forget_claim_of(task_id).await?;
        let done = Done {
            seq: run.last_seq,
            result: sema_core::json::parse(&f.done_json).unwrap_or_default(),
        };
        self.hub.publish_done(task_id, &done);
        Ok(SessionReply::Finished(run))
    }

    pub(super) async fn steer(
        &self,
        cx: &Cx,
        task_id: String,
        message: &str,
    ) -> Result<SessionReply, Failure> {
        let steered = cx
            .store()?
            .add_steer(&NewSteer {
                task_id: &task_id,
                message,
                now: platform::now_ms(),
                max_messages: STEER_QUEUE_MAX,
                max_bytes: STEER_QUEUE_MAX_BYTES,
            })
            .await?;
        match steered {
            Steered::Queued(seq) => Ok(SessionReply::SteerQueued { task_id, seq }),
            Steered::NotRunning => Err(ApiError::run_not_running().into()),
            Steered::QueueFull => {
                Err(ApiError::steer_queue_full(STEER_QUEUE_MAX, STEER_QUEUE_MAX_BYTES).into())
            }
        }
    }

    /// The reaper ended `task_id` or found it ended, and let its claim go in D1 in that same batch
    /// (a tick tells only of claims it released, and only for runs terminal or gone, which stay so).
    /// So nothing in D1 is left to write: forget the claim here, and read the run's row only when
    /// someone watches the run, whose streams and waiters end with its done frame. An object that
    /// holds no claim for it and no watcher answers without a D1 round trip.
    pub(super) async fn reaped(&self, cx: &Cx, task_id: &str) -> Result<bool, Failure> {
        if self.hub.watches(task_id) {
            return self.end_run(cx, task_id).await;
        }
        self.forget_claim_of(task_id).await
    }

    /// `task_id` ended (or lost its claim) outside this object: let its claim go here and in D1 if
    /// its row is terminal or gone, and end its open streams and waiters with `done`.
    pub(super) async fn end_run(&self, cx: &Cx, task_id: &str) -> Result<bool, Failure> {
        let store = cx.store()?;
        let run = store.get_run(task_id).await?;
        let effects = answer::end_effects(run.as_ref());
        let mut released = false;
        if effects.forget_claim {
            store.release_claim_of(task_id).await?;
            released = self.forget_claim_of(task_id).await?;
        }
        if effects.done.is_some() {
            self.publish_closing_done(cx, run.as_ref()).await?;
        }
        Ok(released)
    }

    pub(super) async fn cancel(
        &self,
        cx: &Cx,
        task_id: String,
        session_id: String,
    ) -> Result<SessionReply, Failure> {
        let outcome = cx.store()?.cancel(&task_id, platform::now_ms()).await?;
        cx.fail.hit("cancel.after_d1").await;
        let effects = answer::end_effects(outcome.run.as_ref());
        if effects.forget_claim {
            self.forget_claim_of(&task_id).await?;
        }
        if effects.done.is_some() {
            // Open streams and waiters of the run end with its done frame.
            self.publish_closing_done(cx, outcome.run.as_ref()).await?;
        }
        Ok(SessionReply::Cancelled(CancelReply {
            task_id,
            session_id,
            run: outcome.run,
            claim_released: outcome.claim_released,
        }))
    }

    /// Ends the run's open streams and waiters with its `done` frame: the ledger's own `done` when
    /// the writer that ended it appended one (a runner's finish, a decision, a reaper), else one
    /// built from the row at `last_seq + 1` — the frame a replay of the ledger ends with too.
    /// With nobody watching the run there is no frame to send, so the ledger is not read: a stream
    /// opened later replays the ledger from D1 and ends with the same frame. No await separates
    /// the check from that return, so no stream registers in between; when someone watches, a
    /// stream registered while the read is in flight gets the frame too, as before.
    pub(super) async fn publish_closing_done(
        &self,
        cx: &Cx,
        run: Option<&sema_core::run::RunRow>,
    ) -> Result<(), Failure> {
        let Some(run) = run.filter(|r| self.hub.watches(&r.task_id)) else {
            return Ok(());
        };
        let done = crate::ledger_read::closing_done(&cx.store()?, run).await?;
        self.hub.publish_done(&run.task_id, &done);
        Ok(())
    }
}
