//! Live event fan-out inside a session's Durable Object: the subscribers of each run's SSE stream.
//!
//! A subscriber is registered before its replay reads D1, and live frames that arrive while it
//! replays are buffered; when the replay catches up, buffered frames with a seq above the last one
//! sent are flushed. Every frame is sent at most once and in seq order, so a stream never duplicates
//! or skips an event. Everything here runs on the object's single thread (Rc/RefCell, no locks).

use crate::d1;
use futures_channel::{
    mpsc::{unbounded, UnboundedReceiver, UnboundedSender},
    oneshot,
};
use futures_util::StreamExt;
use sema_core::{
    sse,
    store::{EventRow, RunStore},
};
use std::{cell::RefCell, collections::HashMap, rc::Rc, time::Duration};
use worker::{Env, Headers, Response};

/// How many ledger events one replay read fetches.
const REPLAY_PAGE: i64 = 500;

/// One open stream.
pub struct Subscriber {
    tx: UnboundedSender<Vec<u8>>,
    /// Highest seq sent (ledger events and the done frame).
    last_sent: i64,
    replaying: bool,
    /// Live frames that arrived during replay: `(seq, frame, is_done)`.
    buffer: Vec<(i64, String, bool)>,
    closed: bool,
}

impl Subscriber {
    fn send(&mut self, seq: i64, frame: &str, is_done: bool) {
        if self.closed || seq <= self.last_sent {
            return;
        }
        self.last_sent = seq;
        if self.tx.unbounded_send(frame.as_bytes().to_vec()).is_err() {
            self.closed = true; // the client went away
        }
        if is_done {
            self.close();
        }
    }

    /// Sends the closing `done` frame even if its seq was already sent (a client that reconnects
    /// after the end gets the same done frame again, so every stream ends with one), then closes.
    fn finish_with(&mut self, seq: i64, frame: &str) {
        self.last_sent = self.last_sent.max(seq);
        self.raw(frame);
        self.close();
    }

    fn raw(&mut self, frame: &str) {
        if !self.closed && self.tx.unbounded_send(frame.as_bytes().to_vec()).is_err() {
            self.closed = true;
        }
    }

    fn close(&mut self) {
        self.closed = true;
        self.tx.close_channel();
    }
}

pub type Sub = Rc<RefCell<Subscriber>>;

/// The subscribers of each run, by task id, and the callers waiting for a run to end.
#[derive(Default)]
pub struct Hub {
    subs: RefCell<HashMap<String, Vec<Sub>>>,
    waiters: RefCell<HashMap<String, Vec<oneshot::Sender<()>>>>,
}

impl Hub {
    /// Registers a subscriber that has already seen everything up to `after`.
    pub fn subscribe(&self, task_id: &str, after: i64) -> (Sub, UnboundedReceiver<Vec<u8>>) {
        let (tx, rx) = unbounded();
        let sub = Rc::new(RefCell::new(Subscriber {
            tx,
            last_sent: after,
            replaying: true,
            buffer: Vec::new(),
            closed: false,
        }));
        let mut subs = self.subs.borrow_mut();
        let list = subs.entry(task_id.to_owned()).or_default();
        list.retain(|s| !s.borrow().closed);
        list.push(sub.clone());
        (sub, rx)
    }

    /// Resolves when a `done` frame is published for `task_id` (or the object goes away).
    pub fn wait_done(&self, task_id: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .borrow_mut()
            .entry(task_id.to_owned())
            .or_default()
            .push(tx);
        rx
    }

    /// Delivers a frame with `seq` to every subscriber of `task_id` (buffered for those replaying).
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
            let mut s = sub.borrow_mut();
            if s.replaying {
                s.buffer.push((seq, frame.to_owned(), is_done));
            } else {
                s.send(seq, frame, is_done);
            }
        }
        list.retain(|s| !s.borrow().closed);
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

/// SSE response headers.
pub fn sse_headers() -> Headers {
    let h = Headers::new();
    let _ = h.set("content-type", "text/event-stream; charset=utf-8");
    let _ = h.set("cache-control", "no-store");
    let _ = h.set("x-accel-buffering", "no");
    h
}

/// Turns a subscriber's receiver into a streaming SSE response, optionally opening with `prefix`.
pub fn sse_response(
    rx: UnboundedReceiver<Vec<u8>>,
    status: u16,
    extra: &[(&str, &str)],
) -> Result<Response, worker::Error> {
    let headers = sse_headers();
    for (k, v) in extra {
        let _ = headers.set(k, v);
    }
    Ok(Response::from_stream(rx.map(Ok::<Vec<u8>, worker::Error>))?
        .with_status(status)
        .with_headers(headers))
}

/// Replays the ledger after the subscriber's anchor, then either ends the stream with the `done`
/// frame (run terminal) or switches the subscriber to live delivery. Runs as a task of its own.
pub async fn replay_then_tail(env: Env, task_id: String, sub: Sub) {
    if let Err(e) = replay(&env, &task_id, &sub).await {
        worker::console_error!("replay of {task_id} failed: {e}");
        sub.borrow_mut().close();
    }
}

async fn replay(env: &Env, task_id: &str, sub: &Sub) -> Result<(), String> {
    // A replay is not part of any request's cost (it outlives the request that opened it).
    let store = d1::store(env, &Default::default()).map_err(|e| e.to_string())?;
    let mut cursor = sub.borrow().last_sent;
    // Catch up in pages; once the run is terminal, one more read completes the ledger for good.
    loop {
        let page = store
            .events_after(task_id, cursor, REPLAY_PAGE)
            .await
            .map_err(|e| e.to_string())?;
        let full = page.len() as i64 == REPLAY_PAGE;
        for e in &page {
            if send_ledger_event(sub, e) {
                return Ok(());
            }
            cursor = e.seq;
        }
        if full {
            continue;
        }
        let run = store
            .get_run(task_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("run vanished")?;
        if sema_core::status::is_terminal(&run.status) {
            // A terminal run's ledger is final and a `done` event, if any, is its last event.
            let tail = store
                .events_after(task_id, cursor, (run.last_seq - cursor).max(1))
                .await
                .map_err(|e| e.to_string())?;
            for e in &tail {
                if send_ledger_event(sub, e) {
                    return Ok(());
                }
            }
            // No `done` sent yet. The closing frame is the ledger's `done` event if the runner
            // finished the run (only possible when the anchor was already past it, so re-read that
            // one event), else (cancelled, reaped) a done built from the row at last_seq + 1. Either
            // way it has the same id on every reconnect.
            let last = if tail.is_empty() && run.last_seq > 0 {
                store
                    .events_after(task_id, run.last_seq - 1, 1)
                    .await
                    .map_err(|e| e.to_string())?
            } else {
                Vec::new()
            };
            let (seq, frame) = match last.first().filter(|e| e.kind == "done") {
                Some(e) => {
                    let result: serde_json::Value =
                        serde_json::from_str(&e.data).unwrap_or_default();
                    (e.seq, sse::done_frame(e.seq, &result))
                }
                None => (
                    run.last_seq + 1,
                    sse::done_frame(run.last_seq + 1, &sse::done_result(&run)),
                ),
            };
            sub.borrow_mut().finish_with(seq, &frame);
            return Ok(());
        }
        break;
    }
    // Caught up with a live run: flush what arrived meanwhile, then deliver live.
    let mut s = sub.borrow_mut();
    let buffered = std::mem::take(&mut s.buffer);
    s.replaying = false;
    for (seq, frame, is_done) in buffered {
        s.send(seq, &frame, is_done);
    }
    Ok(())
}

/// Sends one ledger event; true when it was the `done` event (the stream is then closed).
fn send_ledger_event(sub: &Sub, e: &EventRow) -> bool {
    let mut s = sub.borrow_mut();
    if e.kind == "done" {
        let result: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_default();
        s.send(e.seq, &sse::done_frame(e.seq, &result), true);
        true
    } else {
        s.send(
            e.seq,
            &sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref()),
            false,
        );
        false
    }
}

/// Writes a heartbeat frame every 15 s until the stream closes.
pub async fn heartbeats(sub: Sub) {
    loop {
        worker::Delay::from(Duration::from_millis(sse::HEARTBEAT_INTERVAL_MS)).await;
        let mut s = sub.borrow_mut();
        if s.closed {
            return;
        }
        s.raw(sse::HEARTBEAT_FRAME);
    }
}

/// Writes `frame` (no seq) to a fresh subscriber before anything else (e.g. the `meta` frame).
pub fn prefix(sub: &Sub, frame: &str) {
    sub.borrow_mut().raw(frame);
}

/// A one-frame stream that ends at once (e.g. the conflict `done` of a stream submit).
pub fn single_frame_response(frame: String) -> Result<Response, worker::Error> {
    let (tx, rx) = unbounded();
    let _ = tx.unbounded_send(frame.into_bytes());
    tx.close_channel();
    sse_response(rx, 200, &[])
}
