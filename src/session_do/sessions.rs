//! Deleting the session: decided here, under the object's lock, so no admission of this session can
//! slip in between the check and the delete (admissions take the same lock); the D1 batch is itself
//! guarded (`sql::session_sql::delete_session`), so a claim the object does not remember still
//! refuses it. Once D1 committed, the object forgets the session: memory, storage and alarm, so the
//! next submit into this id starts from nothing.

use super::SessionDo;
use crate::{cx::Cx, failure::Failure, platform};
use sema_core::{
    admission::SessionState,
    conflict::{Conflict, Holder},
    leader::leader_of_session,
    session_protocol::SessionReply,
    status,
    store::{GateStore, SessionDelete, SessionDeleted, SessionStore},
    ApiError,
};

impl SessionDo {
    pub(super) async fn delete_session(
        &self,
        cx: &Cx,
        session_id: String,
        owner: Option<String>,
        marker: &str,
    ) -> Result<SessionReply, Failure> {
        let store = cx.store()?;
        let outcome = store
            .delete_session(&SessionDelete {
                session_id: &session_id,
                owner: owner.as_deref(),
                marker,
                leader_run_id: leader_of_session(&session_id).unwrap_or(""),
                now: platform::now_ms(),
            })
            .await?;
        match outcome {
            SessionDeleted::Deleted { runs } => {
                *self.memory.borrow_mut() = Some(SessionState::default());
                *self.tickets.borrow_mut() = None;
                // D1 has committed the delete: a failure to clear the object's own storage is
                // logged, not answered as a failed delete (what is left names only deleted runs:
                // a claim whose run is gone is let go by the next look, tickets open nothing).
                let storage = self.state.storage();
                // Forgotten before the delete: should it fail, the next claim sets one again.
                self.alarm_at.set(None);
                if let Err(e) = storage.delete_alarm().await {
                    worker::console_error!("session delete: clearing the alarm: {e}");
                }
                if let Err(e) = storage.delete_all().await {
                    worker::console_error!("session delete: clearing storage: {e}");
                }
                Ok(SessionReply::SessionDeleted {
                    session_id,
                    runs_deleted: runs,
                })
            }
            SessionDeleted::Active { task_id, status } => {
                // The 409 a submit would get, so the caller learns how to free the session.
                let pending_gate_kind = if status::is_parked(&status) {
                    store
                        .pending_gate(&session_id)
                        .await?
                        .filter(|g| g.task_id == task_id)
                        .map(|g| g.kind)
                } else {
                    None
                };
                let task = Some(task_id.as_str()).filter(|t| !t.is_empty());
                Ok(SessionReply::Conflict(Conflict::build(
                    &session_id,
                    task,
                    &Holder::Row {
                        status,
                        pending_gate_kind,
                    },
                )))
            }
            SessionDeleted::LeaderRunning { leader_run_id } => {
                Err(ApiError::session_leader_running(&leader_run_id).into())
            }
            SessionDeleted::Missing => Err(ApiError::not_found("session").into()),
        }
    }
}
