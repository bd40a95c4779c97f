//! Live fan-out inside a session's object: the SSE subscribers of each run and the callers waiting
//! for a run to end.
//!
//! A subscriber is registered before its replay reads D1; what it sends, and when, is decided by the
//! core's state machine (`sema_core::sse_subscriber`): live frames that arrive during the replay are
//! buffered and flushed above the last seq sent, so a stream never duplicates or skips an event.
//! Everything here runs on the object's single thread (Rc/RefCell, no locks); frames are published
//! while the object's lock is held, which is what keeps them in seq order.
//!
//! Memory is bounded per stream: each client's queue holds at most [`QUEUE_MAX_BYTES`]; a live frame
//! that would overflow it ends the stream (a reader too slow to keep up resumes by `Last-Event-ID`,
//! losing nothing), and the replay waits for the reader to drain below [`QUEUE_LOW_BYTES`] before
//! each ledger frame, so a replay is paced by its reader, not pushed as fast as D1 answers.

use futures_channel::oneshot;
use sema_core::{
    sql::event_sql::EVENT_PAGE_MAX_BYTES,
    sse,
    sse_subscriber::{closing_done, Done, Sink, Subscriber},
    store::{EventRow, RunReadStore},
    text_map::TextMap,
    ApiError,
};
use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
    time::Duration,
};
use worker::{Env, Headers, Response};

/// How many ledger events one replay read fetches (and at most `EVENT_PAGE_MAX_BYTES` of data).
const REPLAY_PAGE: i64 = 500;
/// Open SSE streams one run, and one session object, may have.
pub const STREAMS_PER_RUN: usize = 256;
pub const STREAMS_PER_OBJECT: usize = 1_024;

/// Bytes one client's queue may hold; a frame that would overflow it ends the stream.
const QUEUE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The replay sends its next ledger frame only once the queue is below this.
const QUEUE_LOW_BYTES: usize = 1024 * 1024;

/// One client's frames waiting to be read.
#[derive(Default)]
struct Queue {
    frames: VecDeque<Vec<u8>>,
    bytes: usize,
    /// No more frames will come (the stream ended, or its reader went away).
    closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

type Shared = Rc<RefCell<Queue>>;

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

/// The writing end, as the core's [`Sink`], with the count of streams its object cut off.
struct Channel(Shared, Rc<Cell<u64>>);

impl Sink for Channel {
    fn send(&mut self, frame: &str) -> bool {
        let q = &mut *self.0.borrow_mut();
        if q.closed {
            return false;
        }
        if q.bytes + frame.len() > QUEUE_MAX_BYTES {
            // The reader is 4 MiB behind: the subscriber ends the stream on this refusal.
            self.1.set(self.1.get() + 1);
            return false;
        }
        q.bytes += frame.len();
        q.frames.push_back(frame.as_bytes().to_vec());
        wake(&mut q.reader);
        true
    }
    fn cut_off(&mut self) {
        self.1.set(self.1.get() + 1);
    }
    fn close(&mut self) {
        let q = &mut *self.0.borrow_mut();
        q.closed = true;
        wake(&mut q.reader);
        wake(&mut q.writer);
    }
}

/// The reading end: the response body. Dropped when the client goes away.
struct Reader(Shared);

impl futures_util::Stream for Reader {
    type Item = Result<Vec<u8>, worker::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let q = &mut *self.0.borrow_mut();
        if let Some(frame) = q.frames.pop_front() {
            q.bytes -= frame.len();
            if q.bytes < QUEUE_LOW_BYTES {
                wake(&mut q.writer);
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        if q.closed {
            return Poll::Ready(None);
        }
        q.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let q = &mut *self.0.borrow_mut();
        q.closed = true;
        q.frames.clear();
        q.bytes = 0;
        wake(&mut q.writer);
    }
}

/// A new client queue: its writing and reading ends; `cut` counts it if it overflows.
fn queue(cut: Rc<Cell<u64>>) -> (Channel, Reader) {
    let shared: Shared = Rc::default();
    (Channel(shared.clone(), cut), Reader(shared))
}

/// Resolves once the queue of `sub` has room for the replay's next frame (or it closed).
async fn room(sub: &Sub) {
    let shared = sub.borrow().channel.0.clone();
    futures_util::future::poll_fn(|cx| {
        let q = &mut *shared.borrow_mut();
        if q.closed || q.bytes < QUEUE_LOW_BYTES {
            Poll::Ready(())
        } else {
            q.writer = Some(cx.waker().clone());
            Poll::Pending
        }
    })
    .await
}

/// One open stream: its state and its channel.
pub struct Stream {
    state: Subscriber,
    channel: Channel,
}

impl Stream {
    /// Not ended, and its reader is still there.
    fn is_open(&self) -> bool {
        !self.state.is_closed() && !self.channel.0.borrow().closed
    }
}

pub type Sub = Rc<RefCell<Stream>>;

/// The subscribers of each run, by task id, and the callers waiting for a run to end.
#[derive(Default)]
pub struct Hub {
    subs: RefCell<TextMap<Vec<Sub>>>,
    waiters: RefCell<TextMap<Vec<oneshot::Sender<()>>>>,
    /// Streams ended because their reader fell too far behind (a live frame found its queue at
    /// [`QUEUE_MAX_BYTES`], or its replay held back more than the core's replay bound), in this
    /// instance's life.
    cut_off: Rc<Cell<u64>>,
}

impl Hub {
    /// Registers a subscriber that has already seen everything up to `after` (a `joining` one: a
    /// keyed duplicate waiting for the run's `done` only), unless the run or the object already has
    /// as many open streams as it serves (a joiner counts as a stream).
    pub fn subscribe(
        &self,
        task_id: &str,
        after: i64,
        joining: bool,
    ) -> Result<
        (
            Sub,
            impl futures_util::Stream<Item = Result<Vec<u8>, worker::Error>>,
        ),
        ApiError,
    > {
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
        let (channel, rx) = queue(self.cut_off.clone());
        let sub = Rc::new(RefCell::new(Stream {
            state: if joining {
                Subscriber::joining(after)
            } else {
                Subscriber::new(after)
            },
            channel,
        }));
        subs.get_or_insert_with(task_id, Vec::new).push(sub.clone());
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
        waiters.get_or_insert_with(task_id, Vec::new).push(tx);
        rx
    }

    /// Whether anyone waits for `task_id` to end or has a stream of it open.
    pub fn watches(&self, task_id: &str) -> bool {
        let waits = self
            .waiters
            .borrow()
            .get(task_id)
            .is_some_and(|l| l.iter().any(|w| !w.is_canceled()));
        waits
            || self
                .subs
                .borrow()
                .get(task_id)
                .is_some_and(|l| l.iter().any(|s| s.borrow().is_open()))
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

    /// How many streams this instance ended because their reader fell too far behind.
    pub fn cut_off(&self) -> u64 {
        self.cut_off.get()
    }

    /// Hands `deliver` every open subscriber of `task_id`, then forgets those that closed.
    fn each_subscriber(&self, task_id: &str, mut deliver: impl FnMut(&mut Stream)) {
        let mut subs = self.subs.borrow_mut();
        let Some(list) = subs.get_mut(task_id) else {
            return;
        };
        for sub in list.iter() {
            deliver(&mut sub.borrow_mut());
        }
        list.retain(|s| !s.borrow().state.is_closed());
        if list.is_empty() {
            subs.remove(task_id);
        }
    }

    /// Publishes ledger events just appended (buffered for subscribers still replaying). Each frame
    /// is written once and shared by every subscriber.
    pub fn publish_events(&self, task_id: &str, events: &[EventRow]) {
        for e in events {
            let frame = sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref());
            self.each_subscriber(task_id, |s| s.state.on_live(e.seq, &frame, &mut s.channel));
        }
    }

    /// Publishes the run's `done` (each subscriber writes it plainly, or marked `replay` for a
    /// joiner) and releases the run's waiters.
    pub fn publish_done(&self, task_id: &str, done: &Done) {
        for w in self
            .waiters
            .borrow_mut()
            .remove(task_id)
            .unwrap_or_default()
        {
            let _ = w.send(());
        }
        self.each_subscriber(task_id, |s| s.state.on_live_done(done, &mut s.channel));
    }
}

/// Turns a subscriber's reading end into a streaming SSE response, with `extra` headers.
pub fn sse_response(
    rx: impl futures_util::Stream<Item = Result<Vec<u8>, worker::Error>> + 'static,
    extra: &[(&str, &str)],
) -> Result<Response, worker::Error> {
    let headers = Headers::new();
    let _ = headers.set("content-type", "text/event-stream; charset=utf-8");
    let _ = headers.set("cache-control", "no-store");
    let _ = headers.set("x-accel-buffering", "no");
    for (k, v) in extra {
        let _ = headers.set(k, v);
    }
    Ok(Response::from_stream(rx)?
        .with_status(200)
        .with_headers(headers))
}

/// A stream of `frames` that ends at once (e.g. the conflict `done` of a stream submit), with
/// `extra` headers.
pub fn finished_response(
    frames: &[String],
    extra: &[(&str, &str)],
) -> Result<Response, worker::Error> {
    let (mut tx, rx) = queue(Rc::default());
    for frame in frames {
        tx.send(frame);
    }
    tx.close();
    sse_response(rx, extra)
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

/// Replays `events` in order, each once the reader has room; true when the stream ended.
async fn replay_events(sub: &Sub, events: &[EventRow]) -> bool {
    for e in events {
        room(sub).await;
        if replayed(sub, e) {
            return true;
        }
    }
    false
}

async fn replay(env: &Env, task_id: &str, sub: &Sub) -> Result<(), String> {
    // A replay is not part of any request's cost (it outlives the request that opened it).
    let store = crate::store_backend::detached_store(env).map_err(|e| e.to_string())?;
    let mut cursor = sub.borrow().state.last_sent();
    // Catch up in pages bounded in count and bytes. A full page (either bound) reads on at once;
    // a short one is checked against the run's counter, so a page cut by bytes or overtaken by
    // appends never ends the catch-up early. Once the run is terminal and its ledger read to the
    // end, the stream closes with `done`.
    loop {
        let page = store
            .events_after(task_id, cursor, REPLAY_PAGE, EVENT_PAGE_MAX_BYTES)
            .await
            .map_err(|e| e.to_string())?;
        if replay_events(sub, &page).await {
            return Ok(());
        }
        cursor = page.last().map_or(cursor, |e| e.seq);
        let bytes: usize = page.iter().map(|e| e.data.len()).sum();
        if page.len() as i64 == REPLAY_PAGE || bytes as i64 >= EVENT_PAGE_MAX_BYTES {
            continue;
        }
        let run = store
            .get_run(task_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("run vanished")?;
        if !page.is_empty() && cursor < run.last_seq {
            continue;
        }
        if !sema_core::status::is_terminal(&run.status) {
            break;
        }
        // A terminal run's ledger is final and a `done` event, if any, is its last event. The
        // last event just replayed was not `done` (the stream would have ended); otherwise re-read
        // the last event only when the anchor was already past it.
        let last = if page.last().is_some_and(|e| e.seq >= run.last_seq) || run.last_seq == 0 {
            Vec::new()
        } else {
            store
                .events_after(task_id, run.last_seq - 1, 1, EVENT_PAGE_MAX_BYTES)
                .await
                .map_err(|e| e.to_string())?
        };
        let done = closing_done(&run, last.first());
        let s = &mut *sub.borrow_mut();
        s.state.on_final_done(&done, &mut s.channel);
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
