//! The object's alarm: while its session holds a claim, the object keeps an alarm at the claim's
//! recheck time (the holder's stale deadline, capped at one held-run cutoff; for a run still waiting
//! for a runner, at as long again as it has waited, up to four cutoffs: `Staleness::recheck_at`).
//! On the alarm it judges the holder from its row, as admission would: live → re-arm; stale → fail
//! it with `run.stalled` guarded on the row as read (the same outcome as the cron's reaper; a
//! heartbeat that lands first wins) and end it; dead (ended elsewhere) → end it. A run leased after
//! waiting longer than a cutoff is told here (`leased`), so its next look comes within one cutoff
//! again. So a silent runner is reaped on time between cron ticks; the cron is the backstop for
//! objects that were never told.

use super::SessionDo;
use crate::{cx::Cx, failure::Failure, object_storage::Durability, platform};
use sema_core::{
    liveness::{Verdict, STALLED_CODE, STALLED_ERROR},
    session_protocol::SessionReply,
    store::{GuardedFail, LedgerStore, RunReadStore, RunSnapshot},
};

impl SessionDo {
    /// Sets the alarm at the claim's recheck time (nothing to do without a claim), unless this
    /// instance already set one that fires no later: that one looks at the claim first (the alarm
    /// judges whatever claim is held when it fires, and re-arms at that claim's recheck time), so
    /// an admission into a session whose previous run's alarm is still pending writes no alarm.
    pub(super) async fn arm_alarm(&self) -> Result<(), Failure> {
        self.arm_alarm_with(Durability::Confirmed).await
    }

    /// [`SessionDo::arm_alarm`] right after D1 committed the claim it watches, unconfirmed (D1 is
    /// the record, as for [`SessionDo::save_after_d1`]): a crash that loses it loses the memory
    /// too, and the next instance confirms its claim against D1; the cron's reaper is the
    /// backstop meanwhile.
    pub(super) async fn arm_alarm_after_d1(&self) -> Result<(), Failure> {
        self.arm_alarm_with(Durability::Unconfirmed).await
    }

    async fn arm_alarm_with(&self, durability: Durability) -> Result<(), Failure> {
        let Some(at) = self.load().await?.claim.map(|c| c.recheck_at) else {
            return Ok(());
        };
        if self.alarm_at.get().is_some_and(|armed| armed <= at) {
            return Ok(());
        }
        self.set_alarm_in_with(at - platform::now_ms(), durability)
            .await
    }

    /// Sets the alarm `offset_ms` from now (at least 1 ms) and remembers when it is due. Every
    /// alarm the object sets goes through here, so while `alarm_at` names a time, an alarm is
    /// pending that is due no later than it.
    pub(super) async fn set_alarm_in(&self, offset_ms: i64) -> Result<(), Failure> {
        self.set_alarm_in_with(offset_ms, Durability::Confirmed)
            .await
    }

    async fn set_alarm_in_with(
        &self,
        offset_ms: i64,
        durability: Durability,
    ) -> Result<(), Failure> {
        let offset = offset_ms.max(1);
        // An absolute time, from the clock reading `alarm_at` remembers.
        let at = platform::now_ms() + offset;
        // Remembered only once set: after a failed write the pending alarm is the earlier one or,
        // had the write taken effect after all, this earlier one; either is due by `alarm_at`.
        self.storage.set_alarm(at, durability).await?;
        self.alarm_at.set(Some(at));
        Ok(())
    }

    /// `task_id` was leased after waiting longer than one cutoff (`SessionCall::Leased`): if it
    /// holds the claim, the alarm is due within one cutoff, so a runner silent from its lease on
    /// is reaped at its stale deadline, however far the queued run's looks had backed off. The
    /// claim's recheck time only moves earlier (a claim a fresh instance read back from storage
    /// keeps 0: its next 409 reads D1 first). The alarm is set unless one this instance set is due
    /// no later: a fresh instance knows nothing of the alarm pending from the one before, which may
    /// be a backed-off look. (Under the lock, after `settle`: no admission waits in the outbox for
    /// the alarm's retry, so an earlier alarm could only be owed to the run itself, which is live
    /// until a cutoff after this lease.)
    pub(super) async fn leased(&self, task_id: &str) -> Result<SessionReply, Failure> {
        let noted = SessionReply::Noted {
            claim_released: false,
        };
        let mut state = self.load().await?;
        let soon = platform::now_ms().saturating_add(self.staleness.held_ms);
        let Some(claim) = state.claim.as_mut().filter(|c| c.task_id == task_id) else {
            return Ok(noted);
        };
        if claim.recheck_at > soon {
            claim.recheck_at = soon;
            self.save(state).await?;
        }
        if self.alarm_at.get().is_none_or(|at| at > soon) {
            self.set_alarm_in(self.staleness.held_ms).await?;
        }
        Ok(noted)
    }

    /// The alarm fired: judge the claim's holder and act (under the lock, like any claim change).
    pub(super) async fn on_alarm(&self) -> Result<(), Failure> {
        // No alarm is pending once it fires (until one is set again below).
        self.alarm_at.set(None);
        let _serialised = self.lock.lock().await;
        let cx = Cx::new(self.env.clone());
        // An admission still in the outbox goes to D1 first (this alarm may be its retry).
        self.settle(&cx).await?;
        let Some(claim) = self.load().await?.claim else {
            return Ok(());
        };
        let store = cx.store()?;
        let row = store.get_run(&claim.task_id).await?;
        let now = platform::now_ms();
        let staleness = self.staleness;
        let session_id = row
            .as_ref()
            .map(|r| r.session_id.clone())
            .unwrap_or_default();
        let (verdict, gate_kind) = self
            .judge_holder(&cx, &session_id, row.as_ref(), now)
            .await?;
        match (verdict, row) {
            (Verdict::Live { deadline }, row) => {
                let mut state = self.load().await?;
                if let Some(c) = state.claim.as_mut() {
                    c.recheck_at = staleness.recheck_at(row.as_ref(), deadline, now);
                    c.gate_kind = gate_kind;
                }
                self.save(state).await?;
                self.arm_alarm().await?;
            }
            (Verdict::Stale { .. }, Some(row)) if sema_core::status::is_parked(&row.status) => {
                // A park nothing can resume: the next submission takes the session over (the
                // takeover writes the SPEC reason and admits in one batch). Until then, the 409
                // says its decision cannot be located. The cron's reaper expires such a run and
                // tells this object; in case that notice is lost, look at the row again one
                // held-run cutoff from now (the claim itself stays due, so a submission judges it).
                let mut state = self.load().await?;
                if let Some(c) = state.claim.as_mut() {
                    c.recheck_at = now;
                    c.gate_kind = None;
                }
                self.save(state).await?;
                self.set_alarm_in(staleness.held_ms.max(1_000)).await?;
            }
            (Verdict::Stale { .. }, Some(row)) => {
                let failed = store
                    .fail_if_unchanged(&GuardedFail {
                        snapshot: &RunSnapshot::of(&row),
                        error: STALLED_ERROR,
                        error_code: Some(STALLED_CODE),
                        now,
                    })
                    .await?;
                if failed {
                    cx.fail.hit("alarm.after_fail").await;
                    self.end_run(&cx, &claim.task_id).await?;
                    // A leader's child ended here: its leader need not wait for the cron.
                    crate::leader_driver::after_child_change(&cx, &session_id).await;
                } else {
                    // Heard from between the read and the write: look again at its new deadline.
                    self.set_alarm_in(1_000).await?;
                }
            }
            (Verdict::Dead | Verdict::Stale { .. }, _) => {
                self.end_run(&cx, &claim.task_id).await?;
            }
        }
        Ok(())
    }
}
