//! The session state the object remembers (owner and claim): memory first, then the object's own
//! storage. It is a cache of D1's truth: lost at any moment, re-learnt from D1's refusals; a claim
//! read back from storage is confirmed against D1 before a 409 is answered from it.

use super::SessionDo;
use crate::{failure::Failure, object_storage::Durability};
use sema_core::admission::SessionState;

const STATE_KEY: &str = "state";

impl SessionDo {
    /// The session state: memory, else storage, else empty.
    pub(super) async fn load(&self) -> Result<SessionState, Failure> {
        if let Some(s) = self.memory.borrow().as_ref() {
            return Ok(s.clone());
        }
        let stored = self.storage.get(STATE_KEY).await?;
        let mut state: SessionState = match stored {
            Some(text) => sema_core::json::from_text(&text)
                .map_err(|e| Failure::Infra(format!("stored session state: {e}")))?,
            None => SessionState::default(),
        };
        // A claim read back from storage may be behind D1: the runtime can stop between a D1
        // commit and the storage write that follows it (a finish, cancel or decision that released
        // the claim; found by tests/faults/kill.rs). So a fresh instance confirms it against the
        // holder's row before answering a 409 from it (one D1 read, once per instance).
        if let Some(claim) = state.claim.as_mut() {
            claim.recheck_at = 0;
        }
        *self.memory.borrow_mut() = Some(state.clone());
        Ok(state)
    }

    /// Persists `state`. Memory is updated first: if the storage write fails, this instance still
    /// knows the truth, and a later instance re-learns it from D1's refusal.
    pub(super) async fn save(&self, state: SessionState) -> Result<(), Failure> {
        self.save_with(state, Durability::Confirmed).await
    }

    /// Persists `state` right after D1 committed what it records (an admission), without holding
    /// the object's output for the write's durability: the runtime's output gate would otherwise
    /// keep the 202, and the announce to the queue's dispatcher, until the write is on disk. D1 is
    /// the record here; losing this write to a crash is the case [`SessionDo::load`] already
    /// covers (storage behind D1, confirmed against D1 before it answers a 409).
    pub(super) async fn save_after_d1(&self, state: SessionState) -> Result<(), Failure> {
        self.save_with(state, Durability::Unconfirmed).await
    }

    async fn save_with(&self, state: SessionState, durability: Durability) -> Result<(), Failure> {
        let text = sema_core::json::to_text(&state)?;
        *self.memory.borrow_mut() = Some(state);
        self.storage.put(STATE_KEY, &text, durability).await
    }

    /// Whether this session's claim, in memory or storage, names `task_id`: proof that the run is
    /// this session's (a task's session never changes, and only its own object ever claims for
    /// it), even when the claim is stale. Routing only: nothing is decided from it but where a
    /// runner's write goes, and a miss sends the write the long way, by the run's row.
    pub(super) async fn holds_claim_of(&self, task_id: &str) -> Result<bool, Failure> {
        Ok(self
            .load()
            .await?
            .claim
            .is_some_and(|c| c.task_id == task_id))
    }

    /// Drops the remembered claim if `task_id` holds it (its run just ended); whether it did.
    ///
    /// Every caller has had D1 release the claim first (a finish, a cancel, an ending decision, an
    /// end or a reap, each in its own batch), so D1 is the record and the write need not hold the
    /// object's answer or its `done` frames for its durability ([`SessionDo::save_after_d1`]). A
    /// write lost to a crash leaves storage behind D1 with the old claim, which a fresh instance
    /// confirms against the run's row before answering a 409 from it ([`SessionDo::load`]), as it
    /// must anyway for a crash between the D1 commit and this write.
    pub(super) async fn forget_claim_of(&self, task_id: &str) -> Result<bool, Failure> {
        let mut state = self.load().await?;
        if state.claim.as_ref().is_none_or(|c| c.task_id != task_id) {
            return Ok(false);
        }
        state.claim = None;
        self.save_after_d1(state).await?;
        Ok(true)
    }
}

impl SessionDo {
    /// Evidence of life for `task_id` seen by the object (an append): push its claim's recheck time
    /// out to one held-run cutoff from `now`. Memory only: losing it merely means an earlier look.
    pub(super) fn heard_from(&self, task_id: &str, now: i64, held_ms: i64) {
        if let Some(claim) = self
            .memory
            .borrow_mut()
            .as_mut()
            .and_then(|s| s.claim.as_mut())
            .filter(|c| c.task_id == task_id)
        {
            claim.recheck_at = claim.recheck_at.max(now.saturating_add(held_ms));
        }
    }
}
