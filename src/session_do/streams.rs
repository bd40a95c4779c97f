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
    /// `Subscribe`: an SSE stream of `task_id` after seq `after`; with `replay`, the stream of a
    /// keyed duplicate ([`Self::keyed_stream`]).
    pub(super) async fn subscribe_call(
        &self,
        cx: &Cx,
        task_id: &str,
        after: i64,
        replay: bool,
    ) -> Result<Outcome, Failure> {
        if replay {
            return self.keyed_stream(cx, task_id).await;
        }
        Ok(Outcome::Stream(
            self.subscribe(task_id, after, None, false)?,
        ))
    }

    /// The stream form of a submit whose `Idempotency-Key` is bound to `task_id` (SPEC-api §3.5,
    /// §4); the run executes once whatever the number of duplicates.
    /// - The run has ended (an idempotent replay): header `x-task-id`, a `meta` frame, the run's
    ///   `done` frame with `replay: true` (same id and result as its live one), then the end.
    /// - It is in flight (a duplicate joins it): no `x-task-id`, no `meta`, no ledger frames;
    ///   heartbeats every 15 s, then its `done` with `replay: true` once it ends. The joiner registers
    ///   before its replay reads D1 from the `last_seq` read here, so an end in between is not missed.
    async fn keyed_stream(&self, cx: &Cx, task_id: &str) -> Result<Outcome, Failure> {
        let store = cx.store()?;
        let run = store
            .get_run(task_id)
            .await?
            .ok_or_else(|| ApiError::not_found("run"))?;
        if !sema_core::status::is_terminal(&run.status) {
            return Ok(Outcome::Stream(self.subscribe(
                task_id,
                run.last_seq,
                None,
                true,
            )?));
        }
        let done = crate::ledger_read::closing_done(&store, &run).await?;
        let frames = [sse::meta_frame(task_id, &run.session_id), done.frame(true)];
        Ok(Outcome::Stream(fanout::finished_response(
            &frames,
            &[("x-task-id", task_id)],
        )?))
    }

    /// Opens an SSE stream of `task_id` after seq `after`, optionally opening with `meta` (and then
    /// naming the task in the `x-task-id` header); a `joining` stream gets only the run's `done`.
    fn subscribe(
        &self,
        task_id: &str,
        after: i64,
        meta: Option<String>,
        joining: bool,
    ) -> Result<worker::Response, Failure> {
        let (sub, rx) = self.hub.subscribe(task_id, after, joining)?;
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

    /// The stream form of a submit: the admitted (or attached) run streamed from its first event
    /// after a `meta` frame; a key found bound meanwhile (a concurrent duplicate that passed the
    /// Worker's check) is a keyed stream; a conflict is the stream's one `done` frame (no id, no
    /// `replay`).
    pub(super) async fn stream_admission(
        &self,
        cx: &Cx,
        input: &AdmitInput,
        admitted: Result<Admission, Refusal>,
    ) -> Result<Outcome, Failure> {
        match admitted {
            Ok(a) if a.replayed => self.keyed_stream(cx, &a.task_id).await,
            Ok(a) => {
                let meta = sse::meta_frame(&a.task_id, &input.session_id);
                Ok(Outcome::Stream(self.subscribe(
                    &a.task_id,
                    0,
                    Some(meta),
                    false,
                )?))
            }
            Err(Refusal::Conflict(c)) => {
                let frame = sse::refusal_done_frame(&c.done_result());
                Ok(Outcome::Stream(fanout::finished_response(&[frame], &[])?))
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
