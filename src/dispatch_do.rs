//! `DispatchDo`: one Durable Object per task queue, holding the runners that wait for a run of it
//! and the runs it knows to be leasable (`sema_core::dispatch`). When both exist it leases the
//! oldest run to the longest-waiting runner at once: the lease is the store's fenced compare-and-set
//! on that run (`lease_run`), written here, and its body goes to the waiting request.
//!
//! Concurrency: the object runs one call at a time between awaits. Waiters and the backlog are only
//! touched in short borrows, never across an await, so two `serve` passes (a notice and a new waiter
//! at once) each pop distinct waiters and distinct runs. A lost compare-and-set (another runner or
//! an older path took the run, or it ended) puts the waiter back at the front and tries the next
//! run. A waiter whose request is gone (its receiver dropped: the runner disconnected or its wait
//! ran out) is skipped before a lease is written; if it goes while its lease is being written, the
//! lease is undone by a fenced release (only while unacknowledged, at that epoch), so a runner that
//! left never holds a run.
//!
//! Idle runners cost no D1 query: the backlog is read from D1 only while the memory is cold
//! (a new object, or an overflowed backlog); afterwards it is kept current by notices.

use crate::{cx::Cx, d1::METER_HEADER, failure::Failure, platform};
use futures_channel::oneshot;
use sema_core::{
    dispatch::{self, Backlog, DispatchCall, DispatchReply, Ready},
    error::ErrorCode,
    store::{RunReadStore, RunnerStore},
    ApiError,
};
use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
};
use worker::{durable_object, DurableObject, Env, Headers, Request, Response, State};

/// A runner waiting for a lease.
struct Waiter {
    id: u64,
    runner_id: String,
    /// The lease body and the D1 cost of writing it (charged to the runner's request).
    tx: oneshot::Sender<(String, String)>,
}

#[durable_object]
pub struct DispatchDo {
    #[allow(dead_code)]
    state: State,
    env: Env,
    /// The queue this object serves (learnt from its first call; every call names it).
    queue: RefCell<String>,
    backlog: RefCell<Backlog>,
    waiters: RefCell<VecDeque<Waiter>>,
    next_id: Cell<u64>,
}

impl DurableObject for DispatchDo {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            queue: RefCell::new(String::new()),
            backlog: RefCell::new(Backlog::new()),
            waiters: RefCell::new(VecDeque::new()),
            next_id: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let cx = Cx::new(self.env.clone());
        let reply = match req.json::<DispatchCall>().await {
            Ok(call) => self.dispatch(&cx, call).await,
            Err(e) => Err(Failure::Infra(format!("dispatch call: {e}"))),
        }
        .unwrap_or_else(|f| match f {
            Failure::Api(e) => DispatchReply::Refused(e),
            Failure::Infra(cause) => DispatchReply::Failed { cause },
        });
        let body =
            serde_json::to_string(&reply).map_err(|e| worker::Error::RustError(e.to_string()))?;
        let headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        let _ = headers.set(METER_HEADER, &cx.meter.header());
        Ok(Response::ok(body)?.with_headers(headers))
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
                let handed = self.serve(cx).await?;
                Ok(DispatchReply::Noted { handed })
            }
            DispatchCall::Stats => Ok(DispatchReply::Stats {
                waiters: self.waiters.borrow().len(),
                backlog: self.backlog.borrow().len(),
                cold: self.backlog.borrow().is_cold(),
            }),
        }
    }

    fn learn(&self, queue: String) {
        let mut q = self.queue.borrow_mut();
        if q.is_empty() {
            *q = queue;
        }
    }

    /// Registers the runner, serves, and waits for its lease or the end of `wait_ms`.
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
        let (tx, mut rx) = oneshot::channel();
        self.waiters
            .borrow_mut()
            .push_back(Waiter { id, runner_id, tx });
        self.serve(cx).await?;
        if let Ok(Some(got)) = rx.try_recv() {
            return Ok(leased(cx, got));
        }
        let timeout = worker::Delay::from(std::time::Duration::from_millis(wait_ms));
        match futures_util::future::select(rx, Box::pin(timeout)).await {
            futures_util::future::Either::Left((Ok(got), _)) => Ok(leased(cx, got)),
            futures_util::future::Either::Left((Err(_), _)) => Ok(DispatchReply::Empty),
            futures_util::future::Either::Right((_, rx)) => {
                let removed = {
                    let mut waiters = self.waiters.borrow_mut();
                    let at = waiters.iter().position(|w| w.id == id);
                    at.and_then(|at| waiters.remove(at)).is_some()
                };
                if removed {
                    return Ok(DispatchReply::Empty);
                }
                // A lease for this runner is being written right now: take its outcome.
                Ok(match rx.await {
                    Ok(got) => leased(cx, got),
                    Err(_) => DispatchReply::Empty,
                })
            }
        }
    }

    /// Hands the oldest leasable runs to the longest-waiting live runners; how many it handed.
    async fn serve(&self, cx: &Cx) -> Result<usize, Failure> {
        let store = cx.store()?;
        let mut handed = 0;
        loop {
            let waiter = {
                let mut w = self.waiters.borrow_mut();
                loop {
                    match w.pop_front() {
                        Some(x) if x.tx.is_canceled() => continue,
                        other => break other,
                    }
                }
            };
            let Some(waiter) = waiter else {
                break;
            };
            if self.backlog.borrow().needs_refill() {
                let queue = self.queue.borrow().clone();
                let rows = match store.queue_backlog(&queue, dispatch::REFILL).await {
                    Ok(rows) => rows,
                    Err(e) => {
                        self.waiters.borrow_mut().push_front(waiter);
                        return Err(e.into());
                    }
                };
                let ready = rows
                    .into_iter()
                    .map(|r| Ready {
                        since: r.created_at,
                        task_id: r.task_id,
                    })
                    .collect();
                self.backlog.borrow_mut().refilled(ready, dispatch::REFILL);
            }
            let next = self.backlog.borrow_mut().pop();
            let Some(ready) = next else {
                self.waiters.borrow_mut().push_front(waiter);
                break;
            };
            let now = platform::now_ms();
            // Metered apart: the lease write is the cost of the runner's request, whoever serves.
            let lease_cx = Cx::new(self.env.clone());
            let lease = match lease_cx
                .store()?
                .lease_run(&ready.task_id, &waiter.runner_id, now)
                .await
            {
                Ok(lease) => lease,
                Err(e) => {
                    self.waiters.borrow_mut().push_front(waiter);
                    self.backlog.borrow_mut().add([ready]);
                    return Err(e.into());
                }
            };
            let Some(lease) = lease else {
                // Taken by another runner, parked or ended: the waiter tries the next run.
                self.waiters.borrow_mut().push_front(waiter);
                continue;
            };
            let runner_id = waiter.runner_id.clone();
            if waiter
                .tx
                .send((dispatch::lease_body(&lease), lease_cx.meter.header()))
                .is_err()
            {
                // The runner left while its lease was written: undo it (fenced) and offer the run
                // to the next waiter.
                store
                    .release_lease(&lease.task_id, &runner_id, lease.lease_epoch, now)
                    .await?;
                self.backlog.borrow_mut().add([ready]);
                continue;
            }
            handed += 1;
        }
        Ok(handed)
    }
}

/// A lease handed over: its body, with the cost of writing it added to this request's meter.
fn leased(cx: &Cx, (body, cost): (String, String)) -> DispatchReply {
    cx.meter.add_header(&cost);
    DispatchReply::Leased { body }
}

/// Sends `call` to the dispatcher of `queue`.
pub async fn call(cx: &Cx, queue: &str, call: &DispatchCall) -> Result<DispatchReply, Failure> {
    let stub = cx
        .env
        .durable_object(dispatch::BINDING)?
        .get_by_name(&dispatch::object_name(queue))?;
    let mut init = worker::RequestInit::new();
    init.with_method(worker::Method::Post)
        .with_body(Some(wasm_bindgen::JsValue::from_str(
            &serde_json::to_string(call)?,
        )));
    let req = Request::new_with_init(dispatch::CALL_URL, &init)?;
    let mut resp = stub.fetch_with_request(req).await?;
    if let Ok(Some(share)) = resp.headers().get(METER_HEADER) {
        cx.meter.add_header(&share);
    }
    Ok(serde_json::from_str(&resp.text().await?)?)
}

/// Tells the dispatcher of `queue` that `runs` became leasable; failures are logged (the cron's
/// sweep announces them again). `SEMA_TEST_DROP_NOTICES = "1"` (a test Worker's knob, never in the
/// repository's config) drops every notice, to prove the sweep.
pub async fn announce(env: &Env, queue: &str, runs: Vec<Ready>) {
    if env
        .var("SEMA_TEST_DROP_NOTICES")
        .is_ok_and(|v| v.to_string() == "1")
    {
        return;
    }
    let cx = Cx::new(env.clone());
    let notice = DispatchCall::Notify {
        queue: queue.to_owned(),
        runs,
    };
    match call(&cx, queue, &notice).await {
        Ok(DispatchReply::Noted { .. }) => {}
        Ok(other) => worker::console_error!("dispatch notice to {queue}: {other:?}"),
        Err(f) => worker::console_error!("dispatch notice to {queue} failed: {f:?}"),
    }
}

/// [`announce`] for one run whose queue is read from its row (a run resumed after a decision).
pub async fn announce_run(env: &Env, task_id: &str, since: i64) {
    let cx = Cx::new(env.clone());
    let run = match cx.store() {
        Ok(store) => store.get_run(task_id).await,
        Err(e) => {
            worker::console_error!("dispatch notice for {task_id}: {e:?}");
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
        Err(e) => worker::console_error!("dispatch notice for {task_id}: {e:?}"),
    }
}
