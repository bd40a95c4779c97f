//! The session object's protocol, declared once: the binding, the naming rule, the calls the Worker
//! sends and the replies the object returns.
//!
//! One Durable Object per session (binding [`BINDING`], named by [`object_name`]) is the
//! serialisation point of that session's claim and its live streams. The Worker authenticates the
//! caller, checks ownership or role, validates the body, and only then sends a [`SessionCall`]. The
//! object answers with a [`SessionReply`] (both in [`crate::object_codec`]'s text; over `fetch`, a
//! reply is marked with [`REPLY_HEADER`]); it renders no HTTP.
//! The only answers that leave the object as responses are streams (SSE): a `Subscribe`, or an
//! `AdmitStream` that admitted (or met a conflict, which is the stream's one `done` frame).
//!
//! Transport: a call that may open a stream ([`SessionCall::may_stream`]) is sent as a `fetch` to
//! [`CALL_URL`], its body the call; every other call goes by the object's RPC method [`RPC_METHOD`]
//! (one string in, one string out: [`crate::object_rpc`]), which spares both sides building and
//! reading a request and a response.
//!
//! [`SessionCall::lock`] is the object's lock policy, stated here so it is tested natively.

pub use crate::admission::Admission;
use crate::{
    admission::AdmitInput,
    auth::Role,
    conflict::Conflict,
    error::ApiError,
    gate::{DecidePath, Decision},
    run::RunRow,
    runner_wire::LeaseHolder,
    status::{ParkStatus, TerminalStatus},
};
use crate::{codec_enum, codec_struct};

/// The Worker's binding of the session object class.
pub const BINDING: &str = "SESSION";
/// The URL of a call (the object has one entry point; the call says what to do).
pub const CALL_URL: &str = "https://session.internal/call";
/// Present on every reply sent over `fetch`; a response without it is a stream the object opened.
pub const REPLY_HEADER: &str = "x-session-reply";
/// The object's RPC method for calls that never stream: `(call, failpoint) -> text`, the text
/// framed by [`crate::object_rpc::answer`].
pub const RPC_METHOD: &str = "sessionCall";

/// The name of the object that serialises `session_id`: the session id itself. Session ids are safe
/// ids (`[A-Za-z0-9_.-]{1,64}`), so the name needs no escaping and every Worker isolate derives the
/// same object for the same session.
pub fn object_name(session_id: &str) -> &str {
    session_id
}

/// A call from the Worker to a session's object, written in [`crate::object_codec`]'s text (an
/// internal protocol both sides of one build share).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCall {
    Admit(AdmitInput),
    /// Admit, then stream the run (`meta` first); a conflict becomes the stream's `done` frame.
    AdmitStream(AdmitInput),
    /// Admit, then wait up to `wait_ms` for the terminal result.
    AdmitWait {
        input: AdmitInput,
        wait_ms: u64,
    },
    Cancel {
        task_id: String,
        session_id: String,
    },
    /// SSE replay after `after`, then the live tail until `done`. With `replay`, the stream of a
    /// keyed duplicate (SPEC-api §4): an ended run answers `x-task-id`, `meta`, then its `done` with
    /// `replay: true`; a run in flight is joined (heartbeats, then that `done`), `after` unused.
    Subscribe {
        task_id: String,
        after: i64,
        replay: bool,
    },
    /// Wait up to `wait_ms` for an existing run to end.
    Wait {
        task_id: String,
        wait_ms: u64,
    },
    /// A runner's append. `hinted`: the Worker chose this object from the runner's `sessionId`
    /// hint, not from the run's row, so the object takes the write only for the run whose claim it
    /// holds, else answers [`SessionReply::Misrouted`] having done nothing.
    Append {
        task_id: String,
        holder: LeaseHolder,
        events: Vec<WireEvent>,
        hinted: bool,
    },
    /// A runner's finish; `hinted` as for [`SessionCall::Append`].
    Finish {
        task_id: String,
        finish: WireFinish,
        hinted: bool,
    },
    Steer {
        task_id: String,
        message: String,
    },
    /// A reaper pass ended a run of this session, or found it ended (terminal or gone), and
    /// released its claim in D1 in the same batch: forget the claim if held, end the run's streams
    /// and waiters with `done`. D1 needs nothing more from the object.
    RunEnded {
        task_id: String,
    },
    /// The run was leased after waiting longer than one held-run cutoff (from the dispatcher or the
    /// Worker that wrote the lease, after handing it over): if it holds the session's claim, look at
    /// it again within one cutoff, as for any held run (its looks may have backed off while it
    /// waited: `liveness::Staleness::recheck_at`). Answered `Noted` (`claim_released` false).
    Leased {
        task_id: String,
    },
    /// Diagnostics: what the object holds in memory (operators only).
    Stats,
    /// Write the admission the object answered from its own storage into D1 (its outbox), if one
    /// is still pending; the Worker sends it right after answering, and a listing of the session
    /// sends it before reading D1. Idempotent: with nothing pending it changes nothing.
    Flush,
    /// The lease holder parks its run on a gate.
    Park {
        task_id: String,
        park: WirePark,
    },
    /// A client's decision on the session's pending gate; for a wake, the run to admit after it.
    Decide {
        decide: WireDecide,
        wake: Option<AdmitInput>,
    },
    /// A leader's driver starts child `index` of `leader_run_id` as the run `input` (in the child's
    /// own session): the child's compare-and-set and the run's admission, one D1 batch.
    StartChild {
        leader_run_id: String,
        index: usize,
        input: AdmitInput,
    },
    /// Delete the session whole (its runs, ledger, gates, steer messages, idempotency bindings)
    /// and forget it, unless a run of it is running or parked. `owner`: the owner the Worker
    /// checked; `marker`: a fresh id (see `sql::session_sql::delete_session`).
    DeleteSession {
        session_id: String,
        owner: Option<String>,
        marker: String,
    },
    /// Issue a stream ticket for `task_id` to this principal (the Worker checked that it may read
    /// the run): the book in the object's storage keeps only its digest (`stream_ticket.rs`).
    IssueTicket {
        task_id: String,
        principal: Option<String>,
        role: Role,
    },
    /// Whom a stream ticket stands for on `task_id`, whose run `owner` owns (read by the Worker).
    CheckTicket {
        task_id: String,
        ticket: String,
        owner: Option<String>,
    },
}

/// A park as the Worker forwards it (validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WirePark {
    pub holder: LeaseHolder,
    pub kind: String,
    pub status: ParkStatus,
    /// The card, compact JSON text (at most 64 KiB).
    pub card_json: String,
    /// The runner's `expiresInSec`, if any.
    pub expires_in_sec: Option<u64>,
    /// `APPROVAL_TIMEOUT_SEC` (0 = none); the object computes the deadline from the same clock
    /// reading as the gate's `created_at`.
    pub approval_timeout_sec: u64,
}

/// A decision as the Worker forwards it (validated for its path; ownership checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireDecide {
    pub path: DecidePath,
    /// The session id (approvals, wake) or task id (plan review, resume) the path names.
    pub scope_id: String,
    pub decision: Decision,
    pub reason: Option<String>,
    /// Fresh per attempt.
    pub resolution_id: String,
}

/// How much of a call runs under the object's lock.
///
/// What the lock guarantees: calls that change the claim or write a run's ledger never interleave,
/// even while one awaits D1 (a D1 call is external I/O and does not close the object's input gate).
/// Hence (1) admission decides from a claim no other call is changing, and (2) live frames are
/// published while the lock is held, right after their D1 commit, so they reach subscribers in seq
/// order. Streams and waits hold it only while admitting, never while streaming or waiting: a slow
/// reader never blocks the session. A submit holds it only to write or judge the claim
/// (`AdmitDecision::needs_lock`): one the remembered state answers is not queued behind a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// The whole call runs under the lock.
    Whole,
    /// A submission (plain, streamed or waited): its admission takes the lock only when it writes
    /// or judges the claim, and the stream or wait that follows never holds it.
    Admission,
    /// No lock: reads the ledger and registers a subscriber or waiter.
    Free,
}

impl SessionCall {
    /// Marks a runner's write as routed by the runner's session hint, or not (other calls are
    /// left as they are).
    pub fn set_hinted(&mut self, value: bool) {
        if let Self::Append { hinted, .. } | Self::Finish { hinted, .. } = self {
            *hinted = value;
        }
    }

    /// The run of a runner's write routed by the runner's session hint; `None` for every other
    /// call.
    pub fn hinted_task(&self) -> Option<&str> {
        match self {
            Self::Append {
                task_id,
                hinted: true,
                ..
            }
            | Self::Finish {
                task_id,
                hinted: true,
                ..
            } => Some(task_id),
            _ => None,
        }
    }

    pub fn lock(&self) -> Lock {
        match self {
            Self::Cancel { .. }
            | Self::Append { .. }
            | Self::Finish { .. }
            | Self::Steer { .. }
            | Self::RunEnded { .. }
            | Self::Leased { .. }
            | Self::Park { .. }
            | Self::Decide { .. }
            | Self::StartChild { .. }
            | Self::DeleteSession { .. }
            | Self::IssueTicket { .. }
            | Self::Flush => Lock::Whole,
            Self::Stats | Self::CheckTicket { .. } => Lock::Free,
            Self::Admit(_) | Self::AdmitStream(_) | Self::AdmitWait { .. } => Lock::Admission,
            Self::Subscribe { .. } | Self::Wait { .. } => Lock::Free,
        }
    }

    /// Whether the object may answer with a stream (then the call travels as a `fetch`, whose
    /// response can carry it); every other call is answered by a reply alone.
    pub fn may_stream(&self) -> bool {
        matches!(self, Self::AdmitStream(_) | Self::Subscribe { .. })
    }
}

/// An event as the Worker forwards it (validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEvent {
    pub kind: String,
    /// JSON text.
    pub data: String,
    pub event_id: Option<String>,
}

/// A finish as the Worker forwards it (validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireFinish {
    pub holder: LeaseHolder,
    pub status: TerminalStatus,
    /// JSON text.
    pub result: Option<String>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    /// The `done` event's data (JSON text).
    pub done_json: String,
}

/// The outcome of a cancel, as the object saw it after its batch.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelReply {
    pub task_id: String,
    pub session_id: String,
    /// The run after the cancel (`None`: no row).
    pub run: Option<RunRow>,
    /// Whether a claim naming this task was released.
    pub claim_released: bool,
}

/// The object's answer to a call (every call but an opened stream), written as [`SessionCall`] is.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionReply {
    /// Admitted, attached to the caller's own run, or an idempotency key's original answer.
    Admitted(Admission),
    /// The session is held: the 409 materials.
    Conflict(Conflict),
    Cancelled(CancelReply),
    /// The seqs assigned to an appended batch, in order, and what waits for the holder (read in
    /// the append's own batch).
    Appended {
        seqs: Vec<i64>,
        cancel_requested: bool,
        steer_pending: i64,
    },
    /// The run after the runner's finish.
    Finished(RunRow),
    SteerQueued {
        task_id: String,
        seq: i64,
    },
    /// The run when a wait ended (terminal, or still active when the wait ran out).
    Waited(RunRow),
    /// A `RunEnded` (or `Leased`) notice was taken: whether the object held the run's claim and let
    /// it go (never, for `Leased`).
    Noted {
        claim_released: bool,
    },
    /// A `Flush` was carried out: whether an admission was pending and D1 now has it.
    Flushed {
        written: bool,
    },
    /// What the object holds in memory: callers waiting for a run's end, open SSE streams, the
    /// task holding the claim it remembers, and how many streams this instance ended because their
    /// reader fell too far behind.
    Stats {
        waiters: usize,
        streams: usize,
        claim: Option<String>,
        cut_off: u64,
    },
    /// A run parked: its park word and the park event's seq.
    Parked {
        task_id: String,
        status: String,
        seq: i64,
    },
    /// A decision was recorded: the run resumed (`status` running) or ended (its terminal status);
    /// after a wake, `woken` is the new run's admission (or the conflict that refused it).
    Decided {
        task_id: String,
        session_id: String,
        kind: String,
        decision: Decision,
        status: String,
        woken: Option<Box<SessionReply>>,
    },
    /// A child start: `started` when this call started it; otherwise another driver did, the
    /// leader stopped or is at its bound (`held`: false), or the child's session is held by another
    /// run (`held`: true; the child waits for it, as any submission would).
    ChildStart {
        started: bool,
        held: bool,
    },
    /// The session was deleted (this many runs) and its object forgot it.
    SessionDeleted {
        session_id: String,
        runs_deleted: u64,
    },
    /// A stream ticket just issued (shown once) and its deadline.
    Ticket {
        ticket: String,
        expires_at: i64,
    },
    /// The principal a stream ticket stands for.
    TicketHolder {
        principal: Option<String>,
        role: Role,
    },
    /// A hinted runner write reached an object that holds no claim of its run: nothing was done,
    /// and the Worker routes it again by the run's row.
    Misrouted,
    /// A caller's mistake or a refusal (4xx).
    Refused(ApiError),
    /// An infrastructure failure inside the object; the cause is logged by the Worker, never sent.
    Failed {
        cause: String,
    },
}

// The messages' text (`object_codec`): each variant keeps its number, and each field its place.
codec_enum!(SessionCall {
    0 => Admit(input),
    1 => AdmitStream(input),
    2 => AdmitWait { input, wait_ms },
    3 => Cancel { task_id, session_id },
    4 => Subscribe { task_id, after, replay },
    5 => Wait { task_id, wait_ms },
    6 => Append { task_id, holder, events, hinted },
    7 => Finish { task_id, finish, hinted },
    8 => Steer { task_id, message },
    9 => RunEnded { task_id },
    10 => Stats,
    11 => Flush,
    12 => Park { task_id, park },
    13 => Decide { decide, wake },
    14 => StartChild { leader_run_id, index, input },
    15 => DeleteSession { session_id, owner, marker },
    16 => IssueTicket { task_id, principal, role },
    17 => CheckTicket { task_id, ticket, owner },
    18 => Leased { task_id },
});
codec_enum!(SessionReply {
    0 => Admitted(admission),
    1 => Conflict(conflict),
    2 => Cancelled(cancel),
    3 => Appended { seqs, cancel_requested, steer_pending },
    4 => Finished(run),
    5 => SteerQueued { task_id, seq },
    6 => Waited(run),
    7 => Noted { claim_released },
    8 => Flushed { written },
    9 => Stats { waiters, streams, claim, cut_off },
    10 => Parked { task_id, status, seq },
    11 => Decided { task_id, session_id, kind, decision, status, woken },
    12 => ChildStart { started, held },
    13 => SessionDeleted { session_id, runs_deleted },
    14 => Ticket { ticket, expires_at },
    15 => TicketHolder { principal, role },
    16 => Misrouted,
    17 => Refused(error),
    18 => Failed { cause },
});
codec_struct!(WirePark {
    holder,
    kind,
    status,
    card_json,
    expires_in_sec,
    approval_timeout_sec
});
codec_struct!(WireDecide {
    path,
    scope_id,
    decision,
    reason,
    resolution_id
});
codec_struct!(WireEvent {
    kind,
    data,
    event_id
});
codec_struct!(WireFinish {
    holder,
    status,
    result,
    error,
    error_code,
    done_json
});
codec_struct!(CancelReply {
    task_id,
    session_id,
    run,
    claim_released
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conflict::{Conflict, Holder};

    fn input() -> AdmitInput {
        AdmitInput {
            session_id: "S".into(),
            task_id: "T".into(),
            client_task_id: true,
            owner: Some("alice".into()),
            objective: "say hi".into(),
            meta: "{}".into(),
            idempotency: Some(("k".into(), "f".into())),
            queue: "gpu".into(),
            key_unread: true,
        }
    }

    fn every_call() -> Vec<SessionCall> {
        vec![
            SessionCall::Admit(input()),
            SessionCall::AdmitStream(input()),
            SessionCall::AdmitWait {
                input: input(),
                wait_ms: 5,
            },
            SessionCall::Cancel {
                task_id: "T".into(),
                session_id: "S".into(),
            },
            SessionCall::Subscribe {
                task_id: "T".into(),
                after: 3,
                replay: true,
            },
            SessionCall::Wait {
                task_id: "T".into(),
                wait_ms: 9,
            },
            SessionCall::Append {
                task_id: "T".into(),
                holder: LeaseHolder {
                    runner_id: "r1".into(),
                    lease_epoch: 2,
                },
                events: vec![WireEvent {
                    kind: "text_delta".into(),
                    data: r#"{"delta":"é"}"#.into(),
                    event_id: Some("e1".into()),
                }],
                hinted: true,
            },
            SessionCall::Finish {
                task_id: "T".into(),
                finish: WireFinish {
                    holder: LeaseHolder {
                        runner_id: "r1".into(),
                        lease_epoch: 2,
                    },
                    status: TerminalStatus::Completed,
                    result: Some("{}".into()),
                    error: None,
                    error_code: None,
                    done_json: r#"{"status":"completed"}"#.into(),
                },
                hinted: false,
            },
            SessionCall::Steer {
                task_id: "T".into(),
                message: "shorter".into(),
            },
            SessionCall::RunEnded {
                task_id: "T".into(),
            },
            SessionCall::Stats,
            SessionCall::Flush,
            SessionCall::Park {
                task_id: "T".into(),
                park: WirePark {
                    holder: LeaseHolder {
                        runner_id: "r1".into(),
                        lease_epoch: 2,
                    },
                    kind: "tool_approval".into(),
                    status: ParkStatus::Suspended,
                    card_json: r#"{"tool":"x"}"#.into(),
                    expires_in_sec: Some(60),
                    approval_timeout_sec: 0,
                },
            },
            SessionCall::Decide {
                decide: WireDecide {
                    path: DecidePath::Wake,
                    scope_id: "S".into(),
                    decision: Decision::Wake,
                    reason: Some("go".into()),
                    resolution_id: "R".into(),
                },
                wake: Some(input()),
            },
            SessionCall::StartChild {
                leader_run_id: "L".into(),
                index: 3,
                input: input(),
            },
            SessionCall::DeleteSession {
                session_id: "S".into(),
                owner: None,
                marker: "M".into(),
            },
            SessionCall::IssueTicket {
                task_id: "T".into(),
                principal: Some("alice".into()),
                role: Role::Client,
            },
            SessionCall::CheckTicket {
                task_id: "T".into(),
                ticket: "st1_x".into(),
                owner: None,
            },
            SessionCall::Leased {
                task_id: "T".into(),
            },
        ]
    }

    #[test]
    fn only_a_streamed_admission_and_a_subscription_travel_as_fetch() {
        let streaming: Vec<String> = every_call()
            .iter()
            .filter(|c| c.may_stream())
            .map(|c| {
                format!("{c:?}")
                    .split([' ', '('])
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(streaming, ["AdmitStream", "Subscribe"]);
    }

    #[test]
    fn every_call_survives_a_serialisation_round_trip() {
        for call in every_call() {
            let text = crate::object_codec::encode(&call);
            let back: SessionCall = crate::object_codec::decode(&text).unwrap();
            assert_eq!(back, call, "{text}");
        }
    }

    #[test]
    fn claim_and_ledger_writes_run_wholly_under_the_lock_and_streams_never_do() {
        let policy: Vec<(&str, Lock)> = every_call()
            .iter()
            .map(|c| {
                // The variant's name, as its `Debug` form begins.
                let name = format!("{c:?}");
                let op = name.split([' ', '(']).next().unwrap().to_owned();
                (
                    match op.as_str() {
                        "Admit" => "admit",
                        "AdmitStream" => "admit_stream",
                        "AdmitWait" => "admit_wait",
                        "Cancel" => "cancel",
                        "Subscribe" => "subscribe",
                        "Wait" => "wait",
                        "Append" => "append",
                        "Finish" => "finish",
                        "Steer" => "steer",
                        "RunEnded" => "run_ended",
                        "Stats" => "stats",
                        "Flush" => "flush",
                        "Park" => "park",
                        "Decide" => "decide",
                        "StartChild" => "start_child",
                        "DeleteSession" => "delete_session",
                        "IssueTicket" => "issue_ticket",
                        "CheckTicket" => "check_ticket",
                        "Leased" => "leased",
                        other => panic!("unexpected op {other}"),
                    },
                    c.lock(),
                )
            })
            .collect();
        assert_eq!(
            policy,
            vec![
                ("admit", Lock::Admission),
                ("admit_stream", Lock::Admission),
                ("admit_wait", Lock::Admission),
                ("cancel", Lock::Whole),
                ("subscribe", Lock::Free),
                ("wait", Lock::Free),
                ("append", Lock::Whole),
                ("finish", Lock::Whole),
                ("steer", Lock::Whole),
                ("run_ended", Lock::Whole),
                ("stats", Lock::Free),
                ("flush", Lock::Whole),
                ("park", Lock::Whole),
                ("decide", Lock::Whole),
                ("start_child", Lock::Whole),
                ("delete_session", Lock::Whole),
                ("issue_ticket", Lock::Whole),
                ("check_ticket", Lock::Free),
                ("leased", Lock::Whole),
            ]
        );
    }

    fn every_reply() -> Vec<SessionReply> {
        let run: RunRow = crate::json::serde_from_value(crate::json!({
            "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
            "status": "completed", "objective_preview": "p", "result": "{\"ok\":true}",
            "error": null, "error_code": null, "held_by": null, "lease_epoch": 1,
            "cancel_requested": false, "heartbeat_at": 5, "last_seq": 4, "created_at": 1,
            "updated_at": 2
        }))
        .unwrap();
        vec![
            SessionReply::Admitted(Admission {
                status: 202,
                body: r#"{"taskId":"T"}"#.into(),
                task_id: "T".into(),
                replayed: true,
                flush: false,
            }),
            SessionReply::Conflict(Conflict::build(
                "S",
                Some("T"),
                &Holder::Row {
                    status: "suspended".into(),
                    pending_gate_kind: Some("tool_approval".into()),
                },
            )),
            SessionReply::ChildStart {
                started: false,
                held: true,
            },
            SessionReply::Cancelled(CancelReply {
                task_id: "T".into(),
                session_id: "S".into(),
                run: Some(run.clone()),
                claim_released: true,
            }),
            SessionReply::Appended {
                seqs: vec![1, 2],
                cancel_requested: true,
                steer_pending: 3,
            },
            SessionReply::Finished(run.clone()),
            SessionReply::SteerQueued {
                task_id: "T".into(),
                seq: 1,
            },
            SessionReply::Waited(run),
            SessionReply::Refused(ApiError::lease_lost()),
            SessionReply::Failed {
                cause: "d1: boom".into(),
            },
            SessionReply::Noted {
                claim_released: true,
            },
            SessionReply::Misrouted,
            SessionReply::Flushed { written: true },
            SessionReply::SessionDeleted {
                session_id: "S".into(),
                runs_deleted: 2,
            },
            SessionReply::Stats {
                waiters: 0,
                streams: 2,
                claim: Some("T".into()),
                cut_off: 1,
            },
            SessionReply::Ticket {
                ticket: "st1_x".into(),
                expires_at: 60_000,
            },
            SessionReply::TicketHolder {
                principal: None,
                role: Role::Operator,
            },
            SessionReply::Parked {
                task_id: "T".into(),
                status: "suspended".into(),
                seq: 7,
            },
            SessionReply::Decided {
                task_id: "T".into(),
                session_id: "S".into(),
                kind: "tool_approval".into(),
                decision: Decision::Wake,
                status: "completed".into(),
                woken: Some(Box::new(SessionReply::Admitted(Admission {
                    status: 202,
                    body: "{}".into(),
                    task_id: "T2".into(),
                    replayed: false,
                    flush: true,
                }))),
            },
        ]
    }

    #[test]
    fn every_reply_survives_a_serialisation_round_trip() {
        for reply in every_reply() {
            let text = crate::object_codec::encode(&reply);
            let back: SessionReply = crate::object_codec::decode(&text).unwrap();
            assert_eq!(back, reply, "{text}");
        }
    }

    /// Every variant is in [`every_call`] and [`every_reply`]: this match has no wildcard, so a new
    /// variant stops the tests compiling until it is added here and to those lists (whose text the
    /// layout test pins), and the lists hold each variant once.
    #[test]
    fn the_samples_hold_every_variant_once() {
        fn call_name(c: &SessionCall) -> &'static str {
            match c {
                SessionCall::Admit(_) => "Admit",
                SessionCall::AdmitStream(_) => "AdmitStream",
                SessionCall::AdmitWait { .. } => "AdmitWait",
                SessionCall::Cancel { .. } => "Cancel",
                SessionCall::Subscribe { .. } => "Subscribe",
                SessionCall::Wait { .. } => "Wait",
                SessionCall::Append { .. } => "Append",
                SessionCall::Finish { .. } => "Finish",
                SessionCall::Steer { .. } => "Steer",
                SessionCall::RunEnded { .. } => "RunEnded",
                SessionCall::Stats => "Stats",
                SessionCall::Flush => "Flush",
                SessionCall::Park { .. } => "Park",
                SessionCall::Decide { .. } => "Decide",
                SessionCall::StartChild { .. } => "StartChild",
                SessionCall::DeleteSession { .. } => "DeleteSession",
                SessionCall::IssueTicket { .. } => "IssueTicket",
                SessionCall::CheckTicket { .. } => "CheckTicket",
                SessionCall::Leased { .. } => "Leased",
            }
        }
        fn reply_name(r: &SessionReply) -> &'static str {
            match r {
                SessionReply::Admitted(_) => "Admitted",
                SessionReply::Conflict(_) => "Conflict",
                SessionReply::Cancelled(_) => "Cancelled",
                SessionReply::Appended { .. } => "Appended",
                SessionReply::Finished(_) => "Finished",
                SessionReply::SteerQueued { .. } => "SteerQueued",
                SessionReply::Waited(_) => "Waited",
                SessionReply::Noted { .. } => "Noted",
                SessionReply::Flushed { .. } => "Flushed",
                SessionReply::Stats { .. } => "Stats",
                SessionReply::Parked { .. } => "Parked",
                SessionReply::Decided { .. } => "Decided",
                SessionReply::ChildStart { .. } => "ChildStart",
                SessionReply::SessionDeleted { .. } => "SessionDeleted",
                SessionReply::Ticket { .. } => "Ticket",
                SessionReply::TicketHolder { .. } => "TicketHolder",
                SessionReply::Misrouted => "Misrouted",
                SessionReply::Refused(_) => "Refused",
                SessionReply::Failed { .. } => "Failed",
            }
        }
        let calls: std::collections::BTreeSet<_> = every_call().iter().map(call_name).collect();
        assert_eq!((calls.len(), every_call().len()), (19, 19));
        let replies: std::collections::BTreeSet<_> = every_reply().iter().map(reply_name).collect();
        assert_eq!((replies.len(), every_reply().len()), (19, 19));
    }

    /// The digest of every message's text above and of the dispatcher's (`crate::dispatch`),
    /// pinned to [`crate::object_codec::LAYOUT`]: a change that alters any message's text (a
    /// variant's number, a field's place, a field's type written otherwise, a field added or
    /// dropped) fails here until `LAYOUT` is bumped and the new digest pinned beside it, so that
    /// two builds of different layouts refuse each other's messages rather than misread them. (A
    /// changed sample value with the layout unchanged moves the digest too: pin it, keep `LAYOUT`.)
    #[test]
    fn the_messages_layout_is_pinned_to_its_version() {
        let mut text = String::new();
        for call in every_call() {
            text.push_str(&crate::object_codec::encode(&call));
        }
        for reply in every_reply() {
            text.push_str(&crate::object_codec::encode(&reply));
        }
        text.push_str(&crate::dispatch::every_message_text());
        let digest = crate::object_codec::digest(&text);
        assert_eq!(
            (crate::object_codec::LAYOUT, digest),
            ("1", 0x1732_d991_1a63_93b2),
            "the objects' messages changed layout: bump object_codec::LAYOUT and pin the new digest"
        );
    }

    #[test]
    fn the_object_of_a_session_is_named_by_the_session_id() {
        assert_eq!(object_name("demo-1"), "demo-1");
        assert_eq!(BINDING, "SESSION");
    }
}
