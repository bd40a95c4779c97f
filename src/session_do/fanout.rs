//! Live fan-out inside a session's object: the SSE subscribers of each run and the callers waiting
//! for a run to end.
//!
//! A subscriber is registered before its replay reads D1; what it sends, and when, is decided by the
//! core's state machine (`sema_core::sse_subscriber`): live frames that arrive during the replay are
//! buffered and flushed above the last seq sent, so a stream never duplicates or skips an event.
//! Everything here runs on the object's single thread (Rc/RefCell, no locks); frames are published
//! while the object's lock is held, which is what keeps them in seq order.

use crate::d1;
use futures_channel::{
    mpsc::{unbounded, UnboundedReceiver, UnboundedSender},
    oneshot,
};
use futures_util::StreamExt;
use sema_core::{
    sse,
    sse_subscriber::{closing_done, Sink, Subscriber},
    store::{EventRow, RunReadStore},
    ApiError,
};
use std::{cell::RefCell, collections::HashMap, rc::Rc, time::Duration};
use worker::{Env, Headers, Response};

/// How many ledger events one replay read fetches.
const REPLAY_PAGE: i64 = 500;
/// Open SSE streams one run, and one session object, may have.
pub const STREAMS_PER_RUN: usize = 256;
pub const STREAMS_PER_OBJECT: usize = 1_024;

/// The channel to one client, as the core's [`Sink`].
struct Channel(UnboundedSender<Vec<u8>>);

impl Sink for Channel {
    fn send(&mut self, frame: &str) -> bool {
        self.0.unbounded_send(frame.as_bytes().to_vec()).is_ok()
    }
    fn close(&mut self) {
        self.0.close_channel();
    }
}

/// One open stream: its state and its channel.
pub struct Stream {
    state: Subscriber,
    channel: Channel,
}

impl Stream {
    /// Not ended, and its reader is still there.
    fn is_open(&self) -> bool {
        !self.state.is_closed() && !self.channel.0.is_closed()
    }
}

pub type Sub = Rc<RefCell<Stream>>;

/// The subscribers of each run, by task id, and the callers waiting for a run to end.
#[derive(Default)]
pub struct Hub {
    subs: RefCell<HashMap<String, Vec<Sub>>>,
    waiters: RefCell<HashMap<String, Vec<oneshot::Sender<()>>>>,
}

impl Hub {
    /// Registers a subscriber that has already seen everything up to `after`, unless the run or the
    /// object already has as many open streams as it serves.
    pub fn subscribe(
        &self,
        task_id: &str,
        after: i64,
    ) -> Result<(Sub, UnboundedReceiver<Vec<u8>>), ApiError> {
        let mut subs = self.subs.borrow_mut();
        // Forget every stream that ended or whose reader went away, of any run: the map holds open
        // streams only.
        subs.retain(|_, list| {
            list.retain(|s| s.borrow().is_open());
            !list.is_empty()
        });
        if subs.get(task_id).map_or(0, Vec::len) >= STREAMS_PER_RUN {
            return Err(ApiError::too_many_streams(STREAMS_PER_RUN, "this run"));
        }
        if subs.values().map(Vec::len).sum::<usize>() >= STREAMS_PER_OBJECT {
            return Err(ApiError::too_many_streams(
                STREAMS_PER_OBJECT,
                "this session",
            ));
        }
        let (tx, rx) = unbounded();
        let sub = Rc::new(RefCell::new(Stream {
            state: Subscriber::new(after),
            channel: Channel(tx),
        }));
        subs.entry(task_id.to_owned())
            .or_default()
            .push(sub.clone());
        Ok((sub, rx))
    }

    /// Resolves when a `done` frame is published for `task_id` (or the object goes away). A waiter
    /// whose caller stopped waiting (refused, replayed or timed out: its receiver dropped) is
    /// forgotten at the next registration, so none is left behind.
    pub fn wait_done(&self, task_id: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.borrow_mut();
        waiters.retain(|_, list| {
            list.retain(|w| !w.is_canceled());
            !list.is_empty()
        });
        waiters.entry(task_id.to_owned()).or_default().push(tx);
        rx
    }

    /// How many callers wait and streams are open (waiters already given up on not counted).
    pub fn counts(&self) -> (usize, usize) {
        let waiters = self
            .waiters
            .borrow()
            .values()
            .flatten()
            .filter(|w| !w.is_canceled())
            .count();
        let streams = self
            .subs
            .borrow()
            .values()
            .flatten()
            .filter(|s| s.borrow().is_open())
            .count();
        (waiters, streams)
    }

    /// Delivers a frame with `seq` to every subscriber of `task_id` (buffered for those replaying);
    /// a `done` frame also releases the run's waiters.
    pub fn publish(&self, task_id: &str, seq: i64, frame: &str, is_done: bool) {
        if is_done {
            for w in self
                .waiters
                .borrow_mut()
                .remove(task_id)
                .unwrap_or_default()
            {
                let _ = w.send(());
            }
        }
        let mut subs = self.subs.borrow_mut();
        let Some(list) = subs.get_mut(task_id) else {
            return;
        };
        for sub in list.iter() {
            let s = &mut *sub.borrow_mut();
            s.state.on_live(seq, frame, is_done, &mut s.channel);
        }
        list.retain(|s| !s.borrow().state.is_closed());
        if list.is_empty() {
            subs.remove(task_id);
        }
    }

    /// Publishes ledger events just appended.
    pub fn publish_events(&self, task_id: &str, events: &[EventRow]) {
        for e in events {
            let frame = sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref());
            self.publish(task_id, e.seq, &frame, false);
        }
    }
}

/// Turns a subscriber's receiver into a streaming SSE response, with `extra` headers.
pub fn sse_response(
    rx: UnboundedReceiver<Vec<u8>>,
    extra: &[(&str, &str)],
) -> Result<Response, worker::Error> {
    let headers = Headers::new();
    let _ = headers.set("content-type", "text/event-stream; charset=utf-8");
    let _ = headers.set("cache-control", "no-store");
    let _ = headers.set("x-accel-buffering", "no");
    for (k, v) in extra {
        let _ = headers.set(k, v);
    }
    Ok(Response::from_stream(rx.map(Ok::<Vec<u8>, worker::Error>))?
        .with_status(200)
        .with_headers(headers))
}

/// A one-frame stream that ends at once (e.g. the conflict `done` of a stream submit).
pub fn single_frame_response(frame: String) -> Result<Response, worker::Error> {
    let (tx, rx) = unbounded();
    let _ = tx.unbounded_send(frame.into_bytes());
    tx.close_channel();
    sse_response(rx, &[])
}

/// Writes `frame` (no seq) to a fresh subscriber before anything else (e.g. the `meta` frame).
pub fn prefix(sub: &Sub, frame: &str) {
    let s = &mut *sub.borrow_mut();
    s.state.on_unsequenced(frame, &mut s.channel);
}

/// Replays the ledger after the subscriber's anchor, then either ends the stream with the `done`
/// frame (run terminal) or switches the subscriber to live delivery. Runs as a task of its own.
pub async fn replay_then_tail(env: Env, task_id: String, sub: Sub) {
    if let Err(e) = replay(&env, &task_id, &sub).await {
        worker::console_error!("replay of {task_id} failed: {e}");
        let s = &mut *sub.borrow_mut();
        s.state.close(&mut s.channel);
    }
}

/// Sends one replayed ledger event; true when the stream ended (`done`, or closed).
fn replayed(sub: &Sub, e: &EventRow) -> bool {
    let s = &mut *sub.borrow_mut();
    s.state.on_replayed(e, &mut s.channel) || s.state.is_closed()
}

async fn replay(env: &Env, task_id: &str, sub: &Sub) -> Result<(), String> {
    // A replay is not part of any request's cost (it outlives the request that opened it).
    let store = d1::store(env, &Default::default()).map_err(|e| e.to_string())?;
    let mut cursor = sub.borrow().state.last_sent();
    // Catch up in pages; once the run is terminal, one more read completes the ledger for good.
    loop {
        let page = store
            .events_after(task_id, cursor, REPLAY_PAGE)
            .await
            .map_err(|e| e.to_string())?;
        for e in &page {
            if replayed(sub, e) {
                return Ok(());
            }
            cursor = e.seq;
        }
        if page.len() as i64 == REPLAY_PAGE {
            continue;
        }
        let run = store
            .get_run(task_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("run vanished")?;
        if !sema_core::status::is_terminal(&run.status) {
            break;
        }
        // A terminal run's ledger is final and a `done` event, if any, is its last event.
        let tail = store
            .events_after(task_id, cursor, (run.last_seq - cursor).max(1))
            .await
            .map_err(|e| e.to_string())?;
        for e in &tail {
            if replayed(sub, e) {
                return Ok(());
            }
        }
        // No `done` sent yet: re-read the last event only when the anchor was already past it.
        let last = if tail.is_empty() && run.last_seq > 0 {
            store
                .events_after(task_id, run.last_seq - 1, 1)
                .await
                .map_err(|e| e.to_string())?
        } else {
            Vec::new()
        };
        let (seq, frame) = closing_done(&run, last.first());
        let s = &mut *sub.borrow_mut();
        s.state.on_final_done(seq, &frame, &mut s.channel);
        return Ok(());
    }
    // Caught up with a live run: flush what arrived meanwhile, then deliver live.
    let s = &mut *sub.borrow_mut();
    s.state.on_caught_up(&mut s.channel);
    Ok(())
}

/// Writes a heartbeat frame every 15 s until the stream closes.
pub async fn heartbeats(sub: Sub) {
    loop {
        worker::Delay::from(Duration::from_millis(sse::HEARTBEAT_INTERVAL_MS)).await;
        let s = &mut *sub.borrow_mut();
        if !s.state.on_unsequenced(sse::HEARTBEAT_FRAME, &mut s.channel) {
            return;
        }
    }
}
