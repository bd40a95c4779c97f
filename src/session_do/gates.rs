//! Human gates in the session object: a park and a decision each run under the object's lock, so
//! the claim it remembers (status, gate kind: the parked 409 needs no D1 round trip) changes with
//! the D1 batch, and watchers get the park, `resumed` and `done` events live, in seq order.

use super::SessionDo;
use crate::{cx::Cx, failure::Failure, platform};
use sema_core::{
    admission::AdmitInput,
    gate::{self, Decided},
    session_protocol::{SessionReply, WireDecide, WirePark},
    sql::event_sql::EVENT_PAGE_MAX_BYTES,
    store::{EventRow, GateScope, GateStore, Park, Parked, Resolve, RunReadStore},
    ApiError,
};

/// How long the object trusts a parked claim without a deadline before it looks at D1 again.
const PARKED_RECHECK_MS: i64 = 3_600_000;

impl SessionDo {
    pub(super) async fn park(
        &self,
        cx: &Cx,
        task_id: &str,
        p: WirePark,
    ) -> Result<SessionReply, Failure> {
        // The token is a secret nobody needs back (decisions are addressed by session or task):
        // only its digest is stored, and it is dropped here.
        let token = platform::random::<32>()?;
        let checkpoint_id = gate::checkpoint_id(&token);
        let card: sema_core::json::Value = sema_core::json::parse(&p.card_json)?;
        let now = platform::now_ms();
        let expires_at = gate::expires_at(now, p.expires_in_sec, p.approval_timeout_sec);
        let event_json = gate::park_event_data(&p.kind, &card, expires_at);
        let parked = cx
            .store()?
            .park(&Park {
                task_id,
                lease_epoch: p.holder.lease_epoch,
                runner_id: &p.holder.runner_id,
                checkpoint_id: &checkpoint_id,
                gate_kind: &p.kind,
                status: p.status,
                card_json: &p.card_json,
                event_json: &event_json,
                expires_at,
                now,
            })
            .await?;
        let seq = match parked {
            Parked::Parked { seq } => seq,
            Parked::LeaseLost => return Err(ApiError::lease_lost().into()),
            Parked::GatePending(_) => return Err(ApiError::gate_pending().into()),
        };
        cx.fail.hit("park.after_d1").await;
        let status = p.status.as_str().to_owned();
        let mut state = self.load().await?;
        if let Some(claim) = state.claim.as_mut().filter(|c| c.task_id == task_id) {
            claim.status = status.clone();
            claim.gate_kind = Some(p.kind.clone());
            claim.recheck_at = expires_at.unwrap_or(now.saturating_add(PARKED_RECHECK_MS));
        }
        self.save(state).await?;
        self.hub.publish_events(
            task_id,
            &[EventRow {
                seq,
                kind: status.clone(),
                data: event_json,
                event_id: None,
                created_at: now,
            }],
        );
        Ok(SessionReply::Parked {
            task_id: task_id.to_owned(),
            status,
            seq,
        })
    }

    /// Resolves the pending gate (one winner among concurrent deciders: the store's compare-and-set
    /// decides, the lock only orders this object's callers). A resumed run is queued again; an
    /// ended one lets the claim go; after a wake, `wake` is admitted into the freed session.
    pub(super) async fn decide(
        &self,
        cx: &Cx,
        d: WireDecide,
        wake: Option<AdmitInput>,
    ) -> Result<SessionReply, Failure> {
        let store = cx.store()?;
        let scope = if d.path.by_session() {
            GateScope::Session(&d.scope_id)
        } else {
            GateScope::Task(&d.scope_id)
        };
        let now = platform::now_ms();
        let decided = store
            .resolve_gate(&Resolve {
                path: d.path,
                scope,
                decision: d.decision,
                reason: d.reason.as_deref(),
                resolution_id: &d.resolution_id,
                now,
            })
            .await?;
        if !matches!(decided, Decided::Refused(_)) {
            cx.fail.hit("decide.after_d1").await;
        }
        match decided {
            Decided::Resumed {
                session_id,
                task_id,
                kind,
                ..
            } => {
                let mut state = self.load().await?;
                if let Some(claim) = state.claim.as_mut().filter(|c| c.task_id == task_id) {
                    claim.status = "running".into();
                    claim.gate_kind = None;
                    claim.recheck_at = now.saturating_add(self.staleness.queued_ms);
                }
                self.save(state).await?;
                self.publish_resumed(cx, &task_id).await?;
                // Leasable again: its queue's dispatcher hands it to a waiting runner.
                let env = self.env.clone();
                let resumed = task_id.clone();
                self.state.wait_until(async move {
                    crate::dispatch_do::announce_run(&env, &resumed, now).await;
                });
                Ok(SessionReply::Decided {
                    task_id,
                    session_id,
                    kind,
                    decision: d.decision,
                    status: "running".into(),
                    woken: None,
                })
            }
            Decided::Ended {
                session_id,
                task_id,
                kind,
                status,
                queue,
                ..
            } => {
                self.forget_claim_of(&task_id).await?;
                // The same closing frame every other ending sends: the ledger's `done`, read only
                // for someone watching the run.
                if self.hub.watches(&task_id) {
                    let run = cx.store()?.get_run(&task_id).await?;
                    self.publish_closing_done(cx, run.as_ref()).await?;
                }
                let woken = match wake {
                    None => None,
                    Some(mut input) => Some(Box::new({
                        // A wake's run follows in the queue of the run it wakes from.
                        input.queue = queue;
                        match self.admit(cx, &input).await {
                            Ok(admission) => SessionReply::Admitted(admission),
                            Err(refusal) => refusal.into_reply(),
                        }
                    })),
                };
                Ok(SessionReply::Decided {
                    task_id,
                    session_id,
                    kind,
                    decision: d.decision,
                    status: status.as_str().into(),
                    woken,
                })
            }
            Decided::Refused(r) => Err(r.api_error(d.path).into()),
        }
    }

    /// Publishes the `resumed` event a decision just appended (the run's last ledger event).
    async fn publish_resumed(&self, cx: &Cx, task_id: &str) -> Result<(), Failure> {
        let store = cx.store()?;
        let Some(run) = store.get_run(task_id).await? else {
            return Ok(());
        };
        let last = store
            .events_after(task_id, run.last_seq - 1, 1, EVENT_PAGE_MAX_BYTES)
            .await?;
        self.hub.publish_events(task_id, &last);
        Ok(())
    }
}
