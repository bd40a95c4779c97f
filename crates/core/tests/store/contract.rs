//! The store contract, one body per behaviour, each run on SQLite, PostgreSQL and MariaDB.

use crate::every_dialect;
use crate::harness::{unique, Fixture};
use sema_core::{
    gate::{self, DecidePath, Decided, Decision, Refusal},
    leader::{self, LeaderFinish},
    leader_drive::{ChildState, Drive, ReportStatus},
    sql::DbError,
    store::{
        prelude::*, Append, Appended, CreateRun, Finish, GateScope, GuardedFail, Heartbeat,
        HeldLease, LeaderChild, Leasable, ListScope, NewChild, NewEvent, NewLeader, NewRun,
        NewSteer, Park, ParkStatus, Parked, ReapReport, Resolve, RunSnapshot, SessionTask,
        SqlStore, StaleCutoffs, StartChild, Steered, StoreError, SweepWindow, Swept, Takeover,
        Terminal, TerminalStatus, Tick, TickRecord, Waiting,
    },
};

use sema_core::queue::DEFAULT_QUEUE;

const NOW: i64 = 1_700_000_000_000;
/// The API's byte bound of one page of events.
const PAGE_BYTES: i64 = sema_core::sql::event_sql::EVENT_PAGE_MAX_BYTES;

fn new_run<'a>(task: &'a str, session: &'a str, owner: Option<&'a str>, now: i64) -> NewRun<'a> {
    NewRun {
        task_id: task,
        session_id: session,
        owner,
        instance_id: "default",
        objective: "do the thing",
        objective_preview: "do the thing",
        meta_json: r#"{"k":1}"#,
        queue: DEFAULT_QUEUE,
        now,
        idempotency: None,
    }
}

fn terminal(task: &str, status: TerminalStatus, now: i64) -> Terminal<'_> {
    Terminal {
        task_id: task,
        status,
        result_json: None,
        error: None,
        error_code: None,
        now,
    }
}

/// Parks `task` on a gate of `kind` as its lease holder would: a running run nobody holds is first
/// held out of band by runner `parker` (as a lease would, epoch + 1); a held run parks under its
/// holder's lease. The checkpoint's token is fresh (its digest is the id). Returns the outcome.
async fn park_gate<F: Fixture>(
    fx: &F,
    s: &SqlStore<F::E>,
    task: &str,
    kind: &str,
    expires_at: Option<i64>,
    now: i64,
) -> Parked {
    let run = s.get_run(task).await.unwrap().expect("run exists");
    if run.held_by.is_none() && run.status == "running" {
        fx.raw(&format!(
            "UPDATE task_run SET held_by = 'parker', lease_epoch = lease_epoch + 1 WHERE task_id = '{task}'"
        ));
    }
    let run = s.get_run(task).await.unwrap().unwrap();
    let card = format!(r#"{{"ask":"{kind} for {task}"}}"#);
    let event = gate::park_event_data(kind, &serde_json::from_str(&card).unwrap(), expires_at);
    let token = unique("token");
    s.park(&Park {
        task_id: task,
        lease_epoch: run.lease_epoch,
        runner_id: run.held_by.as_deref().unwrap_or("parker"),
        checkpoint_id: &gate::checkpoint_id(token.as_bytes()),
        gate_kind: kind,
        status: gate::park_status(kind).unwrap(),
        card_json: &card,
        event_json: &event,
        expires_at,
        now,
    })
    .await
    .unwrap()
}

/// Parks `task` (see [`park_gate`]) on a `plan_review` gate for `NeedsReview`, a `human` gate
/// otherwise, without a deadline; true when it parked.
async fn park<F: Fixture>(
    fx: &F,
    s: &SqlStore<F::E>,
    task: &str,
    status: ParkStatus,
    now: i64,
) -> bool {
    let kind = match status {
        ParkStatus::NeedsReview => "plan_review",
        ParkStatus::Suspended => "human",
    };
    matches!(
        park_gate(fx, s, task, kind, None, now).await,
        Parked::Parked { .. }
    )
}

/// A decide attempt with a fresh resolution id.
async fn decide<S: GateStore>(
    s: &S,
    path: DecidePath,
    scope: GateScope<'_>,
    decision: Decision,
    reason: Option<&str>,
    now: i64,
) -> Decided {
    let id = unique("res");
    s.resolve_gate(&Resolve {
        path,
        scope,
        decision,
        reason,
        resolution_id: &id,
        now,
    })
    .await
    .unwrap()
}

/// Approves the session's pending approval (a `human` gate) and returns the run's new epoch.
async fn approve<S: GateStore>(s: &S, session: &str, now: i64) -> i64 {
    match decide(
        s,
        DecidePath::Approvals,
        GateScope::Session(session),
        Decision::Approve,
        None,
        now,
    )
    .await
    {
        Decided::Resumed { lease_epoch, .. } => lease_epoch,
        other => panic!("approve in {session}: {other:?}"),
    }
}

/// `(session, task)` pairs, as a reaper reports them (sorted).
fn pairs(list: &[(&str, &str)]) -> Vec<SessionTask> {
    let mut v: Vec<_> = list.iter().map(|(s, t)| SessionTask::new(*s, *t)).collect();
    v.sort();
    v
}

/// Reaper ticks, each with a fresh tick id. `reap_stale`: one cutoff for held and queued runs.
async fn reap_stale<S: ReaperStore>(
    s: &S,
    cutoff: i64,
    now: i64,
    limit: i64,
) -> Result<ReapReport, StoreError> {
    let cutoffs = StaleCutoffs {
        held: cutoff,
        queued: cutoff,
    };
    reap_stale_with(s, &cutoffs, now, limit).await
}

async fn reap_stale_with<S: ReaperStore>(
    s: &S,
    cutoffs: &StaleCutoffs,
    now: i64,
    limit: i64,
) -> Result<ReapReport, StoreError> {
    let id = unique("tick");
    s.reap_stale(
        &Tick {
            id: &id,
            now,
            limit,
        },
        cutoffs,
    )
    .await
}

async fn requeue<S: ReaperStore>(
    s: &S,
    ack_cutoff: i64,
    now: i64,
    limit: i64,
) -> Result<Vec<SessionTask>, StoreError> {
    let id = unique("tick");
    s.requeue_unacked_leases(
        &Tick {
            id: &id,
            now,
            limit,
        },
        ack_cutoff,
    )
    .await
}

/// An append by `runner` under `lease_epoch`.
async fn append<S: LedgerStore>(
    s: &S,
    task: &str,
    lease_epoch: i64,
    runner: &str,
    events: &[NewEvent<'_>],
    now: i64,
) -> Result<Appended, StoreError> {
    s.append_events(&Append {
        task_id: task,
        lease_epoch,
        runner_id: runner,
        events,
        now,
    })
    .await
}

async fn fail_parked<S: ReaperStore>(
    s: &S,
    now: i64,
    limit: i64,
) -> Result<ReapReport, StoreError> {
    let id = unique("tick");
    s.fail_parked_with_expired_checkpoint(&Tick {
        id: &id,
        now,
        limit,
    })
    .await
}

async fn reap_parked<S: ReaperStore>(
    s: &S,
    cutoff: i64,
    now: i64,
    limit: i64,
) -> Result<ReapReport, StoreError> {
    let id = unique("tick");
    s.reap_parked_older_than(
        &Tick {
            id: &id,
            now,
            limit,
        },
        cutoff,
    )
    .await
}

/// One window of the claim sweep, with a fresh tick id.
async fn sweep_window<S: ReaperStore>(s: &S, after: &str, limit: i64) -> Result<Swept, StoreError> {
    s.sweep_claims(&unique("tick"), &SweepWindow { after, limit })
        .await
}

/// One window over every claim of a test's database (it reaches the end of the table).
async fn sweep<S: ReaperStore>(s: &S) -> Result<ReapReport, StoreError> {
    let swept = sweep_window(s, "", 1_000).await?;
    assert_eq!(swept.next, None, "one window covers the test's claims");
    Ok(swept.report)
}

/// Inserts a claim without a run row (out-of-band debris).
fn orphan_claim<F: Fixture>(fx: &F, session: &str, task: &str) {
    fx.raw(&format!(
        "INSERT INTO task_active (session_id, task_id, created_at) VALUES ('{session}', '{task}', 1)"
    ));
}

/// Admits a run and asserts it was created.
async fn admit<S: AdmissionStore>(
    store: &S,
    task: &str,
    session: &str,
    owner: Option<&str>,
    now: i64,
) {
    let out = store
        .create_run(&new_run(task, session, owner, now))
        .await
        .unwrap();
    assert_eq!(out, CreateRun::Created, "admitting {task} into {session}");
}

async fn status_of<S: RunReadStore>(store: &S, task: &str) -> String {
    store
        .get_run(task)
        .await
        .unwrap()
        .expect("run exists")
        .status
}

async fn holder_of<S: AdmissionStore>(store: &S, session: &str) -> Option<String> {
    store
        .claim_holder(session)
        .await
        .unwrap()
        .map(|h| h.task_id)
}

every_dialect!(
    a_page_of_events_stops_after_the_event_that_reaches_its_byte_bound,
    create_run_writes_the_row_and_the_claim_together,
    a_held_session_refuses_a_second_run_and_names_the_holder,
    another_principals_session_refuses_and_writes_nothing,
    a_taken_task_id_is_reported_with_its_run,
    a_key_bound_by_another_admission_is_observed_not_duplicated,
    terminal_status_is_write_once_including_blocked_and_timeout,
    a_late_terminal_write_never_releases_a_newer_runs_claim,
    set_terminal_on_an_orphan_claim_releases_it,
    cancel_ends_unheld_and_parked_runs_and_only_flags_held_ones,
    cancel_requests_match_owners_null_safely,
    appends_are_gap_free_ordered_and_fenced_by_the_lease_epoch,
    run_listings_page_newest_first_with_ties_broken_by_task_id,
    session_listings_page_by_recent_activity,
    delete_by_session_removes_rows_events_checkpoints_and_claim,
    the_claim_sweep_frees_terminal_and_orphan_claims_and_keeps_live_ones,
    a_sweep_window_releases_debris_only_within_it_and_returns_the_cursor,
    walking_sweep_windows_to_the_end_releases_every_debris_claim_once_and_keeps_live_ones,
    a_sweep_window_over_no_claims_or_past_the_last_one_ends_the_walk,
    reap_stale_fails_silent_running_runs_and_keeps_parked_claims,
    a_reaper_releases_exactly_its_reaped_runs_claims_and_leaves_debris_alone,
    reapers_are_bounded_per_tick_and_idempotent,
    parked_runs_with_an_expired_checkpoint_fail_with_approval_expired,
    parked_runs_older_than_the_cutoff_fail_with_approval_timeout,
    concurrent_admissions_through_two_connections_admit_exactly_one,
    leader_admission_is_once_per_key_and_observes_afterwards,
    leader_runs_without_a_key_never_deduplicate,
    concurrent_leader_admission_through_two_connections_creates_exactly_one,
    a_leader_duplicate_whose_winner_is_missing_rethrows,
    leader_finish_is_write_once,
    stale_leader_runs_fail_with_the_exact_sentence_and_stay_bound_to_their_key,
    an_unknown_leader_status_is_a_loud_error,
    leader_previews_are_truncated_and_null_reads_as_empty,
    applying_the_schema_twice_is_harmless,
    a_leader_with_a_plan_writes_its_plan_and_children_once_per_key,
    twenty_concurrent_creates_with_one_key_write_one_plan_and_one_set_of_children,
    starting_a_child_admits_its_run_in_its_own_session_and_the_children_read_their_runs_states,
    two_concurrent_starts_of_one_child_admit_exactly_one_run,
    a_child_that_lost_its_compare_and_set_writes_nothing_not_even_its_session,
    a_cancelled_expired_finished_or_foreign_leader_starts_no_child,
    a_stopped_leader_skips_every_unstarted_child_in_one_statement_and_never_a_started_one,
    a_child_whose_session_is_held_is_refused_as_an_admission_and_stays_unstarted,
    a_full_concurrency_bound_loses_the_start_and_a_parked_child_keeps_its_slot,
    concurrent_starters_of_different_children_never_exceed_the_bound,
    a_leader_view_reads_record_plan_fingerprint_and_children_in_one_round_trip,
    a_plan_keeps_its_fingerprint_and_a_duplicate_key_observer_never_overwrites_it,
    leader_listings_are_scoped_by_owner_filtered_by_status_and_page_newest_first_with_ties_broken_by_id,
    running_leader_ids_come_in_windows_after_an_exclusive_id_and_skip_settled_leaders,
    a_window_over_claims_releases_debris_even_when_no_run_was_reaped,
    ids_are_case_sensitive,
);

async fn create_run_writes_the_row_and_the_claim_together<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.session_id.as_str()),
        ("running", "s1")
    );
    assert_eq!(run.owner.as_deref(), Some("alice"));
    assert_eq!(
        (run.created_at, run.updated_at, run.heartbeat_at),
        (NOW, NOW, Some(NOW))
    );
    assert_eq!(
        (run.lease_epoch, run.last_seq, run.cancel_requested),
        (0, 0, false)
    );
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("t1"));
    let session = s.get_session("s1").await.unwrap().unwrap();
    assert_eq!(session.owner.as_deref(), Some("alice"));
}

async fn a_held_session_refuses_a_second_run_and_names_the_holder<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    match s
        .create_run(&new_run("t2", "s1", None, NOW + 1))
        .await
        .unwrap()
    {
        CreateRun::Held(Some(h)) => {
            assert_eq!(h.task_id, "t1");
            assert_eq!(h.status.as_deref(), Some("running"));
        }
        other => panic!("{other:?}"),
    }
    // Nothing of the refused run was written.
    assert!(s.get_run("t2").await.unwrap().is_none());
}

async fn another_principals_session_refuses_and_writes_nothing<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    s.set_terminal(&terminal("t1", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    let out = s
        .create_run(&new_run("t2", "s1", Some("bob"), NOW + 2))
        .await
        .unwrap();
    assert_eq!(
        out,
        CreateRun::ForeignSession {
            owner: Some("alice".into())
        }
    );
    assert!(s.get_run("t2").await.unwrap().is_none());
    assert_eq!(holder_of(&s, "s1").await, None);
    // Anonymous is a principal too: it does not match a named owner, nor a named one anonymous.
    admit(&s, "t3", "s-anon", None, NOW).await;
    s.set_terminal(&terminal("t3", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    let out = s
        .create_run(&new_run("t4", "s-anon", Some("alice"), NOW + 2))
        .await
        .unwrap();
    assert_eq!(out, CreateRun::ForeignSession { owner: None });
}

async fn a_taken_task_id_is_reported_with_its_run<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    match s
        .create_run(&new_run("t1", "s2", None, NOW + 1))
        .await
        .unwrap()
    {
        CreateRun::TaskIdTaken(Some(run)) => assert_eq!(run.session_id, "s1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        holder_of(&s, "s2").await,
        None,
        "the failed batch left no claim"
    );
}

async fn a_key_bound_by_another_admission_is_observed_not_duplicated<F: Fixture>(fx: &F) {
    let s = fx.store();
    let mut first = new_run("t1", "s1", None, NOW);
    first.idempotency = Some(("k1", "fp", 202, r#"{"taskId":"t1"}"#));
    assert_eq!(s.create_run(&first).await.unwrap(), CreateRun::Created);
    let mut second = new_run("t2", "s2", None, NOW);
    second.idempotency = Some(("k1", "fp", 202, r#"{"taskId":"t2"}"#));
    match s.create_run(&second).await.unwrap() {
        CreateRun::KeyBound(b) => {
            assert_eq!(
                (b.response_status, b.response_body.as_str()),
                (202, r#"{"taskId":"t1"}"#)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(s.get_run("t2").await.unwrap().is_none());
    assert_eq!(holder_of(&s, "s2").await, None);
    assert!(
        s.get_session("s2").await.unwrap().is_none(),
        "the refused batch left no session row either"
    );
}

async fn terminal_status_is_write_once_including_blocked_and_timeout<F: Fixture>(fx: &F) {
    let s = fx.store();
    for (i, first) in [
        TerminalStatus::Blocked,
        TerminalStatus::Timeout,
        TerminalStatus::Completed,
        TerminalStatus::Failed,
        TerminalStatus::Cancelled,
    ]
    .into_iter()
    .enumerate()
    {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, None, NOW).await;
        assert!(s
            .set_terminal(&Terminal {
                result_json: Some(r#"{"n":1}"#),
                error: Some("e1"),
                error_code: Some("c1"),
                ..terminal(&task, first, NOW + 1)
            })
            .await
            .unwrap());
        for second in [TerminalStatus::Completed, TerminalStatus::Failed] {
            assert!(!s
                .set_terminal(&Terminal {
                    error: Some("e2"),
                    ..terminal(&task, second, NOW + 2)
                })
                .await
                .unwrap());
        }
        let run = s.get_run(&task).await.unwrap().unwrap();
        assert_eq!(run.status, first.as_str());
        assert_eq!(
            (run.error.as_deref(), run.error_code.as_deref()),
            (Some("e1"), Some("c1"))
        );
        assert_eq!(
            sema_core::json::parse(run.result.as_deref().unwrap()).unwrap(),
            sema_core::json!({"n": 1})
        );
        assert_eq!(run.updated_at, NOW + 1);
        assert_eq!(holder_of(&s, &session).await, None);
    }
}

async fn a_late_terminal_write_never_releases_a_newer_runs_claim<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "old", "s1", None, NOW).await;
    s.set_terminal(&terminal("old", TerminalStatus::Failed, NOW + 1))
        .await
        .unwrap();
    admit(&s, "new", "s1", None, NOW + 2).await;
    assert!(!s
        .set_terminal(&terminal("old", TerminalStatus::Completed, NOW + 3))
        .await
        .unwrap());
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("new"));
}

async fn set_terminal_on_an_orphan_claim_releases_it<F: Fixture>(fx: &F) {
    let s = fx.store();
    fx.raw("INSERT INTO task_active (session_id, task_id, created_at) VALUES ('s1', 'ghost', 1)");
    assert!(matches!(
        s.create_run(&new_run("t1", "s1", None, NOW)).await.unwrap(),
        CreateRun::Held(_)
    ));
    assert!(!s
        .set_terminal(&terminal("ghost", TerminalStatus::Cancelled, NOW))
        .await
        .unwrap());
    assert_eq!(holder_of(&s, "s1").await, None);
    admit(&s, "t1", "s1", None, NOW).await;
}

async fn cancel_ends_unheld_and_parked_runs_and_only_flags_held_ones<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "unheld", "s1", None, NOW).await;
    let c = s.cancel("unheld", NOW + 1).await.unwrap();
    let run = c.run.unwrap();
    assert_eq!(
        (run.status.as_str(), run.error.as_deref()),
        ("cancelled", Some("cancelled by user"))
    );
    assert!(c.claim_released && run.cancel_requested);

    admit(&s, "parked", "s2", None, NOW).await;
    assert!(park(fx, &s, "parked", ParkStatus::NeedsReview, NOW + 1).await);
    let c = s.cancel("parked", NOW + 2).await.unwrap();
    assert_eq!(c.run.unwrap().status, "cancelled");
    assert!(c.claim_released);

    admit(&s, "held", "s3", None, NOW).await;
    fx.raw("UPDATE task_run SET held_by = 'runner-1' WHERE task_id = 'held'");
    let c = s.cancel("held", NOW + 1).await.unwrap();
    let run = c.run.unwrap();
    assert_eq!(run.status, "running");
    assert!(run.cancel_requested && !c.claim_released);
    assert_eq!(holder_of(&s, "s3").await.as_deref(), Some("held"));

    // Terminal is write-once: cancelling a finished run changes nothing.
    admit(&s, "done", "s4", None, NOW).await;
    s.set_terminal(&terminal("done", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    let c = s.cancel("done", NOW + 2).await.unwrap();
    assert_eq!(c.run.unwrap().status, "completed");

    // A claim without a row is released by cancel (the self-rescue path).
    fx.raw("INSERT INTO task_active (session_id, task_id, created_at) VALUES ('s5', 'gone', 1)");
    let c = s.cancel("gone", NOW).await.unwrap();
    assert!(c.run.is_none() && c.claim_released);
}

async fn cancel_requests_match_owners_null_safely<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "named", "s1", Some("alice"), NOW).await;
    admit(&s, "anon", "s2", None, NOW).await;
    assert!(!s.request_cancel("named", Some("bob"), NOW).await.unwrap());
    assert!(!s.request_cancel("named", None, NOW).await.unwrap());
    assert!(!s.request_cancel("missing", None, NOW).await.unwrap());
    assert!(!s.is_cancel_requested("named", Some("alice")).await.unwrap());
    assert!(s.request_cancel("named", Some("alice"), NOW).await.unwrap());
    assert!(s.is_cancel_requested("named", Some("alice")).await.unwrap());
    assert!(!s.is_cancel_requested("named", Some("bob")).await.unwrap());
    // A legacy run with a NULL owner matches only a NULL owner.
    assert!(!s.request_cancel("anon", Some("alice"), NOW).await.unwrap());
    assert!(s.request_cancel("anon", None, NOW).await.unwrap());
    assert!(s.is_cancel_requested("anon", None).await.unwrap());
    // Asking twice stays true.
    assert!(s.request_cancel("anon", None, NOW).await.unwrap());
}

async fn a_page_of_events_stops_after_the_event_that_reaches_its_byte_bound<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    // Sizes differ per event and include multi-byte characters, so characters ≠ bytes.
    let texts: Vec<String> = (1..=5)
        .map(|i| format!(r#"{{"delta":"{}"}}"#, "é".repeat(i * 10)))
        .collect();
    let events: Vec<NewEvent<'_>> = texts
        .iter()
        .map(|data| NewEvent {
            kind: "text_delta",
            data,
            event_id: None,
        })
        .collect();
    append(&s, "t1", e, "r1", &events, NOW).await.unwrap();
    let all = s.events_after("t1", 0, 100, PAGE_BYTES).await.unwrap();
    assert_eq!(all.len(), 5);
    // The byte bound counts the data as this dialect returns it, in bytes.
    let size: Vec<i64> = all.iter().map(|e| e.data.len() as i64).collect();
    let seqs =
        |page: Vec<sema_core::store::EventRow>| page.iter().map(|e| e.seq).collect::<Vec<_>>();
    let two = size[0] + size[1];
    assert_eq!(
        seqs(s.events_after("t1", 0, 100, two).await.unwrap()),
        [1, 2],
        "the page ends with the event that reaches the bound"
    );
    assert_eq!(
        seqs(s.events_after("t1", 0, 100, two + 1).await.unwrap()),
        [1, 2, 3],
        "one byte more lets the next event in"
    );
    assert_eq!(
        seqs(s.events_after("t1", 0, 100, 1).await.unwrap()),
        [1],
        "a page always carries its first event"
    );
    assert_eq!(
        seqs(s.events_after("t1", 2, 100, size[2]).await.unwrap()),
        [3],
        "the bound starts over after the anchor"
    );
    assert_eq!(
        seqs(s.events_after("t1", 1, 2, PAGE_BYTES).await.unwrap()),
        [2, 3],
        "the count bound still applies"
    );
}

async fn appends_are_gap_free_ordered_and_fenced_by_the_lease_epoch<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let ev = |kind: &'static str, data: &'static str| NewEvent {
        kind,
        data,
        event_id: None,
    };
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let a = append(
        &s,
        "t1",
        e,
        "r1",
        &[
            ev("text_delta", r#"{"delta":"a"}"#),
            ev("text_delta", r#"{"delta":"b"}"#),
        ],
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(a, Appended::Seqs(vec![1, 2], Waiting::NOTHING));
    let b = append(&s, "t1", e, "r1", &[ev("tool_start", r#"{"n":3}"#)], NOW)
        .await
        .unwrap();
    assert_eq!(b, Appended::Seqs(vec![3], Waiting::NOTHING));
    // A stale epoch writes nothing.
    assert_eq!(
        append(&s, "t1", 7, "r1", &[ev("x", "{}")], NOW)
            .await
            .unwrap(),
        Appended::LeaseLost
    );
    let all = s.events_after("t1", 0, 100, PAGE_BYTES).await.unwrap();
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(all[1].kind, "text_delta");
    let data: sema_core::json::Value = serde_json::from_str(&all[1].data).unwrap();
    assert_eq!(data, sema_core::json!({"delta": "b"}));
    let tail = s.events_after("t1", 1, 1, PAGE_BYTES).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
    // A parked run takes no events from its old leg; a resumed run has a new epoch and no holder
    // until a runner leases it again, under a newer epoch still.
    park(fx, &s, "t1", ParkStatus::Suspended, NOW).await;
    assert_eq!(
        append(&s, "t1", e, "r1", &[ev("x", "{}")], NOW)
            .await
            .unwrap(),
        Appended::LeaseLost
    );
    let resumed = approve(&s, "s1", NOW).await;
    for epoch in [e, resumed] {
        assert_eq!(
            append(&s, "t1", epoch, "r1", &[ev("x", "{}")], NOW)
                .await
                .unwrap(),
            Appended::LeaseLost,
            "epoch {epoch}"
        );
    }
    let epoch = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(epoch, resumed + 1);
    assert_eq!(
        append(&s, "t1", epoch, "r1", &[ev("x", "{}")], NOW)
            .await
            .unwrap(),
        Appended::Seqs(vec![6], Waiting::NOTHING),
        "after the park event (4) and the resumed event (5)"
    );
    // A terminal run takes no more events.
    s.set_terminal(&terminal("t1", TerminalStatus::Completed, NOW))
        .await
        .unwrap();
    assert_eq!(
        append(&s, "t1", epoch, "r1", &[ev("x", "{}")], NOW)
            .await
            .unwrap(),
        Appended::LeaseLost
    );
    assert_eq!(
        s.events_after("t1", 0, 100, PAGE_BYTES)
            .await
            .unwrap()
            .len(),
        6
    );
}

async fn run_listings_page_newest_first_with_ties_broken_by_task_id<F: Fixture>(fx: &F) {
    let s = fx.store();
    // Five runs in one session, two of them admitted in the same millisecond.
    let times = [NOW, NOW + 1, NOW + 1, NOW + 2, NOW + 3];
    for (i, at) in times.iter().enumerate() {
        let task = format!("t{i}");
        admit(&s, &task, "s1", Some("alice"), *at).await;
        s.set_terminal(&terminal(&task, TerminalStatus::Completed, *at))
            .await
            .unwrap();
    }
    admit(&s, "other", "s2", Some("bob"), NOW + 5).await;
    let scope = ListScope::Owner(Some("alice"));
    let mut seen = vec![];
    let mut cursor: Option<(i64, String)> = None;
    loop {
        let page = s
            .list_runs(
                &scope,
                Some("s1"),
                None,
                cursor.as_ref().map(|(a, t)| (*a, t.as_str())),
                2,
            )
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        cursor = page.last().map(|r| (r.created_at, r.task_id.clone()));
        seen.extend(page.into_iter().map(|r| r.task_id));
    }
    assert_eq!(seen, ["t4", "t3", "t2", "t1", "t0"]);
    let all_alice = s.list_runs(&scope, None, None, None, 50).await.unwrap();
    assert_eq!(all_alice.len(), 5);
    let bob = s
        .list_runs(
            &ListScope::Owner(Some("bob")),
            None,
            Some("running"),
            None,
            50,
        )
        .await
        .unwrap();
    assert_eq!(
        bob.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(),
        ["other"]
    );
    let anon = s
        .list_runs(&ListScope::Owner(None), None, None, None, 50)
        .await
        .unwrap();
    assert!(anon.is_empty());
    let everyone = s
        .list_runs(&ListScope::All, None, None, None, 50)
        .await
        .unwrap();
    assert_eq!(everyone.first().map(|r| r.task_id.as_str()), Some("other"));
    assert_eq!(everyone.len(), 6);
}

async fn session_listings_page_by_recent_activity<F: Fixture>(fx: &F) {
    let s = fx.store();
    for (i, at) in [NOW, NOW + 2, NOW + 1].iter().enumerate() {
        admit(&s, &format!("t{i}"), &format!("s{i}"), None, *at).await;
    }
    admit(&s, "x", "sx", Some("carol"), NOW + 9).await;
    let first = s
        .list_sessions(&ListScope::Owner(None), None, 2)
        .await
        .unwrap();
    assert_eq!(
        first
            .iter()
            .map(|r| r.session_id.as_str())
            .collect::<Vec<_>>(),
        ["s1", "s2"]
    );
    let last = first.last().unwrap();
    let rest = s
        .list_sessions(
            &ListScope::Owner(None),
            Some((last.updated_at, &last.session_id)),
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter()
            .map(|r| r.session_id.as_str())
            .collect::<Vec<_>>(),
        ["s0"]
    );
    assert_eq!(
        s.list_sessions(&ListScope::All, None, 10)
            .await
            .unwrap()
            .len(),
        4
    );
}

async fn delete_by_session_removes_rows_events_checkpoints_and_claim<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    append(
        &s,
        "t1",
        e,
        "r1",
        &[NewEvent {
            kind: "x",
            data: "{}",
            event_id: Some("e1"),
        }],
        NOW,
    )
    .await
    .unwrap();
    s.set_terminal(&terminal("t1", TerminalStatus::Completed, NOW))
        .await
        .unwrap();
    admit(&s, "t2", "s1", None, NOW + 1).await;
    assert!(matches!(
        park_gate(fx, &s, "t2", "tool_approval", Some(NOW + 1000), NOW + 2).await,
        Parked::Parked { .. }
    ));
    admit(&s, "keep", "s2", None, NOW).await;
    assert_eq!(s.delete_by_session("s1").await.unwrap(), 2);
    assert!(s.get_run("t1").await.unwrap().is_none() && s.get_run("t2").await.unwrap().is_none());
    assert!(s
        .events_after("t1", 0, 10, PAGE_BYTES)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(holder_of(&s, "s1").await, None);
    assert!(s.get_session("s1").await.unwrap().is_none());
    assert_eq!(s.pending_gate("s1").await.unwrap(), None);
    assert_eq!(holder_of(&s, "s2").await.as_deref(), Some("keep"));
    // The session is usable again from scratch.
    admit(&s, "t3", "s1", Some("someone-else"), NOW + 5).await;
}

async fn the_claim_sweep_frees_terminal_and_orphan_claims_and_keeps_live_ones<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "run", "s-run", None, NOW).await;
    admit(&s, "sus", "s-sus", None, NOW).await;
    park(fx, &s, "sus", ParkStatus::Suspended, NOW).await;
    admit(&s, "rev", "s-rev", None, NOW).await;
    park(fx, &s, "rev", ParkStatus::NeedsReview, NOW).await;
    admit(&s, "term", "s-term", None, NOW).await;
    // A terminal row whose claim survived (written out of band, as after a crash between steps).
    fx.raw("UPDATE task_run SET status = 'blocked' WHERE task_id = 'term'");
    fx.raw("INSERT INTO task_active (session_id, task_id, created_at) VALUES ('s-orphan', 'no-row', 1)");
    let report = sweep(&s).await.unwrap();
    assert_eq!(report.reaped, vec![]);
    assert_eq!(
        report.terminal_claims_released,
        pairs(&[("s-term", "term")])
    );
    assert_eq!(
        report.orphan_claims_released,
        pairs(&[("s-orphan", "no-row")])
    );
    assert_eq!(holder_of(&s, "s-term").await, None);
    assert_eq!(holder_of(&s, "s-orphan").await, None);
    for (session, task) in [("s-run", "run"), ("s-sus", "sus"), ("s-rev", "rev")] {
        assert_eq!(holder_of(&s, session).await.as_deref(), Some(task));
    }
    assert_eq!(
        sweep(&s).await.unwrap(),
        ReapReport::default(),
        "a second sweep has nothing to do"
    );
}

async fn reap_stale_fails_silent_running_runs_and_keeps_parked_claims<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "silent", "s1", None, NOW).await;
    admit(&s, "fresh", "s2", None, NOW + 50_000).await;
    admit(&s, "parked", "s3", None, NOW).await;
    park(fx, &s, "parked", ParkStatus::Suspended, NOW).await;
    fx.raw("INSERT INTO task_active (session_id, task_id, created_at) VALUES ('s4', 'no-row', 1)");
    let report = reap_stale(&s, NOW + 30_000, NOW + 60_000, 100)
        .await
        .unwrap();
    assert_eq!(report.reaped, pairs(&[("s1", "silent")]));
    assert_eq!(report.terminal_claims_released, pairs(&[("s1", "silent")]));
    assert_eq!(report.orphan_claims_released, vec![]);
    assert_eq!(report.counts(), (1, 1, 0));
    // Debris is the sweep's business, not the reaper's.
    assert_eq!(holder_of(&s, "s4").await.as_deref(), Some("no-row"));
    let run = s.get_run("silent").await.unwrap().unwrap();
    assert_eq!(run.status, "failed");
    assert_eq!(run.error.as_deref(), Some("run stalled (instance lost?)"));
    assert_eq!(run.error_code.as_deref(), Some("run.stalled"));
    assert_eq!(holder_of(&s, "s1").await, None);
    assert_eq!(status_of(&s, "fresh").await, "running");
    assert_eq!(status_of(&s, "parked").await, "suspended");
    assert_eq!(holder_of(&s, "s3").await.as_deref(), Some("parked"));
}

async fn reapers_are_bounded_per_tick_and_idempotent<F: Fixture>(fx: &F) {
    let s = fx.store();
    for i in 0..3 {
        admit(&s, &format!("t{i}"), &format!("s{i}"), None, NOW + i).await;
    }
    let cutoff = NOW + 10;
    assert_eq!(
        reap_stale(&s, cutoff, NOW + 20, 2).await.unwrap().reaped,
        pairs(&[("s0", "t0"), ("s1", "t1")]),
        "the oldest two went first"
    );
    assert_eq!(status_of(&s, "t2").await, "running");
    assert_eq!(
        reap_stale(&s, cutoff, NOW + 20, 2).await.unwrap().reaped,
        pairs(&[("s2", "t2")])
    );
    assert_eq!(
        reap_stale(&s, cutoff, NOW + 20, 2).await.unwrap(),
        Default::default()
    );
}

async fn parked_runs_with_an_expired_checkpoint_fail_with_approval_expired<F: Fixture>(fx: &F) {
    let s = fx.store();
    // deadline passed: fails
    admit(&s, "exp", "s1", None, NOW).await;
    park_gate(fx, &s, "exp", "tool_approval", Some(NOW + 10), NOW).await;
    // deadline ahead: kept
    admit(&s, "pend", "s2", None, NOW).await;
    park_gate(fx, &s, "pend", "plan_review", Some(NOW + 1_000), NOW).await;
    // no deadline: kept
    admit(&s, "never", "s3", None, NOW).await;
    park_gate(fx, &s, "never", "human", None, NOW).await;
    // a running run is not this reaper's business
    admit(&s, "run", "s4", None, NOW).await;

    let report = fail_parked(&s, NOW + 100, 50).await.unwrap();
    assert_eq!(report.reaped, pairs(&[("s1", "exp")]));
    assert_eq!(report.terminal_claims_released, pairs(&[("s1", "exp")]));
    let run = s.get_run("exp").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.error_code.as_deref(), run.held_by),
        ("failed", Some("approval.expired"), None)
    );
    assert_eq!(holder_of(&s, "s1").await, None);
    // The run's stream ends: park event (1), then `done` (2), appended in the reaper's batch.
    let events = s.events_after("exp", 0, 10, PAGE_BYTES).await.unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.kind.as_str()))
            .collect::<Vec<_>>(),
        [(1, "suspended"), (2, "done")]
    );
    assert_eq!(run.last_seq, 2);
    assert_eq!(
        sema_core::json::parse(&events[1].data).unwrap(),
        sema_core::json!({
            "status": "failed",
            "error": sema_core::sql::claim_sql::APPROVAL_EXPIRED_ERROR,
            "errorCode": "approval.expired"
        })
    );
    // The gate is no longer pending, and a late decision on it says it expired.
    assert_eq!(s.pending_gate("s1").await.unwrap(), None);
    assert_eq!(
        decide(
            &s,
            DecidePath::Approvals,
            GateScope::Session("s1"),
            Decision::Approve,
            None,
            NOW + 101
        )
        .await,
        Decided::Refused(Refusal::Expired)
    );
    assert_eq!(status_of(&s, "pend").await, "needs_review");
    assert_eq!(status_of(&s, "never").await, "suspended");
    assert_eq!(status_of(&s, "run").await, "running");
    assert_eq!(fail_parked(&s, NOW + 100, 50).await.unwrap().reaped, vec![]);
    // The session admits again, and its next park is not shielded by the old gate.
    admit(&s, "next", "s1", None, NOW + 200).await;
    assert!(matches!(
        park_gate(fx, &s, "next", "human", Some(NOW + 210), NOW + 200).await,
        Parked::Parked { .. }
    ));
    assert_eq!(
        fail_parked(&s, NOW + 300, 50).await.unwrap().reaped,
        pairs(&[("s1", "next")])
    );
}

async fn parked_runs_older_than_the_cutoff_fail_with_approval_timeout<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "old", "s1", None, NOW).await;
    park(fx, &s, "old", ParkStatus::Suspended, NOW).await;
    admit(&s, "young", "s2", None, NOW).await;
    park(fx, &s, "young", ParkStatus::NeedsReview, NOW + 500).await;
    admit(&s, "running", "s3", None, NOW).await;
    let report = reap_parked(&s, NOW + 100, NOW + 600, 50).await.unwrap();
    assert_eq!(report.reaped, pairs(&[("s1", "old")]));
    assert_eq!(report.terminal_claims_released, pairs(&[("s1", "old")]));
    let run = s.get_run("old").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.error_code.as_deref()),
        ("failed", Some("approval.timeout"))
    );
    assert_eq!(holder_of(&s, "s1").await, None);
    assert_eq!(status_of(&s, "young").await, "needs_review");
    assert_eq!(status_of(&s, "running").await, "running");
}

async fn concurrent_admissions_through_two_connections_admit_exactly_one<F: Fixture + Sync>(
    fx: &F,
) {
    for round in 0..5 {
        let session = format!("race{round}");
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<CreateRun> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["a", "b"]
                .iter()
                .map(|who| {
                    let (barrier, session) = (&barrier, &session);
                    scope.spawn(move || {
                        let store = fx.store();
                        let task = format!("{session}-{who}");
                        barrier.wait();
                        pollster::block_on(store.create_run(&new_run(&task, session, None, NOW)))
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let created = outcomes
            .iter()
            .filter(|o| **o == CreateRun::Created)
            .count();
        assert_eq!(created, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .any(|o| matches!(o, CreateRun::Held(Some(_)))),
            "{outcomes:?}"
        );
    }
}

async fn leader_admission_is_once_per_key_and_observes_afterwards<F: Fixture>(fx: &F) {
    let s = fx.store();
    let key = sema_core::idempotency::scoped_key(Some("alice"), "raw-key");
    let first = s
        .create_leader_run("L1", "plan and push", Some("alice"), Some(&key), NOW)
        .await
        .unwrap();
    assert!(first.created);
    assert_eq!(
        (first.run.id.as_str(), first.run.status.as_str()),
        ("L1", "running")
    );
    assert_eq!(first.run.started_at_ms, NOW);
    let again = s
        .create_leader_run("L2", "plan and push", Some("alice"), Some(&key), NOW + 1)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.run, first.run);
    assert!(s.get_leader_run("L2").await.unwrap().is_none());
    // Another owner with the same raw key gets its own run.
    let other_key = sema_core::idempotency::scoped_key(Some("bob"), "raw-key");
    assert!(
        s.create_leader_run("L3", "x", Some("bob"), Some(&other_key), NOW)
            .await
            .unwrap()
            .created
    );
    // Cross-connection read returns the same record.
    let other_conn = fx.store();
    assert_eq!(
        other_conn.get_leader_run("L1").await.unwrap().unwrap(),
        first.run
    );
    assert_eq!(
        other_conn
            .get_leader_run_by_idem(&key)
            .await
            .unwrap()
            .unwrap(),
        first.run
    );
}

async fn leader_runs_without_a_key_never_deduplicate<F: Fixture>(fx: &F) {
    let s = fx.store();
    assert!(
        s.create_leader_run("L1", "x", None, None, NOW)
            .await
            .unwrap()
            .created
    );
    assert!(
        s.create_leader_run("L2", "x", None, None, NOW)
            .await
            .unwrap()
            .created
    );
    assert!(
        s.get_leader_run("L1").await.unwrap().is_some()
            && s.get_leader_run("L2").await.unwrap().is_some()
    );
}

async fn concurrent_leader_admission_through_two_connections_creates_exactly_one<
    F: Fixture + Sync,
>(
    fx: &F,
) {
    for round in 0..5 {
        let key = sema_core::idempotency::scoped_key(None, &format!("k{round}"));
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["a", "b"]
                .iter()
                .map(|who| {
                    let (barrier, key) = (&barrier, &key);
                    scope.spawn(move || {
                        let store = fx.store();
                        barrier.wait();
                        let id = format!("L{round}{who}");
                        pollster::block_on(store.create_leader_run(&id, "x", None, Some(key), NOW))
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            results.iter().filter(|r| r.created).count(),
            1,
            "round {round}"
        );
        assert_eq!(
            results[0].run.id, results[1].run.id,
            "both see the same run"
        );
    }
}

async fn a_leader_duplicate_whose_winner_is_missing_rethrows<F: Fixture>(fx: &F) {
    let s = fx.store();
    s.create_leader_run("L1", "x", None, Some(&"a".repeat(64)), NOW)
        .await
        .unwrap();
    // Same id, another key: the primary key refuses, and no row holds the new key to observe.
    let err = s
        .create_leader_run("L1", "x", None, Some(&"b".repeat(64)), NOW)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            sema_core::store::StoreError::Db(sema_core::sql::DbError::Duplicate { .. })
        ),
        "{err:?}"
    );
    assert!(s
        .get_leader_run_by_idem(&"b".repeat(64))
        .await
        .unwrap()
        .is_none());
}

async fn leader_finish_is_write_once<F: Fixture>(fx: &F) {
    let s = fx.store();
    s.create_leader_run("L1", "x", None, None, NOW)
        .await
        .unwrap();
    assert!(s
        .finish_leader_run(
            "L1",
            LeaderFinish::Completed,
            Some(r#"{"merged":3}"#),
            None,
            NOW + 5
        )
        .await
        .unwrap());
    assert!(!s
        .finish_leader_run("L1", LeaderFinish::Failed, None, Some("late"), NOW + 6)
        .await
        .unwrap());
    let run = s.get_leader_run("L1").await.unwrap().unwrap();
    assert_eq!(run.status, "completed");
    assert_eq!(run.result, Some(sema_core::json!({"merged": 3})));
    assert_eq!((run.error, run.finished_at_ms), (None, Some(NOW + 5)));
}

async fn stale_leader_runs_fail_with_the_exact_sentence_and_stay_bound_to_their_key<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    let key = "k".repeat(64);
    s.create_leader_run("stale", "x", None, Some(&key), NOW)
        .await
        .unwrap();
    s.create_leader_run("fresh", "x", None, None, NOW)
        .await
        .unwrap();
    s.create_leader_run("done", "x", None, None, NOW)
        .await
        .unwrap();
    s.finish_leader_run("done", LeaderFinish::NeedsHuman, None, None, NOW + 1)
        .await
        .unwrap();
    s.backdate_leader_run_for_test("stale", NOW - 10_000)
        .await
        .unwrap();
    s.backdate_leader_run_for_test("done", NOW - 10_000)
        .await
        .unwrap();
    assert_eq!(
        s.reap_stale_leader_runs(&unique("tick"), 5_000, NOW)
            .await
            .unwrap(),
        ["stale"]
    );
    let run = s.get_leader_run("stale").await.unwrap().unwrap();
    assert_eq!(run.status, "failed");
    assert_eq!(run.error.as_deref(), Some(leader::STALE_SWEEP_REASON));
    assert_eq!(run.finished_at_ms, Some(NOW));
    assert_eq!(
        s.get_leader_run("fresh").await.unwrap().unwrap().status,
        "running"
    );
    assert_eq!(
        s.get_leader_run("done").await.unwrap().unwrap().status,
        "needs_human"
    );
    // Strictly older than the threshold only: a run started exactly at the edge stays.
    s.backdate_leader_run_for_test("fresh", NOW - 5_000)
        .await
        .unwrap();
    assert!(s
        .reap_stale_leader_runs(&unique("tick"), 5_000, NOW)
        .await
        .unwrap()
        .is_empty());
    // The key stays bound: resubmitting returns the failed run.
    let again = s
        .create_leader_run("new", "x", None, Some(&key), NOW + 1)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(
        (again.run.id.as_str(), again.run.status.as_str()),
        ("stale", "failed")
    );
}

async fn an_unknown_leader_status_is_a_loud_error<F: Fixture>(fx: &F) {
    let s = fx.store();
    s.create_leader_run("L1", "x", None, None, NOW)
        .await
        .unwrap();
    fx.raw("UPDATE leader_run SET status = 'paused' WHERE leader_run_id = 'L1'");
    let err = s.get_leader_run("L1").await.unwrap_err();
    assert_eq!(
        err,
        sema_core::store::StoreError::Corrupt(leader::unknown_status_message("L1", "paused"))
    );
}

async fn leader_previews_are_truncated_and_null_reads_as_empty<F: Fixture>(fx: &F) {
    let s = fx.store();
    let long = "é".repeat(200);
    let r = s
        .create_leader_run("L1", &long, None, None, NOW)
        .await
        .unwrap();
    assert_eq!(r.run.objective_preview.chars().count(), 160);
    fx.raw("UPDATE leader_run SET objective_preview = NULL WHERE leader_run_id = 'L1'");
    assert_eq!(
        s.get_leader_run("L1")
            .await
            .unwrap()
            .unwrap()
            .objective_preview,
        ""
    );
}

async fn applying_the_schema_twice_is_harmless<F: Fixture>(fx: &F) {
    fx.apply_schema();
    let s = fx.store();
    admit(&s, &unique("t"), "s1", None, NOW).await;
}

/// SPEC-core §2.7: claim maintenance never depends on a probe. The cron runs one sweep window
/// every tick, whatever the reapers found; here no reaper reaps anything and the window still
/// releases a claim whose run ended out of band and a claim without a run row.
async fn a_window_over_claims_releases_debris_even_when_no_run_was_reaped<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "done", "s-done", None, NOW).await;
    fx.raw("UPDATE task_run SET status = 'completed' WHERE task_id = 'done'");
    orphan_claim(fx, "s-orphan", "ghost");
    admit(&s, "live", "s-live", None, NOW).await;
    // The reapers find nothing to reap (and so release nothing).
    assert!(reap_stale(&s, NOW - 1, NOW, 10).await.unwrap().is_empty());
    assert!(fail_parked(&s, NOW, 10).await.unwrap().is_empty());
    assert!(reap_parked(&s, NOW - 1, NOW, 10).await.unwrap().is_empty());
    assert_eq!(holder_of(&s, "s-done").await.as_deref(), Some("done"));
    // The tick's window releases the debris all the same.
    let swept = sweep_window(&s, "", 10).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            report: ReapReport {
                reaped: vec![],
                terminal_claims_released: pairs(&[("s-done", "done")]),
                orphan_claims_released: pairs(&[("s-orphan", "ghost")]),
            },
            next: None,
        }
    );
    assert_eq!(holder_of(&s, "s-done").await, None);
    assert_eq!(holder_of(&s, "s-orphan").await, None);
    assert_eq!(holder_of(&s, "s-live").await.as_deref(), Some("live"));
}

async fn a_sweep_window_releases_debris_only_within_it_and_returns_the_cursor<F: Fixture>(fx: &F) {
    let s = fx.store();
    // Sessions in key order: a (terminal), b (live), c (orphan) | d (terminal), e (orphan).
    admit(&s, "ta", "a", None, NOW).await;
    admit(&s, "tb", "b", None, NOW).await;
    orphan_claim(fx, "c", "ghost-c");
    admit(&s, "td", "d", None, NOW).await;
    orphan_claim(fx, "e", "ghost-e");
    fx.raw("UPDATE task_run SET status = 'failed' WHERE task_id IN ('ta', 'td')");
    let first = sweep_window(&s, "", 3).await.unwrap();
    assert_eq!(
        first,
        Swept {
            report: ReapReport {
                reaped: vec![],
                terminal_claims_released: pairs(&[("a", "ta")]),
                orphan_claims_released: pairs(&[("c", "ghost-c")]),
            },
            next: Some("c".into()),
        },
        "the window is a, b, c; its last examined claim is the cursor"
    );
    // Outside the window: untouched.
    assert_eq!(holder_of(&s, "d").await.as_deref(), Some("td"));
    assert_eq!(holder_of(&s, "e").await.as_deref(), Some("ghost-e"));
    assert_eq!(holder_of(&s, "b").await.as_deref(), Some("tb"));
    // The next window starts after the cursor and reaches the end of the table.
    let second = sweep_window(&s, "c", 3).await.unwrap();
    assert_eq!(
        second,
        Swept {
            report: ReapReport {
                reaped: vec![],
                terminal_claims_released: pairs(&[("d", "td")]),
                orphan_claims_released: pairs(&[("e", "ghost-e")]),
            },
            next: None,
        }
    );
    // A window that is exactly full returns its last claim; the window after it is empty.
    let full = sweep_window(&s, "", 1).await.unwrap();
    assert_eq!(
        (full.report, full.next.as_deref()),
        (ReapReport::default(), Some("b"))
    );
    assert_eq!(
        sweep_window(&s, "b", 1).await.unwrap(),
        Swept::default(),
        "past the last claim: nothing examined, the walk ends"
    );
    assert_eq!(holder_of(&s, "b").await.as_deref(), Some("tb"));
}

async fn walking_sweep_windows_to_the_end_releases_every_debris_claim_once_and_keeps_live_ones<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let (mut terminal, mut orphan, mut live) = (vec![], vec![], vec![]);
    for i in 0..12 {
        let (task, session) = (format!("t{i:02}"), format!("s{i:02}"));
        match i % 4 {
            0 => {
                orphan_claim(fx, &session, &task);
                orphan.push(SessionTask::new(session, task));
            }
            1 => {
                admit(&s, &task, &session, None, NOW).await;
                fx.raw(&format!(
                    "UPDATE task_run SET status = 'cancelled' WHERE task_id = '{task}'"
                ));
                terminal.push(SessionTask::new(session, task));
            }
            2 => {
                admit(&s, &task, &session, None, NOW).await;
                park(fx, &s, &task, ParkStatus::Suspended, NOW).await;
                live.push(SessionTask::new(session, task));
            }
            _ => {
                admit(&s, &task, &session, None, NOW).await;
                live.push(SessionTask::new(session, task));
            }
        }
    }
    let (mut got_terminal, mut got_orphan) = (vec![], vec![]);
    let mut after = String::new();
    let mut windows = 0;
    loop {
        let swept = sweep_window(&s, &after, 5).await.unwrap();
        windows += 1;
        assert!(swept.report.reaped.is_empty());
        got_terminal.extend(swept.report.terminal_claims_released);
        got_orphan.extend(swept.report.orphan_claims_released);
        match swept.next {
            Some(next) => {
                assert!(next > after, "the cursor moves forward");
                after = next;
            }
            None => break,
        }
        assert!(windows < 10, "the walk ends");
    }
    // Windows of five over 12 claims, debris released as the walk goes: the claims examined by a
    // window are the next five still present.
    assert!(windows >= 2, "the walk took several windows ({windows})");
    got_terminal.sort();
    got_orphan.sort();
    assert_eq!(got_terminal, terminal, "each terminal claim released once");
    assert_eq!(got_orphan, orphan, "each orphan claim released once");
    for p in &live {
        assert_eq!(
            holder_of(&s, &p.session_id).await.as_deref(),
            Some(p.task_id.as_str())
        );
    }
    // The next walk starts over and finds nothing to release.
    assert_eq!(sweep(&s).await.unwrap(), ReapReport::default());
}

async fn a_sweep_window_over_no_claims_or_past_the_last_one_ends_the_walk<F: Fixture>(fx: &F) {
    let s = fx.store();
    assert_eq!(sweep_window(&s, "", 10).await.unwrap(), Swept::default());
    admit(&s, "t", "s", None, NOW).await;
    assert_eq!(sweep_window(&s, "s", 10).await.unwrap(), Swept::default());
    assert_eq!(sweep_window(&s, "z", 10).await.unwrap(), Swept::default());
    // A limit below one still examines one claim (and moves the cursor).
    assert_eq!(
        sweep_window(&s, "", 0).await.unwrap().next.as_deref(),
        Some("s")
    );
    assert_eq!(holder_of(&s, "s").await.as_deref(), Some("t"));
}

async fn a_reaper_releases_exactly_its_reaped_runs_claims_and_leaves_debris_alone<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    // Debris every reaper must leave to the sweep: a terminal run whose claim survived, a claim
    // without a run row.
    admit(&s, "done", "s-done", None, NOW).await;
    fx.raw("UPDATE task_run SET status = 'completed' WHERE task_id = 'done'");
    orphan_claim(fx, "s-orphan", "ghost");
    // One run for each reaper: stale, parked with an expired checkpoint, parked too long.
    admit(&s, "stale", "s-stale", None, NOW).await;
    admit(&s, "expired", "s-expired", None, NOW + 1_000).await;
    park_gate(fx, &s, "expired", "human", Some(NOW + 1_500), NOW + 1_000).await;
    admit(&s, "old", "s-old", None, NOW + 1_000).await;
    park(fx, &s, "old", ParkStatus::NeedsReview, NOW + 1_000).await;
    admit(&s, "live", "s-live", None, NOW + 5_000).await;

    let stale = reap_stale(&s, NOW + 500, NOW + 6_000, 10).await.unwrap();
    assert_eq!(
        stale,
        ReapReport {
            reaped: pairs(&[("s-stale", "stale")]),
            terminal_claims_released: pairs(&[("s-stale", "stale")]),
            orphan_claims_released: vec![],
        }
    );
    let expired = fail_parked(&s, NOW + 6_000, 10).await.unwrap();
    assert_eq!(
        expired,
        ReapReport {
            reaped: pairs(&[("s-expired", "expired")]),
            terminal_claims_released: pairs(&[("s-expired", "expired")]),
            orphan_claims_released: vec![],
        }
    );
    let old = reap_parked(&s, NOW + 2_000, NOW + 6_000, 10).await.unwrap();
    assert_eq!(
        old,
        ReapReport {
            reaped: pairs(&[("s-old", "old")]),
            terminal_claims_released: pairs(&[("s-old", "old")]),
            orphan_claims_released: vec![],
        }
    );
    for session in ["s-stale", "s-expired", "s-old"] {
        assert_eq!(holder_of(&s, session).await, None, "{session}");
    }
    assert_eq!(holder_of(&s, "s-done").await.as_deref(), Some("done"));
    assert_eq!(holder_of(&s, "s-orphan").await.as_deref(), Some("ghost"));
    assert_eq!(holder_of(&s, "s-live").await.as_deref(), Some("live"));
    // A reaped run whose claim is already gone (released out of band): reported reaped, no claim.
    admit(&s, "gone", "s-gone", None, NOW + 5_000).await;
    fx.raw("DELETE FROM task_active WHERE session_id = 's-gone'");
    let gone = reap_stale(&s, NOW + 5_500, NOW + 7_000, 10).await.unwrap();
    assert_eq!(
        gone.counts(),
        (2, 1, 0),
        "live and gone reaped; only live had a claim: {gone:?}"
    );
    assert_eq!(gone.terminal_claims_released, pairs(&[("s-live", "live")]));
    // The debris is left for the sweep.
    assert_eq!(
        sweep(&s).await.unwrap(),
        ReapReport {
            reaped: vec![],
            terminal_claims_released: pairs(&[("s-done", "done")]),
            orphan_claims_released: pairs(&[("s-orphan", "ghost")]),
        }
    );
}

async fn ids_are_case_sensitive<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "Task", "Session", None, NOW).await;
    admit(&s, "task", "session", None, NOW).await;
    assert_eq!(holder_of(&s, "Session").await.as_deref(), Some("Task"));
    assert_eq!(holder_of(&s, "session").await.as_deref(), Some("task"));
    assert!(s.get_run("TASK").await.unwrap().is_none());
}

// ---- The runner protocol: lease, heartbeat, steer, finish, and the ledger under it. ----

every_dialect!(
    two_runners_never_win_the_same_lease,
    a_lease_goes_to_the_oldest_unheld_running_run_with_a_new_epoch,
    cancelled_parked_and_finished_runs_are_never_leased,
    a_stale_epoch_heartbeat_changes_nothing,
    a_heartbeat_in_the_same_millisecond_keeps_the_lease,
    heartbeats_carry_the_cancel_request,
    an_append_tells_its_holder_of_a_cancel_request_and_of_steer_messages_waiting,
    a_lease_tells_its_runner_of_steer_messages_and_a_cancel_that_came_before_it,
    steer_messages_are_delivered_once_in_order,
    steer_is_refused_when_the_run_is_not_running,
    a_full_steer_queue_refuses_and_loses_nothing_queued,
    steer_queue_bytes_are_counted_in_bytes_not_characters,
    a_heartbeat_takes_at_most_a_page_of_steer_messages_oldest_first,
    concurrent_steers_of_one_run_get_distinct_seqs,
    finish_appends_done_writes_terminal_and_releases_the_claim_once,
    a_finish_with_a_stale_epoch_writes_nothing,
    a_finish_racing_appends_keeps_the_ledger_gap_free_and_ends_with_done,
    a_duplicate_event_id_refuses_the_whole_batch,
    overlapping_reaper_ticks_change_and_report_each_row_once,
    overlapping_claim_sweeps_release_and_report_each_claim_once,
    a_reaper_reports_only_what_its_own_tick_changed,
);

/// A heartbeat by runner `r1`, taking the API's page of steer messages.
fn beat<'a>(task: &'a str, lease_epoch: i64, delivery_id: &'a str, now: i64) -> Heartbeat<'a> {
    Heartbeat {
        task_id: task,
        lease_epoch,
        runner_id: "r1",
        delivery_id,
        steer_page: sema_core::runner_wire::STEER_PAGE,
        now,
    }
}

/// A steer message within the API's queue bounds: its seq, or `None` when the run is not running.
async fn steer<S: LedgerStore>(s: &S, task: &str, message: &str, now: i64) -> Option<i64> {
    let bounded = NewSteer {
        task_id: task,
        message,
        now,
        max_messages: sema_core::runner_wire::STEER_QUEUE_MAX,
        max_bytes: sema_core::runner_wire::STEER_QUEUE_MAX_BYTES,
    };
    match s.add_steer(&bounded).await.unwrap() {
        Steered::Queued(seq) => Some(seq),
        Steered::NotRunning => None,
        Steered::QueueFull => panic!("the steer queue of {task} is full"),
    }
}

/// A steer message into a queue of at most `max_messages` messages and `max_bytes` bytes.
async fn steer_bounded<S: LedgerStore>(
    s: &S,
    task: &str,
    message: &str,
    max_messages: i64,
    max_bytes: i64,
) -> Steered {
    s.add_steer(&NewSteer {
        task_id: task,
        message,
        now: NOW,
        max_messages,
        max_bytes,
    })
    .await
    .unwrap()
}

/// A finish by runner `r1`.
fn finish<'a>(task: &'a str, lease_epoch: i64, status: TerminalStatus, now: i64) -> Finish<'a> {
    Finish {
        task_id: task,
        lease_epoch,
        runner_id: "r1",
        status,
        result_json: None,
        error: None,
        error_code: None,
        done_json: r#"{"status":"done"}"#,
        now,
    }
}

fn event(
    kind: &'static str,
    data: &'static str,
    event_id: Option<&'static str>,
) -> NewEvent<'static> {
    NewEvent {
        kind,
        data,
        event_id,
    }
}

async fn two_runners_never_win_the_same_lease<F: Fixture + Sync>(fx: &F) {
    for round in 0..5 {
        let task = format!("race{round}");
        admit(&fx.store(), &task, &format!("s{round}"), None, NOW + round).await;
        let barrier = std::sync::Barrier::new(2);
        let won: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["runner-a", "runner-b"]
                .iter()
                .map(|runner| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let store = fx.store();
                        barrier.wait();
                        pollster::block_on(store.lease(runner, DEFAULT_QUEUE, NOW + 10, 4)).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = won.into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        assert_eq!(won[0].task_id, task);
        let run = fx.store().get_run(&task).await.unwrap().unwrap();
        assert_eq!(run.lease_epoch, won[0].lease_epoch);
    }
}

async fn a_lease_goes_to_the_oldest_unheld_running_run_with_a_new_epoch<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "young", "s2", Some("alice"), NOW + 5).await;
    admit(&s, "old", "s1", Some("alice"), NOW).await;
    let first = s
        .lease("r1", DEFAULT_QUEUE, NOW + 10, 8)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.task_id.as_str(), first.session_id.as_str()),
        ("old", "s1")
    );
    assert_eq!((first.lease_epoch, first.last_seq), (1, 0));
    // When it was admitted: whether its session's object is told of the lease.
    assert_eq!(first.created_at, NOW);
    assert_eq!(first.objective, "do the thing");
    assert_eq!(
        sema_core::json::parse(&first.meta).unwrap(),
        sema_core::json!({"k": 1})
    );
    let run = s.get_run("old").await.unwrap().unwrap();
    assert_eq!(run.held_by.as_deref(), Some("r1"));
    assert_eq!(
        (run.heartbeat_at, run.updated_at),
        (Some(NOW + 10), NOW + 10)
    );
    let second = s
        .lease("r2", DEFAULT_QUEUE, NOW + 11, 8)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (second.task_id.as_str(), second.created_at),
        ("young", NOW + 5)
    );
    assert_eq!(
        s.lease("r3", DEFAULT_QUEUE, NOW + 12, 8).await.unwrap(),
        None
    );
}

async fn cancelled_parked_and_finished_runs_are_never_leased<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "cancelled", "s1", None, NOW).await;
    s.cancel("cancelled", NOW + 1).await.unwrap();
    admit(&s, "parked", "s2", None, NOW).await;
    assert!(park(fx, &s, "parked", ParkStatus::NeedsReview, NOW + 1).await);
    admit(&s, "done", "s3", None, NOW).await;
    s.set_terminal(&terminal("done", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    assert_eq!(
        s.lease("r1", DEFAULT_QUEUE, NOW + 2, 8).await.unwrap(),
        None
    );
    // A resumed run is leasable again, under a newer epoch than its parked leg.
    let resumed = match decide(
        &s,
        DecidePath::PlanReview,
        GateScope::Task("parked"),
        Decision::Approve,
        None,
        NOW + 3,
    )
    .await
    {
        Decided::Resumed { lease_epoch, .. } => lease_epoch,
        other => panic!("{other:?}"),
    };
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 4, 8)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.task_id, "parked");
    assert_eq!(lease.lease_epoch, resumed + 1);
}

async fn a_stale_epoch_heartbeat_changes_nothing<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(steer(&s, "t1", "turn left", NOW + 2).await, Some(1));
    assert_eq!(
        s.heartbeat(&beat("t1", lease.lease_epoch + 1, "d1", NOW + 3))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.heartbeat(&beat("t1", lease.lease_epoch - 1, "d2", NOW + 3))
            .await
            .unwrap(),
        None
    );
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(run.heartbeat_at, Some(NOW + 1), "liveness not refreshed");
    // The message was not taken by the stale heartbeats: the lease holder gets it.
    let got = s
        .heartbeat(&beat("t1", lease.lease_epoch, "d3", NOW + 4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.steer, vec![(1, "turn left".to_owned())]);
    assert_eq!(
        s.get_run("t1").await.unwrap().unwrap().heartbeat_at,
        Some(NOW + 4)
    );
    // An unleased run (epoch matches, nobody holds it) is not heartbeat-able either.
    admit(&s, "t2", "s2", None, NOW).await;
    assert_eq!(
        s.heartbeat(&beat("t2", 0, "d4", NOW + 5)).await.unwrap(),
        None
    );
}

async fn a_heartbeat_in_the_same_millisecond_keeps_the_lease<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s.lease("r1", DEFAULT_QUEUE, NOW, 1).await.unwrap().unwrap();
    for delivery in ["d1", "d2", "d3"] {
        let b = s
            .heartbeat(&beat("t1", lease.lease_epoch, delivery, NOW))
            .await
            .unwrap();
        assert!(
            b.is_some(),
            "{delivery}: an unchanged heartbeat_at is not a lost lease"
        );
    }
}

async fn heartbeats_carry_the_cancel_request<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    let b = s
        .heartbeat(&beat("t1", lease.lease_epoch, "d1", NOW + 2))
        .await
        .unwrap()
        .unwrap();
    assert!(!b.cancel_requested && b.steer.is_empty());
    let c = s.cancel("t1", NOW + 3).await.unwrap();
    assert_eq!(
        c.run.unwrap().status,
        "running",
        "a held run is only flagged"
    );
    let b = s
        .heartbeat(&beat("t1", lease.lease_epoch, "d2", NOW + 4))
        .await
        .unwrap()
        .unwrap();
    assert!(b.cancel_requested);
}

async fn an_append_tells_its_holder_of_a_cancel_request_and_of_steer_messages_waiting<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let one = [event("x", "{}", None)];
    let said = |cancel_requested, steer_pending| Waiting {
        cancel_requested,
        steer_pending,
    };
    assert_eq!(
        append(&s, "t1", e, "r1", &one, NOW + 2).await.unwrap(),
        Appended::Seqs(vec![1], Waiting::NOTHING)
    );
    assert_eq!(steer(&s, "t1", "left", NOW + 3).await, Some(1));
    assert_eq!(steer(&s, "t1", "right", NOW + 3).await, Some(2));
    assert_eq!(
        append(&s, "t1", e, "r1", &one, NOW + 4).await.unwrap(),
        Appended::Seqs(vec![2], said(false, 2)),
        "steer messages wait for the next heartbeat"
    );
    let b = s
        .heartbeat(&beat("t1", e, "d1", NOW + 5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.steer.len(), b.steer_pending), (2, 0));
    assert_eq!(
        append(&s, "t1", e, "r1", &one, NOW + 6).await.unwrap(),
        Appended::Seqs(vec![3], Waiting::NOTHING),
        "a heartbeat took them"
    );
    s.cancel("t1", NOW + 7).await.unwrap();
    assert_eq!(
        append(&s, "t1", e, "r1", &one, NOW + 8).await.unwrap(),
        Appended::Seqs(vec![4], said(true, 0)),
        "a held run is only flagged, and its holder learns it from its next write"
    );
}

async fn a_lease_tells_its_runner_of_steer_messages_and_a_cancel_that_came_before_it<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    assert_eq!(steer(&s, "t1", "queued early", NOW + 1).await, Some(1));
    let first = s.lease_run("t1", "r1", NOW + 2).await.unwrap().unwrap();
    assert_eq!(
        first.waiting,
        Waiting {
            cancel_requested: false,
            steer_pending: 1
        }
    );
    // A held run is only flagged by a cancel; its unacknowledged lease goes back, and the next
    // holder learns of the cancel from its lease.
    s.cancel("t1", NOW + 3).await.unwrap();
    assert!(s
        .release_lease("t1", "r1", first.lease_epoch, NOW + 4)
        .await
        .unwrap());
    let second = s.lease_run("t1", "r2", NOW + 5).await.unwrap().unwrap();
    assert_eq!(
        second.waiting,
        Waiting {
            cancel_requested: true,
            steer_pending: 1
        }
    );
}

async fn steer_messages_are_delivered_once_in_order<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    for (i, m) in ["one", "two", "three"].iter().enumerate() {
        assert_eq!(steer(&s, "t1", m, NOW + i as i64).await, Some(i as i64 + 1));
    }
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 5, 1)
        .await
        .unwrap()
        .unwrap();
    let e = lease.lease_epoch;
    let b = s
        .heartbeat(&beat("t1", e, "d1", NOW + 6))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        b.steer,
        vec![
            (1, "one".to_owned()),
            (2, "two".to_owned()),
            (3, "three".to_owned())
        ]
    );
    let b = s
        .heartbeat(&beat("t1", e, "d2", NOW + 7))
        .await
        .unwrap()
        .unwrap();
    assert!(b.steer.is_empty(), "delivered once");
    assert_eq!(steer(&s, "t1", "four", NOW + 8).await, Some(4));
    let b = s
        .heartbeat(&beat("t1", e, "d3", NOW + 9))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.steer, vec![(4, "four".to_owned())]);
    // Another run's messages are its own.
    admit(&s, "t2", "s2", None, NOW).await;
    assert_eq!(steer(&s, "t2", "other", NOW).await, Some(1));
}

async fn steer_is_refused_when_the_run_is_not_running<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "parked", "s1", None, NOW).await;
    park(fx, &s, "parked", ParkStatus::Suspended, NOW).await;
    admit(&s, "done", "s2", None, NOW).await;
    s.set_terminal(&terminal("done", TerminalStatus::Failed, NOW))
        .await
        .unwrap();
    for task in ["parked", "done", "missing"] {
        assert_eq!(steer(&s, task, "hello", NOW).await, None, "{task}");
    }
    assert_eq!(
        s.get_run("parked").await.unwrap().unwrap().updated_at,
        NOW,
        "a refused steer writes nothing"
    );
}

async fn a_full_steer_queue_refuses_and_loses_nothing_queued<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    // Bounds: 3 messages, 10 bytes.
    assert_eq!(
        steer_bounded(&s, "t1", "aaaa", 3, 10).await,
        Steered::Queued(1)
    );
    assert_eq!(
        steer_bounded(&s, "t1", "bbbb", 3, 10).await,
        Steered::Queued(2)
    );
    assert_eq!(
        steer_bounded(&s, "t1", "ccc", 3, 10).await,
        Steered::QueueFull,
        "11 bytes would exceed 10"
    );
    assert_eq!(
        steer_bounded(&s, "t1", "cc", 3, 10).await,
        Steered::Queued(3)
    );
    assert_eq!(
        steer_bounded(&s, "t1", "d", 3, 10).await,
        Steered::QueueFull,
        "a 4th message would exceed 3"
    );
    // Delivered messages leave the queue: room again, and seqs stay contiguous.
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    let b = s
        .heartbeat(&beat("t1", lease.lease_epoch, "d1", NOW + 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        b.steer,
        vec![
            (1, "aaaa".to_owned()),
            (2, "bbbb".to_owned()),
            (3, "cc".to_owned())
        ],
        "every queued message, once, in order; no refused one"
    );
    assert_eq!(b.steer_pending, 0);
    assert_eq!(
        steer_bounded(&s, "t1", "dddd", 3, 10).await,
        Steered::Queued(4)
    );
    // A run that is not running is told apart from a full queue.
    admit(&s, "t2", "s2", None, NOW).await;
    s.set_terminal(&terminal("t2", TerminalStatus::Failed, NOW))
        .await
        .unwrap();
    assert_eq!(
        steer_bounded(&s, "t2", "x", 0, 0).await,
        Steered::NotRunning
    );
    assert_eq!(
        steer_bounded(&s, "missing", "x", 3, 10).await,
        Steered::NotRunning
    );
}

async fn steer_queue_bytes_are_counted_in_bytes_not_characters<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    // "é" is 2 bytes in UTF-8: two of them are 4 bytes, over a 3-byte bound.
    assert_eq!(steer_bounded(&s, "t1", "é", 8, 3).await, Steered::Queued(1));
    assert_eq!(steer_bounded(&s, "t1", "é", 8, 3).await, Steered::QueueFull);
    assert_eq!(steer_bounded(&s, "t1", "e", 8, 3).await, Steered::Queued(2));
}

async fn a_heartbeat_takes_at_most_a_page_of_steer_messages_oldest_first<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    for m in ["m1", "m2", "m3", "m4", "m5"] {
        steer(&s, "t1", m, NOW + 2).await.unwrap();
    }
    let page = |delivery: &'static str| Heartbeat {
        steer_page: 2,
        ..beat("t1", lease.lease_epoch, delivery, NOW + 3)
    };
    let mut got = vec![];
    for (delivery, want, left) in [("d1", 2, 3), ("d2", 2, 1), ("d3", 1, 0), ("d4", 0, 0)] {
        let b = s.heartbeat(&page(delivery)).await.unwrap().unwrap();
        assert_eq!((b.steer.len(), b.steer_pending), (want, left), "{delivery}");
        got.extend(b.steer);
    }
    let seqs: Vec<i64> = got.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "each once, oldest first");
    // A refused heartbeat (lost lease) takes nothing: the next message waits for the holder.
    steer(&s, "t1", "m6", NOW + 4).await.unwrap();
    assert_eq!(
        s.heartbeat(&Heartbeat {
            lease_epoch: lease.lease_epoch + 1,
            ..page("d5")
        })
        .await
        .unwrap(),
        None
    );
    let b = s.heartbeat(&page("d6")).await.unwrap().unwrap();
    assert_eq!(b.steer, vec![(6, "m6".to_owned())]);
}

async fn concurrent_steers_of_one_run_get_distinct_seqs<F: Fixture + Sync>(fx: &F) {
    admit(&fx.store(), "t1", "s1", None, NOW).await;
    for round in 0..5 {
        let barrier = std::sync::Barrier::new(2);
        let seqs: Vec<i64> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["a", "b"]
                .iter()
                .map(|who| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let store = fx.store();
                        barrier.wait();
                        pollster::block_on(steer(&store, "t1", who, NOW)).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = seqs.clone();
        sorted.sort();
        assert_eq!(sorted, [2 * round + 1, 2 * round + 2], "round {round}");
    }
}

async fn finish_appends_done_writes_terminal_and_releases_the_claim_once<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    let e = lease.lease_epoch;
    assert_eq!(
        append(
            &s,
            "t1",
            e,
            "r1",
            &[
                event("text_delta", r#"{"delta":"a"}"#, Some("e1")),
                event("text_delta", r#"{"delta":"b"}"#, None),
            ],
            NOW + 2,
        )
        .await
        .unwrap(),
        Appended::Seqs(vec![1, 2], Waiting::NOTHING)
    );
    let f = Finish {
        result_json: Some(r#"{"answer":42}"#),
        error: Some("partial"),
        error_code: Some("x.partial"),
        ..finish("t1", e, TerminalStatus::Blocked, NOW + 3)
    };
    let finished = s.finish_run(&f).await.unwrap().expect("the finish won");
    let run = s.get_run("t1").await.unwrap().unwrap();
    // The finish answers with the run as its batch left it: what a read right after sees.
    assert_eq!(finished, run);
    assert_eq!(run.status, "blocked");
    assert_eq!(run.last_seq, 3);
    assert_eq!(run.held_by, None);
    assert_eq!(
        (run.error.as_deref(), run.error_code.as_deref()),
        (Some("partial"), Some("x.partial"))
    );
    assert_eq!(
        sema_core::json::parse(run.result.as_deref().unwrap()).unwrap(),
        sema_core::json!({"answer": 42})
    );
    assert_eq!(run.updated_at, NOW + 3);
    assert_eq!(holder_of(&s, "s1").await, None);
    let events = s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    let done = &events[2];
    assert_eq!(
        (done.kind.as_str(), done.event_id.as_deref()),
        ("done", None)
    );
    assert_eq!(
        sema_core::json::parse(&done.data).unwrap(),
        sema_core::json!({"status": "done"})
    );
    assert_eq!(done.created_at, NOW + 3);
    // Once: a second finish (even with another status) changes nothing.
    admit(&s, "t2", "s1", None, NOW + 4).await;
    assert_eq!(
        s.finish_run(&finish("t1", e, TerminalStatus::Completed, NOW + 5))
            .await
            .unwrap(),
        None
    );
    assert_eq!(status_of(&s, "t1").await, "blocked");
    assert_eq!(
        s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap().len(),
        3
    );
    assert_eq!(
        holder_of(&s, "s1").await.as_deref(),
        Some("t2"),
        "a late finish never releases a newer run's claim"
    );
}

async fn a_finish_with_a_stale_epoch_writes_nothing<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let lease = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    for stale in [lease.lease_epoch - 1, lease.lease_epoch + 1] {
        assert_eq!(
            s.finish_run(&finish("t1", stale, TerminalStatus::Completed, NOW + 2))
                .await
                .unwrap(),
            None
        );
    }
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.last_seq, run.updated_at),
        ("running", 0, NOW + 1)
    );
    assert_eq!(run.held_by.as_deref(), Some("r1"));
    assert!(s
        .events_after("t1", 0, 10, PAGE_BYTES)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("t1"));
    // A parked run cannot be finished by its old leg either.
    park(fx, &s, "t1", ParkStatus::Suspended, NOW + 3).await;
    assert_eq!(
        s.finish_run(&finish(
            "t1",
            lease.lease_epoch,
            TerminalStatus::Failed,
            NOW + 4
        ))
        .await
        .unwrap(),
        None
    );
    assert_eq!(status_of(&s, "t1").await, "suspended");
}

async fn a_finish_racing_appends_keeps_the_ledger_gap_free_and_ends_with_done<F: Fixture + Sync>(
    fx: &F,
) {
    for round in 0..3 {
        let (task, session) = (format!("t{round}"), format!("s{round}"));
        admit(&fx.store(), &task, &session, None, NOW).await;
        let e = fx
            .store()
            .lease("r1", DEFAULT_QUEUE, NOW, 8)
            .await
            .unwrap()
            .unwrap()
            .lease_epoch;
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            let (barrier, task) = (&barrier, &task);
            let appender = scope.spawn(move || {
                let store = fx.store();
                barrier.wait();
                for _ in 0..10 {
                    let ev = [event("x", "{}", None), event("y", "{}", None)];
                    match pollster::block_on(append(&store, task, e, "r1", &ev, NOW)).unwrap() {
                        Appended::Seqs(..) => {}
                        Appended::LeaseLost => break,
                    }
                }
            });
            let finisher = scope.spawn(move || {
                let store = fx.store();
                barrier.wait();
                pollster::block_on(store.finish_run(&finish(
                    task,
                    e,
                    TerminalStatus::Completed,
                    NOW,
                )))
                .unwrap()
            });
            appender.join().unwrap();
            assert!(finisher.join().unwrap().is_some());
        });
        let s = fx.store();
        let events = s.events_after(&task, 0, 100, PAGE_BYTES).await.unwrap();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as i64).collect::<Vec<_>>(),
            "gap-free"
        );
        assert_eq!(events.last().unwrap().kind, "done", "done is last");
        assert_eq!(
            s.get_run(&task).await.unwrap().unwrap().last_seq,
            seqs.len() as i64
        );
    }
}

async fn a_duplicate_event_id_refuses_the_whole_batch<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(
        append(&s, "t1", e, "r1", &[event("x", "{}", Some("e1"))], NOW)
            .await
            .unwrap(),
        Appended::Seqs(vec![1], Waiting::NOTHING)
    );
    let duplicate = StoreError::Db(DbError::Duplicate {
        table: "run_event".into(),
    });
    // Against a stored event, and within one batch.
    for batch in [
        vec![event("x", "{}", Some("e2")), event("x", "{}", Some("e1"))],
        vec![event("x", "{}", Some("e3")), event("x", "{}", Some("e3"))],
    ] {
        assert_eq!(
            append(&s, "t1", e, "r1", &batch, NOW).await.unwrap_err(),
            duplicate
        );
    }
    // Nothing of the refused batches was written: the counter did not advance, no event landed.
    assert_eq!(s.get_run("t1").await.unwrap().unwrap().last_seq, 1);
    let events = s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap();
    assert_eq!(events.len(), 1);
    // The same event id in another run is another event.
    admit(&s, "t2", "s2", None, NOW).await;
    let e2 = s
        .lease("r2", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(
        append(&s, "t2", e2, "r2", &[event("x", "{}", Some("e1"))], NOW)
            .await
            .unwrap(),
        Appended::Seqs(vec![1], Waiting::NOTHING)
    );
    // And the first run carries on from 2.
    assert_eq!(
        append(&s, "t1", e, "r1", &[event("x", "{}", Some("e2"))], NOW)
            .await
            .unwrap(),
        Appended::Seqs(vec![2], Waiting::NOTHING)
    );
}

/// Runs `n` ticks of `tick` concurrently, each on its own connection.
fn concurrently<F, T>(fx: &F, n: usize, tick: impl Fn(&SqlStoreOf<F>) -> T + Sync) -> Vec<T>
where
    F: Fixture + Sync,
    T: Send,
{
    let barrier = std::sync::Barrier::new(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (barrier, tick) = (&barrier, &tick);
                scope.spawn(move || {
                    let store = fx.store();
                    barrier.wait();
                    tick(&store)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

type SqlStoreOf<F> = sema_core::store::SqlStore<<F as Fixture>::E>;

async fn overlapping_reaper_ticks_change_and_report_each_row_once<F: Fixture + Sync>(fx: &F) {
    let s = fx.store();
    let mut expected = vec![];
    for i in 0..7 {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, None, NOW + i).await;
        expected.push(SessionTask::new(session, task));
    }
    expected.sort();
    // Rounds of three overlapping ticks (3 runs each at most) until nothing is left. A tick that
    // finds its candidates taken by another reaps nothing; the next round picks up the rest.
    let (mut reaped, mut released) = (vec![], vec![]);
    for round in 0..10 {
        let reports = concurrently(fx, 3, |store| {
            pollster::block_on(reap_stale(store, NOW + 100, NOW + 200 + round, 3))
        });
        let mut idle = true;
        for r in reports {
            let r = r.unwrap();
            idle &= r.is_empty();
            reaped.extend(r.reaped);
            released.extend(r.terminal_claims_released);
            assert!(r.orphan_claims_released.is_empty());
        }
        if idle {
            break;
        }
    }
    reaped.sort();
    released.sort();
    assert_eq!(
        reaped, expected,
        "every stale run reaped and reported exactly once"
    );
    assert_eq!(
        released, expected,
        "every claim released and reported exactly once"
    );
    for p in &expected {
        assert_eq!(status_of(&s, &p.task_id).await, "failed");
        assert_eq!(holder_of(&s, &p.session_id).await, None);
    }
}

async fn overlapping_claim_sweeps_release_and_report_each_claim_once<F: Fixture + Sync>(fx: &F) {
    let s = fx.store();
    let mut terminal = vec![];
    let mut orphan = vec![];
    for i in 0..5 {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, None, NOW).await;
        terminal.push(SessionTask::new(session, task));
        orphan_claim(fx, &format!("o{i}"), &format!("ghost{i}"));
        orphan.push(SessionTask::new(format!("o{i}"), format!("ghost{i}")));
    }
    fx.raw("UPDATE task_run SET status = 'completed'");
    admit(&s, "live", "s-live", None, NOW).await;
    // Overlapping ticks read the same cursor, so they sweep the same window at once: rounds of
    // three, each round from the furthest cursor a tick of the previous round returned, until
    // every tick of a round reaches the end of the table.
    let (mut got_terminal, mut got_orphan) = (vec![], vec![]);
    let mut after = String::new();
    for _round in 0..20 {
        let swept = concurrently(fx, 3, |store| {
            pollster::block_on(sweep_window(store, &after, 3))
        });
        let mut next: Option<String> = None;
        for r in swept {
            let r = r.unwrap();
            assert!(r.report.reaped.is_empty());
            got_terminal.extend(r.report.terminal_claims_released);
            got_orphan.extend(r.report.orphan_claims_released);
            next = next.max(r.next);
        }
        match next {
            Some(n) => after = n,
            None => break,
        }
    }
    got_terminal.sort();
    got_orphan.sort();
    terminal.sort();
    orphan.sort();
    assert_eq!(
        got_terminal, terminal,
        "each terminal claim reported exactly once"
    );
    assert_eq!(
        got_orphan, orphan,
        "each orphan claim reported exactly once"
    );
    assert_eq!(holder_of(&s, "s-live").await.as_deref(), Some("live"));
    assert!(sweep(&s).await.unwrap().is_empty());
}

async fn a_reaper_reports_only_what_its_own_tick_changed<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "a", "sa", None, NOW).await;
    admit(&s, "b", "sb", None, NOW + 1).await;
    // Same `now`, two ticks: the second reports only its own run, not the first tick's.
    let first = reap_stale(&s, NOW + 10, NOW + 20, 1).await.unwrap();
    assert_eq!(first.reaped, pairs(&[("sa", "a")]));
    let second = reap_stale(&s, NOW + 10, NOW + 20, 1).await.unwrap();
    assert_eq!(second.reaped, pairs(&[("sb", "b")]));
    assert_eq!(second.terminal_claims_released, pairs(&[("sb", "b")]));
    // Parked runs: the expiry and timeout reapers report theirs the same way.
    admit(&s, "p", "sp", None, NOW).await;
    park_gate(fx, &s, "p", "human", Some(NOW + 5), NOW).await;
    admit(&s, "q", "sq", None, NOW).await;
    park(fx, &s, "q", ParkStatus::NeedsReview, NOW).await;
    let expired = fail_parked(&s, NOW + 20, 10).await.unwrap();
    assert_eq!(expired.reaped, pairs(&[("sp", "p")]));
    let timed_out = reap_parked(&s, NOW + 10, NOW + 20, 10).await.unwrap();
    assert_eq!(timed_out.reaped, pairs(&[("sq", "q")]));
    assert_eq!(timed_out.terminal_claims_released, pairs(&[("sq", "q")]));
    // The leader reaper names the runs it failed.
    for id in ["L1", "L2"] {
        s.create_leader_run(id, "x", None, None, NOW).await.unwrap();
    }
    assert_eq!(
        s.reap_stale_leader_runs(&unique("tick"), 5, NOW + 10)
            .await
            .unwrap(),
        ["L1", "L2"]
    );
    assert!(s
        .reap_stale_leader_runs(&unique("tick"), 5, NOW + 10)
        .await
        .unwrap()
        .is_empty());
}

// ---- Sessions that heal themselves: fencing by holder, acknowledged leases, requeue, two stale
// cutoffs, the guarded fail, takeover admission, the reaper tick log. ----

every_dialect!(
    runner_writes_without_the_current_lease_and_its_holder_write_nothing,
    the_lease_holders_writes_succeed_and_acknowledge_the_lease,
    an_append_by_the_holder_refreshes_liveness_and_acknowledges_the_lease,
    an_unacknowledged_lease_is_requeued_after_the_cutoff_and_its_silent_holder_is_fenced_out,
    an_acknowledged_lease_is_never_requeued,
    requeue_is_bounded_per_tick_and_oldest_first,
    overlapping_requeue_ticks_requeue_and_report_each_run_once,
    held_and_queued_runs_are_reaped_by_their_own_cutoff,
    a_guarded_fail_loses_to_a_heartbeat_that_landed_after_the_snapshot,
    a_guarded_fail_wins_when_nothing_changed_and_releases_the_claim,
    a_takeover_admits_the_new_run_and_fails_the_old_with_the_reason_and_no_error_code,
    a_takeover_whose_snapshot_is_outdated_returns_held_and_writes_nothing,
    a_takeover_refused_for_another_reason_writes_nothing_either,
    the_tick_log_keeps_only_the_newest_ticks_newest_first,
);

/// A heartbeat by `runner`.
fn beat_by<'a>(
    task: &'a str,
    lease_epoch: i64,
    runner: &'a str,
    delivery_id: &'a str,
    now: i64,
) -> Heartbeat<'a> {
    Heartbeat {
        runner_id: runner,
        ..beat(task, lease_epoch, delivery_id, now)
    }
}

async fn snapshot_of<S: RunReadStore>(s: &S, task: &str) -> RunSnapshot {
    RunSnapshot::of(&s.get_run(task).await.unwrap().expect("run exists"))
}

fn guarded<'a>(snapshot: &'a RunSnapshot, now: i64) -> GuardedFail<'a> {
    GuardedFail {
        snapshot,
        error: "runner silent",
        error_code: Some("run.stalled"),
        now,
    }
}

const TAKEOVER_REASON: &str = "superseded: the session was taken over";

async fn take_over<S: AdmissionStore>(
    s: &S,
    snapshot: &RunSnapshot,
    new: &NewRun<'_>,
) -> CreateRun {
    s.take_over_and_create(&Takeover {
        snapshot,
        reason: TAKEOVER_REASON,
        new,
    })
    .await
    .unwrap()
}

/// Every runner write by `(epoch, runner)` is refused and leaves the run exactly as it was.
async fn assert_refused<S: RunnerStore + LedgerStore + RunReadStore>(
    s: &S,
    task: &str,
    epoch: i64,
    runner: &str,
    now: i64,
) {
    let before = s.get_run(task).await.unwrap().unwrap();
    let events_before = s
        .events_after(task, 0, 100, PAGE_BYTES)
        .await
        .unwrap()
        .len();
    let what = format!("{task}: epoch {epoch}, runner {runner:?}");
    assert_eq!(
        s.heartbeat(&beat_by(task, epoch, runner, &unique("d"), now))
            .await
            .unwrap(),
        None,
        "heartbeat, {what}"
    );
    assert_eq!(
        append(s, task, epoch, runner, &[event("x", "{}", None)], now)
            .await
            .unwrap(),
        Appended::LeaseLost,
        "append, {what}"
    );
    assert_eq!(
        s.finish_run(&Finish {
            runner_id: runner,
            ..finish(task, epoch, TerminalStatus::Completed, now)
        })
        .await
        .unwrap(),
        None,
        "finish, {what}"
    );
    assert_eq!(
        s.get_run(task).await.unwrap().unwrap(),
        before,
        "nothing written, {what}"
    );
    assert_eq!(
        s.events_after(task, 0, 100, PAGE_BYTES)
            .await
            .unwrap()
            .len(),
        events_before,
        "no event, {what}"
    );
}

async fn runner_writes_without_the_current_lease_and_its_holder_write_nothing<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW + 1).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 2, 8)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(e, 1);
    // Unleased (queued): epoch 0 never matches, nor does a guessed epoch 1.
    admit(&s, "queued", "s0", None, NOW).await;
    for epoch in [0, 1, -1] {
        assert_refused(&s, "queued", epoch, "r1", NOW + 1).await;
    }
    // Leased by r1: epoch 0, a stale or future epoch, another runner, an empty runner id.
    assert_eq!(steer(&s, "t1", "turn left", NOW + 3).await, Some(1));
    for (epoch, runner) in [(0, "r1"), (e + 1, "r1"), (e, "r2"), (e, ""), (e, "R1")] {
        assert_refused(&s, "t1", epoch, runner, NOW + 4).await;
    }
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.heartbeat_at, run.lease_acked, run.held_by.as_deref()),
        (Some(NOW + 2), false, Some("r1"))
    );
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("t1"));
    // The steer message was not taken by a refused heartbeat: the holder gets it.
    let b = s
        .heartbeat(&beat("t1", e, "d-holder", NOW + 5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.steer, vec![(1, "turn left".to_owned())]);
}

async fn the_lease_holders_writes_succeed_and_acknowledge_the_lease<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert!(!s.get_run("t1").await.unwrap().unwrap().lease_acked);
    assert!(s
        .heartbeat(&beat("t1", e, "d1", NOW + 2))
        .await
        .unwrap()
        .is_some());
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!((run.heartbeat_at, run.lease_acked), (Some(NOW + 2), true));
    assert_eq!(
        append(&s, "t1", e, "r1", &[event("x", "{}", None)], NOW + 3)
            .await
            .unwrap(),
        Appended::Seqs(vec![1], Waiting::NOTHING)
    );
    assert_eq!(
        s.finish_run(&finish("t1", e, TerminalStatus::Completed, NOW + 4))
            .await
            .unwrap()
            .map(|run| run.last_seq),
        Some(2)
    );
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!((run.status.as_str(), run.held_by), ("completed", None));
    assert_eq!(holder_of(&s, "s1").await, None);
    // A new lease starts unacknowledged again.
    admit(&s, "t2", "s1", None, NOW + 5).await;
    let e2 = s
        .lease("r2", DEFAULT_QUEUE, NOW + 6, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(e2, 1);
    assert!(!s.get_run("t2").await.unwrap().unwrap().lease_acked);
}

async fn an_append_by_the_holder_refreshes_liveness_and_acknowledges_the_lease<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!((run.heartbeat_at, run.lease_acked), (Some(NOW + 1), false));
    append(&s, "t1", e, "r1", &[event("x", "{}", None)], NOW + 5)
        .await
        .unwrap();
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.heartbeat_at, run.lease_acked, run.updated_at),
        (Some(NOW + 5), true, NOW + 5)
    );
    // Acknowledged: never requeued, however old its lease.
    assert_eq!(
        requeue(&s, NOW + 1_000, NOW + 1_000, 10).await.unwrap(),
        vec![]
    );
    // Alive by its appends: a held-stale cutoff before the append does not reap it.
    let cutoffs = StaleCutoffs {
        held: NOW + 5,
        queued: NOW + 5,
    };
    assert!(reap_stale_with(&s, &cutoffs, NOW + 6, 10)
        .await
        .unwrap()
        .reaped
        .is_empty());
    assert_eq!(status_of(&s, "t1").await, "running");
}

async fn an_unacknowledged_lease_is_requeued_after_the_cutoff_and_its_silent_holder_is_fenced_out<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    // Not before the cutoff passes the lease time.
    assert_eq!(requeue(&s, NOW + 1, NOW + 5, 10).await.unwrap(), vec![]);
    assert_eq!(
        requeue(&s, NOW + 2, NOW + 10, 10).await.unwrap(),
        pairs(&[("s1", "t1")])
    );
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.held_by.as_deref(),
            run.lease_epoch,
            run.heartbeat_at,
            run.lease_acked
        ),
        ("running", None, e + 1, Some(NOW + 10), false)
    );
    assert_eq!(
        holder_of(&s, "s1").await.as_deref(),
        Some("t1"),
        "claim kept"
    );
    // The silent holder wakes up: its lease is gone.
    assert_refused(&s, "t1", e, "r1", NOW + 11).await;
    // Requeued once: an unheld run is not requeued again.
    assert_eq!(requeue(&s, NOW + 100, NOW + 100, 10).await.unwrap(), vec![]);
    // Another runner leases it under a newer epoch still; the old holder stays fenced out.
    let lease = s
        .lease("r2", DEFAULT_QUEUE, NOW + 12, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((lease.task_id.as_str(), lease.lease_epoch), ("t1", e + 2));
    assert_refused(&s, "t1", e, "r1", NOW + 13).await;
    assert_refused(&s, "t1", e + 2, "r1", NOW + 13).await;
    assert!(s
        .heartbeat(&beat_by("t1", e + 2, "r2", "d", NOW + 14))
        .await
        .unwrap()
        .is_some());
}

async fn an_acknowledged_lease_is_never_requeued<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "acked", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    // A heartbeat in the lease's own millisecond still acknowledges it.
    assert!(s
        .heartbeat(&beat("acked", e, "d1", NOW))
        .await
        .unwrap()
        .is_some());
    // Queued and parked runs are not requeued either (nobody holds them).
    admit(&s, "queued", "s2", None, NOW).await;
    admit(&s, "parked", "s3", None, NOW).await;
    park(fx, &s, "parked", ParkStatus::Suspended, NOW).await;
    assert_eq!(
        requeue(&s, NOW + 10_000, NOW + 10_000, 10).await.unwrap(),
        vec![]
    );
    let run = s.get_run("acked").await.unwrap().unwrap();
    assert_eq!(
        (run.held_by.as_deref(), run.lease_epoch, run.lease_acked),
        (Some("r1"), e, true)
    );
    assert_eq!(s.get_run("queued").await.unwrap().unwrap().lease_epoch, 0);
}

async fn requeue_is_bounded_per_tick_and_oldest_first<F: Fixture>(fx: &F) {
    let s = fx.store();
    for i in 0..3 {
        admit(&s, &format!("t{i}"), &format!("s{i}"), None, NOW).await;
        s.lease("r1", DEFAULT_QUEUE, NOW + i, 8)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(
        requeue(&s, NOW + 10, NOW + 20, 2).await.unwrap(),
        pairs(&[("s0", "t0"), ("s1", "t1")]),
        "the two oldest leases first"
    );
    assert_eq!(
        requeue(&s, NOW + 10, NOW + 20, 2).await.unwrap(),
        pairs(&[("s2", "t2")])
    );
    assert_eq!(requeue(&s, NOW + 10, NOW + 20, 2).await.unwrap(), vec![]);
}

async fn overlapping_requeue_ticks_requeue_and_report_each_run_once<F: Fixture + Sync>(fx: &F) {
    let s = fx.store();
    let mut expected = vec![];
    for i in 0..7 {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, None, NOW).await;
        s.lease(&format!("r{i}"), DEFAULT_QUEUE, NOW + i, 8)
            .await
            .unwrap()
            .unwrap();
        expected.push(SessionTask::new(session, task));
    }
    expected.sort();
    let mut requeued = vec![];
    for round in 0..10 {
        let reports = concurrently(fx, 3, |store| {
            pollster::block_on(requeue(store, NOW + 100, NOW + 200 + round, 3))
        });
        let mut idle = true;
        for r in reports {
            let r = r.unwrap();
            idle &= r.is_empty();
            requeued.extend(r);
        }
        if idle {
            break;
        }
    }
    requeued.sort();
    assert_eq!(
        requeued, expected,
        "every unacknowledged lease requeued and reported exactly once"
    );
    for p in &expected {
        let run = s.get_run(&p.task_id).await.unwrap().unwrap();
        assert_eq!(
            (run.held_by, run.lease_epoch),
            (None, 2),
            "{}: one requeue, one epoch bump",
            p.task_id
        );
    }
}

async fn held_and_queued_runs_are_reaped_by_their_own_cutoff<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "held_old", "s1", None, NOW - 2).await;
    admit(&s, "held_young", "s2", None, NOW - 1).await;
    assert_eq!(
        s.lease("r1", DEFAULT_QUEUE, NOW + 10, 1)
            .await
            .unwrap()
            .unwrap()
            .task_id,
        "held_old"
    );
    let e = s
        .lease("r2", DEFAULT_QUEUE, NOW + 10, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    s.heartbeat(&beat_by("held_young", e, "r2", "d", NOW + 80))
        .await
        .unwrap()
        .unwrap();
    admit(&s, "queued_old", "s3", None, NOW).await;
    admit(&s, "queued_young", "s4", None, NOW + 50).await;
    // heartbeat_at: held_old NOW+10, held_young NOW+80, queued_old NOW, queued_young NOW+50.
    let cutoffs = StaleCutoffs {
        held: NOW + 70,
        queued: NOW + 20,
    };
    // Bounded in all, oldest first across both kinds.
    let first = reap_stale_with(&s, &cutoffs, NOW + 100, 1).await.unwrap();
    assert_eq!(first.reaped, pairs(&[("s3", "queued_old")]));
    let second = reap_stale_with(&s, &cutoffs, NOW + 100, 10).await.unwrap();
    assert_eq!(second.reaped, pairs(&[("s1", "held_old")]));
    assert_eq!(
        second.terminal_claims_released,
        pairs(&[("s1", "held_old")])
    );
    assert!(reap_stale_with(&s, &cutoffs, NOW + 100, 10)
        .await
        .unwrap()
        .is_empty());
    for task in ["held_old", "queued_old"] {
        let run = s.get_run(task).await.unwrap().unwrap();
        assert_eq!(
            (
                run.status.as_str(),
                run.error.as_deref(),
                run.error_code.as_deref(),
                run.held_by
            ),
            (
                "failed",
                Some("run stalled (instance lost?)"),
                Some("run.stalled"),
                None
            ),
            "{task}"
        );
    }
    // queued_young (NOW+50) is younger than the queued cutoff though older than the held one;
    // held_young (NOW+80) is younger than the held cutoff.
    assert_eq!(status_of(&s, "queued_young").await, "running");
    assert_eq!(status_of(&s, "held_young").await, "running");
    // The other way round: the queued cutoff takes queued_young, the held cutoff spares held_young.
    let cutoffs = StaleCutoffs {
        held: NOW + 5,
        queued: NOW + 60,
    };
    let third = reap_stale_with(&s, &cutoffs, NOW + 200, 10).await.unwrap();
    assert_eq!(third.reaped, pairs(&[("s4", "queued_young")]));
    assert_eq!(
        third.terminal_claims_released,
        pairs(&[("s4", "queued_young")])
    );
    assert_eq!(status_of(&s, "held_young").await, "running");
    assert_eq!(holder_of(&s, "s2").await.as_deref(), Some("held_young"));
}

async fn a_guarded_fail_loses_to_a_heartbeat_that_landed_after_the_snapshot<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let snapshot = snapshot_of(&s, "t1").await;
    s.heartbeat(&beat("t1", e, "d1", NOW + 2))
        .await
        .unwrap()
        .unwrap();
    assert!(!s
        .fail_if_unchanged(&guarded(&snapshot, NOW + 3))
        .await
        .unwrap());
    // An append, a requeue and a lease change the evidence the same way.
    let snapshot = snapshot_of(&s, "t1").await;
    append(&s, "t1", e, "r1", &[event("x", "{}", None)], NOW + 4)
        .await
        .unwrap();
    assert!(!s
        .fail_if_unchanged(&guarded(&snapshot, NOW + 5))
        .await
        .unwrap());
    admit(&s, "t2", "s2", None, NOW).await;
    let queued = snapshot_of(&s, "t2").await;
    s.lease("r2", DEFAULT_QUEUE, NOW, 1).await.unwrap().unwrap();
    assert!(!s
        .fail_if_unchanged(&guarded(&queued, NOW + 5))
        .await
        .unwrap());
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.error, run.held_by.as_deref()),
        ("running", None, Some("r1"))
    );
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("t1"));
    assert_eq!(status_of(&s, "t2").await, "running");
}

async fn a_guarded_fail_wins_when_nothing_changed_and_releases_the_claim<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    s.lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    let snapshot = snapshot_of(&s, "t1").await;
    assert_eq!(snapshot.held_by.as_deref(), Some("r1"));
    assert!(s
        .fail_if_unchanged(&guarded(&snapshot, NOW + 9))
        .await
        .unwrap());
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.error.as_deref(),
            run.error_code.as_deref(),
            run.held_by,
            run.updated_at
        ),
        (
            "failed",
            Some("runner silent"),
            Some("run.stalled"),
            None,
            NOW + 9
        )
    );
    assert_eq!(holder_of(&s, "s1").await, None, "claim released");
    assert!(
        !s.fail_if_unchanged(&guarded(&snapshot, NOW + 10))
            .await
            .unwrap(),
        "once"
    );
    // A queued run (nobody holds it) matches NULL-safely; no error code is written as NULL.
    admit(&s, "t2", "s2", None, NOW).await;
    let queued = snapshot_of(&s, "t2").await;
    assert_eq!(queued.held_by, None);
    let g = GuardedFail {
        error_code: None,
        ..guarded(&queued, NOW + 9)
    };
    assert!(s.fail_if_unchanged(&g).await.unwrap());
    let run = s.get_run("t2").await.unwrap().unwrap();
    assert_eq!((run.status.as_str(), run.error_code), ("failed", None));
    assert_eq!(holder_of(&s, "s2").await, None);
    // The snapshot survives a serde round trip (a session object stores it).
    let text = sema_core::json::to_text(&snapshot).unwrap();
    assert_eq!(
        serde_json::from_str::<RunSnapshot>(&text).unwrap(),
        snapshot
    );
}

async fn a_takeover_admits_the_new_run_and_fails_the_old_with_the_reason_and_no_error_code<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    admit(&s, "old", "s1", Some("alice"), NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let snapshot = snapshot_of(&s, "old").await;
    let new = NewRun {
        idempotency: Some((&"k".repeat(64), &"f".repeat(64), 202, "{}")),
        ..new_run("new", "s1", Some("alice"), NOW + 50)
    };
    let out = take_over(&s, &snapshot, &new).await;
    assert_eq!(out, CreateRun::Created);
    let old = s.get_run("old").await.unwrap().unwrap();
    assert_eq!(
        (
            old.status.as_str(),
            old.error.as_deref(),
            old.error_code,
            old.held_by,
            old.updated_at
        ),
        ("failed", Some(TAKEOVER_REASON), None, None, NOW + 50)
    );
    let run = s.get_run("new").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.owner.as_deref(), run.lease_epoch),
        ("running", Some("alice"), 0)
    );
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("new"));
    assert_eq!(
        s.idempotency(&"k".repeat(64))
            .await
            .unwrap()
            .unwrap()
            .task_id,
        "new"
    );
    // The old holder is fenced out.
    assert_refused(&s, "old", e, "r1", NOW + 51).await;
}

async fn a_takeover_whose_snapshot_is_outdated_returns_held_and_writes_nothing<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "old", "s1", None, NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let snapshot = snapshot_of(&s, "old").await;
    s.heartbeat(&beat("old", e, "d1", NOW + 2))
        .await
        .unwrap()
        .unwrap();
    let before = s.get_run("old").await.unwrap().unwrap();
    let session_before = s.get_session("s1").await.unwrap().unwrap();
    let new = NewRun {
        idempotency: Some((&"k".repeat(64), &"f".repeat(64), 202, "{}")),
        ..new_run("new", "s1", None, NOW + 50)
    };
    let out = take_over(&s, &snapshot, &new).await;
    let CreateRun::Held(Some(holder)) = out else {
        panic!("expected Held with the holder, got {out:?}");
    };
    assert_eq!(
        (holder.task_id.as_str(), holder.status.as_deref()),
        ("old", Some("running"))
    );
    assert_eq!(
        s.get_run("old").await.unwrap().unwrap(),
        before,
        "old row untouched"
    );
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("old"));
    assert!(s.get_run("new").await.unwrap().is_none(), "no new row");
    assert!(s.idempotency(&"k".repeat(64)).await.unwrap().is_none());
    assert_eq!(s.get_session("s1").await.unwrap().unwrap(), session_before);
    // The holder carries on.
    assert!(s
        .heartbeat(&beat("old", e, "d2", NOW + 51))
        .await
        .unwrap()
        .is_some());
}

async fn a_takeover_refused_for_another_reason_writes_nothing_either<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "old", "s1", Some("alice"), NOW).await;
    s.lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap();
    admit(&s, "elsewhere", "s2", Some("alice"), NOW).await;
    let snapshot = snapshot_of(&s, "old").await;
    let before = s.get_run("old").await.unwrap().unwrap();
    // Another principal's session.
    assert_eq!(
        take_over(
            &s,
            &snapshot,
            &new_run("new", "s1", Some("mallory"), NOW + 5)
        )
        .await,
        CreateRun::ForeignSession {
            owner: Some("alice".into())
        }
    );
    // A taken task id.
    let CreateRun::TaskIdTaken(Some(taken)) = take_over(
        &s,
        &snapshot,
        &new_run("elsewhere", "s1", Some("alice"), NOW + 5),
    )
    .await
    else {
        panic!("expected TaskIdTaken");
    };
    assert_eq!(taken.task_id, "elsewhere");
    // A snapshot of a run of another session never fails that run.
    let other = snapshot_of(&s, "elsewhere").await;
    let out = take_over(&s, &other, &new_run("new", "s1", Some("alice"), NOW + 5)).await;
    assert!(
        matches!(out, CreateRun::Held(Some(ref h)) if h.task_id == "old"),
        "{out:?}"
    );
    assert_eq!(status_of(&s, "elsewhere").await, "running");
    assert_eq!(s.get_run("old").await.unwrap().unwrap(), before);
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("old"));
    assert!(s.get_run("new").await.unwrap().is_none());
}

async fn the_tick_log_keeps_only_the_newest_ticks_newest_first<F: Fixture>(fx: &F) {
    let s = fx.store();
    assert!(s.recent_ticks(10).await.unwrap().is_empty());
    // Started at 1, 2, 3, 3, 5 (a tie broken by tick id); keep 3.
    let ticks = [("a", 1), ("b", 2), ("c", 3), ("d", 3), ("e", 5)];
    for (id, started) in ticks {
        let report = format!(r#"{{"tick":"{id}","reaped":[]}}"#);
        s.record_tick(
            &TickRecord {
                tick_id: id,
                started_at: NOW + started,
                finished_at: NOW + started + 7,
                report_json: &report,
            },
            3,
        )
        .await
        .unwrap();
    }
    let recent = s.recent_ticks(10).await.unwrap();
    assert_eq!(
        recent
            .iter()
            .map(|t| t.tick_id.as_str())
            .collect::<Vec<_>>(),
        ["e", "d", "c"]
    );
    assert_eq!(
        (recent[0].started_at, recent[0].finished_at),
        (NOW + 5, NOW + 12)
    );
    assert_eq!(
        sema_core::json::parse(&recent[1].report_json).unwrap(),
        sema_core::json!({"tick": "d", "reaped": []})
    );
    assert_eq!(s.recent_ticks(2).await.unwrap().len(), 2);
    // Keeping fewer trims further; a reused tick id is refused.
    s.record_tick(
        &TickRecord {
            tick_id: "f",
            started_at: NOW + 6,
            finished_at: NOW + 6,
            report_json: "{}",
        },
        1,
    )
    .await
    .unwrap();
    let recent = s.recent_ticks(10).await.unwrap();
    assert_eq!(
        recent
            .iter()
            .map(|t| t.tick_id.as_str())
            .collect::<Vec<_>>(),
        ["f"]
    );
    assert!(s
        .record_tick(
            &TickRecord {
                tick_id: "f",
                started_at: NOW + 7,
                finished_at: NOW + 7,
                report_json: "{}",
            },
            5,
        )
        .await
        .is_err());
}

every_dialect!(
    a_park_is_fenced_by_the_lease_epoch_and_its_holder,
    a_session_holds_at_most_one_pending_gate,
    of_two_concurrent_deciders_exactly_one_wins,
    deny_and_stop_end_the_run_with_done_and_free_the_session_in_one_batch,
    wake_completes_the_parked_run_with_its_card_and_frees_the_session,
    a_decide_tells_nothing_pending_from_another_kind_from_expired_from_a_lost_race,
    cancel_and_terminal_writes_void_the_pending_gate,
    no_read_returns_the_token_or_its_digest,
    the_next_lease_carries_the_decision_until_the_run_parks_again,
    pending_gates_are_listed_oldest_first_by_owner_in_bounded_pages,
);

/// A park by `runner` under `lease_epoch` (every field a test varies is a parameter).
#[allow(clippy::too_many_arguments)]
fn park_of<'a>(
    task: &'a str,
    lease_epoch: i64,
    runner: &'a str,
    checkpoint_id: &'a str,
    kind: &'a str,
    card: &'a str,
    event: &'a str,
    now: i64,
) -> Park<'a> {
    Park {
        task_id: task,
        lease_epoch,
        runner_id: runner,
        checkpoint_id,
        gate_kind: kind,
        status: gate::park_status(kind).unwrap(),
        card_json: card,
        event_json: event,
        expires_at: Some(now + 60_000),
        now,
    }
}

async fn a_park_is_fenced_by_the_lease_epoch_and_its_holder<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 1, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let id = gate::checkpoint_id(b"token-1");
    let card = r#"{"plan":"three steps"}"#;
    let event = gate::park_event_data(
        "plan_review",
        &serde_json::from_str(card).unwrap(),
        Some(NOW + 2 + 60_000),
    );
    for (epoch, runner) in [(e + 1, "r1"), (e - 1, "r1"), (0, "r1"), (e, "r2")] {
        assert_eq!(
            s.park(&park_of(
                "t1",
                epoch,
                runner,
                &id,
                "plan_review",
                card,
                &event,
                NOW + 2
            ))
            .await
            .unwrap(),
            Parked::LeaseLost,
            "epoch {epoch}, runner {runner}"
        );
    }
    // Nothing was written by the refused parks.
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.held_by.as_deref(), run.last_seq),
        ("running", Some("r1"), 0)
    );
    assert!(s
        .events_after("t1", 0, 10, PAGE_BYTES)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.pending_gate("s1").await.unwrap(), None);

    let parked = s
        .park(&park_of(
            "t1",
            e,
            "r1",
            &id,
            "plan_review",
            card,
            &event,
            NOW + 2,
        ))
        .await
        .unwrap();
    assert_eq!(parked, Parked::Parked { seq: 1 });
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.held_by,
            run.last_seq,
            run.updated_at
        ),
        ("needs_review", None, 1, NOW + 2)
    );
    assert_eq!(
        holder_of(&s, "s1").await.as_deref(),
        Some("t1"),
        "the claim stays"
    );
    let events = s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].seq, events[0].kind.as_str()),
        (1, "needs_review")
    );
    assert_eq!(
        sema_core::json::parse(&events[0].data).unwrap(),
        sema_core::json!({
            "gate": {"kind": "plan_review", "card": {"plan": "three steps"}},
            "expiresAt": NOW + 2 + 60_000
        })
    );
    let pending = s.pending_gate("s1").await.unwrap().unwrap();
    assert_eq!(
        (
            pending.task_id.as_str(),
            pending.kind.as_str(),
            pending.expires_at,
            pending.created_at
        ),
        ("t1", "plan_review", Some(NOW + 2 + 60_000), NOW + 2)
    );
    assert_eq!(
        sema_core::json::parse(&pending.card).unwrap(),
        sema_core::json!({"plan": "three steps"})
    );
    // The parked leg's lease is over: parking again, appending or finishing writes nothing.
    let again = gate::checkpoint_id(b"token-2");
    assert_eq!(
        s.park(&park_of(
            "t1",
            e,
            "r1",
            &again,
            "plan_review",
            card,
            &event,
            NOW + 3
        ))
        .await
        .unwrap(),
        Parked::LeaseLost
    );
    assert_eq!(
        append(&s, "t1", e, "r1", &[event_x()], NOW + 3)
            .await
            .unwrap(),
        Appended::LeaseLost
    );
    assert_eq!(
        s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap().len(),
        1
    );
}

fn event_x() -> NewEvent<'static> {
    NewEvent {
        kind: "x",
        data: "{}",
        event_id: None,
    }
}

async fn a_session_holds_at_most_one_pending_gate<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    assert!(matches!(
        park_gate(fx, &s, "t1", "tool_approval", None, NOW).await,
        Parked::Parked { seq: 1 }
    ));
    // Out of band, the run is driven again while its gate is still pending (the store never leaves
    // this shape; an operator's manual write could). A second park in the session is refused whole.
    fx.raw(
        "UPDATE task_run SET status = 'running', held_by = 'r2', lease_epoch = lease_epoch + 1 \
         WHERE task_id = 't1'",
    );
    let run = s.get_run("t1").await.unwrap().unwrap();
    let out = park_gate(fx, &s, "t1", "human", None, NOW + 1).await;
    let Parked::GatePending(Some(first)) = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        (first.task_id.as_str(), first.kind.as_str()),
        ("t1", "tool_approval")
    );
    let after = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (after.status.as_str(), after.last_seq, after.held_by),
        ("running", run.last_seq, Some("r2".to_owned())),
        "nothing written"
    );
    assert_eq!(
        s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap().len(),
        1
    );
    assert_eq!(
        s.list_pending_gates(&ListScope::All, Some("s1"), None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn of_two_concurrent_deciders_exactly_one_wins<F: Fixture + Sync>(fx: &F) {
    for round in 0..6 {
        let (task, session) = (format!("race{round}"), format!("s{round}"));
        admit(&fx.store(), &task, &session, None, NOW).await;
        park_gate(fx, &fx.store(), &task, "tool_approval", None, NOW).await;
        // Even rounds: both approve; odd rounds: one approves, one denies.
        let decisions = if round % 2 == 0 {
            [Decision::Approve, Decision::Approve]
        } else {
            [Decision::Approve, Decision::Deny]
        };
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<Decided> = std::thread::scope(|scope| {
            let handles: Vec<_> = decisions
                .iter()
                .map(|decision| {
                    let (barrier, session) = (&barrier, &session);
                    scope.spawn(move || {
                        let store = fx.store();
                        barrier.wait();
                        pollster::block_on(decide(
                            &store,
                            DecidePath::Approvals,
                            GateScope::Session(session),
                            *decision,
                            None,
                            NOW + 1,
                        ))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = outcomes
            .iter()
            .filter(|o| !matches!(o, Decided::Refused(_)))
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes.contains(&Decided::Refused(Refusal::LostRace)),
            "round {round}: {outcomes:?}"
        );
        let s = fx.store();
        let run = s.get_run(&task).await.unwrap().unwrap();
        let kinds: Vec<String> = s
            .events_after(&task, 0, 10, PAGE_BYTES)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        match won[0] {
            Decided::Resumed { lease_epoch, .. } => {
                assert_eq!(
                    (run.status.as_str(), run.lease_epoch),
                    ("running", *lease_epoch)
                );
                assert_eq!(run.lease_epoch, 2, "one bump over the parked leg's lease");
                assert_eq!(kinds, ["suspended", "resumed"]);
                assert_eq!(
                    holder_of(&s, &session).await.as_deref(),
                    Some(task.as_str())
                );
            }
            Decided::Ended { status, .. } => {
                assert_eq!(
                    (run.status.as_str(), *status),
                    ("cancelled", TerminalStatus::Cancelled)
                );
                assert_eq!(kinds, ["suspended", "done"]);
                assert_eq!(holder_of(&s, &session).await, None);
            }
            Decided::Refused(_) => unreachable!(),
        }
    }
}

async fn deny_and_stop_end_the_run_with_done_and_free_the_session_in_one_batch<F: Fixture>(fx: &F) {
    let s = fx.store();
    let cases = [
        (
            "tool_approval",
            DecidePath::Approvals,
            Decision::Deny,
            "approval.denied",
        ),
        (
            "resource_limit",
            DecidePath::Resume,
            Decision::Stop,
            "resource_limit.stopped",
        ),
    ];
    for (i, (kind, path, decision, code)) in cases.into_iter().enumerate() {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, None, NOW).await;
        park_gate(fx, &s, &task, kind, Some(NOW + 1_000), NOW).await;
        let scope = if path.by_session() {
            GateScope::Session(&session)
        } else {
            GateScope::Task(&task)
        };
        let out = decide(&s, path, scope, decision, Some("not now"), NOW + 5).await;
        assert_eq!(
            out,
            Decided::Ended {
                session_id: session.clone(),
                task_id: task.clone(),
                kind: kind.into(),
                status: TerminalStatus::Cancelled,
                done_seq: 2,
                queue: DEFAULT_QUEUE.into(),
            }
        );
        let run = s.get_run(&task).await.unwrap().unwrap();
        assert_eq!(
            (
                run.status.as_str(),
                run.error_code.as_deref(),
                run.held_by,
                run.last_seq
            ),
            ("cancelled", Some(code), None, 2)
        );
        assert_eq!(
            sema_core::json::parse(run.result.as_deref().unwrap()).unwrap(),
            sema_core::json!({"gate": kind, "decision": decision.as_str(), "reason": "not now"})
        );
        let events = s.events_after(&task, 0, 10, PAGE_BYTES).await.unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!((events[1].seq, events[1].kind.as_str()), (2, "done"));
        let done: sema_core::json::Value = serde_json::from_str(&events[1].data).unwrap();
        assert_eq!(
            (done["status"].as_str(), done["errorCode"].as_str()),
            (Some("cancelled"), Some(code))
        );
        assert_eq!(holder_of(&s, &session).await, None, "claim released");
        assert_eq!(s.pending_gate(&session).await.unwrap(), None);
        // A repeat lost to the decision that ended the run; a terminal run is never leased.
        assert_eq!(
            decide(&s, path, scope, decision, None, NOW + 6).await,
            Decided::Refused(Refusal::LostRace)
        );
        admit(&s, &format!("next{i}"), &session, None, NOW + 7).await;
    }
    assert_eq!(
        s.lease("r1", DEFAULT_QUEUE, NOW + 8, 8)
            .await
            .unwrap()
            .unwrap()
            .task_id,
        "next0"
    );
}

async fn wake_completes_the_parked_run_with_its_card_and_frees_the_session<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    park_gate(fx, &s, "t1", "task_done", None, NOW).await;
    assert_eq!(status_of(&s, "t1").await, "suspended");
    let out = decide(
        &s,
        DecidePath::Wake,
        GateScope::Session("s1"),
        Decision::Wake,
        None,
        NOW + 1,
    )
    .await;
    assert_eq!(
        out,
        Decided::Ended {
            session_id: "s1".into(),
            task_id: "t1".into(),
            kind: "task_done".into(),
            status: TerminalStatus::Completed,
            done_seq: 2,
            queue: DEFAULT_QUEUE.into(),
        }
    );
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!((run.status.as_str(), run.error_code), ("completed", None));
    assert_eq!(
        sema_core::json::parse(run.result.as_deref().unwrap()).unwrap(),
        sema_core::json!({"ask": "task_done for t1"})
    );
    let done = &s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap()[1];
    assert_eq!(
        sema_core::json::parse(&done.data).unwrap(),
        sema_core::json!({"status": "completed", "result": {"ask": "task_done for t1"}})
    );
    // The session is free for the new run the object admits next.
    assert_eq!(holder_of(&s, "s1").await, None);
    admit(&s, "t2", "s1", None, NOW + 2).await;
    // A second wake finds the woken task settled by the first.
    assert_eq!(
        decide(
            &s,
            DecidePath::Wake,
            GateScope::Session("s1"),
            Decision::Wake,
            None,
            NOW + 3
        )
        .await,
        Decided::Refused(Refusal::LostRace)
    );
}

async fn a_decide_tells_nothing_pending_from_another_kind_from_expired_from_a_lost_race<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let approvals = |session: &'static str, now: i64| {
        decide(
            &s,
            DecidePath::Approvals,
            GateScope::Session(session),
            Decision::Approve,
            None,
            now,
        )
    };
    // Nothing ever parked.
    admit(&s, "t1", "s1", None, NOW).await;
    assert_eq!(
        approvals("s1", NOW).await,
        Decided::Refused(Refusal::NothingPending)
    );
    assert_eq!(
        approvals("nowhere", NOW).await,
        Decided::Refused(Refusal::NothingPending)
    );
    // A pending plan review: the approvals and resume paths name its own path.
    park_gate(fx, &s, "t1", "plan_review", Some(NOW + 100), NOW).await;
    let wrong = Decided::Refused(Refusal::WrongKind {
        kind: "plan_review".into(),
        decide_path: Some("/v1/assistant/tasks/t1/plan_review".into()),
    });
    assert_eq!(approvals("s1", NOW + 1).await, wrong);
    assert_eq!(
        decide(
            &s,
            DecidePath::Resume,
            GateScope::Task("t1"),
            Decision::Continue,
            None,
            NOW + 1
        )
        .await,
        wrong
    );
    // Past its deadline (the reaper has not run yet): expired, and nothing is written.
    let review = |now: i64| {
        decide(
            &s,
            DecidePath::PlanReview,
            GateScope::Task("t1"),
            Decision::Approve,
            None,
            now,
        )
    };
    assert_eq!(review(NOW + 100).await, Decided::Refused(Refusal::Expired));
    assert_eq!(status_of(&s, "t1").await, "needs_review");
    assert!(s.pending_gate("s1").await.unwrap().is_some());
    // In time: resumed; then a second decision lost the race.
    assert!(matches!(review(NOW + 99).await, Decided::Resumed { .. }));
    assert_eq!(review(NOW + 99).await, Decided::Refused(Refusal::LostRace));
    // Once the resumed run has completed, nothing is pending any more.
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW + 100, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    s.finish_run(&finish("t1", e, TerminalStatus::Completed, NOW + 101))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        review(NOW + 102).await,
        Decided::Refused(Refusal::NothingPending)
    );
    // A run of another session is never reached through this one.
    admit(&s, "t2", "s2", None, NOW).await;
    park_gate(fx, &s, "t2", "human", None, NOW).await;
    assert_eq!(
        approvals("s1", NOW + 103).await,
        Decided::Refused(Refusal::NothingPending)
    );
    assert_eq!(status_of(&s, "t2").await, "suspended");
}

async fn cancel_and_terminal_writes_void_the_pending_gate<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    park_gate(fx, &s, "t1", "human", Some(NOW + 10), NOW).await;
    let c = s.cancel("t1", NOW + 1).await.unwrap();
    assert!(c.claim_released);
    assert_eq!(c.run.unwrap().status, "cancelled");
    assert_eq!(s.pending_gate("s1").await.unwrap(), None);
    assert_eq!(
        decide(
            &s,
            DecidePath::Approvals,
            GateScope::Session("s1"),
            Decision::Approve,
            None,
            NOW + 2
        )
        .await,
        Decided::Refused(Refusal::NothingPending)
    );
    // The abandoned gate (its deadline long past) neither blocks nor shields a later park: the next
    // run parks, and only its own deadline decides its expiry.
    admit(&s, "t2", "s1", None, NOW + 3).await;
    assert!(matches!(
        park_gate(fx, &s, "t2", "human", Some(NOW + 1_000), NOW + 3).await,
        Parked::Parked { .. }
    ));
    assert_eq!(fail_parked(&s, NOW + 500, 10).await.unwrap().reaped, vec![]);
    assert_eq!(s.pending_gate("s1").await.unwrap().unwrap().task_id, "t2");
    // A terminal write on a parked run voids its gate too.
    assert!(s
        .set_terminal(&terminal("t2", TerminalStatus::Failed, NOW + 600))
        .await
        .unwrap());
    assert_eq!(s.pending_gate("s1").await.unwrap(), None);
    assert_eq!(holder_of(&s, "s1").await, None);
    assert_eq!(
        fail_parked(&s, NOW + 2_000, 10).await.unwrap().reaped,
        vec![]
    );
}

async fn no_read_returns_the_token_or_its_digest<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let token = "tok-4f1c9e-secret";
    let id = gate::checkpoint_id(token.as_bytes());
    let card = r#"{"q":"run rm -rf?"}"#;
    let event = gate::park_event_data(
        "irreversible_ask",
        &serde_json::from_str(card).unwrap(),
        None,
    );
    let mut p = park_of(
        "t1",
        e,
        "r1",
        &id,
        "irreversible_ask",
        card,
        &event,
        NOW + 1,
    );
    p.expires_at = None;
    assert_eq!(s.park(&p).await.unwrap(), Parked::Parked { seq: 1 });
    let mut seen = vec![];
    seen.push(format!("{:?}", s.pending_gate("s1").await.unwrap()));
    seen.push(format!(
        "{:?}",
        s.list_pending_gates(&ListScope::All, None, None, 10)
            .await
            .unwrap()
    ));
    seen.push(format!("{:?}", s.get_run("t1").await.unwrap()));
    seen.push(format!(
        "{:?}",
        s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap()
    ));
    seen.push(format!(
        "{:?}",
        s.park(&p).await.unwrap() // refused: the lease ended
    ));
    let decided = decide(
        &s,
        DecidePath::Approvals,
        GateScope::Session("s1"),
        Decision::Approve,
        Some("ok"),
        NOW + 2,
    )
    .await;
    seen.push(format!("{decided:?}"));
    seen.push(format!(
        "{:?}",
        s.lease("r2", DEFAULT_QUEUE, NOW + 3, 1).await.unwrap()
    ));
    seen.push(format!(
        "{:?}",
        s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap()
    ));
    for text in &seen {
        assert!(
            !text.contains(token) && !text.contains(&id),
            "a read leaked the token or its digest: {text}"
        );
    }
    assert!(seen[0].contains("irreversible_ask"), "{}", seen[0]);
}

async fn the_next_lease_carries_the_decision_until_the_run_parks_again<F: Fixture>(fx: &F) {
    // Quotes, a backslash, a newline, a control character and text beyond ASCII: the lease reads
    // the decision back through each engine's JSON.
    const REASON: &str = "add tests: \"é\" \\ ☃\n\u{1}";
    let s = fx.store();
    admit(&s, "t1", "s1", None, NOW).await;
    let first = s.lease("r1", DEFAULT_QUEUE, NOW, 1).await.unwrap().unwrap();
    assert_eq!(
        first.resume, None,
        "a run never parked resumes from nothing"
    );
    park_gate(fx, &s, "t1", "plan_review", None, NOW + 1).await;
    let out = decide(
        &s,
        DecidePath::PlanReview,
        GateScope::Task("t1"),
        Decision::Revise,
        Some(REASON),
        NOW + 2,
    )
    .await;
    let Decided::Resumed { lease_epoch, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(lease_epoch, first.lease_epoch + 1);
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.status.as_str(), run.held_by, run.heartbeat_at),
        ("running", None, Some(NOW + 2))
    );
    let resumed = &s.events_after("t1", 0, 10, PAGE_BYTES).await.unwrap()[1];
    assert_eq!((resumed.seq, resumed.kind.as_str()), (2, "resumed"));
    let lease = s
        .lease("r2", DEFAULT_QUEUE, NOW + 3, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.lease_epoch, lease_epoch + 1);
    assert_eq!(lease.last_seq, 2);
    let resume = lease.resume.unwrap();
    assert_eq!(
        (
            resume.kind.as_str(),
            resume.decision.as_str(),
            resume.reason.as_deref()
        ),
        ("plan_review", "revise", Some(REASON))
    );
    assert_eq!(
        sema_core::json::parse(&resume.card).unwrap(),
        sema_core::json!({"ask": "plan_review for t1"})
    );
    // Re-park: a new gate (a new checkpoint); its decision is what the next lease carries.
    assert!(matches!(
        park_gate(fx, &s, "t1", "tool_approval", None, NOW + 4).await,
        Parked::Parked { seq: 3 }
    ));
    assert_eq!(status_of(&s, "t1").await, "suspended");
    assert_eq!(
        s.pending_gate("s1").await.unwrap().unwrap().kind,
        "tool_approval"
    );
    approve(&s, "s1", NOW + 5).await;
    let lease = s
        .lease("r3", DEFAULT_QUEUE, NOW + 6, 1)
        .await
        .unwrap()
        .unwrap();
    let resume = lease.resume.unwrap();
    assert_eq!(
        (
            resume.kind.as_str(),
            resume.decision.as_str(),
            resume.reason
        ),
        ("tool_approval", "approve", None)
    );
    // A requeued lease carries the same decision again.
    let id = unique("tick");
    let requeued = s
        .requeue_unacked_leases(
            &Tick {
                id: &id,
                now: NOW + 100,
                limit: 10,
            },
            NOW + 50,
        )
        .await
        .unwrap();
    assert_eq!(requeued, pairs(&[("s1", "t1")]));
    let again = s
        .lease("r4", DEFAULT_QUEUE, NOW + 101, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.resume.unwrap().kind, "tool_approval");
}

async fn pending_gates_are_listed_oldest_first_by_owner_in_bounded_pages<F: Fixture>(fx: &F) {
    let s = fx.store();
    for (i, owner) in [
        Some("alice"),
        Some("bob"),
        Some("alice"),
        None,
        Some("alice"),
    ]
    .into_iter()
    .enumerate()
    {
        let (task, session) = (format!("t{i}"), format!("s{i}"));
        admit(&s, &task, &session, owner, NOW).await;
        park_gate(fx, &s, &task, "human", None, NOW + 10 - i as i64 % 2).await;
    }
    // A settled gate is not listed.
    approve(&s, "s4", NOW + 20).await;
    let sessions = |v: Vec<sema_core::store::PendingGate>| {
        v.into_iter().map(|g| g.session_id).collect::<Vec<_>>()
    };
    // alice: s0 (t=10), s2 (t=10); s4 settled. Ties broken by session id.
    let alice = ListScope::Owner(Some("alice"));
    let page = s.list_pending_gates(&alice, None, None, 1).await.unwrap();
    assert_eq!(sessions(page.clone()), ["s0"]);
    let cursor = (page[0].created_at, page[0].session_id.as_str());
    assert_eq!(
        sessions(
            s.list_pending_gates(&alice, None, Some(cursor), 10)
                .await
                .unwrap()
        ),
        ["s2"]
    );
    assert_eq!(
        sessions(
            s.list_pending_gates(&ListScope::Owner(None), None, None, 10)
                .await
                .unwrap()
        ),
        ["s3"]
    );
    // Operators see every pending gate: s1 and s3 parked at t=9, s0 and s2 at t=10.
    assert_eq!(
        sessions(
            s.list_pending_gates(&ListScope::All, None, None, 10)
                .await
                .unwrap()
        ),
        ["s1", "s3", "s0", "s2"]
    );
    assert_eq!(
        sessions(
            s.list_pending_gates(&ListScope::Owner(Some("bob")), Some("s1"), None, 10)
                .await
                .unwrap()
        ),
        ["s1"]
    );
    assert!(s
        .list_pending_gates(&ListScope::Owner(Some("bob")), Some("s0"), None, 10)
        .await
        .unwrap()
        .is_empty());
}

const SUBTASKS: [NewChild<'static>; 3] = [
    NewChild {
        objective: "say one",
        meta_json: r#"{"n":0}"#,
    },
    NewChild {
        objective: "say two",
        meta_json: "{}",
    },
    NewChild {
        objective: "say three",
        meta_json: "{}",
    },
];

fn new_leader<'a>(id: &'a str, owner: Option<&'a str>, key: Option<&'a str>) -> NewLeader<'a> {
    NewLeader {
        id,
        objective: "fan out",
        owner,
        idem_key: key,
        now: NOW,
        max_concurrency: 2,
        deadline_at: None,
        fingerprint: None,
        children: &SUBTASKS,
    }
}

/// The run a driver would admit for child `idx` of leader `id`.
fn child_run<'a>(
    task: &'a str,
    session: &'a str,
    owner: Option<&'a str>,
    child: &'a LeaderChild,
    now: i64,
) -> NewRun<'a> {
    NewRun {
        task_id: task,
        session_id: session,
        owner,
        instance_id: "default",
        objective: &child.objective,
        objective_preview: &child.objective,
        meta_json: &child.meta_json,
        queue: DEFAULT_QUEUE,
        now,
        idempotency: None,
    }
}

/// Starts child `idx` of `id` as run `task` at `now`.
async fn start<S: LeaderDriveStore>(
    s: &S,
    id: &str,
    idx: usize,
    task: &str,
    owner: Option<&str>,
    now: i64,
) -> StartChild {
    let children = s.leader_children(id).await.unwrap();
    let session = leader::child_session_id(id, idx);
    s.start_child(
        id,
        idx,
        &child_run(task, &session, owner, &children[idx], now),
    )
    .await
    .unwrap()
}

async fn states<S: LeaderDriveStore>(s: &S, id: &str) -> Vec<ChildState> {
    s.leader_children(id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.state)
        .collect()
}

async fn a_leader_with_a_plan_writes_its_plan_and_children_once_per_key<F: Fixture>(fx: &F) {
    let s = fx.store();
    let key = sema_core::idempotency::scoped_key(Some("alice"), "fan");
    let mut first = new_leader("L1", Some("alice"), Some(&key));
    first.deadline_at = Some(NOW + 60_000);
    let won = s.create_leader_with_plan(&first).await.unwrap();
    assert!(won.created);
    assert_eq!(
        (won.run.id.as_str(), won.run.status.as_str()),
        ("L1", "running")
    );
    assert_eq!(
        s.leader_drive("L1").await.unwrap(),
        Some(Drive {
            max_concurrency: 2,
            deadline_at: Some(NOW + 60_000),
            cancel_requested: false
        })
    );
    let children = s.leader_children("L1").await.unwrap();
    assert_eq!(
        children,
        (0..3)
            .map(|i| LeaderChild {
                index: i,
                session_id: format!("leader-L1-{i}"),
                task_id: None,
                objective: SUBTASKS[i].objective.to_owned(),
                meta_json: SUBTASKS[i].meta_json.to_owned(),
                state: ChildState::NotStarted,
            })
            .collect::<Vec<_>>()
    );
    // A retry with the key observes the winner and writes no second plan or children.
    let mut retry = new_leader("L2", Some("alice"), Some(&key));
    retry.children = &SUBTASKS[..1];
    let seen = s.create_leader_with_plan(&retry).await.unwrap();
    assert!(!seen.created);
    assert_eq!(seen.run, won.run);
    assert!(s.get_leader_run("L2").await.unwrap().is_none());
    assert_eq!(s.leader_drive("L2").await.unwrap(), None);
    assert!(s.leader_children("L2").await.unwrap().is_empty());
    assert_eq!(s.leader_children("L1").await.unwrap(), children);
    // A leader admitted without a plan has none.
    s.create_leader_run("bare", "x", None, None, NOW)
        .await
        .unwrap();
    assert_eq!(s.leader_drive("bare").await.unwrap(), None);
}

async fn twenty_concurrent_creates_with_one_key_write_one_plan_and_one_set_of_children<
    F: Fixture + Sync,
>(
    fx: &F,
) {
    let key = sema_core::idempotency::scoped_key(None, "twenty");
    let ids: Vec<String> = (0..20).map(|i| format!("L{i}")).collect();
    let barrier = std::sync::Barrier::new(ids.len());
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (barrier, key) = (&barrier, &key);
                scope.spawn(move || {
                    let store = fx.store();
                    barrier.wait();
                    pollster::block_on(store.create_leader_with_plan(&new_leader(
                        id,
                        None,
                        Some(key),
                    )))
                    .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|r| r.created).count(), 1);
    let winner = results.iter().find(|r| r.created).unwrap().run.id.clone();
    assert!(results.iter().all(|r| r.run.id == winner));
    let s = fx.store();
    for id in &ids {
        let (plan, children) = (
            s.leader_drive(id).await.unwrap(),
            s.leader_children(id).await.unwrap(),
        );
        if *id == winner {
            assert!(plan.is_some() && children.len() == 3, "{id}");
        } else {
            assert!(plan.is_none() && children.is_empty(), "{id}");
        }
    }
}

async fn starting_a_child_admits_its_run_in_its_own_session_and_the_children_read_their_runs_states<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let mut three = new_leader("L", Some("alice"), None);
    let more = [
        SUBTASKS[0],
        SUBTASKS[1],
        SUBTASKS[2],
        SUBTASKS[0],
        SUBTASKS[1],
    ];
    three.children = &more;
    three.max_concurrency = 5;
    s.create_leader_with_plan(&three).await.unwrap();
    for (i, task) in ["c0", "c1", "c2", "c3"].into_iter().enumerate() {
        assert_eq!(
            start(&s, "L", i, task, Some("alice"), NOW + 1).await,
            StartChild::Started
        );
    }
    // The run is an ordinary admission: its row, its own session (the leader's owner), its claim.
    let run = s.get_run("c0").await.unwrap().unwrap();
    assert_eq!(
        (
            run.session_id.as_str(),
            run.owner.as_deref(),
            run.status.as_str()
        ),
        ("leader-L-0", Some("alice"), "running")
    );
    assert_eq!(holder_of(&s, "leader-L-0").await.as_deref(), Some("c0"));
    assert_eq!(
        s.get_session("leader-L-0")
            .await
            .unwrap()
            .unwrap()
            .owner
            .as_deref(),
        Some("alice")
    );
    // Runs' states as the driver sees them.
    s.set_terminal(&Terminal {
        error: Some("boom"),
        ..terminal("c1", TerminalStatus::Failed, NOW + 2)
    })
    .await
    .unwrap();
    s.set_terminal(&terminal("c2", TerminalStatus::Completed, NOW + 2))
        .await
        .unwrap();
    fx.raw("UPDATE task_run SET status = 'suspended' WHERE task_id = 'c3'");
    assert!(s.skip_child("L", 4, ReportStatus::Timeout).await.unwrap());
    assert!(!s.skip_child("L", 4, ReportStatus::Failed).await.unwrap());
    assert!(!s.skip_child("L", 0, ReportStatus::Failed).await.unwrap());
    assert_eq!(
        states(&s, "L").await,
        vec![
            ChildState::Running,
            ChildState::Ended {
                status: "failed".into(),
                error: Some("boom".into())
            },
            ChildState::Ended {
                status: "completed".into(),
                error: None
            },
            ChildState::Parked,
            ChildState::Skipped {
                report: ReportStatus::Timeout
            },
        ]
    );
    let children = s.leader_children("L").await.unwrap();
    assert_eq!(children[0].task_id.as_deref(), Some("c0"));
    assert_eq!(children[4].task_id, None);
}

async fn two_concurrent_starts_of_one_child_admit_exactly_one_run<F: Fixture + Sync>(fx: &F) {
    let s = fx.store();
    for round in 0..5 {
        let id = format!("L{round}");
        s.create_leader_with_plan(&new_leader(&id, None, None))
            .await
            .unwrap();
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<StartChild> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["a", "b"]
                .iter()
                .map(|who| {
                    let (barrier, id) = (&barrier, &id);
                    scope.spawn(move || {
                        let store = fx.store();
                        let task = format!("{id}-{who}");
                        let children = pollster::block_on(store.leader_children(id)).unwrap();
                        let session = leader::child_session_id(id, 1);
                        let run = child_run(&task, &session, None, &children[1], NOW);
                        barrier.wait();
                        pollster::block_on(store.start_child(id, 1, &run)).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let started = outcomes
            .iter()
            .filter(|o| **o == StartChild::Started)
            .count();
        assert_eq!(started, 1, "round {round}: {outcomes:?}");
        assert!(outcomes.contains(&StartChild::Lost), "{outcomes:?}");
        let runs = [
            s.get_run(&format!("{id}-a")).await.unwrap(),
            s.get_run(&format!("{id}-b")).await.unwrap(),
        ];
        assert_eq!(runs.iter().flatten().count(), 1, "round {round}");
        let child = &s.leader_children(&id).await.unwrap()[1];
        assert_eq!(
            child.task_id,
            runs.iter().flatten().next().map(|r| r.task_id.clone())
        );
    }
}

async fn a_child_that_lost_its_compare_and_set_writes_nothing_not_even_its_session<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    s.create_leader_with_plan(&new_leader("L", Some("alice"), None))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "L", 0, "first", Some("alice"), NOW).await,
        StartChild::Started
    );
    // The first run ended and released its claim: a late second start still admits nothing.
    s.set_terminal(&terminal("first", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "L", 0, "again", Some("alice"), NOW + 2).await,
        StartChild::Lost
    );
    assert!(s.get_run("again").await.unwrap().is_none());
    assert_eq!(holder_of(&s, "leader-L-0").await, None);
    assert_eq!(
        s.get_session("leader-L-0")
            .await
            .unwrap()
            .unwrap()
            .updated_at,
        NOW,
        "the loser did not even touch the session"
    );
    // A skipped child never starts, and its session is never created.
    assert!(s.skip_child("L", 1, ReportStatus::Failed).await.unwrap());
    assert_eq!(
        start(&s, "L", 1, "late", Some("alice"), NOW + 3).await,
        StartChild::Lost
    );
    assert!(s.get_run("late").await.unwrap().is_none());
    assert!(s.get_session("leader-L-1").await.unwrap().is_none());
    // A run for another session than the child's is refused by the CAS.
    let children = s.leader_children("L").await.unwrap();
    let wrong = child_run("wrong", "elsewhere", Some("alice"), &children[2], NOW);
    assert_eq!(
        s.start_child("L", 2, &wrong).await.unwrap(),
        StartChild::Lost
    );
    assert!(s.get_session("elsewhere").await.unwrap().is_none());
    assert_eq!(states(&s, "L").await[2], ChildState::NotStarted);
}

async fn a_stopped_leader_skips_every_unstarted_child_in_one_statement_and_never_a_started_one<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    s.create_leader_with_plan(&new_leader("K", None, None))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "K", 1, "k1", None, NOW).await,
        StartChild::Started
    );
    let unstarted = SUBTASKS.len() as u64 - 1;
    assert_eq!(
        s.skip_unstarted("K", ReportStatus::Timeout).await.unwrap(),
        unstarted
    );
    assert_eq!(
        s.skip_unstarted("K", ReportStatus::Failed).await.unwrap(),
        0
    );
    let got = states(&s, "K").await;
    assert_eq!(got[1], ChildState::Running);
    for (i, c) in got.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(
            *c,
            ChildState::Skipped {
                report: ReportStatus::Timeout
            },
            "child {i}"
        );
    }
    // Another leader's children are untouched.
    s.create_leader_with_plan(&new_leader("K2", None, None))
        .await
        .unwrap();
    assert!(states(&s, "K2")
        .await
        .iter()
        .all(|c| *c == ChildState::NotStarted));
}

async fn a_cancelled_expired_finished_or_foreign_leader_starts_no_child<F: Fixture>(fx: &F) {
    let s = fx.store();
    // Cancel: set once, then no child starts.
    s.create_leader_with_plan(&new_leader("C", None, None))
        .await
        .unwrap();
    assert!(s.request_leader_cancel("C").await.unwrap());
    assert!(!s.request_leader_cancel("C").await.unwrap());
    assert!(s.leader_drive("C").await.unwrap().unwrap().cancel_requested);
    assert_eq!(start(&s, "C", 0, "c", None, NOW).await, StartChild::Lost);
    assert!(!s.request_leader_cancel("missing").await.unwrap());
    // Deadline: a child starts strictly before it, never at it.
    let mut timed = new_leader("D", None, None);
    timed.deadline_at = Some(NOW + 10);
    s.create_leader_with_plan(&timed).await.unwrap();
    assert_eq!(
        start(&s, "D", 0, "d0", None, NOW + 10).await,
        StartChild::Lost
    );
    assert_eq!(
        start(&s, "D", 0, "d0", None, NOW + 9).await,
        StartChild::Started
    );
    // A settled leader starts nothing.
    s.create_leader_with_plan(&new_leader("F", None, None))
        .await
        .unwrap();
    assert!(s
        .finish_leader_run("F", LeaderFinish::Completed, None, None, NOW)
        .await
        .unwrap());
    assert_eq!(start(&s, "F", 0, "f", None, NOW).await, StartChild::Lost);
    // The run must be the leader's owner's, in a session nobody else owns.
    s.create_leader_with_plan(&new_leader("O", Some("alice"), None))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "O", 0, "o0", Some("bob"), NOW).await,
        StartChild::Lost
    );
    admit(&s, "squat", "leader-O-1", Some("bob"), NOW).await;
    assert_eq!(
        start(&s, "O", 1, "o1", Some("alice"), NOW).await,
        StartChild::Lost
    );
    assert!(s.get_run("o0").await.unwrap().is_none() && s.get_run("o1").await.unwrap().is_none());
    assert_eq!(
        states(&s, "O").await,
        vec![
            ChildState::NotStarted,
            ChildState::NotStarted,
            ChildState::NotStarted
        ]
    );
}

async fn a_child_whose_session_is_held_is_refused_as_an_admission_and_stays_unstarted<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    s.create_leader_with_plan(&new_leader("L", Some("alice"), None))
        .await
        .unwrap();
    // The owner's own run already holds the child's session: the admission refuses, and the
    // batch's compare-and-set rolls back with it.
    admit(&s, "mine", "leader-L-0", Some("alice"), NOW).await;
    match start(&s, "L", 0, "c0", Some("alice"), NOW + 1).await {
        StartChild::Refused(refused) => assert!(
            matches!(*refused, CreateRun::Held(Some(ref h)) if h.task_id == "mine"),
            "{refused:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(s.get_run("c0").await.unwrap().is_none());
    assert_eq!(states(&s, "L").await[0], ChildState::NotStarted);
    assert_eq!(s.leader_children("L").await.unwrap()[0].task_id, None);
}

/// The children of `id` that hold a concurrency slot: started with a running or parked run.
async fn live_children<S: LeaderDriveStore>(s: &S, id: &str) -> usize {
    states(s, id)
        .await
        .iter()
        .filter(|c| matches!(c, ChildState::Running | ChildState::Parked))
        .count()
}

async fn a_full_concurrency_bound_loses_the_start_and_a_parked_child_keeps_its_slot<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    let mut one = new_leader("L", Some("alice"), None);
    one.max_concurrency = 1;
    s.create_leader_with_plan(&one).await.unwrap();
    assert_eq!(
        start(&s, "L", 0, "c0", Some("alice"), NOW).await,
        StartChild::Started
    );
    // The bound is full while child 0 runs: child 1 loses and writes nothing, not even its session.
    assert_eq!(
        start(&s, "L", 1, "c1", Some("alice"), NOW + 1).await,
        StartChild::Lost
    );
    assert!(s.get_run("c1").await.unwrap().is_none());
    assert!(s.get_session("leader-L-1").await.unwrap().is_none());
    assert_eq!(states(&s, "L").await[1], ChildState::NotStarted);
    // Child 0's run ends: its slot is free and child 1 starts.
    let cancelled = s.cancel("c0", NOW + 2).await.unwrap();
    assert_eq!(cancelled.run.unwrap().status, "cancelled");
    assert_eq!(
        start(&s, "L", 1, "c1", Some("alice"), NOW + 3).await,
        StartChild::Started
    );
    // A parked child (waiting for a human) still holds its slot, whichever gate it waits on.
    for parked in ["suspended", "needs_review"] {
        fx.raw(&format!(
            "UPDATE task_run SET status = '{parked}' WHERE task_id = 'c1'"
        ));
        assert_eq!(states(&s, "L").await[1], ChildState::Parked);
        assert_eq!(
            start(&s, "L", 2, "c2", Some("alice"), NOW + 4).await,
            StartChild::Lost,
            "{parked}"
        );
    }
    // Once it ends (here: cancelled while parked), the last child starts.
    s.cancel("c1", NOW + 5).await.unwrap();
    assert_eq!(
        start(&s, "L", 2, "c2", Some("alice"), NOW + 6).await,
        StartChild::Started
    );
    assert_eq!(live_children(&s, "L").await, 1);
    // A started child whose run row is gone (its session deleted) counts as ended, not as a slot.
    let mut two = new_leader("M", None, None);
    two.max_concurrency = 1;
    s.create_leader_with_plan(&two).await.unwrap();
    assert_eq!(
        start(&s, "M", 0, "m0", None, NOW).await,
        StartChild::Started
    );
    s.delete_by_session("leader-M-0").await.unwrap();
    assert_eq!(
        start(&s, "M", 1, "m1", None, NOW).await,
        StartChild::Started
    );
}

async fn concurrent_starters_of_different_children_never_exceed_the_bound<F: Fixture + Sync>(
    fx: &F,
) {
    let six = [SUBTASKS[0]; 6];
    let s = fx.store();
    for round in 0..4 {
        let id = format!("L{round}");
        let mut leader = new_leader(&id, None, None);
        leader.children = &six;
        s.create_leader_with_plan(&leader).await.unwrap();
        // Every not-yet-started child is started by its own thread, all at once.
        let wave = |wave: usize| -> Vec<(usize, StartChild)> {
            let pending: Vec<usize> = pollster::block_on(s.leader_children(&id))
                .unwrap()
                .iter()
                .filter(|c| c.state == ChildState::NotStarted)
                .map(|c| c.index)
                .collect();
            let barrier = std::sync::Barrier::new(pending.len());
            std::thread::scope(|scope| {
                let handles: Vec<_> = pending
                    .iter()
                    .map(|&idx| {
                        let (barrier, id) = (&barrier, &id);
                        scope.spawn(move || {
                            let store = fx.store();
                            let task = format!("{id}-{wave}-{idx}");
                            let children = pollster::block_on(store.leader_children(id)).unwrap();
                            let session = leader::child_session_id(id, idx);
                            let run = child_run(&task, &session, None, &children[idx], NOW);
                            barrier.wait();
                            (
                                idx,
                                pollster::block_on(store.start_child(id, idx, &run)).unwrap(),
                            )
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        };
        let first = wave(0);
        let started: Vec<usize> = first
            .iter()
            .filter(|(_, o)| *o == StartChild::Started)
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(started.len(), 2, "round {round}: {first:?}");
        assert!(
            first
                .iter()
                .all(|(_, o)| matches!(o, StartChild::Started | StartChild::Lost)),
            "round {round}: {first:?}"
        );
        assert_eq!(live_children(&s, &id).await, 2, "round {round}");
        // Every loser wrote nothing.
        for (idx, outcome) in &first {
            let run = s.get_run(&format!("{id}-0-{idx}")).await.unwrap();
            assert_eq!(run.is_some(), *outcome == StartChild::Started, "{idx}");
        }
        // One run ends: exactly one slot opens, and of four racing starters exactly one takes it.
        s.cancel(&format!("{id}-0-{}", started[0]), NOW + 1)
            .await
            .unwrap();
        let second = wave(1);
        assert_eq!(
            second
                .iter()
                .filter(|(_, o)| *o == StartChild::Started)
                .count(),
            1,
            "round {round}: {second:?}"
        );
        assert_eq!(live_children(&s, &id).await, 2, "round {round}");
    }
}

async fn a_leader_view_reads_record_plan_fingerprint_and_children_in_one_round_trip<F: Fixture>(
    fx: &F,
) {
    let s = fx.counted_store();
    let key = sema_core::idempotency::scoped_key(Some("alice"), "view");
    let fp = "a".repeat(64);
    let mut keyed = new_leader("L", Some("alice"), Some(&key));
    keyed.fingerprint = Some(&fp);
    keyed.deadline_at = Some(NOW + 60_000);
    s.create_leader_with_plan(&keyed).await.unwrap();
    assert_eq!(
        start(&s, "L", 1, "c1", Some("alice"), NOW + 1).await,
        StartChild::Started
    );
    s.exec.take();
    let view = s.leader_view("L").await.unwrap().unwrap();
    assert_eq!(s.exec.take(), 1, "one round trip");
    assert_eq!(view.record, s.get_leader_run("L").await.unwrap().unwrap());
    assert_eq!(
        view.drive,
        Some(Drive {
            max_concurrency: 2,
            deadline_at: Some(NOW + 60_000),
            cancel_requested: false
        })
    );
    assert_eq!(view.drive, s.leader_drive("L").await.unwrap());
    assert_eq!(view.fingerprint.as_deref(), Some(fp.as_str()));
    assert_eq!(view.children, s.leader_children("L").await.unwrap());
    assert_eq!(
        view.children.iter().map(|c| &c.state).collect::<Vec<_>>(),
        [
            &ChildState::NotStarted,
            &ChildState::Running,
            &ChildState::NotStarted
        ]
    );
    assert_eq!(view.children[1].task_id.as_deref(), Some("c1"));
    // A missing leader: `None`, in one round trip too.
    s.exec.take();
    assert_eq!(s.leader_view("missing").await.unwrap(), None);
    assert_eq!(s.exec.take(), 1);
    // A leader admitted without a plan: its record, no plan, no children.
    s.create_leader_run("bare", "x", None, None, NOW)
        .await
        .unwrap();
    let bare = s.leader_view("bare").await.unwrap().unwrap();
    assert_eq!(
        (bare.record.id.as_str(), bare.drive, bare.fingerprint),
        ("bare", None, None)
    );
    assert!(bare.children.is_empty());
    // An unkeyed admission has a plan and no fingerprint.
    s.create_leader_with_plan(&new_leader("U", None, None))
        .await
        .unwrap();
    let unkeyed = s.leader_view("U").await.unwrap().unwrap();
    assert!(unkeyed.drive.is_some() && unkeyed.fingerprint.is_none());
    assert_eq!(unkeyed.children.len(), 3);
}

async fn a_plan_keeps_its_fingerprint_and_a_duplicate_key_observer_never_overwrites_it<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let key = sema_core::idempotency::scoped_key(None, "fp");
    let (first_fp, other_fp) = ("1".repeat(64), "2".repeat(64));
    let mut first = new_leader("L1", None, Some(&key));
    first.fingerprint = Some(&first_fp);
    assert!(s.create_leader_with_plan(&first).await.unwrap().created);
    // The same key with another body: the observer sees the winner, whose fingerprint stays.
    let mut other = new_leader("L2", None, Some(&key));
    other.fingerprint = Some(&other_fp);
    let seen = s.create_leader_with_plan(&other).await.unwrap();
    assert!(!seen.created);
    assert_eq!(seen.run.id, "L1");
    let view = s.leader_view("L1").await.unwrap().unwrap();
    assert_eq!(view.fingerprint.as_deref(), Some(first_fp.as_str()));
    assert_eq!(s.leader_view("L2").await.unwrap(), None);
}

/// Every leader run `scope` and `status` list, walking pages of `size`; the ids in order.
async fn walk_leader_runs<S: LeaderRunStore>(
    s: &S,
    scope: &ListScope<'_>,
    status: Option<&str>,
    size: i64,
) -> Vec<String> {
    let mut seen = vec![];
    let mut cursor: Option<(i64, String)> = None;
    loop {
        let page = s
            .list_leader_runs(
                scope,
                status,
                cursor.as_ref().map(|(at, id)| (*at, id.as_str())),
                size,
            )
            .await
            .unwrap();
        assert!(page.len() as i64 <= size);
        if page.is_empty() {
            return seen;
        }
        cursor = page.last().map(|r| (r.started_at_ms, r.id.clone()));
        seen.extend(page.into_iter().map(|r| r.id));
    }
}

async fn leader_listings_are_scoped_by_owner_filtered_by_status_and_page_newest_first_with_ties_broken_by_id<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    // Alice's five, two started in the same millisecond (admitted in the order opposite to their
    // ids), bob's one and an anonymous one.
    let alice = [
        ("a0", NOW),
        ("a2", NOW + 1),
        ("a1", NOW + 1),
        ("a3", NOW + 2),
        ("a4", NOW + 3),
    ];
    for (id, at) in alice {
        s.create_leader_run(id, "x", Some("alice"), None, at)
            .await
            .unwrap();
    }
    s.create_leader_run("b0", "x", Some("bob"), None, NOW + 5)
        .await
        .unwrap();
    s.create_leader_run("n0", "x", None, None, NOW + 4)
        .await
        .unwrap();
    s.create_leader_with_plan(&NewLeader {
        now: NOW - 1,
        ..new_leader("ap", Some("alice"), None)
    })
    .await
    .unwrap();
    for (id, end) in [
        ("a3", LeaderFinish::Completed),
        ("a0", LeaderFinish::Failed),
    ] {
        assert!(s
            .finish_leader_run(id, end, None, None, NOW + 9)
            .await
            .unwrap());
    }
    let owner = |o| ListScope::Owner(Some(o));
    // Pages of two walk every row exactly once, newest first, ties broken by id.
    assert_eq!(
        walk_leader_runs(&s, &owner("alice"), None, 2).await,
        ["a4", "a3", "a2", "a1", "a0", "ap"]
    );
    assert_eq!(
        walk_leader_runs(&s, &ListScope::All, None, 2).await,
        ["b0", "n0", "a4", "a3", "a2", "a1", "a0", "ap"]
    );
    // Status filters, alone and with an owner, paged too.
    assert_eq!(
        walk_leader_runs(&s, &owner("alice"), Some("running"), 2).await,
        ["a4", "a2", "a1", "ap"]
    );
    assert_eq!(
        walk_leader_runs(&s, &owner("alice"), Some("completed"), 2).await,
        ["a3"]
    );
    assert_eq!(
        walk_leader_runs(&s, &ListScope::All, Some("running"), 2).await,
        ["b0", "n0", "a4", "a2", "a1", "ap"]
    );
    assert_eq!(
        walk_leader_runs(&s, &ListScope::All, Some("failed"), 2).await,
        ["a0"]
    );
    // Another owner's and anonymous rows are never in a scoped listing.
    assert_eq!(walk_leader_runs(&s, &owner("bob"), None, 2).await, ["b0"]);
    assert_eq!(
        walk_leader_runs(&s, &ListScope::Owner(None), None, 2).await,
        ["n0"]
    );
    assert!(walk_leader_runs(&s, &owner("carol"), None, 2)
        .await
        .is_empty());
    // A page is the record as read by id, and a cursor is strictly exclusive.
    let page = s
        .list_leader_runs(&owner("alice"), None, Some((NOW + 1, "a2")), 10)
        .await
        .unwrap();
    assert_eq!(page[0], s.get_leader_run("a1").await.unwrap().unwrap());
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a1", "a0", "ap"]
    );
}

async fn running_leader_ids_come_in_windows_after_an_exclusive_id_and_skip_settled_leaders<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    for (i, id) in ["r05", "r01", "r07", "r03", "r02", "r06", "r04"]
        .into_iter()
        .enumerate()
    {
        s.create_leader_run(id, "x", Some("alice"), None, NOW + i as i64)
            .await
            .unwrap();
    }
    s.create_leader_with_plan(&new_leader("r08", None, None))
        .await
        .unwrap();
    for (id, end) in [
        ("r03", LeaderFinish::Completed),
        ("r05", LeaderFinish::Failed),
        ("r06", LeaderFinish::NeedsHuman),
    ] {
        s.finish_leader_run(id, end, None, None, NOW + 9)
            .await
            .unwrap();
    }
    assert_eq!(s.running_leader_ids("", 2).await.unwrap(), ["r01", "r02"]);
    assert_eq!(
        s.running_leader_ids("r02", 2).await.unwrap(),
        ["r04", "r07"]
    );
    assert_eq!(s.running_leader_ids("r07", 2).await.unwrap(), ["r08"]);
    assert!(s.running_leader_ids("r08", 2).await.unwrap().is_empty());
    // `after` is exclusive whether or not it names a running leader.
    assert_eq!(
        s.running_leader_ids("r01", 10).await.unwrap(),
        ["r02", "r04", "r07", "r08"]
    );
    assert_eq!(
        s.running_leader_ids("r03", 10).await.unwrap(),
        ["r04", "r07", "r08"]
    );
    // Walking windows from the start visits every running leader once.
    let mut walked = vec![];
    let mut after = String::new();
    loop {
        let window = s.running_leader_ids(&after, 3).await.unwrap();
        match window.last() {
            Some(last) => after = last.clone(),
            None => break,
        }
        walked.extend(window);
    }
    assert_eq!(walked, ["r01", "r02", "r04", "r07", "r08"]);
    // A reaped leader is settled too.
    s.backdate_leader_run_for_test("r02", 0).await.unwrap();
    s.reap_stale_leader_runs("tick", 1_000, NOW).await.unwrap();
    assert_eq!(
        s.running_leader_ids("", 10).await.unwrap(),
        ["r01", "r04", "r07", "r08"]
    );
}

// ---- Named task queues: leasing per queue, a queue's backlog, the sweep of runs leasable for a
// while, the dispatcher's lease of a named run and its release of a lease never received. ----

every_dialect!(
    runs_of_one_queue_are_never_leased_from_another,
    a_submit_that_names_no_queue_lands_in_the_default_queue,
    of_concurrent_leases_of_one_named_run_exactly_one_wins,
    a_lease_of_a_named_run_loses_for_a_held_parked_ended_or_missing_run_and_writes_nothing,
    a_queue_backlog_lists_its_leasable_runs_oldest_first_and_nothing_else,
    unleased_since_counts_from_when_a_run_last_became_leasable,
    release_lease_frees_only_an_unacknowledged_lease_of_its_holder_at_its_epoch,
    release_leases_frees_only_the_unacknowledged_of_many_and_says_which,
    a_released_run_is_leasable_again_and_its_old_holder_stays_fenced_out,
    the_queue_round_trips_to_the_run_row_its_read_face_and_gate_decisions,
);

/// Admits `task` into `session` (anonymous owner) on `queue` and asserts it was created.
async fn admit_in<S: AdmissionStore>(s: &S, task: &str, session: &str, queue: &str, now: i64) {
    let out = s
        .create_run(&NewRun {
            queue,
            ..new_run(task, session, None, now)
        })
        .await
        .unwrap();
    assert_eq!(out, CreateRun::Created, "admitting {task} on {queue}");
}

/// The task ids of leasable runs, in the order read.
fn ids(runs: &[Leasable]) -> Vec<&str> {
    runs.iter().map(|r| r.task_id.as_str()).collect()
}

async fn runs_of_one_queue_are_never_leased_from_another<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit_in(&s, "a_old", "s1", "a", NOW).await;
    admit_in(&s, "b_old", "s2", "b", NOW + 1).await;
    admit_in(&s, "a_young", "s3", "a", NOW + 2).await;
    admit(&s, "d1", "s4", None, NOW).await;
    // Oldest first within the queue, never a run of another queue, however old.
    let lease = |runner: &'static str, queue: &'static str, now: i64| {
        let s = &s;
        async move {
            s.lease(runner, queue, now, 8)
                .await
                .unwrap()
                .map(|l| l.task_id)
        }
    };
    assert_eq!(lease("r1", "b", NOW + 10).await.as_deref(), Some("b_old"));
    assert_eq!(lease("r2", "b", NOW + 10).await, None);
    assert_eq!(lease("r3", "a", NOW + 10).await.as_deref(), Some("a_old"));
    assert_eq!(lease("r4", "a", NOW + 10).await.as_deref(), Some("a_young"));
    assert_eq!(lease("r5", "a", NOW + 10).await, None);
    assert_eq!(lease("r6", "c", NOW + 10).await, None);
    assert_eq!(
        lease("r7", "A", NOW + 10).await,
        None,
        "queue names are case-sensitive"
    );
    assert_eq!(
        lease("r8", DEFAULT_QUEUE, NOW + 10).await.as_deref(),
        Some("d1")
    );
    for (task, holder) in [
        ("a_old", "r3"),
        ("a_young", "r4"),
        ("b_old", "r1"),
        ("d1", "r8"),
    ] {
        let run = s.get_run(task).await.unwrap().unwrap();
        assert_eq!((run.held_by.as_deref(), run.lease_epoch), (Some(holder), 1));
    }
}

async fn a_submit_that_names_no_queue_lands_in_the_default_queue<F: Fixture>(fx: &F) {
    let s = fx.store();
    let (_, body): (_, sema_core::wire::SubmitRunBody) =
        sema_core::wire::parse_body(br#"{"sessionId":"s1","objective":"do it"}"#).unwrap();
    let submit = body.validate().unwrap();
    assert_eq!(submit.queue, DEFAULT_QUEUE);
    s.create_run(&NewRun {
        queue: &submit.queue,
        ..new_run("t1", submit.session_id.as_str(), None, NOW)
    })
    .await
    .unwrap();
    // A row written without naming the column (an operator's insert) is in the default queue too.
    fx.raw(
        "INSERT INTO task_run (task_id, session_id, instance_id, status, objective, \
         objective_preview, meta, heartbeat_at, created_at, updated_at) \
         VALUES ('t2', 's2', 'i', 'running', 'o', 'o', '{}', 1, 1, 1)",
    );
    for task in ["t1", "t2"] {
        assert_eq!(s.get_run(task).await.unwrap().unwrap().queue, "default");
    }
    assert_eq!(
        ids(&s.queue_backlog(DEFAULT_QUEUE, 10).await.unwrap()),
        ["t2", "t1"]
    );
    let lease = s.lease("r1", DEFAULT_QUEUE, NOW + 1, 8).await.unwrap();
    assert_eq!(lease.map(|l| l.task_id).as_deref(), Some("t2"));
}

async fn of_concurrent_leases_of_one_named_run_exactly_one_wins<F: Fixture + Sync>(fx: &F) {
    for round in 0..5 {
        let task = format!("race{round}");
        admit_in(&fx.store(), &task, &format!("s{round}"), "q", NOW + round).await;
        let barrier = std::sync::Barrier::new(4);
        let won: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["runner-a", "runner-b", "runner-c", "runner-d"]
                .iter()
                .map(|runner| {
                    let (barrier, task) = (&barrier, &task);
                    scope.spawn(move || {
                        let store = fx.store();
                        barrier.wait();
                        pollster::block_on(store.lease_run(task, runner, NOW + 10))
                            .unwrap()
                            .map(|lease| (*runner, lease))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = won.into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        let (runner, lease) = &won[0];
        assert_eq!(
            (lease.task_id.as_str(), lease.lease_epoch),
            (task.as_str(), 1)
        );
        let run = fx.store().get_run(&task).await.unwrap().unwrap();
        assert_eq!(
            (run.held_by.as_deref(), run.lease_epoch, run.lease_acked),
            (Some(*runner), 1, false)
        );
    }
}

async fn a_lease_of_a_named_run_loses_for_a_held_parked_ended_or_missing_run_and_writes_nothing<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    // A leasable run of any queue is leased by name, with everything a lease carries.
    admit_in(&s, "free", "s0", "b", NOW).await;
    let lease = s.lease_run("free", "r1", NOW + 1).await.unwrap().unwrap();
    assert_eq!(
        (lease.task_id.as_str(), lease.session_id.as_str()),
        ("free", "s0")
    );
    assert_eq!(
        (lease.lease_epoch, lease.last_seq, lease.objective.as_str()),
        (1, 0, "do the thing")
    );
    assert_eq!(lease.resume, None);
    let run = s.get_run("free").await.unwrap().unwrap();
    assert_eq!(
        (run.held_by.as_deref(), run.heartbeat_at, run.updated_at),
        (Some("r1"), Some(NOW + 1), NOW + 1)
    );
    // Held (by another runner, or by the caller itself): lost.
    admit(&s, "parked", "s1", None, NOW).await;
    assert!(park(fx, &s, "parked", ParkStatus::Suspended, NOW + 1).await);
    admit(&s, "done", "s2", None, NOW).await;
    s.set_terminal(&terminal("done", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    admit(&s, "cancelled", "s3", None, NOW).await;
    s.cancel("cancelled", NOW + 1).await.unwrap();
    for task in ["free", "parked", "done", "cancelled"] {
        let before = s.get_run(task).await.unwrap().unwrap();
        for runner in ["r2", "r1"] {
            assert_eq!(
                s.lease_run(task, runner, NOW + 5).await.unwrap(),
                None,
                "{task} by {runner}"
            );
        }
        assert_eq!(s.get_run(task).await.unwrap().unwrap(), before, "{task}");
    }
    assert_eq!(s.lease_run("missing", "r2", NOW + 5).await.unwrap(), None);
    assert!(s.get_run("missing").await.unwrap().is_none());
}

async fn a_queue_backlog_lists_its_leasable_runs_oldest_first_and_nothing_else<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit_in(&s, "a_tie2", "s1", "a", NOW + 2).await;
    admit_in(&s, "a_mid", "s2", "a", NOW + 1).await;
    admit_in(&s, "a_tie1", "s3", "a", NOW + 2).await;
    admit_in(&s, "a_old", "s4", "a", NOW).await;
    admit_in(&s, "b_1", "s5", "b", NOW - 10).await;
    // Not leasable: held, parked, ended, cancelled.
    for (i, task) in ["a_held", "a_parked", "a_done", "a_cancelled"]
        .into_iter()
        .enumerate()
    {
        admit_in(&s, task, &format!("x{i}"), "a", NOW - 5).await;
    }
    s.lease_run("a_held", "r1", NOW + 3).await.unwrap().unwrap();
    assert!(park(fx, &s, "a_parked", ParkStatus::NeedsReview, NOW + 3).await);
    s.set_terminal(&terminal("a_done", TerminalStatus::Failed, NOW + 3))
        .await
        .unwrap();
    s.cancel("a_cancelled", NOW + 3).await.unwrap();

    let backlog = s.queue_backlog("a", 10).await.unwrap();
    assert_eq!(ids(&backlog), ["a_old", "a_mid", "a_tie1", "a_tie2"]);
    assert_eq!(
        backlog[0],
        Leasable {
            task_id: "a_old".into(),
            queue: "a".into(),
            created_at: NOW
        }
    );
    assert!(backlog.iter().all(|r| r.queue == "a"));
    assert_eq!(
        ids(&s.queue_backlog("a", 2).await.unwrap()),
        ["a_old", "a_mid"]
    );
    assert_eq!(ids(&s.queue_backlog("b", 10).await.unwrap()), ["b_1"]);
    assert!(s.queue_backlog("c", 10).await.unwrap().is_empty());
    assert!(s.queue_backlog(DEFAULT_QUEUE, 10).await.unwrap().is_empty());
    // The backlog is the order leases take: the oldest goes first.
    let lease = s.lease("r2", "a", NOW + 4, 8).await.unwrap().unwrap();
    assert_eq!(lease.task_id, "a_old");
    assert_eq!(
        ids(&s.queue_backlog("a", 10).await.unwrap()),
        ["a_mid", "a_tie1", "a_tie2"]
    );
}

async fn unleased_since_counts_from_when_a_run_last_became_leasable<F: Fixture>(fx: &F) {
    let s = fx.store();
    // Admitted: leasable since admission.
    admit_in(&s, "x", "s1", "a", NOW).await;
    admit_in(&s, "y", "s2", "b", NOW + 10).await;
    // Held: never listed while held.
    admit_in(&s, "held", "s3", "a", NOW).await;
    let held = s.lease_run("held", "r9", NOW + 1).await.unwrap().unwrap();
    assert!(s
        .heartbeat(&beat_by("held", held.lease_epoch, "r9", "d1", NOW + 2))
        .await
        .unwrap()
        .is_some());
    // Requeued at NOW + 20 (an unacknowledged lease taken at NOW + 1).
    admit_in(&s, "requeued", "s4", "b", NOW).await;
    s.lease_run("requeued", "r1", NOW + 1)
        .await
        .unwrap()
        .unwrap();
    // Resumed at NOW + 30 (parked at NOW + 1).
    admit_in(&s, "resumed", "s5", "a", NOW).await;
    assert!(park(fx, &s, "resumed", ParkStatus::Suspended, NOW + 1).await);
    // Released at NOW + 40 (an unacknowledged lease taken at NOW + 2).
    admit_in(&s, "released", "s6", "c", NOW).await;
    let released = s
        .lease_run("released", "r2", NOW + 2)
        .await
        .unwrap()
        .unwrap();

    let since = |before: i64, limit: i64| {
        let s = &s;
        async move { s.unleased_since(before, limit).await.unwrap() }
    };
    assert!(since(NOW, 10).await.is_empty(), "strictly before");
    assert_eq!(ids(&since(NOW + 1, 10).await), ["x"]);
    assert_eq!(ids(&since(NOW + 11, 10).await), ["x", "y"]);

    assert_eq!(
        requeue(&s, NOW + 2, NOW + 20, 10).await.unwrap(),
        pairs(&[("s4", "requeued")])
    );
    assert_eq!(ids(&since(NOW + 20, 10).await), ["x", "y"]);
    assert_eq!(ids(&since(NOW + 21, 10).await), ["x", "y", "requeued"]);

    approve(&s, "s5", NOW + 30).await;
    assert_eq!(ids(&since(NOW + 30, 10).await), ["x", "y", "requeued"]);
    assert_eq!(
        ids(&since(NOW + 31, 10).await),
        ["x", "y", "requeued", "resumed"]
    );

    assert!(s
        .release_lease("released", "r2", released.lease_epoch, NOW + 40)
        .await
        .unwrap());
    assert_eq!(ids(&since(NOW + 40, 10).await).len(), 4);
    let all = since(NOW + 41, 10).await;
    assert_eq!(ids(&all), ["x", "y", "requeued", "resumed", "released"]);
    // Each with its queue and admission time, for its dispatcher.
    assert_eq!(
        all.iter()
            .map(|r| (r.queue.as_str(), r.created_at))
            .collect::<Vec<_>>(),
        [
            ("a", NOW),
            ("b", NOW + 10),
            ("b", NOW),
            ("a", NOW),
            ("c", NOW)
        ]
    );
    // At most `limit`, the longest-waiting first.
    assert_eq!(ids(&since(NOW + 41, 2).await), ["x", "y"]);
    // A lease takes a run out of the sweep (queue b's oldest by admission: the requeued one).
    let lease = s.lease("r3", "b", NOW + 50, 8).await.unwrap().unwrap();
    assert_eq!(lease.task_id, "requeued");
    assert_eq!(
        ids(&since(NOW + 100, 10).await),
        ["x", "y", "resumed", "released"]
    );
}

async fn release_lease_frees_only_an_unacknowledged_lease_of_its_holder_at_its_epoch<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    admit_in(&s, "t1", "s1", "q", NOW).await;
    let e = s
        .lease_run("t1", "r1", NOW + 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    let held = s.get_run("t1").await.unwrap().unwrap();
    // Another runner, another epoch, an epoch below 1, another run: nothing written.
    for (runner, epoch) in [
        ("r2", e),
        ("r1", e + 1),
        ("r1", e - 1),
        ("r1", 0),
        ("r1", -1),
    ] {
        assert!(
            !s.release_lease("t1", runner, epoch, NOW + 2).await.unwrap(),
            "{runner} at {epoch}"
        );
    }
    assert!(!s.release_lease("nope", "r1", e, NOW + 2).await.unwrap());
    assert_eq!(s.get_run("t1").await.unwrap().unwrap(), held);
    // The holder at its epoch, unacknowledged: released; the epoch stays.
    assert!(s.release_lease("t1", "r1", e, NOW + 3).await.unwrap());
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.held_by,
            run.lease_epoch,
            run.lease_acked,
            run.heartbeat_at,
            run.updated_at
        ),
        ("running", None, e, false, Some(NOW + 3), NOW + 3)
    );
    assert_eq!(
        holder_of(&s, "s1").await.as_deref(),
        Some("t1"),
        "the claim stays"
    );
    assert!(
        !s.release_lease("t1", "r1", e, NOW + 4).await.unwrap(),
        "once"
    );
    // An acknowledged lease is never released (its runner received it).
    let e2 = s
        .lease_run("t1", "r2", NOW + 5)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert_eq!(e2, e + 1);
    assert!(s
        .heartbeat(&beat_by("t1", e2, "r2", "d1", NOW + 6))
        .await
        .unwrap()
        .is_some());
    assert!(!s.release_lease("t1", "r2", e2, NOW + 7).await.unwrap());
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(
        (run.held_by.as_deref(), run.lease_acked),
        (Some("r2"), true)
    );
    // Parked and ended runs have no lease to release.
    admit(&s, "parked", "s2", None, NOW).await;
    assert!(park(fx, &s, "parked", ParkStatus::Suspended, NOW + 1).await);
    let parked = s.get_run("parked").await.unwrap().unwrap();
    assert!(!s
        .release_lease("parked", "parker", parked.lease_epoch, NOW + 2)
        .await
        .unwrap());
    admit(&s, "done", "s3", None, NOW).await;
    let e3 = s
        .lease_run("done", "r1", NOW + 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    s.set_terminal(&terminal("done", TerminalStatus::Completed, NOW + 2))
        .await
        .unwrap();
    assert!(!s.release_lease("done", "r1", e3, NOW + 3).await.unwrap());
    assert_eq!(status_of(&s, "done").await, "completed");
}

async fn release_leases_frees_only_the_unacknowledged_of_many_and_says_which<F: Fixture>(fx: &F) {
    let s = fx.store();
    for (i, t) in ["fresh", "acked", "moved", "ended"].iter().enumerate() {
        admit_in(&s, t, &format!("s{i}"), "q", NOW).await;
    }
    let mut epochs = vec![];
    for t in ["fresh", "acked", "moved", "ended"] {
        let lease = s.lease_run(t, "r1", NOW + 1).await.unwrap().unwrap();
        epochs.push(lease.lease_epoch);
    }
    // Acknowledged by a heartbeat; released and leased again by another runner; completed.
    assert!(s
        .heartbeat(&beat_by("acked", epochs[1], "r1", "d1", NOW + 2))
        .await
        .unwrap()
        .is_some());
    assert!(s
        .release_lease("moved", "r1", epochs[2], NOW + 2)
        .await
        .unwrap());
    let moved = s.lease_run("moved", "r2", NOW + 3).await.unwrap().unwrap();
    s.set_terminal(&terminal("ended", TerminalStatus::Completed, NOW + 3))
        .await
        .unwrap();
    let held = |task_id, runner_id, lease_epoch| HeldLease {
        task_id,
        runner_id,
        lease_epoch,
    };
    let released = s
        .release_leases(
            &[
                held("acked", "r1", epochs[1]),
                held("fresh", "r1", 0),
                held("moved", "r1", epochs[2]),
                held("fresh", "r1", epochs[0]),
                held("ended", "r1", epochs[3]),
                held("nope", "r1", 1),
            ],
            NOW + 4,
        )
        .await
        .unwrap();
    assert_eq!(released, [false, false, false, true, false, false]);
    let fresh = s.get_run("fresh").await.unwrap().unwrap();
    assert_eq!(
        (fresh.held_by, fresh.lease_epoch, fresh.updated_at),
        (None, epochs[0], NOW + 4)
    );
    let acked = s.get_run("acked").await.unwrap().unwrap();
    assert_eq!(acked.held_by.as_deref(), Some("r1"));
    let moved_row = s.get_run("moved").await.unwrap().unwrap();
    assert_eq!(
        (moved_row.held_by.as_deref(), moved_row.lease_epoch),
        (Some("r2"), moved.lease_epoch)
    );
    assert_eq!(status_of(&s, "ended").await, "completed");
    assert_eq!(ids(&s.queue_backlog("q", 10).await.unwrap()), ["fresh"]);
    // Past one read's 50 ids: the unacknowledged are found in either read.
    let mut many = vec![];
    for i in 0..55 {
        let t = format!("m{i}");
        admit_in(&s, &t, &format!("ms{i}"), "q", NOW).await;
        let e = s
            .lease_run(&t, "r1", NOW + 1)
            .await
            .unwrap()
            .unwrap()
            .lease_epoch;
        if i != 0 && i != 52 {
            assert!(s
                .heartbeat(&beat_by(&t, e, "r1", "d1", NOW + 2))
                .await
                .unwrap()
                .is_some());
        }
        many.push((t, e));
    }
    let many_held: Vec<HeldLease<'_>> = many
        .iter()
        .map(|(t, e)| HeldLease {
            task_id: t,
            runner_id: "r1",
            lease_epoch: *e,
        })
        .collect();
    let released = s.release_leases(&many_held, NOW + 4).await.unwrap();
    let which: Vec<usize> = (0..55).filter(|i| released[*i]).collect();
    assert_eq!(which, [0, 52]);
    // Nothing to release sends nothing.
    assert!(s.release_leases(&[], NOW + 5).await.unwrap().is_empty());
    assert_eq!(
        s.release_leases(&[held("fresh", "r1", -1)], NOW + 5)
            .await
            .unwrap(),
        [false]
    );
}

async fn a_released_run_is_leasable_again_and_its_old_holder_stays_fenced_out<F: Fixture>(fx: &F) {
    let s = fx.store();
    admit_in(&s, "t1", "s1", "q", NOW).await;
    let e = s
        .lease("r1", "q", NOW + 1, 8)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    assert!(s.queue_backlog("q", 10).await.unwrap().is_empty());
    assert!(s.release_lease("t1", "r1", e, NOW + 2).await.unwrap());
    // Leasable again, from its queue.
    assert_eq!(ids(&s.queue_backlog("q", 10).await.unwrap()), ["t1"]);
    // The old holder's writes are fenced out while nobody holds it...
    assert_refused(&s, "t1", e, "r1", NOW + 3).await;
    // ...and once another runner holds it under the next epoch.
    let lease = s.lease("r2", "q", NOW + 4, 8).await.unwrap().unwrap();
    assert_eq!((lease.task_id.as_str(), lease.lease_epoch), ("t1", e + 1));
    assert_refused(&s, "t1", e, "r1", NOW + 5).await;
    // Even the same runner leasing it again gets a new epoch; its old one stays fenced out.
    assert!(s.release_lease("t1", "r2", e + 1, NOW + 6).await.unwrap());
    let again = s.lease_run("t1", "r1", NOW + 7).await.unwrap().unwrap();
    assert_eq!(again.lease_epoch, e + 2);
    assert_refused(&s, "t1", e, "r1", NOW + 8).await;
    // The new lease works: a heartbeat acknowledges it, the finish ends the run.
    assert!(s
        .heartbeat(&beat("t1", e + 2, "d1", NOW + 9))
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        s.finish_run(&finish("t1", e + 2, TerminalStatus::Completed, NOW + 10))
            .await
            .unwrap()
            .map(|run| run.last_seq),
        Some(1)
    );
    assert!(s.queue_backlog("q", 10).await.unwrap().is_empty());
}

async fn the_queue_round_trips_to_the_run_row_its_read_face_and_gate_decisions<F: Fixture>(fx: &F) {
    let s = fx.store();
    let queue = "Gpu-Q.1_x";
    admit_in(&s, "t1", "s1", queue, NOW).await;
    let run = s.get_run("t1").await.unwrap().unwrap();
    assert_eq!(run.queue, queue);
    let staleness = sema_core::liveness::Staleness {
        held_ms: 60_000,
        queued_ms: 60_000,
        lease_ack_ms: 60_000,
    };
    let face: sema_core::json::Value =
        serde_json::from_str(&sema_core::answer::face(&run, NOW + 1, &staleness)).unwrap();
    assert_eq!(face["queue"], queue);
    let listed = s
        .list_runs(&ListScope::All, Some("s1"), None, None, 10)
        .await
        .unwrap();
    assert_eq!(listed[0].queue, queue);
    // A queue name is case-sensitive in every engine.
    assert!(s.queue_backlog("gpu-q.1_x", 10).await.unwrap().is_empty());
    assert_eq!(ids(&s.queue_backlog(queue, 10).await.unwrap()), ["t1"]);
    // A resumed run is leasable again from its queue: the decision names it. A wake's new run
    // follows the run it wakes: the ending names that run's queue.
    assert!(park(fx, &s, "t1", ParkStatus::Suspended, NOW + 1).await);
    match decide(
        &s,
        DecidePath::Approvals,
        GateScope::Session("s1"),
        Decision::Approve,
        None,
        NOW + 2,
    )
    .await
    {
        Decided::Resumed { queue: q, .. } => assert_eq!(q, queue),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        park_gate(fx, &s, "t1", "task_done", None, NOW + 3).await,
        Parked::Parked { .. }
    ));
    match decide(
        &s,
        DecidePath::Wake,
        GateScope::Session("s1"),
        Decision::Wake,
        None,
        NOW + 4,
    )
    .await
    {
        Decided::Ended { queue: q, .. } => assert_eq!(q, queue),
        other => panic!("{other:?}"),
    }
    // The cancel's read-back carries it too.
    admit_in(&s, "t2", "s2", queue, NOW).await;
    let cancelled = s.cancel("t2", NOW + 1).await.unwrap();
    assert_eq!(cancelled.run.unwrap().queue, queue);
}

// ---- sessions as a whole: faces, deletion, retention -------------------------------------------

use sema_core::store::{Purged, SessionDelete, SessionDeleted};

every_dialect!(
    session_faces_show_the_active_run_and_pending_gate_and_page_by_recent_admission,
    deleting_a_session_removes_everything_keyed_by_it_and_a_new_submit_starts_fresh,
    a_session_with_a_running_or_parked_run_or_of_someone_else_is_not_deleted,
    a_leader_childs_session_is_not_deleted_while_its_leader_runs,
    retention_deletes_old_terminal_runs_with_their_rows_bounded_and_never_an_active_run,
    a_delete_racing_an_admission_through_another_connection_never_deletes_the_admitted_run,
);

/// Rows of `table` matching `cond` (literal SQL), read out of band.
async fn count<F: Fixture>(fx: &F, table: &str, cond: &str) -> i64 {
    use sema_core::store::Executor;
    let out = fx
        .connect()
        .run(&sema_core::sql::Stmt::new(
            format!("SELECT COUNT(*) AS n FROM {table} WHERE {cond}"),
            vec![],
        ))
        .await
        .unwrap();
    sema_core::sql::get_i64(&out.rows[0], "n").unwrap()
}

fn deletion<'a>(session: &'a str, owner: Option<&'a str>, marker: &'a str) -> SessionDelete<'a> {
    SessionDelete {
        session_id: session,
        owner,
        marker,
        leader_run_id: sema_core::leader::leader_of_session(session).unwrap_or(""),
        now: NOW + 100,
    }
}

async fn session_faces_show_the_active_run_and_pending_gate_and_page_by_recent_admission<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let alice = ListScope::Owner(Some("alice"));
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    admit(&s, "t2", "s2", Some("alice"), NOW + 1).await;
    assert!(matches!(
        park_gate(fx, &s, "t2", "tool_approval", None, NOW + 2).await,
        Parked::Parked { .. }
    ));
    admit(&s, "t3", "s3", Some("bob"), NOW + 3).await;
    let first = s.list_session_views(&alice, None, 1).await.unwrap();
    assert_eq!(first.len(), 1);
    let v = &first[0];
    assert_eq!(v.session_id, "s2");
    let active = v.active.as_ref().expect("s2 is held");
    assert_eq!(
        (active.task_id.as_str(), active.status.as_str()),
        ("t2", "suspended")
    );
    let gate = v.gate.as_ref().expect("s2 has a pending gate");
    assert_eq!(
        (gate.task_id.as_str(), gate.kind.as_str()),
        ("t2", "tool_approval")
    );
    assert_eq!(
        v.face(false)["pendingGate"]["decidePath"],
        "/v1/approvals/s2/decide"
    );
    let rest = s
        .list_session_views(&alice, Some((v.updated_at, &v.session_id)), 5)
        .await
        .unwrap();
    assert_eq!(
        rest.iter()
            .map(|r| r.session_id.as_str())
            .collect::<Vec<_>>(),
        ["s1"]
    );
    assert_eq!(rest[0].active.as_ref().unwrap().status, "running");
    assert!(rest[0].gate.is_none());
    // The whole card on a session's own read; a listing's card is the same text (short here).
    let one = s.session_view("s2").await.unwrap().unwrap();
    let card: sema_core::json::Value =
        serde_json::from_str(&one.gate.as_ref().unwrap().card).unwrap();
    assert_eq!(card, sema_core::json!({"ask": "tool_approval for t2"}));
    assert_eq!(
        s.list_session_views(&ListScope::All, None, 10)
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(s
        .list_session_views(&ListScope::Owner(None), None, 10)
        .await
        .unwrap()
        .is_empty());
    // A session whose run ended shows no active run; its last activity is that run's end.
    s.cancel("t1", NOW + 50).await.unwrap();
    let s1 = s.session_view("s1").await.unwrap().unwrap();
    assert!(s1.active.is_none());
    assert_eq!(s1.last_activity_at(), NOW + 50);
    assert_eq!(s.session_view("nope").await.unwrap(), None);
}

async fn deleting_a_session_removes_everything_keyed_by_it_and_a_new_submit_starts_fresh<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    let key = sema_core::idempotency::scoped_key(None, "k1");
    let mut keyed = new_run("t1", "s1", None, NOW);
    keyed.idempotency = Some((&key, "fp", 202, "{}"));
    assert_eq!(s.create_run(&keyed).await.unwrap(), CreateRun::Created);
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    append(
        &s,
        "t1",
        e,
        "r1",
        &[NewEvent {
            kind: "x",
            data: "{}",
            event_id: Some("e1"),
        }],
        NOW,
    )
    .await
    .unwrap();
    s.add_steer(&NewSteer {
        task_id: "t1",
        message: "m",
        now: NOW,
        max_messages: 64,
        max_bytes: 1 << 20,
    })
    .await
    .unwrap();
    s.set_terminal(&terminal("t1", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    admit(&s, "t2", "s1", None, NOW + 2).await;
    assert!(matches!(
        park_gate(fx, &s, "t2", "human", None, NOW + 3).await,
        Parked::Parked { .. }
    ));
    s.cancel("t2", NOW + 4).await.unwrap();
    admit(&s, "keep", "s2", None, NOW).await;
    for (table, n) in [
        ("run_event", 1),
        ("steer_message", 1),
        ("idempotency_key", 1),
        ("gate_checkpoint", 1),
    ] {
        let cond = "task_id IN (SELECT task_id FROM task_run WHERE session_id = 's1')";
        assert!(count(fx, table, cond).await >= n, "{table} was written");
    }
    assert_eq!(
        s.delete_session(&deletion("s1", None, "marker-1"))
            .await
            .unwrap(),
        SessionDeleted::Deleted { runs: 2 }
    );
    for table in [
        "run_event",
        "steer_message",
        "idempotency_key",
        "gate_checkpoint",
    ] {
        assert_eq!(
            count(fx, table, "task_id IN ('t1', 't2')").await,
            0,
            "{table}"
        );
    }
    assert_eq!(count(fx, "task_run", "session_id = 's1'").await, 0);
    assert_eq!(
        count(fx, "task_active", "session_id = 's1'").await,
        0,
        "no marker left"
    );
    assert!(s.get_session("s1").await.unwrap().is_none());
    assert_eq!(s.idempotency(&key).await.unwrap(), None);
    // The other session is untouched.
    assert_eq!(holder_of(&s, "s2").await.as_deref(), Some("keep"));
    // Deleting again: nothing there.
    assert_eq!(
        s.delete_session(&deletion("s1", None, "marker-2"))
            .await
            .unwrap(),
        SessionDeleted::Missing
    );
    // The id and the key start fresh, even for another principal.
    let mut again = new_run("t9", "s1", Some("bob"), NOW + 10);
    let bob_key = sema_core::idempotency::scoped_key(Some("bob"), "k1");
    again.idempotency = Some((&bob_key, "fp", 202, "{}"));
    assert_eq!(s.create_run(&again).await.unwrap(), CreateRun::Created);
    keyed.task_id = "t10";
    keyed.session_id = "s3";
    assert_eq!(
        s.create_run(&keyed).await.unwrap(),
        CreateRun::Created,
        "the key is free again"
    );
}

async fn a_session_with_a_running_or_parked_run_or_of_someone_else_is_not_deleted<F: Fixture>(
    fx: &F,
) {
    let s = fx.store();
    admit(&s, "t1", "s1", Some("alice"), NOW).await;
    let running = SessionDeleted::Active {
        task_id: "t1".into(),
        status: "running".into(),
    };
    assert_eq!(
        s.delete_session(&deletion("s1", Some("alice"), "m1"))
            .await
            .unwrap(),
        running
    );
    assert!(matches!(
        park_gate(fx, &s, "t1", "tool_approval", None, NOW + 1).await,
        Parked::Parked { .. }
    ));
    assert_eq!(
        s.delete_session(&deletion("s1", Some("alice"), "m2"))
            .await
            .unwrap(),
        SessionDeleted::Active {
            task_id: "t1".into(),
            status: "suspended".into()
        }
    );
    // Nothing was deleted, and the claim is the run's (no marker left behind).
    assert!(s.get_run("t1").await.unwrap().is_some());
    assert_eq!(holder_of(&s, "s1").await.as_deref(), Some("t1"));
    assert!(s.pending_gate("s1").await.unwrap().is_some());
    // A session checked as someone else's (deleted and re-created since) is not deleted.
    s.cancel("t1", NOW + 2).await.unwrap();
    assert_eq!(
        s.delete_session(&deletion("s1", Some("bob"), "m3"))
            .await
            .unwrap(),
        SessionDeleted::Missing
    );
    assert!(s.get_run("t1").await.unwrap().is_some());
    // A live run without a claim (out-of-band debris) still keeps its session.
    admit(&s, "t2", "s2", None, NOW).await;
    fx.raw("DELETE FROM task_active WHERE session_id = 's2'");
    assert_eq!(
        s.delete_session(&deletion("s2", None, "m4")).await.unwrap(),
        SessionDeleted::Active {
            task_id: "t2".into(),
            status: "running".into()
        }
    );
    // A dead claim (its run ended out of band) does not: it goes with the session.
    admit(&s, "t3", "s3", None, NOW).await;
    fx.raw("UPDATE task_run SET status = 'failed' WHERE task_id = 't3'");
    assert_eq!(
        s.delete_session(&deletion("s3", None, "m5")).await.unwrap(),
        SessionDeleted::Deleted { runs: 1 }
    );
    assert_eq!(holder_of(&s, "s3").await, None);
    assert_eq!(
        s.delete_session(&deletion("s1", Some("alice"), "m6"))
            .await
            .unwrap(),
        SessionDeleted::Deleted { runs: 1 }
    );
}

async fn a_leader_childs_session_is_not_deleted_while_its_leader_runs<F: Fixture>(fx: &F) {
    let s = fx.store();
    s.create_leader_with_plan(&new_leader("L", None, None))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "L", 0, "c0", None, NOW).await,
        StartChild::Started
    );
    s.set_terminal(&terminal("c0", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();
    let session = leader::child_session_id("L", 0);
    assert_eq!(
        s.delete_session(&deletion(&session, None, "m1"))
            .await
            .unwrap(),
        SessionDeleted::LeaderRunning {
            leader_run_id: "L".into()
        }
    );
    assert_eq!(
        states(&s, "L").await[0],
        ChildState::Ended {
            status: "completed".into(),
            error: None
        }
    );
    assert!(s
        .finish_leader_run("L", LeaderFinish::Completed, None, None, NOW + 2)
        .await
        .unwrap());
    assert_eq!(
        s.delete_session(&deletion(&session, None, "m2"))
            .await
            .unwrap(),
        SessionDeleted::Deleted { runs: 1 }
    );
    // A session merely named like a child (no such leader) is an ordinary session.
    admit(&s, "x", "leader-Q-0", None, NOW).await;
    s.cancel("x", NOW + 1).await.unwrap();
    assert_eq!(
        s.delete_session(&deletion("leader-Q-0", None, "m3"))
            .await
            .unwrap(),
        SessionDeleted::Deleted { runs: 1 }
    );
}

async fn retention_deletes_old_terminal_runs_with_their_rows_bounded_and_never_an_active_run<
    F: Fixture,
>(
    fx: &F,
) {
    let s = fx.store();
    // Three old terminal runs (one with events and a key), one recent, one old but still running,
    // one old terminal run still holding a claim (debris), one old child of a running leader.
    let key = sema_core::idempotency::scoped_key(None, "old");
    let mut keyed = new_run("old1", "a", None, NOW);
    keyed.idempotency = Some((&key, "fp", 202, "{}"));
    assert_eq!(s.create_run(&keyed).await.unwrap(), CreateRun::Created);
    let e = s
        .lease("r1", DEFAULT_QUEUE, NOW, 1)
        .await
        .unwrap()
        .unwrap()
        .lease_epoch;
    append(
        &s,
        "old1",
        e,
        "r1",
        &[
            NewEvent {
                kind: "x",
                data: "{}",
                event_id: None,
            },
            NewEvent {
                kind: "y",
                data: "{}",
                event_id: None,
            },
        ],
        NOW,
    )
    .await
    .unwrap();
    s.set_terminal(&terminal("old1", TerminalStatus::Completed, NOW))
        .await
        .unwrap();
    for (t, sess) in [("old2", "a"), ("old3", "b")] {
        admit(&s, t, sess, None, NOW).await;
        s.set_terminal(&terminal(t, TerminalStatus::Failed, NOW + 1))
            .await
            .unwrap();
    }
    admit(&s, "recent", "b", None, NOW + 9_000).await;
    s.set_terminal(&terminal("recent", TerminalStatus::Cancelled, NOW + 9_000))
        .await
        .unwrap();
    admit(&s, "live", "c", None, NOW).await;
    admit(&s, "debris", "d", None, NOW).await;
    fx.raw("UPDATE task_run SET status = 'completed' WHERE task_id = 'debris'");
    s.create_leader_with_plan(&new_leader("L", None, None))
        .await
        .unwrap();
    assert_eq!(
        start(&s, "L", 0, "child", None, NOW).await,
        StartChild::Started
    );
    s.set_terminal(&terminal("child", TerminalStatus::Completed, NOW + 1))
        .await
        .unwrap();

    let before = NOW + 5_000;
    let first = s.purge_terminal_runs(before, 2).await.unwrap();
    assert_eq!(first.runs, 2, "bounded by the page");
    let second = s.purge_terminal_runs(before, 2).await.unwrap();
    assert_eq!(second.runs, 1);
    assert_eq!(first.events + second.events, 2, "old1's two events");
    assert_eq!(
        s.purge_terminal_runs(before, 2).await.unwrap(),
        Purged::default()
    );
    for t in ["old1", "old2", "old3"] {
        assert!(s.get_run(t).await.unwrap().is_none(), "{t} deleted");
    }
    for t in ["recent", "live", "debris", "child"] {
        assert!(s.get_run(t).await.unwrap().is_some(), "{t} kept");
    }
    assert_eq!(s.idempotency(&key).await.unwrap(), None);
    assert_eq!(count(fx, "run_event", "task_id = 'old1'").await, 0);
    assert_eq!(holder_of(&s, "c").await.as_deref(), Some("live"));
    // Once the leader settled, its old child goes too.
    assert!(s
        .finish_leader_run("L", LeaderFinish::Completed, None, None, NOW + 2)
        .await
        .unwrap());
    assert_eq!(s.purge_terminal_runs(before, 10).await.unwrap().runs, 1);
    assert!(s.get_run("child").await.unwrap().is_none());
}

async fn a_delete_racing_an_admission_through_another_connection_never_deletes_the_admitted_run<
    F: Fixture + Sync,
>(
    fx: &F,
) {
    let s = fx.store();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..20 {
        let session = format!("race{round}");
        let (old, new) = (format!("old{round}"), format!("new{round}"));
        admit(&s, &old, &session, None, NOW).await;
        s.cancel(&old, NOW + 1).await.unwrap();
        let barrier = std::sync::Barrier::new(2);
        let marker = format!("marker{round}");
        let (deleted, created) = std::thread::scope(|scope| {
            let del = scope.spawn(|| {
                let store = fx.store();
                barrier.wait();
                pollster::block_on(store.delete_session(&deletion(&session, None, &marker)))
                    .unwrap()
            });
            let add = scope.spawn(|| {
                let store = fx.store();
                barrier.wait();
                pollster::block_on(store.create_run(&new_run(&new, &session, None, NOW + 2)))
                    .unwrap()
            });
            (del.join().unwrap(), add.join().unwrap())
        });
        let kind = |d: &SessionDeleted| match d {
            SessionDeleted::Deleted { .. } => "deleted",
            SessionDeleted::Active { .. } => "refused",
            _ => "other",
        };
        *outcomes
            .entry(format!(
                "{} / {}",
                kind(&deleted),
                created == CreateRun::Created
            ))
            .or_default() += 1;
        if created == CreateRun::Created {
            // Whoever went first, the admitted run and its claim are whole.
            assert!(s.get_run(&new).await.unwrap().is_some(), "round {round}");
            assert_eq!(
                holder_of(&s, &session).await,
                Some(new.clone()),
                "round {round}"
            );
            if let SessionDeleted::Active { task_id, .. } = &deleted {
                assert!(
                    task_id.is_empty() || *task_id == new,
                    "round {round}: {deleted:?}"
                );
            }
        } else {
            // The admission lost to the marker: the delete won and nothing of it remains.
            assert!(
                matches!(created, CreateRun::Held(_)),
                "round {round}: {created:?}"
            );
            assert!(
                matches!(deleted, SessionDeleted::Deleted { .. }),
                "round {round}"
            );
            assert!(s.get_run(&new).await.unwrap().is_none());
            assert_eq!(holder_of(&s, &session).await, None, "no marker left");
        }
        assert_eq!(
            count(fx, "task_active", &format!("task_id = '{marker}'")).await,
            0
        );
    }
    eprintln!("delete/admission race outcomes: {outcomes:?}");
}
