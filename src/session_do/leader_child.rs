//! Starting a leader's child in its own session's object: the child's compare-and-set and the run's
//! admission as one D1 batch (`LeaderDriveStore::start_child`), then the claim is remembered and the
//! alarm armed, as after any admission. The object serialises the start with every other claim
//! change of its session; the compare-and-set (and the bound it checks) serialises it with every
//! other driver of the same leader, so a losing driver writes nothing.

use super::SessionDo;
use crate::{config, cx::Cx, failure::Failure, platform};
use sema_core::{
    admission::{self, AdmitInput},
    session_protocol::SessionReply,
    store::{CreateRun, LeaderDriveStore, StartChild},
    wire::objective_preview,
};

impl SessionDo {
    pub(super) async fn start_child(
        &self,
        cx: &Cx,
        leader_run_id: &str,
        index: usize,
        input: &AdmitInput,
    ) -> Result<SessionReply, Failure> {
        let state = self.load().await?;
        let preview = objective_preview(&input.objective);
        let instance = config::settings(&self.env).instance_id.clone();
        let now = platform::now_ms();
        let body = admission::admitted_body(&input.task_id, &input.session_id);
        let run = input.new_run(&instance, &preview, now, &body);
        let (started, held) = match cx.store()?.start_child(leader_run_id, index, &run).await? {
            StartChild::Started => {
                self.remember_admitted(state, input, &body, now).await?;
                (true, false)
            }
            StartChild::Lost => (false, false),
            // The child's session is held by another run of the owner's: the child waits for it,
            // as any submission would (the next drive tries again).
            StartChild::Refused(refusal) => (false, matches!(*refusal, CreateRun::Held(_))),
        };
        Ok(SessionReply::ChildStart { started, held })
    }
}
