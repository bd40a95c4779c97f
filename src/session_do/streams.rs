//! Answers that outlive the call's lock: SSE streams (replay, then the live tail) and waits for a
//! run's end. Neither holds the object's lock while it streams or waits.

use super::{admission::Refusal, fanout, Outcome, SessionDo};
use crate::{cx::Cx, failure::Failure};
use futures_channel::oneshot;
use sema_core::{
    admission::{Admission, AdmitInput},
    session_protocol::SessionReply,
    sse,
    store::RunReadStore,
    ApiError,
};

impl SessionDo {
    /// `Subscribe`: an SSE stream of `task_id` after seq `after`, opening with `meta` if asked.
    pub(super) async fn subscribe_call(
        &self,
        cx: &Cx,
        task_id: &str,
        after: i64,
        meta: bool,
    ) -> Result<Outcome, Failure> {
        let first = if meta {
            let run = cx
                .store()?
                .get_run(task_id)
                .await?
                .ok_or_else(|| ApiError::not_found("run"))?;
            Some(sse::meta_frame(task_id, &run.session_id))
        } else {
            None
        };
        Ok(Outcome::Stream(self.subscribe(task_id, after, first)?))
    }

    /// Opens an SSE stream of `task_id` after seq `after`, optionally opening with `meta` (and then
    /// naming the task in the `x-task-id` header).
    fn subscribe(
        &self,
        task_id: &str,
        after: i64,
        meta: Option<String>,
    ) -> Result<worker::Response, Failure> {
        let (sub, rx) = self.hub.subscribe(task_id, after)?;
        let mut extra = vec![];
        if let Some(frame) = &meta {
            fanout::prefix(&sub, frame);
            extra.push(("x-task-id", task_id));
        }
        wasm_bindgen_futures::spawn_local(fanout::replay_then_tail(
            self.env.clone(),
            task_id.to_owned(),
            sub.clone(),
        ));
        wasm_bindgen_futures::spawn_local(fanout::heartbeats(sub));
        Ok(fanout::sse_response(rx, &extra)?)
    }

    /// The stream form of a submit: the admitted (or replayed, or attached) run streamed from its
    /// first event after a `meta` frame; a conflict is the stream's one `done` frame.
    pub(super) fn stream_admission(
        &self,
        input: &AdmitInput,
        admitted: Result<Admission, Refusal>,
    ) -> Result<Outcome, Failure> {
        match admitted {
            Ok(a) => {
                let meta = sse::meta_frame(&a.task_id, &input.session_id);
                Ok(Outcome::Stream(self.subscribe(
                    &a.task_id,
                    0,
                    Some(meta),
                )?))
            }
            Err(Refusal::Conflict(c)) => {
                let frame = sse::refusal_done_frame(&c.done_result());
                Ok(Outcome::Stream(fanout::single_frame_response(frame)?))
            }
            Err(Refusal::Failed(f)) => Ok(Outcome::Reply(f.into_reply())),
        }
    }

    /// Waits up to `wait_ms` for `task_id` to end (`done` resolves when its done frame is published);
    /// replies with the run as it is then.
    pub(super) async fn wait_for(
        &self,
        cx: &Cx,
        task_id: &str,
        done: oneshot::Receiver<()>,
        wait_ms: u64,
    ) -> Result<SessionReply, Failure> {
        let store = cx.store()?;
        let read = || async {
            store
                .get_run(task_id)
                .await?
                .ok_or_else(|| Failure::Infra("admitted run vanished".into()))
        };
        let current = read().await?;
        let run = if sema_core::status::is_terminal(&current.status) {
            current
        } else {
            let timeout = worker::Delay::from(std::time::Duration::from_millis(wait_ms));
            futures_util::future::select(done, Box::pin(timeout)).await;
            read().await?
        };
        Ok(SessionReply::Waited(run))
    }
}
