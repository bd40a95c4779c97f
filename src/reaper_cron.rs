//! The scheduled handler (every minute, `[triggers] crons` in wrangler.toml): one reaper tick over
//! the store, planned by `sema_core::reaper`. Passes, each paged, index-backed and bounded:
//! unacknowledged leases back to the queue; silent running runs failed as `run.stalled` (their claims
//! released in the same batches); parked runs whose checkpoint expired; stale leader runs; a window of
//! running leader runs driven (`leader_driver.rs`: their deadlines, lost child events); the oldest
//! leasable runs announced again to their queues' dispatchers (`dispatch_do.rs`); one window
//! of the debris sweep over the claims (continuing where the last tick stopped); with `RETENTION_DAYS`
//! set, one page of old terminal runs deleted (`sessions::RETENTION_PER_TICK`). Every session whose claim a
//! pass released is told through the typed protocol (`RunEnded`), so its object forgets the claim and
//! ends the run's streams and waiters with `done`. The tick is logged as one JSON line and kept in
//! the tick log (`GET /v1/admin/reapers`).
//!
//! Overlapping or repeated ticks are safe: each leg re-checks its predicate on the row it writes and
//! reports only the rows its own page stamped; a `RunEnded` notice is idempotent.

use crate::{
    config, cx::Cx, dispatch_do, failure::Failure, leader_driver, platform, session_do::client,
};
use sema_core::{
    concurrent::join_bounded,
    dispatch::{self, DispatchCall, DispatchReply, Ready},
    ids::TaskId,
    reaper::{self, Cutoffs, TickSummary},
    session_protocol::SessionCall,
    store::{
        LeaderRunStore, ReapReport, ReaperStore, RunnerStore, SessionStore, SessionTask,
        StaleCutoffs, SweepWindow, Tick, TickRecord,
    },
};
use worker::Env;

/// Runs one tick; failures are logged (the next tick tries again).
pub async fn tick(env: Env) {
    match run(&Cx::new(env)).await {
        Ok(summary) => worker::console_log!(
            r#"{{"event":"reaper.tick","summary":{}}}"#,
            sema_core::json::to_text(&summary).unwrap_or_default()
        ),
        Err(f) => worker::console_error!("reaper tick failed: {f}"),
    }
}

async fn run(cx: &Cx) -> Result<TickSummary, Failure> {
    let started = platform::now_ms();
    let tick_id = TaskId::mint(started as u64, platform::random()?).into_string();
    let staleness = config::settings(&cx.env).staleness;
    let cut = Cutoffs::at(started, &staleness);
    let store = cx.store()?;
    let mut s = TickSummary {
        tick_id: tick_id.clone(),
        started_at: started,
        ..Default::default()
    };
    let elapsed = || platform::now_ms() - started;
    // 1–3 release claims in D1; their sessions are told even when a later page fails, so an
    // object never keeps a claim D1 let go of because the tick stopped half way.
    let mut notify: Vec<SessionTask> = Vec::new();
    let released = release_passes(cx, &mut s, &mut notify, &cut, started).await;
    cx.fail.hit("reaper.before_notify").await;
    tell_sessions(cx, &mut s, &notify).await;
    released?;

    // 4. Leader runs no replica settled.
    let id = reaper::page_id(&tick_id, "leaders", 1);
    let failed = store
        .reap_stale_leader_runs(
            &id,
            config::settings(&cx.env).leader_run_stale_ms,
            platform::now_ms(),
        )
        .await?;
    s.leaders_failed = failed.len();
    s.pages += 1;

    // 5. Drive a window of running leader runs (ids after the last tick's window, wrapping around):
    //    the backstop for a lost child event, and the clock of leader deadlines.
    let last = store.recent_ticks(1).await?;
    s.leaders_from = reaper::leaders_start(last.first().map(|t| t.report_json.as_str()));
    let ids = store
        .running_leader_ids(&s.leaders_from, reaper::LEADER_DRIVE_PAGE)
        .await?;
    s.pages += 1;
    s.leaders_next = match ids.last() {
        Some(id) if ids.len() as i64 >= reaper::LEADER_DRIVE_PAGE => id.clone(),
        _ => String::new(),
    };
    for id in &ids {
        if elapsed() > reaper::BUDGET_MS {
            s.truncated = true;
            s.leaders_next = id.clone();
            break;
        }
        match leader_driver::drive(cx, id).await {
            Ok(d) => {
                s.leaders_driven += 1;
                s.leaders_settled += usize::from(d.settled.is_some());
                s.leader_settles_lost += usize::from(d.settle_lost);
            }
            Err(f) => {
                s.leader_drive_failures += 1;
                worker::console_error!("reaper: driving leader {id} failed: {f}");
            }
        }
    }

    // 6. Announce the oldest leasable runs again to their queues' dispatchers (runs requeued above,
    //    and any notice that was lost): a lost notice delays a run by one tick at most.
    let leasable = store
        .unleased_since(platform::now_ms() + 1, dispatch::SWEEP_LIMIT)
        .await?;
    s.pages += 1;
    s.runs_announced = leasable.len();
    // Grouped by queue, each queue's runs in the order read (oldest first).
    let mut leasable = leasable;
    leasable.sort_by(|a, b| a.queue.cmp(&b.queue));
    let mut by_queue: Vec<(String, Vec<Ready>)> = Vec::new();
    for r in leasable {
        let ready = Ready {
            since: r.created_at,
            task_id: r.task_id,
        };
        match by_queue.last_mut() {
            Some((queue, runs)) if *queue == r.queue => runs.push(ready),
            _ => by_queue.push((r.queue, vec![ready])),
        }
    }
    for (queue, runs) in by_queue {
        s.queues_told += 1;
        let notice = DispatchCall::Notify {
            queue: queue.clone(),
            runs,
        };
        match dispatch_do::call(cx, &queue, &notice).await {
            Ok(DispatchReply::Noted { .. }) => {}
            other => {
                s.announce_failures += 1;
                let why = match other {
                    Ok(reply) => format!("reply {}", sema_core::object_codec::encode(&reply)),
                    Err(f) => f.to_string(),
                };
                worker::console_error!("reaper: announcing to queue {queue}: {why}");
            }
        }
    }

    // 7. One window of the debris sweep: claims whose run ended or vanished without releasing them
    //    (out-of-band writes, crashes), examined in session order from where the last tick stopped.
    s.sweep_from = reaper::sweep_start(last.first().map(|t| t.report_json.as_str()));
    let id = reaper::page_id(&tick_id, "sweep", 1);
    let window = SweepWindow {
        after: &s.sweep_from,
        limit: reaper::SWEEP_WINDOW,
    };
    let swept = store.sweep_claims(&id, &window).await?;
    let mut notify = Vec::new();
    absorb(&mut s, &mut notify, &swept.report);
    s.sweep_next = swept.next.unwrap_or_default();
    s.pages += 1;

    // 8. Tell each session object whose claim the sweep released.
    tell_sessions(cx, &mut s, &notify).await;

    // 9. Retention (RETENTION_DAYS, off by default): one bounded page of old terminal runs deleted
    //    with their ledger, steer messages, idempotency bindings and gates. A run holding a claim or
    //    belonging to a running leader run is never touched, so no session object needs telling.
    s.retention_days = config::settings(&cx.env).retention_days;
    if let Some(before) =
        sema_core::sessions::retention_cutoff(platform::now_ms(), s.retention_days)
    {
        // Last, and never fatal: the claims released above are told to their objects and the tick
        // is recorded whatever becomes of this batch.
        match store
            .purge_terminal_runs(before, sema_core::sessions::RETENTION_PER_TICK)
            .await
        {
            Ok(purged) => {
                s.retention_runs_deleted = purged.runs;
                s.retention_events_deleted = purged.events;
            }
            Err(e) => {
                s.retention_failed = true;
                worker::console_error!("reaper: retention pass failed: {e}");
            }
        }
        s.pages += 1;
    }

    s.duration_ms = elapsed();
    s.d1_round_trips = cx.meter.round_trips();
    s.d1_rows_read = cx.meter.rows_read();
    let report_json = sema_core::json::to_text(&s)?;
    store
        .record_tick(
            &TickRecord {
                tick_id: &tick_id,
                started_at: started,
                finished_at: platform::now_ms(),
                report_json: &report_json,
            },
            reaper::KEEP_TICKS,
        )
        .await?;
    Ok(s)
}

/// Passes 1–3, which release claims in D1: every claim released is in `notify` when this returns,
/// whether or not a later page failed.
async fn release_passes(
    cx: &Cx,
    s: &mut TickSummary,
    notify: &mut Vec<SessionTask>,
    cut: &Cutoffs,
    started: i64,
) -> Result<(), Failure> {
    let store = cx.store()?;
    let elapsed = || platform::now_ms() - started;
    let tick_id = s.tick_id.clone();

    // 1. Leases granted and never acknowledged go back to the queue (fencing out the silent holder).
    for page in 1.. {
        let id = reaper::page_id(&tick_id, "requeue", page);
        let t = page_tick(&id);
        let back = store.requeue_unacked_leases(&t, cut.lease_ack).await?;
        s.requeued += back.len();
        s.pages += 1;
        if !reaper::another_page(back.len(), page, elapsed()) {
            s.truncated |= back.len() as i64 >= reaper::PAGE;
            break;
        }
    }

    // 2. Silent running runs fail as stalled; each page releases exactly their claims.
    let cutoffs = StaleCutoffs {
        held: cut.held,
        queued: cut.queued,
    };
    for page in 1.. {
        let id = reaper::page_id(&tick_id, "reap", page);
        let t = page_tick(&id);
        let report = store.reap_stale(&t, &cutoffs).await?;
        let rows = report.reaped.len();
        absorb(s, notify, &report);
        s.reaped += rows;
        s.pages += 1;
        if !reaper::another_page(rows, page, elapsed()) {
            s.truncated |= rows as i64 >= reaper::PAGE;
            break;
        }
    }

    // 3. Parked runs whose checkpoint expired (one page a tick).
    let id = reaper::page_id(&tick_id, "parked", 1);
    let t = page_tick(&id);
    let report = store.fail_parked_with_expired_checkpoint(&t).await?;
    s.parked_expired += report.reaped.len();
    absorb(s, notify, &report);
    s.pages += 1;

    Ok(())
}

/// Tells each session whose claim a pass released (`RunEnded`: its object forgets the claim and
/// ends the run's streams), [`TELL_AT_ONCE`] objects at a time: the notices are independent (each
/// object serialises its own), so a tick that released many claims does not pay for them one after
/// another. A notice that fails is counted and logged; the object's own alarm looks at D1 again
/// later, so a lost notice delays the object's view, never a submission.
async fn tell_sessions(cx: &Cx, s: &mut TickSummary, notify: &[SessionTask]) {
    let started = platform::now_ms();
    let pairs = reaper::to_notify(notify);
    s.sessions_told += pairs.len();
    let told = join_bounded(
        pairs.into_iter().map(|pair| async move {
            let call = SessionCall::RunEnded {
                task_id: pair.task_id.clone(),
            };
            match client::call(cx, &pair.session_id, &call).await {
                Ok(_) => None,
                Err(f) => Some(format!("telling session {} failed: {f}", pair.session_id)),
            }
        }),
        TELL_AT_ONCE,
    )
    .await;
    let failures: Vec<String> = told.into_iter().flatten().collect();
    s.notify_failures += failures.len();
    s.notify_ms += platform::now_ms() - started;
    for f in failures {
        worker::console_error!("reaper: {f}");
    }
}

/// Session objects one tick tells at once (each notice is one object call; the runtime queues
/// what its per-invocation connection limit does not admit at once).
const TELL_AT_ONCE: usize = 8;

/// One page of a pass, stamped with its own id.
fn page_tick(id: &str) -> Tick<'_> {
    Tick {
        id,
        now: platform::now_ms(),
        limit: reaper::PAGE,
    }
}

/// Adds a page's released claims to the summary and to the sessions to tell.
fn absorb(s: &mut TickSummary, notify: &mut Vec<SessionTask>, report: &ReapReport) {
    s.terminal_claims_released += report.terminal_claims_released.len();
    s.orphan_claims_released += report.orphan_claims_released.len();
    notify.extend(report.released_claims().cloned());
}
