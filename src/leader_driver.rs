//! The leader-run driver. No request stays open for a leader run and no process owns its fan-out:
//! a drive reads the leader with its plan and children (one D1 round trip), asks the core's state
//! machine what to do (`sema_core::leader_drive::plan`), and applies that plan with conditional
//! writes, then returns. It runs on every event that can change the answer — the leader's admission,
//! a child's finish, cancel, park or decision (the handler of that request drives after its own
//! write committed), a cancel of the leader — and on every cron tick as a backstop, so a lost event
//! only delays a leader, never stalls it.
//!
//! Concurrent drives are safe because every step is conditional on the state it was planned from:
//! a child starts only through its session object's compare-and-set (`not_started`, the leader
//! `running`, not cancelled, before its deadline, and fewer than `max_concurrency` children
//! non-terminal, all checked in the database), a skip only from `not_started`, and the leader
//! settles only from `running` (write-once). A settle that finds the leader already terminal is
//! logged and counted, never swallowed.

use crate::{cx::Cx, failure::Failure, platform, session_do::client};
use sema_core::{
    admission::AdmitInput,
    concurrent::join_all,
    ids::TaskId,
    json::JsonText,
    leader::{self, LeaderFinish},
    leader_drive::{self, ChildState},
    leader_wire,
    session_protocol::{SessionCall, SessionReply},
    store::{LeaderChild, LeaderDriveStore, LeaderRunStore, LeaderView},
};

/// What one drive did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Driven {
    pub started: usize,
    /// Children the plan named to start whose session is held by another run (they wait).
    pub held: usize,
    pub skipped: usize,
    pub cancelled: usize,
    /// The leader settled by this drive.
    pub settled: Option<LeaderFinish>,
    /// The plan settled the leader but it was already terminal (another drive or the stale sweep).
    pub settle_lost: bool,
}

/// Drives the leader of `session_id` if that session is a leader's child; failures are logged (the
/// cron drives again). Called by handlers after a write that may have changed a child's state.
pub async fn after_child_change(cx: &Cx, session_id: &str) {
    let Some(id) = leader::leader_of_session(session_id) else {
        return;
    };
    if let Err(f) = drive(cx, id).await {
        worker::console_error!("leader {id}: drive after a child's change failed: {f}");
    }
}

/// Drives leader `id` once (see the module comment). Nothing to do for a missing, settled or
/// plan-less leader.
pub async fn drive(cx: &Cx, id: &str) -> Result<Driven, Failure> {
    let store = cx.store()?;
    let Some(view) = store.leader_view(id).await? else {
        return Ok(Driven::default());
    };
    drive_view(cx, &view).await
}

/// Applies one plan made from `view`.
pub async fn drive_view(cx: &Cx, view: &LeaderView) -> Result<Driven, Failure> {
    let mut done = Driven::default();
    let (Some(drive), true) = (view.drive.as_ref(), view.record.status == "running") else {
        return Ok(done);
    };
    let id = view.record.id.as_str();
    let states: Vec<ChildState> = view.children.iter().map(|c| c.state.clone()).collect();
    let now = platform::now_ms();
    let plan = leader_drive::plan(drive, &states, now);
    let store = cx.store()?;

    // Children that will never start (the leader stopped; they all report alike): one conditional
    // statement, so a child a concurrent drive started first stays started.
    if let Some((_, report)) = plan.skip.first() {
        done.skipped = store.skip_unstarted(id, *report).await? as usize;
    }

    // Running (and, on a cancel, parked) children are asked to stop through their session objects,
    // as their owner's cancel would be.
    let cancel_calls: Vec<(&str, SessionCall)> = plan
        .cancel
        .iter()
        .filter_map(|&i| view.children.get(i))
        .filter_map(|c| {
            let task_id = c.task_id.clone()?;
            let call = SessionCall::Cancel {
                task_id,
                session_id: c.session_id.clone(),
            };
            Some((c.session_id.as_str(), call))
        })
        .collect();
    let cancels = call_each(cx, &cancel_calls).await;
    for c in cancels {
        c?;
        done.cancelled += 1;
    }

    // Starts, concurrently: each is its own session object's call and its own compare-and-set.
    let mut start_calls = Vec::with_capacity(plan.start.len());
    for &i in &plan.start {
        if let Some(child) = view.children.get(i) {
            let call = SessionCall::StartChild {
                leader_run_id: id.to_owned(),
                index: i,
                input: child_input(view, child)?,
            };
            start_calls.push((child.session_id.as_str(), call));
        }
    }
    let starts = call_each(cx, &start_calls).await;
    for s in starts {
        match s? {
            client::Answer::Reply(SessionReply::ChildStart { started, held }) => {
                done.started += usize::from(started);
                done.held += usize::from(held);
            }
            client::Answer::Reply(SessionReply::Failed { cause }) => {
                return Err(Failure::Infra(cause));
            }
            _ => return Err(Failure::Infra("unexpected reply to a child start".into())),
        }
    }

    if let Some(settle) = plan.settle {
        let reports = leader_wire::worker_reports(&view.children, &settle.reports).json_text();
        let won = store
            .finish_leader_run(
                id,
                settle.status,
                Some(&reports),
                settle.error.as_deref(),
                platform::now_ms(),
            )
            .await?;
        if won {
            done.settled = Some(settle.status);
        } else {
            done.settle_lost = true;
            worker::console_warn!(
                "{}",
                sema_core::json!({
                    "event": "leader.settle_lost",
                    "leaderRunId": id,
                    "wanted": settle.status.as_str(),
                })
                .json_text()
            );
        }
    }
    Ok(done)
}

/// Sends each call to its session's object, concurrently; the answers in call order.
async fn call_each(cx: &Cx, calls: &[(&str, SessionCall)]) -> Vec<Result<client::Answer, Failure>> {
    join_all(
        calls
            .iter()
            .map(|(session, call)| client::call(cx, session, call)),
    )
    .await
}

/// The admission of a child: a fresh task id in the child's own session, owned by the leader's owner.
fn child_input(view: &LeaderView, child: &LeaderChild) -> Result<AdmitInput, Failure> {
    let task_id = TaskId::mint(platform::now_ms() as u64, platform::random()?).into_string();
    Ok(AdmitInput {
        session_id: child.session_id.clone(),
        task_id,
        client_task_id: false,
        owner: view.record.owner.clone(),
        objective: child.objective.clone(),
        meta: child.meta_json.clone(),
        idempotency: None,
        queue: sema_core::queue::default_queue(),
        key_unread: false,
    })
}

/// Cancels leader `id` for its owner: sets the cancel flag (after which no child starts), then drives
/// it, which stops its children and settles it `failed`. Whether this call set the flag.
pub async fn cancel(cx: &Cx, id: &str) -> Result<bool, Failure> {
    let set = cx.store()?.request_leader_cancel(id).await?;
    drive(cx, id).await?;
    Ok(set)
}
