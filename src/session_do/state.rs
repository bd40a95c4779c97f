//! The session state the object remembers (owner and claim): memory first, then the object's own
//! storage. It is a cache of D1's truth: lost at any moment, re-learnt from D1's refusals; a claim
//! read back from storage is confirmed against D1 before a 409 is answered from it.

use super::SessionDo;
use crate::failure::Failure;
use sema_core::admission::SessionState;

const STATE_KEY: &str = "state";

impl SessionDo {
    /// The session state: memory, else storage, else empty.
    pub(super) async fn load(&self) -> Result<SessionState, Failure> {
        if let Some(s) = self.memory.borrow().as_ref() {
            return Ok(s.clone());
        }
        let stored: Option<String> = self.state.storage().get(STATE_KEY).await?;
        let mut state: SessionState = match stored {
            Some(text) => serde_json::from_str(&text)
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
        let text = serde_json::to_string(&state)?;
        *self.memory.borrow_mut() = Some(state);
        self.state.storage().put(STATE_KEY, text).await?;
        Ok(())
    }

    /// Drops the remembered claim if `task_id` holds it (its run just ended); whether it did.
    pub(super) async fn forget_claim_of(&self, task_id: &str) -> Result<bool, Failure> {
        let mut state = self.load().await?;
        if state.claim.as_ref().is_none_or(|c| c.task_id != task_id) {
            return Ok(false);
        }
        state.claim = None;
        self.save(state).await?;
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
