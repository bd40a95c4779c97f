//! `DispatchDo`: one Durable Object per task queue, holding the runners that wait for a run of it
//! and the runs it knows to be leasable (`sema_core::dispatch`). When both exist it gives the
//! oldest run to the longest-waiting runner at once and writes the lease itself (the store's fenced
//! compare-and-set, `lease_run`): a long-poll's wait is answered with the lease, a socket is pushed
//! it. So a long-poll lease costs the runner's request no call after its wait, and the object knows
//! every lease it wrote without being told.
//!
//! A runner that disconnects mid-wait: the runtime does not cancel a request whose client left
//! while it awaits (measured with workerd), so its wait may still be answered with a lease. The
//! object follows its handouts (`sema_core::dispatch::Offers`, up to `MAX_FOLLOWED` leases): an
//! offer whose lease write never settled lapses after `OFFER_TTL_MS`, and a won lease its runner
//! has not acknowledged (first heartbeat or append) within `LEASE_ACK_SEC` is released, fenced on
//! that runner, epoch and `lease_acked = 0`, and offered again — on the object's alarm (up to
//! `FOLLOW_UP_SLACK_MS` late, so that handouts falling due together are looked at once), not the
//! reaper's next tick. The gone runner never ran anything of it; a live one acknowledges long
//! before, and its lease costs one read of D1 shared by up to 50.
//!
//! Concurrency: the object runs one call at a time between awaits, and `serve` pairs waiters with
//! runs without an await, so offers are made in order: oldest run to longest-waiting runner; the
//! lease writes of a pass follow, together. A lost compare-and-set (another path leased the run, or
//! it ended) puts that runner back first in line, a long-poll only while its wait has time left.
//!
//! WebSocket runners (`GET /v1/runner/connect`): the object holds each runner's socket with the
//! hibernation API (`accept_web_socket`), so an idle connection holds no isolate. A runner sends
//! `{"type":"ready"}`; it then waits in the same line as the long-poll waiters (first come, first
//! served), but when it is served the object itself writes the lease (`lease_run`) and pushes
//! `{"type":"lease", ...}`. A socket that closed (`websocket_close` / `websocket_error`) leaves the
//! line at once, so a runner that left is never leased a run; one that closed while its lease was
//! being written has that lease released (fenced) and the run goes to the next waiter. After
//! hibernation the memory is gone: ready sockets are rebuilt from their attachments
//! (`SocketNote`), and the backlog is cold (read from D1 once).
//!
//! Idle runners cost no D1 query: the backlog is read from D1 only while the memory is cold (a new
//! object, or an overflowed backlog); afterwards notices keep it current.

use crate::{
    cx::Cx,
    failure::{js_text, Failure},
    object_storage::{self, Durability, ObjectStorage},
    platform,
    session_do::client,
};
use futures_channel::oneshot;
use sema_core::{
    dispatch::{
        self, Backlog, DispatchCall, DispatchReply, Handout, Offers, Ready, RunnerFrame, SocketNote,
    },
    error::ErrorCode,
    json::JsonText,
    store::{HeldLease, RunReadStore, RunnerStore},
    text_map::TextSet,
    ApiError,
};
use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    rc::Rc,
};
use worker::{
    durable_object, DurableObject, Env, Request, Response, State, WebSocket,
    WebSocketIncomingMessage, WebSocketPair,
};

/// A runner waiting for a run.
struct Waiter {
    id: u64,
    want: Want,
}

/// How a waiting runner is served; the object writes the lease for either.
enum Want {
    /// A long-poll request: its wait is answered with the lease.
    Poll(Poll),
    /// A WebSocket: the lease is pushed on it.
    Socket { ws: WebSocket, note: SocketNote },
}

/// A long-poll's place in line.
struct Poll {
    runner_id: String,
    /// Where its wait hears of its lease body (dropped: nothing came, the wait answers 204).
    tx: oneshot::Sender<String>,
    /// When its wait ends: it is served, or put back in line after a lost lease, only before then.
    until: i64,
    /// Its lease writes go through this, whichever call's turn of the object makes them; the wait
    /// charges their D1 cost to its own call's meter, so the runner's request carries it.
    own: Rc<Cx>,
}

/// What [`DispatchDo::serve`] did: runs offered, and whether its last pass did not land (runners
/// and runs may still pair: the caller that stopped it early serves again, or has the alarm do it).
#[derive(Default)]
struct Served {
    offered: usize,
    unfinished: bool,
}

/// A run given to a waiting runner, whose lease the object writes.
struct Push {
    to: PushTo,
    ready: Ready,
}

enum PushTo {
    Poll { id: u64, poll: Poll },
    Socket { ws: WebSocket, note: SocketNote },
}

#[durable_object]
pub struct DispatchDo {
    state: State,
    /// Its alarm only: the dispatcher keeps nothing else in storage.
    storage: ObjectStorage,
    env: Env,
    /// The queue this object serves (learnt from its first call; every call names it).
    queue: RefCell<String>,
    backlog: RefCell<Backlog>,
    offers: RefCell<Offers>,
    waiters: RefCell<VecDeque<Waiter>>,
    next_id: Cell<u64>,
    /// A cold read of the backlog is in flight (runners arriving meanwhile wait for its result).
    refilling: Cell<bool>,
    /// Ready sockets were rebuilt from their attachments (once per life of this memory).
    woke: Cell<bool>,
    /// Sockets whose lease is being written (their keys).
    pushing: RefCell<TextSet>,
    /// Of those, the ones that closed meanwhile.
    gone: RefCell<TextSet>,
    /// When the alarm this memory set is due (none: none set since it last fired).
    alarm_at: Cell<Option<i64>>,
}

impl DurableObject for DispatchDo {
    fn new(state: State, env: Env) -> Self {
        let (state, storage) = ObjectStorage::of(state);
        Self {
            storage,
            state,
            env,
            queue: RefCell::new(String::new()),
            backlog: RefCell::new(Backlog::new()),
            offers: RefCell::new(Offers::default()),
            waiters: RefCell::new(VecDeque::new()),
            next_id: Cell::new(0),
            refilling: Cell::new(false),
            woke: Cell::new(false),
            pushing: RefCell::new(TextSet::new()),
            gone: RefCell::new(TextSet::new()),
            alarm_at: Cell::new(None),
        }
    }

    /// Only a runner's WebSocket upgrade arrives as a request; every call comes by RPC
    /// (`dispatch_call`).
    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        self.wake();
        if req.path() == "/connect" {
            return crate::http::error::respond(self.accept_socket(&req).map(Into::into))
                .into_response();
        }
        Response::error("the dispatcher takes calls by RPC", 404)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        self.alarm_at.set(None);
        self.wake();
        // Due handouts: lapsed offers and unacknowledged leases go back to the next runner; then
        // whatever a wait's single pass left unserved (`wait`).
        let cx = Cx::new(self.env.clone());
        self.reclaim(&cx).await;
        self.serve(&cx, usize::MAX).await;
        Response::empty()
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> worker::Result<()> {
        self.wake();
        let frame = match message {
            WebSocketIncomingMessage::String(text) => {
                sema_core::json::from_text::<RunnerFrame>(&text)
            }
            WebSocketIncomingMessage::Binary(bytes) => match std::str::from_utf8(&bytes) {
                Ok(text) => sema_core::json::from_text(text),
                Err(_) => Err(serde::de::Error::custom("a binary frame that is not UTF-8")),
            },
        };
        match frame {
            Ok(RunnerFrame::Ready) => self.socket_ready(ws).await,
            Err(e) => {
                let _ = ws.send_with_str(
                    sema_core::json!({"type": "error", "message": format!("unknown frame: {e}")})
                        .json_text(),
                );
            }
        }
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        _code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> worker::Result<()> {
        self.wake();
        self.socket_gone(&ws);
        let _ = ws.close(Some(1000), Some("closed"));
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> worker::Result<()> {
        self.wake();
        self.socket_gone(&ws);
        Ok(())
    }
}

/// The RPC entry of every call (`sema_core::dispatch::RPC_METHOD`: the js_name below and the
/// import in [`call`] are that constant's text): the call's text in (`object_codec`), the reply
/// framed with the meter line out. Every failure is a reply (`Refused`, `Failed`); the promise
/// rejects only when the runtime fails the call.
#[wasm_bindgen::prelude::wasm_bindgen]
impl DispatchDo {
    #[wasm_bindgen(js_name = dispatchCall)]
    pub async fn dispatch_call(
        &self,
        call: String,
    ) -> Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue> {
        self.wake();
        let cx = Cx::new(self.env.clone());
        let reply = match sema_core::object_codec::decode::<DispatchCall>(&call) {
            Ok(call) => self.dispatch(&cx, call).await,
            Err(e) => Err(Failure::Infra(format!("dispatch call: {e}"))),
        }
        .unwrap_or_else(|f| match f {
            Failure::Api(e) => DispatchReply::Refused(e),
            Failure::Infra(cause) => DispatchReply::Failed { cause },
        });
        crate::object_reply::rpc_reply(&cx.meter, &reply)
    }
}

impl DispatchDo {
    async fn dispatch(&self, cx: &Cx, call: DispatchCall) -> Result<DispatchReply, Failure> {
        match call {
            DispatchCall::Wait {
                queue,
                runner_id,
                wait_ms,
            } => {
                self.learn(queue);
                self.wait(cx, runner_id, wait_ms).await
            }
            DispatchCall::Notify { queue, runs } => {
                self.learn(queue);
                self.backlog.borrow_mut().add(runs);
                let handed = self.serve(cx, usize::MAX).await.offered;
                Ok(DispatchReply::Noted { handed })
            }
            DispatchCall::Stats => Ok(DispatchReply::Stats {
                waiters: self.waiters.borrow().len(),
                backlog: self.backlog.borrow().len(),
                offered: self.offers.borrow().len(),
                cold: self.backlog.borrow().is_cold(),
                sockets: self.state.get_websockets().len(),
            }),
        }
    }

    fn learn(&self, queue: String) {
        let mut q = self.queue.borrow_mut();
        if q.is_empty() {
            *q = queue;
        }
    }

    /// Takes the due handouts back (the alarm's work, at [`DispatchDo::arm`]'s time): a lapsed
    /// offer returns to the backlog; the leases their runners have not acknowledged are released
    /// (`RunnerStore::release_leases`, [`dispatch::RELEASE_BATCH`] at a time: one read finds the
    /// few still unacknowledged, one batch of fenced writes releases them) and their runs return
    /// too. Then serves, and keeps the alarm at the next follow-up. A release that fails is logged
    /// and its handouts are followed again `RELEASE_RETRY_MS` later (the reaper's requeue of
    /// unacknowledged leases is the backstop, should the object lose its memory meanwhile).
    async fn reclaim(&self, cx: &Cx) {
        let now = platform::now_ms();
        let due = self.offers.borrow_mut().due(now);
        if !due.is_empty() {
            let mut leased = Vec::new();
            for h in due {
                match h.lease {
                    Some(_) => leased.push(h),
                    None => self.backlog.borrow_mut().add([h.ready]),
                }
            }
            for batch in leased.chunks(dispatch::RELEASE_BATCH) {
                match release(cx, batch, now).await {
                    Ok(released) => {
                        for (h, back) in batch.iter().zip(released) {
                            if back {
                                self.backlog.borrow_mut().add([h.ready.clone()]);
                            }
                        }
                    }
                    Err(e) => {
                        worker::console_error!("dispatch release: {e}");
                        self.offers
                            .borrow_mut()
                            .retry(batch.to_vec(), now + dispatch::RELEASE_RETRY_MS);
                    }
                }
            }
            self.serve(cx, usize::MAX).await;
        }
        self.arm().await;
    }

    /// The alarm at the next follow-up of the open handouts (`Offers::follow_up_at`; none: no
    /// alarm needed; one already due no later: nothing to write). Only the alarm takes handouts
    /// back ([`DispatchDo::reclaim`]): a runner's wait, a socket's ready and an admission's notice
    /// never wait for a release's D1 round trip, and handouts falling due together are taken back
    /// together. The write is unconfirmed: the alarm only hastens what the reaper's
    /// requeue of unacknowledged leases does anyway, so a lease pushed or an offer answered right
    /// after it need not wait for its durability (the runtime's output gate would hold them).
    async fn arm(&self) {
        let Some(at) = self.offers.borrow().follow_up_at() else {
            return;
        };
        self.arm_at(at).await;
    }

    /// The alarm at `at`, unless one due no later is set (unconfirmed, as [`DispatchDo::arm`]).
    async fn arm_at(&self, at: i64) {
        if self.alarm_at.get().is_some_and(|armed| armed <= at) {
            return;
        }
        let at = at.max(platform::now_ms() + 1);
        match self.storage.set_alarm(at, Durability::Unconfirmed).await {
            Ok(()) => self.alarm_at.set(Some(at)),
            Err(e) => worker::console_error!("dispatch alarm: {e}"),
        }
    }

    /// Registers the runner, serves, and waits for its lease or the end of `wait_ms`; the D1 cost
    /// of its lease writes is charged to `cx` (the runner's request's call).
    async fn wait(
        &self,
        cx: &Cx,
        runner_id: String,
        wait_ms: u64,
    ) -> Result<DispatchReply, Failure> {
        if self.waiters.borrow().len() >= dispatch::MAX_WAITERS {
            return Err(ApiError::new(
                ErrorCode::TooManyWaiting,
                format!(
                    "this queue already has {} runners waiting; try again later",
                    dispatch::MAX_WAITERS
                ),
            )
            .with("limit", &dispatch::MAX_WAITERS)
            .into());
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        let until = platform::now_ms() + wait_ms as i64;
        let own = Rc::new(Cx::new(self.env.clone()));
        self.waiters.borrow_mut().push_back(Waiter {
            id,
            want: Want::Poll(Poll {
                runner_id,
                tx,
                until,
                own: own.clone(),
            }),
        });
        let reply = self.wait_for_lease(cx, id, rx, until).await;
        cx.meter.add_header(&own.meter.header());
        reply
    }

    async fn wait_for_lease(
        &self,
        cx: &Cx,
        id: u64,
        mut rx: oneshot::Receiver<String>,
        until: i64,
    ) -> Result<DispatchReply, Failure> {
        if let Err(f) = self.refill_if_cold(cx).await {
            self.waiters.borrow_mut().retain(|w| w.id != id);
            return Err(f);
        }
        // One pass: this wait answers as soon as its own lease is written, not after other
        // runners' retries; a pass that left runners and runs unpaired hands the rest to the
        // alarm, at once.
        if self.serve(cx, 1).await.unfinished {
            self.arm_at(platform::now_ms()).await;
        }
        if let Ok(Some(body)) = rx.try_recv() {
            return Ok(DispatchReply::Leased { body });
        }
        let left = (until - platform::now_ms()).max(0) as u64;
        let timeout = worker::Delay::from(std::time::Duration::from_millis(left));
        let mut rx = match futures_util::future::select(rx, Box::pin(timeout)).await {
            futures_util::future::Either::Left((got, _)) => return Ok(leased(got)),
            futures_util::future::Either::Right((_, rx)) => rx,
        };
        // The wait is over. In line, it leaves with nothing. Out of line, its lease is being
        // written (pairing has no await): that write's outcome is the answer, unless it was lost
        // and put the runner back in line, which is looked at again every few milliseconds.
        loop {
            let queued = {
                let mut waiters = self.waiters.borrow_mut();
                let at = waiters.iter().position(|w| w.id == id);
                at.and_then(|at| waiters.remove(at)).is_some()
            };
            if queued {
                return Ok(DispatchReply::Empty);
            }
            let again = worker::Delay::from(std::time::Duration::from_millis(20));
            match futures_util::future::select(rx, Box::pin(again)).await {
                futures_util::future::Either::Left((got, _)) => return Ok(leased(got)),
                futures_util::future::Either::Right((_, still)) => rx = still,
            }
        }
    }

    /// Reads the backlog from D1 if the memory is cold and nobody reads it already (one read at a
    /// time: runners arriving meanwhile are queued and served by its result).
    async fn refill_if_cold(&self, cx: &Cx) -> Result<(), Failure> {
        if self.backlog.borrow().needs_refill() && !self.refilling.get() {
            self.refilling.set(true);
            let read = self.refill(cx).await;
            self.refilling.set(false);
            read?;
        }
        Ok(())
    }

    /// Reads the queue's oldest leasable runs from D1 into the backlog (cold memory only).
    async fn refill(&self, cx: &Cx) -> Result<(), Failure> {
        let queue = self.queue.borrow().clone();
        let rows = cx.store()?.queue_backlog(&queue, dispatch::REFILL).await?;
        let ready = rows
            .into_iter()
            .map(|r| Ready {
                since: r.created_at,
                task_id: r.task_id,
            })
            .collect();
        self.backlog.borrow_mut().refilled(ready, dispatch::REFILL);
        Ok(())
    }

    /// Offers the oldest leasable runs to the longest-waiting runners. No await between taking a
    /// waiter and a run, so offers never interleave. The pass's leases are written and handed
    /// over after it (answered to a long-poll, pushed on a socket); one that did not land (lost
    /// compare-and-set, runner gone) gives its run or its runner back, and the next pass serves
    /// again, up to `passes` passes.
    async fn serve(&self, cx: &Cx, passes: usize) -> Served {
        let mut served = Served::default();
        for _ in 0..passes {
            if self.refilling.get() {
                // The read in flight may bring older runs; its completion serves.
                return served;
            }
            let now = platform::now_ms();
            let mut pushes = Vec::new();
            let mut pass = 0;
            loop {
                let Some(waiter) = self.waiters.borrow_mut().pop_front() else {
                    break;
                };
                let Some(ready) = self.backlog.borrow_mut().pop() else {
                    self.waiters.borrow_mut().push_front(waiter);
                    break;
                };
                let to = match waiter.want {
                    Want::Poll(poll) => {
                        if poll.tx.is_canceled() || now >= poll.until {
                            // That wait ended (dropping it answers it 204): the run goes to
                            // the next runner.
                            self.backlog.borrow_mut().add([ready]);
                            continue;
                        }
                        PushTo::Poll {
                            id: waiter.id,
                            poll,
                        }
                    }
                    Want::Socket { ws, mut note } => {
                        note.ready = false;
                        let _ = keep_note(&ws, &note);
                        self.pushing.borrow_mut().insert(note.key.clone());
                        PushTo::Socket { ws, note }
                    }
                };
                pushes.push(Push {
                    to,
                    ready: ready.clone(),
                });
                self.offers.borrow_mut().offer(ready, now);
                pass += 1;
            }
            served.offered += pass;
            served.unfinished = false;
            if pushes.is_empty() {
                // After the offers, so no write of this pass comes before a runner's answer.
                self.arm().await;
                return served;
            }
            let landed =
                sema_core::concurrent::join_all(pushes.into_iter().map(|p| self.push(cx, p))).await;
            self.arm().await;
            if landed.iter().all(|l| *l) {
                return served;
            }
            served.unfinished = true;
        }
        served
    }

    /// Writes the lease of a run given to a waiting runner and hands it over; whether it landed
    /// (false: the run or the runner went back in line).
    async fn push(&self, cx: &Cx, p: Push) -> bool {
        let Push { to, ready } = p;
        let (ws, mut note) = match to {
            PushTo::Poll { id, poll } => return self.answer_poll(id, poll, ready).await,
            PushTo::Socket { ws, note } => (ws, note),
        };
        let now = platform::now_ms();
        let task_id = ready.task_id.clone();
        let leased = write_lease(cx, &task_id, &note.runner_id, now).await;
        self.pushing.borrow_mut().remove(&note.key);
        let gone = self.gone.borrow_mut().remove(&note.key);
        let lease = match leased {
            Ok(Some(l)) => l,
            lost => {
                self.not_leased(&task_id, lost.err(), now);
                // The socket waits on, first in line.
                if !gone {
                    self.requeue_socket(ws, &mut note);
                }
                return false;
            }
        };
        let frame = dispatch::lease_frame(&lease);
        if !gone && ws.send_with_str(&frame).is_ok() {
            self.tell_if_waited(&lease, now);
            self.follow(&task_id, note.runner_id, lease.lease_epoch, now)
                .await;
            return true;
        }
        // The socket left while its lease was written: release it (fenced) and serve the next.
        self.give_back(cx, ready, &note.runner_id, lease.lease_epoch, now)
            .await;
        false
    }

    /// Writes the lease of `ready` for a long-poll and answers its wait with it; whether it landed.
    /// The write goes through the wait's own `Cx`, whose cost the wait charges to the runner's
    /// request. A wait dropped meanwhile (a wait past its end keeps listening for a write in
    /// flight, so only a call the runtime cut off) has the lease released, fenced as for a socket
    /// that left, and the run served to the next runner.
    async fn answer_poll(&self, id: u64, poll: Poll, ready: Ready) -> bool {
        let now = platform::now_ms();
        let task_id = ready.task_id.clone();
        let leased = write_lease(&poll.own, &task_id, &poll.runner_id, now).await;
        let lease = match leased {
            Ok(Some(l)) => l,
            lost => {
                self.not_leased(&task_id, lost.err(), now);
                // The runner waits on, first in line, while its wait has time left.
                if platform::now_ms() < poll.until && !poll.tx.is_canceled() {
                    self.waiters.borrow_mut().push_front(Waiter {
                        id,
                        want: Want::Poll(poll),
                    });
                }
                return false;
            }
        };
        let Poll {
            runner_id, tx, own, ..
        } = poll;
        if tx.send(dispatch::lease_body(&lease)).is_ok() {
            self.tell_if_waited(&lease, now);
            self.follow(&task_id, runner_id, lease.lease_epoch, now)
                .await;
            return true;
        }
        // The wait ended while its lease was written: release it (fenced) and serve the next.
        self.give_back(&own, ready, &runner_id, lease.lease_epoch, now)
            .await;
        false
    }

    /// Tells the session's object of a lease handed over whose run waited longer than one cutoff
    /// (`SessionCall::Leased`: its looks may have backed off meanwhile), after the hand-over and
    /// without holding up this object.
    fn tell_if_waited(&self, lease: &sema_core::store::Lease, now: i64) {
        if let Some(notice) = client::lease_notice(&self.env, lease, now) {
            self.state.wait_until(notice);
        }
    }

    /// A lease write that did not win: lost (`failure` is `None`: another path leased or ended the
    /// run), nothing is left to follow; failed, the offer stays open and lapses (the alarm gives
    /// the run back).
    fn not_leased(&self, task_id: &str, failure: Option<String>, now: i64) {
        match failure {
            None => self.offers.borrow_mut().taken(task_id, None, now, 0),
            Some(e) => worker::console_error!("dispatch: leasing {task_id}: {e}"),
        }
    }

    /// A lease handed to its runner (pushed, or the answer to its wait) is followed until the
    /// runner acknowledges it, and released if it never does.
    async fn follow(&self, task_id: &str, runner_id: String, lease_epoch: i64, now: i64) {
        let ack_ms = crate::config::settings(&self.env).staleness.lease_ack_ms;
        self.offers
            .borrow_mut()
            .taken(task_id, Some((runner_id, lease_epoch)), now, ack_ms);
        self.arm().await;
    }

    /// Releases the lease of `ready` its runner never received (fenced on that runner and epoch,
    /// still unacknowledged; the handout is no longer followed) and, when this call released it,
    /// gives the run back to the backlog. A failure is logged: the reaper's requeue of
    /// unacknowledged leases is the backstop.
    async fn give_back(&self, cx: &Cx, ready: Ready, runner_id: &str, lease_epoch: i64, now: i64) {
        self.offers.borrow_mut().taken(&ready.task_id, None, now, 0);
        let released: Result<bool, Failure> = async {
            let store = cx.store()?;
            let at = platform::now_ms();
            Ok(store
                .release_lease(&ready.task_id, runner_id, lease_epoch, at)
                .await?)
        }
        .await;
        match released {
            Ok(true) => self.backlog.borrow_mut().add([ready]),
            Ok(false) => {}
            Err(e) => worker::console_error!("dispatch release: {e}"),
        }
    }

    /// A socket whose push did not land waits again, first in line (it was the longest waiting).
    fn requeue_socket(&self, ws: WebSocket, note: &mut SocketNote) {
        note.ready = true;
        let _ = keep_note(&ws, note);
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.waiters.borrow_mut().push_front(Waiter {
            id,
            want: Want::Socket {
                ws,
                note: note.clone(),
            },
        });
    }

    /// Rebuilds the ready sockets from their attachments, once per life of this memory (after
    /// hibernation or eviction the object starts empty; the sockets survive hibernation).
    fn wake(&self) {
        if self.woke.replace(true) {
            return;
        }
        let mut found = Vec::new();
        for ws in self.state.get_websockets() {
            if let Some(note) = note_of(&ws) {
                found.push((note, ws));
            }
        }
        if let Some((note, _)) = found.first() {
            self.learn(note.queue.clone());
        }
        found.sort_by(|a, b| (a.0.since, &a.0.key).cmp(&(b.0.since, &b.0.key)));
        for (note, ws) in found.into_iter().filter(|(n, _)| n.ready) {
            let id = self.next_id.get();
            self.next_id.set(id + 1);
            self.waiters.borrow_mut().push_back(Waiter {
                id,
                want: Want::Socket { ws, note },
            });
        }
    }

    /// `GET /connect?queue=&runnerId=` (forwarded by the Worker, validated there): accepts the
    /// runner's WebSocket with the hibernation API.
    fn accept_socket(&self, req: &Request) -> Result<Response, Failure> {
        let pairs = sema_core::list::parse_query(sema_core::list::query_of(&req.inner().url()))?;
        let param = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let (queue, runner_id) = (param("queue"), param("runnerId"));
        if self.state.get_websockets().len() >= dispatch::MAX_SOCKETS {
            return Err(ApiError::new(
                ErrorCode::TooManyWaiting,
                format!(
                    "this queue already holds {} runner sockets; try again later",
                    dispatch::MAX_SOCKETS
                ),
            )
            .with("limit", &dispatch::MAX_SOCKETS)
            .into());
        }
        self.learn(queue.clone());
        let pair = WebSocketPair::new()?;
        // Keepalives are answered by the runtime without waking this object (idempotent: the
        // same pair for every socket).
        let keepalive = worker::worker_sys::WebSocketRequestResponsePair::new(
            dispatch::PING_FRAME,
            dispatch::PONG_FRAME,
        )
        .map_err(|e| Failure::Infra(format!("keepalive pair: {}", js_text(&e))))?;
        self.state.set_websocket_auto_response(&keepalive);
        self.state.accept_web_socket(&pair.server);
        let key = sema_core::hex::encode(&platform::random::<12>()?);
        keep_note(
            &pair.server,
            &SocketNote {
                queue,
                runner_id,
                key,
                ready: false,
                since: platform::now_ms(),
            },
        )?;
        Ok(Response::from_websocket(pair.client)?)
    }

    /// The runner on `ws` asked for a run: it joins the line (once) and is served.
    async fn socket_ready(&self, ws: WebSocket) {
        let Some(mut note) = note_of(&ws) else {
            return;
        };
        if note.ready || self.pushing.borrow().contains(&note.key) {
            return;
        }
        note.ready = true;
        note.since = platform::now_ms();
        if keep_note(&ws, &note).is_err() {
            return;
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.waiters.borrow_mut().push_back(Waiter {
            id,
            want: Want::Socket { ws, note },
        });
        let cx = Cx::new(self.env.clone());
        if let Err(f) = self.refill_if_cold(&cx).await {
            // The socket stays in line; the next notice or ready serves it.
            worker::console_error!("dispatch refill: {f}");
        }
        self.serve(&cx, usize::MAX).await;
    }

    /// A socket closed: it leaves the line, or (its lease being written) is marked gone.
    fn socket_gone(&self, ws: &WebSocket) {
        let Some(note) = note_of(ws) else {
            return;
        };
        self.waiters.borrow_mut().retain(|w| match &w.want {
            Want::Socket { note: n, .. } => n.key != note.key,
            Want::Poll(_) => true,
        });
        if self.pushing.borrow().contains(&note.key) {
            self.gone.borrow_mut().insert(note.key);
        }
    }
}

/// Keeps `note` on the socket (it survives hibernation), as JSON text: one string across the wasm
/// boundary rather than an object built field by field.
fn keep_note(ws: &WebSocket, note: &SocketNote) -> Result<(), Failure> {
    object_storage::keep_on_socket(ws, &sema_core::json::to_text(note)?)
}

/// The note kept on `ws` (none: not one of this object's runner sockets).
fn note_of(ws: &WebSocket) -> Option<SocketNote> {
    sema_core::json::from_text(&object_storage::kept_on_socket(ws)?).ok()
}

/// Sends `call` to the dispatcher of `queue`.
pub async fn call(cx: &Cx, queue: &str, call: &DispatchCall) -> Result<DispatchReply, Failure> {
    let to = crate::object_reply::Target {
        binding: dispatch::BINDING,
        name: &dispatch::object_name(queue),
        method: dispatch::RPC_METHOD,
    };
    let text = sema_core::object_codec::encode(call);
    let reply = crate::object_reply::rpc(&cx.env, &cx.meter, to, &text, None).await?;
    Ok(sema_core::object_codec::decode(&reply)?)
}

/// Tells the dispatcher of `queue` that `runs` became leasable; failures are logged (the cron's
/// sweep announces them again). Test hook: `SEMA_TEST_DROP_NOTICES_QUEUE` (a test Worker's knob,
/// never in the repository's config) names one queue whose admission notices are dropped, to prove
/// that the sweep alone delivers them.
pub async fn announce(env: &Env, queue: &str, runs: Vec<Ready>) {
    if crate::config::settings(env).drop_notices_queue.as_deref() == Some(queue) {
        return;
    }
    let cx = Cx::new(env.clone());
    let notice = DispatchCall::Notify {
        queue: queue.to_owned(),
        runs,
    };
    match call(&cx, queue, &notice).await {
        Ok(DispatchReply::Noted { .. }) => {}
        Ok(other) => worker::console_error!(
            "dispatch notice to {queue}: reply {}",
            sema_core::object_codec::encode(&other)
        ),
        Err(f) => worker::console_error!("dispatch notice to {queue} failed: {f}"),
    }
}

/// [`announce`] for one run whose queue is read from its row (a run resumed after a decision).
pub async fn announce_run(env: &Env, task_id: &str, since: i64) {
    let cx = Cx::new(env.clone());
    let run = match cx.store() {
        Ok(store) => store.get_run(task_id).await,
        Err(e) => {
            worker::console_error!("dispatch notice for {task_id}: {e}");
            return;
        }
    };
    match run {
        Ok(Some(run)) => {
            let runs = vec![Ready {
                since,
                task_id: task_id.to_owned(),
            }];
            announce(env, &run.queue, runs).await;
        }
        Ok(None) => {}
        Err(e) => worker::console_error!("dispatch notice for {task_id}: {e}"),
    }
}

/// Writes the lease of `task_id` for `runner_id` through `cx` (the fenced compare-and-set): the
/// lease, `None` when it lost, or the store's failure as text.
async fn write_lease(
    cx: &Cx,
    task_id: &str,
    runner_id: &str,
    now: i64,
) -> Result<Option<sema_core::store::Lease>, String> {
    match cx.store() {
        Ok(store) => store
            .lease_run(task_id, runner_id, now)
            .await
            .map_err(|e| format!("{e}")),
        Err(e) => Err(format!("{e}")),
    }
}

/// Releases the leases of `handouts` (those that have one) in one batch through `cx`: whether each
/// was released by this call, in order.
async fn release(cx: &Cx, handouts: &[Handout], now: i64) -> Result<Vec<bool>, Failure> {
    let held: Vec<HeldLease<'_>> = handouts
        .iter()
        .map(|h| {
            let (runner_id, lease_epoch) = h
                .lease
                .as_ref()
                .map_or(("", 0), |(runner, epoch)| (runner.as_str(), *epoch));
            HeldLease {
                task_id: &h.ready.task_id,
                runner_id,
                lease_epoch,
            }
        })
        .collect();
    Ok(cx.store()?.release_leases(&held, now).await?)
}

/// The reply to a wait whose lease write settled: its lease, or nothing (the write lost after the
/// wait's end, or the object dropped the wait).
fn leased(got: Result<String, oneshot::Canceled>) -> DispatchReply {
    got.map_or(DispatchReply::Empty, |body| DispatchReply::Leased { body })
}
