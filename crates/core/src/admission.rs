//! Admission decisions of a session's Durable Object.
//!
//! The object serialises every claim-changing operation of its session and remembers the claim
//! ([`SessionState`]), so a conflicting submit is answered from memory without a D1 round trip. D1
//! stays the judge: the object's memory is written only after the D1 batch commits, and a D1 refusal
//! (the mirror `task_active` row says the session is held) is adopted into memory. When unsure, the
//! answer is 409 (single-active beats self-healing).

use crate::{
    conflict::{Conflict, Holder},
    idempotency::{IdempotencyBinding, Replay},
    run::RunRow,
    status,
    store::ClaimHolder,
    wire::Admitted,
    ApiError,
};
use serde::{Deserialize, Serialize};

/// What a session's Durable Object keeps in its storage (key `state`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session's owner, once a submit into it has committed.
    #[serde(default)]
    pub owner: Option<SessionOwner>,
    /// The run holding the session's claim.
    #[serde(default)]
    pub claim: Option<Claim>,
    /// An admission committed in the object's storage and answered, whose D1 batch has not been
    /// confirmed yet (the outbox; see [`commits_in_object`]). Saved with the claim it holds, in
    /// one storage write, so the two are durable together or not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingAdmission>,
    /// Memory only (never stored): this instance has seen D1 commit an admission of this session
    /// for this owner, so its owner and claim are known to match D1 rather than read back from
    /// storage that may lag it.
    #[serde(skip)]
    pub confirmed: bool,
}

crate::tree_struct!(SessionState lenient {
    owner: "owner" = default,
    claim: "claim" = default,
    pending: "pending" = default;
    confirmed
});

/// An admission answered from the object's storage, waiting for its D1 batch: everything the
/// batch needs, so a later instance replays it as it was first built (same task id, same time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAdmission {
    pub input: AdmitInput,
    /// The 202's body.
    pub body: String,
    /// When it was admitted (the run's `created_at`).
    pub at: i64,
    pub instance_id: String,
}

crate::tree_struct!(PendingAdmission lenient {
    input: "input",
    body: "body",
    at: "at",
    instance_id: "instance_id",
});

impl PendingAdmission {
    /// Whether D1's answer to this admission's batch means D1 has it: committed now, or by an
    /// earlier flush whose end the object never saw (the runtime stopped before it forgot the
    /// entry): the task id taken by this same session's run, or the claim held by this same task.
    /// Anything else (a foreign owner, another holder) leaves the entry pending, to try again.
    pub fn written_by(&self, outcome: &crate::store::CreateRun) -> bool {
        use crate::store::CreateRun;
        match outcome {
            CreateRun::Created => true,
            CreateRun::TaskIdTaken(Some(run)) => run.session_id == self.input.session_id,
            CreateRun::Held(Some(holder)) => holder.task_id == self.input.task_id,
            _ => false,
        }
    }
}

/// Where an admission commits (`SEMA_ADMIT_COMMIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitPoint {
    /// D1 first, then the object (the default): every reader sees the run once it is answered.
    #[default]
    D1,
    /// The object's storage first, D1 right after the answer (the outbox), where
    /// [`commits_in_object`] allows it.
    Object,
}

impl CommitPoint {
    /// The knob's value: `object` selects [`CommitPoint::Object`]; anything else is the default.
    pub fn parse(v: Option<&str>) -> Self {
        match v.map(str::trim) {
            Some("object") => Self::Object,
            _ => Self::D1,
        }
    }
}

/// Whether `input`, which found its session free, may be committed in the object's storage and
/// answered before D1 has it. Only when nothing but D1's copy of what this object already knows
/// could refuse the batch: this instance confirmed the session's owner and claim against D1
/// (`confirmed`), the submitter owns it, no earlier admission is still pending, the task id is
/// the server's own (a client's could be taken in another session) and there is no idempotency
/// key (its scope spans sessions, so only D1 can bind it). Every other submission commits in D1.
pub fn commits_in_object(point: CommitPoint, state: &SessionState, input: &AdmitInput) -> bool {
    point == CommitPoint::Object
        && state.confirmed
        && state.pending.is_none()
        && state.claim.is_none()
        && state.owner.as_ref().is_some_and(|o| o.id == input.owner)
        && !input.client_task_id
        && input.idempotency.is_none()
}

/// The owner of a session (`id == None`: the anonymous principal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOwner {
    pub id: Option<String>,
}

crate::tree_struct!(SessionOwner lenient { id: "id" });

/// The claim: which run holds the session, and what a conflicting submit needs to be told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub task_id: String,
    pub owner: Option<String>,
    pub status: String,
    #[serde(default)]
    pub gate_kind: Option<String>,
    /// Set when the claim holder was admitted under an idempotency key.
    #[serde(default)]
    pub idempotency: Option<IdempotencyBinding>,
    /// When the object must look at the holder's row again before answering 409 from memory: the
    /// holder's stale deadline as last seen, and at most one held-run cutoff after the last evidence
    /// of life the object saw (admission, append, a read of the row, a lease it was told of), or up
    /// to four after a read that found the run still waiting for a runner
    /// (`liveness::Staleness::recheck_at`). Until then a conflict costs no D1 round trip. (0, e.g. a
    /// claim stored before this field existed: look now.)
    #[serde(default)]
    pub recheck_at: i64,
}

crate::tree_struct!(Claim lenient {
    task_id: "task_id",
    owner: "owner",
    status: "status",
    gate_kind: "gate_kind" = default,
    idempotency: "idempotency" = default,
    recheck_at: "recheck_at" = default,
});

/// One submission as the Durable Object receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmitInput {
    pub session_id: String,
    pub task_id: String,
    /// The task id came from the client (so a retry with it may attach to the active run).
    pub client_task_id: bool,
    pub owner: Option<String>,
    pub objective: String,
    /// JSON object text.
    pub meta: String,
    /// `(scoped_key, fingerprint)` when the request carried an `Idempotency-Key`.
    pub idempotency: Option<(String, String)>,
    /// The Worker did not look the key up before calling (a plain submit with a key and a
    /// server-minted task id): a bound key's answer comes before any other, so the object reads
    /// the key's binding before answering a refusal (a 409, a 404); a fresh admission, the
    /// holder's own key, the binding its own batch ran into and their 422 need no read. A fresh
    /// keyed admission thus costs its batch alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub key_unread: bool,
    /// The named task queue the run is leased from (a safe id). Absent in a stored or sent shape
    /// from before queues: [`crate::queue::DEFAULT_QUEUE`].
    #[serde(default = "crate::queue::default_queue")]
    pub queue: String,
}

crate::tree_struct!(AdmitInput lenient {
    session_id: "session_id",
    task_id: "task_id",
    client_task_id: "client_task_id",
    owner: "owner",
    objective: "objective",
    meta: "meta",
    idempotency: "idempotency",
    key_unread: "key_unread" = default,
    queue: "queue" = (crate::queue::default_queue()),
});

impl AdmitInput {
    /// The run row this admission writes at `now`; a key, when it has one, is bound to `body` (the
    /// 202 it answers).
    pub fn new_run<'a>(
        &'a self,
        instance_id: &'a str,
        objective_preview: &'a str,
        now: i64,
        body: &'a str,
    ) -> crate::sql::run_sql::NewRun<'a> {
        crate::sql::run_sql::NewRun {
            queue: &self.queue,
            task_id: &self.task_id,
            session_id: &self.session_id,
            owner: self.owner.as_deref(),
            instance_id,
            objective: &self.objective,
            objective_preview,
            meta_json: &self.meta,
            now,
            idempotency: self
                .idempotency
                .as_ref()
                .map(|(key, fp)| (key.as_str(), fp.as_str(), 202, body)),
        }
    }
}

/// What to do with a submission, decided from the Durable Object's memory alone.
#[derive(Debug, Clone, PartialEq)]
pub enum AdmitDecision {
    /// No claim is held: write the run, its claim and its key in one batch.
    Write,
    /// The client's own task id holds the session: 202 with it.
    SameTask(Admitted),
    /// The holder was admitted under this key with this request: replay it.
    Replay(Replay),
    /// The session is held by another run: 409 with these materials (or, on a stream, its `done`).
    Conflict(Conflict),
    /// The claim has not been confirmed for too long: read the holder's row and judge it
    /// (`liveness::judge`) before answering.
    Verify(Claim),
    /// Refuse: 404 for someone else's session, or 422 for a reused key.
    Refuse(ApiError),
}

impl AdmitDecision {
    /// Whether carrying the decision out writes or judges the claim, so it must run under the
    /// session object's lock. Every other decision is an answer from the remembered state alone
    /// and may be given while another call holds the lock: the state it read is the last one a
    /// finished call left, so the answer is ordered before the call in flight. A free session
    /// (`Write`) and a claim due for a look (`Verify`) always wait their turn, so no submit is
    /// refused from memory while the session might be free.
    pub fn needs_lock(&self) -> bool {
        matches!(self, Self::Write | Self::Verify(_))
    }
}

/// Decides a submission against the session's state at `now`.
pub fn decide(state: &SessionState, input: &AdmitInput, now: i64) -> AdmitDecision {
    if let Some(owner) = &state.owner {
        if owner.id != input.owner {
            return AdmitDecision::Refuse(ApiError::not_found("session"));
        }
    }
    let Some(claim) = &state.claim else {
        return AdmitDecision::Write;
    };
    if let (Some((key, fingerprint)), Some(binding)) = (&input.idempotency, &claim.idempotency) {
        if *key == binding.scoped_key {
            return match binding.answer(fingerprint) {
                Ok(replay) => AdmitDecision::Replay(replay),
                Err(e) => AdmitDecision::Refuse(e),
            };
        }
    }
    if input.client_task_id && input.task_id == claim.task_id && input.owner == claim.owner {
        return AdmitDecision::SameTask(Admitted {
            task_id: claim.task_id.clone(),
            session_id: input.session_id.clone(),
            status: crate::status::RUNNING.to_owned(),
        });
    }
    if now >= claim.recheck_at {
        return AdmitDecision::Verify(claim.clone());
    }
    AdmitDecision::Conflict(conflict_for(&input.session_id, claim))
}

/// The conflict materials for a session held by `claim`.
pub fn conflict_for(session_id: &str, claim: &Claim) -> Conflict {
    Conflict::build(
        session_id,
        Some(&claim.task_id),
        &Holder::Row {
            status: claim.status.clone(),
            pending_gate_kind: claim.gate_kind.clone(),
        },
    )
}

/// An accepted submission: the answer and the run it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// 202 for an active run, 200 for a client task id whose run already ended.
    pub status: u16,
    /// The answer body (JSON text), byte for byte what an idempotency key replays.
    pub body: String,
    pub task_id: String,
    /// An idempotency key's original answer, sent again.
    pub replayed: bool,
    /// Committed in the object's storage only: D1 gets the run when the object flushes its
    /// outbox, which the Worker asks for right after answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flush: bool,
}

impl Admission {
    /// A fresh answer naming `admitted`.
    pub fn of(status: u16, admitted: &Admitted) -> Self {
        Self {
            status,
            body: crate::json::to_text(admitted).unwrap_or_default(),
            task_id: admitted.task_id.clone(),
            replayed: false,
            flush: false,
        }
    }
}

impl From<Replay> for Admission {
    fn from(r: Replay) -> Self {
        Self {
            status: r.status,
            body: r.body,
            task_id: r.task_id,
            replayed: true,
            flush: false,
        }
    }
}

/// The claim the object remembers once `input`'s admission batch committed (`body` is its answer),
/// to be confirmed against the row again at `recheck_at`.
pub fn claim_of(input: &AdmitInput, body: &str, recheck_at: i64) -> Claim {
    Claim {
        recheck_at,
        task_id: input.task_id.clone(),
        owner: input.owner.clone(),
        status: status::RUNNING.to_owned(),
        gate_kind: None,
        idempotency: input
            .idempotency
            .as_ref()
            .map(|(key, fp)| IdempotencyBinding {
                scoped_key: key.clone(),
                fingerprint: fp.clone(),
                task_id: input.task_id.clone(),
                response_status: 202,
                response_body: body.to_owned(),
            }),
    }
}

/// What the object does after D1 refused its admission batch because D1 holds the session's claim
/// (the object's memory was behind D1). D1's unique key is the judge; the object only adopts.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconcile {
    /// The claim was released between the batch and the read: write again.
    Retry,
    /// The holder is provably dead (terminal or missing row): release its D1 claim, write again.
    ReleaseAndRetry { task_id: String },
    /// D1 names a non-terminal holder: adopt it as the claim (the session's owner is the
    /// submitter) and judge it from its row (`liveness::judge`) before answering.
    Adopt { claim: Claim },
    /// The session belongs to another principal: remember that owner and answer 404.
    Foreign { owner: Option<String> },
    /// The one retry is spent and the session still looks held: 409 with what is known.
    Refuse(Conflict),
}

/// Decides a refused admission from the holder D1 reports (`None`: no claim any more).
/// `retry_left` is false once the object already released a dead holder or retried once, so a
/// session that keeps looking held is refused (when unsure, 409) instead of looping.
pub fn reconcile(input: &AdmitInput, holder: Option<&ClaimHolder>, retry_left: bool) -> Reconcile {
    let session = input.session_id.as_str();
    let Some(holder) = holder else {
        return if retry_left {
            Reconcile::Retry
        } else {
            Reconcile::Refuse(Conflict::build(session, None, &Holder::Unknown))
        };
    };
    if holder.session_owner != input.owner {
        return Reconcile::Foreign {
            owner: holder.session_owner.clone(),
        };
    }
    match &holder.status {
        Some(s) if status::is_active(s) => {
            let claim = Claim {
                task_id: holder.task_id.clone(),
                owner: holder.owner.clone(),
                status: s.clone(),
                gate_kind: None,
                idempotency: None,
                recheck_at: 0,
            };
            Reconcile::Adopt { claim }
        }
        _ if retry_left => Reconcile::ReleaseAndRetry {
            task_id: holder.task_id.clone(),
        },
        _ => Reconcile::Refuse(Conflict::build(
            session,
            Some(&holder.task_id),
            &Holder::Unknown,
        )),
    }
}

/// The answer when a submit's task id already names a run (`run`: that run, if readable). The
/// caller's own client task id in the same session is that run again: 202 while it is active, 200
/// once it ended. Anything else (someone else's run, another session, a server-minted id) is
/// `conflict.task_id_taken`.
pub fn task_id_taken(input: &AdmitInput, run: Option<&RunRow>) -> Result<Admission, ApiError> {
    match run {
        Some(run)
            if input.client_task_id
                && run.owner == input.owner
                && run.session_id == input.session_id =>
        {
            let code = if status::is_active(&run.status) {
                202
            } else {
                200
            };
            Ok(Admission::of(
                code,
                &Admitted {
                    task_id: run.task_id.clone(),
                    session_id: run.session_id.clone(),
                    status: run.status.clone(),
                },
            ))
        }
        _ => Err(ApiError::task_id_taken()),
    }
}

/// The body of a fresh admission (also what an idempotency key replays).
pub fn admitted_body(task_id: &str, session_id: &str) -> String {
    crate::json::to_text(&Admitted {
        task_id: task_id.to_owned(),
        session_id: session_id.to_owned(),
        status: crate::status::RUNNING.to_owned(),
    })
    .unwrap_or_default()
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_struct!(AdmitInput {
    session_id,
    task_id,
    client_task_id,
    owner,
    objective,
    meta,
    idempotency,
    key_unread,
    queue,
});
crate::codec_struct!(Admission {
    status,
    body,
    task_id,
    replayed,
    flush
});

#[cfg(test)]
mod tests {
    use super::*;

    fn input(
        task: &str,
        client: bool,
        owner: Option<&str>,
        key: Option<(&str, &str)>,
    ) -> AdmitInput {
        AdmitInput {
            session_id: "S".into(),
            task_id: task.into(),
            client_task_id: client,
            owner: owner.map(Into::into),
            objective: "o".into(),
            meta: "{}".into(),
            idempotency: key.map(|(k, f)| (k.into(), f.into())),
            queue: crate::queue::DEFAULT_QUEUE.into(),
            key_unread: false,
        }
    }

    #[test]
    fn an_input_without_a_queue_deserializes_into_the_default_queue() {
        let json = crate::json!({
            "session_id": "S", "task_id": "T", "client_task_id": false, "owner": null,
            "objective": "o", "meta": "{}", "idempotency": null
        });
        let i: AdmitInput = crate::json::serde_from_value(json).unwrap();
        assert_eq!(i.queue, "default");
        let mut named = input("T", false, None, None);
        named.queue = "gpu".into();
        let back: AdmitInput =
            serde_json::from_str(&crate::json::to_text(&named).unwrap()).unwrap();
        assert_eq!(back, named);
    }

    fn confirmed_free(owner: Option<&str>) -> SessionState {
        SessionState {
            owner: Some(SessionOwner {
                id: owner.map(Into::into),
            }),
            confirmed: true,
            ..SessionState::default()
        }
    }

    #[test]
    fn a_server_minted_unkeyed_submit_into_a_confirmed_free_session_of_its_owner_commits_in_the_object(
    ) {
        let state = confirmed_free(Some("alice"));
        let i = input("T", false, Some("alice"), None);
        assert!(commits_in_object(CommitPoint::Object, &state, &i));
        assert!(!commits_in_object(CommitPoint::D1, &state, &i));
    }

    #[test]
    fn every_submit_that_only_d1_can_judge_commits_in_d1() {
        let free = confirmed_free(Some("alice"));
        let o = CommitPoint::Object;
        // A key spans sessions; a client's task id may be taken in another session.
        assert!(!commits_in_object(
            o,
            &free,
            &input("T", false, Some("alice"), Some(("k", "f")))
        ));
        assert!(!commits_in_object(
            o,
            &free,
            &input("T", true, Some("alice"), None)
        ));
        // Another principal, or an owner this instance never confirmed against D1.
        assert!(!commits_in_object(
            o,
            &free,
            &input("T", false, Some("bob"), None)
        ));
        let unconfirmed = SessionState {
            confirmed: false,
            ..free.clone()
        };
        assert!(!commits_in_object(
            o,
            &unconfirmed,
            &input("T", false, Some("alice"), None)
        ));
        let new_session = SessionState {
            confirmed: true,
            ..SessionState::default()
        };
        assert!(!commits_in_object(
            o,
            &new_session,
            &input("T", false, None, None)
        ));
        // A claim held, or an earlier admission still in the outbox.
        let claimed = SessionState {
            confirmed: true,
            ..held("H", Some("alice"), None)
        };
        assert!(!commits_in_object(
            o,
            &claimed,
            &input("T", false, Some("alice"), None)
        ));
        let pending = SessionState {
            pending: Some(PendingAdmission {
                input: input("P", false, Some("alice"), None),
                body: "{}".into(),
                at: 1,
                instance_id: "i".into(),
            }),
            ..free
        };
        assert!(!commits_in_object(
            o,
            &pending,
            &input("T", false, Some("alice"), None)
        ));
    }

    #[test]
    fn the_outbox_is_stored_with_the_state_and_the_confirmation_is_not() {
        let mut state = confirmed_free(None);
        state.pending = Some(PendingAdmission {
            input: input("P", false, None, None),
            body: r#"{"taskId":"P"}"#.into(),
            at: 7,
            instance_id: "i".into(),
        });
        let back: SessionState =
            serde_json::from_str(&crate::json::to_text(&state).unwrap()).unwrap();
        assert_eq!(back.pending, state.pending);
        assert!(!back.confirmed, "a stored state is read back unconfirmed");
        let old: SessionState = serde_json::from_str(r#"{"owner":null,"claim":null}"#).unwrap();
        assert_eq!(old.pending, None);
    }

    #[test]
    fn an_outbox_entry_is_written_once_d1_has_its_run_from_this_or_an_earlier_flush() {
        use crate::store::{ClaimHolder, CreateRun};
        let p = PendingAdmission {
            input: input("P", false, None, None),
            body: "{}".into(),
            at: 1,
            instance_id: "i".into(),
        };
        let holder = |task: &str| ClaimHolder {
            task_id: task.into(),
            status: Some("running".into()),
            owner: None,
            session_owner: None,
        };
        assert!(p.written_by(&CreateRun::Created));
        assert!(p.written_by(&CreateRun::Held(Some(holder("P")))));
        assert!(!p.written_by(&CreateRun::Held(Some(holder("Q")))));
        assert!(!p.written_by(&CreateRun::Held(None)));
        assert!(!p.written_by(&CreateRun::ForeignSession { owner: None }));
        assert!(!p.written_by(&CreateRun::TaskIdTaken(None)));
    }

    #[test]
    fn the_commit_point_knob_is_d1_unless_it_says_object() {
        assert_eq!(CommitPoint::parse(None), CommitPoint::D1);
        assert_eq!(CommitPoint::parse(Some("d1")), CommitPoint::D1);
        assert_eq!(CommitPoint::parse(Some("objects")), CommitPoint::D1);
        assert_eq!(CommitPoint::parse(Some(" object ")), CommitPoint::Object);
    }

    fn held(task: &str, owner: Option<&str>, key: Option<(&str, &str)>) -> SessionState {
        SessionState {
            owner: Some(SessionOwner {
                id: owner.map(Into::into),
            }),
            claim: Some(Claim {
                task_id: task.into(),
                owner: owner.map(Into::into),
                status: "running".into(),
                gate_kind: None,
                recheck_at: 100,
                idempotency: key.map(|(k, f)| IdempotencyBinding {
                    scoped_key: k.into(),
                    fingerprint: f.into(),
                    task_id: task.into(),
                    response_status: 202,
                    response_body: admitted_body(task, "S"),
                }),
            }),
            ..SessionState::default()
        }
    }

    #[test]
    fn a_fresh_session_is_written() {
        assert_eq!(
            decide(&SessionState::default(), &input("T", false, None, None), 0),
            AdmitDecision::Write
        );
    }

    #[test]
    fn a_held_session_refuses_with_the_running_holder_conflict() {
        let AdmitDecision::Conflict(c) =
            decide(&held("A", None, None), &input("B", false, None, None), 0)
        else {
            panic!("expected a conflict");
        };
        let e = c.to_api_error();
        assert_eq!((e.status(), e.code()), (409, "conflict.session_active_run"));
        assert_eq!(e.message, crate::conflict::RUNNING_TEXT);
        assert_eq!(e.detail("activeTaskId"), Some("\"A\""));
    }

    #[test]
    fn the_holders_own_client_task_id_gets_202_with_that_run() {
        let d = decide(
            &held("A", Some("p"), None),
            &input("A", true, Some("p"), None),
            0,
        );
        assert_eq!(
            d,
            AdmitDecision::SameTask(Admitted {
                task_id: "A".into(),
                session_id: "S".into(),
                status: "running".into()
            })
        );
    }

    #[test]
    fn a_server_minted_id_equal_to_the_holder_is_still_a_conflict() {
        assert!(matches!(
            decide(&held("A", None, None), &input("A", false, None, None), 0),
            AdmitDecision::Conflict(_)
        ));
    }

    #[test]
    fn another_principals_session_is_not_found() {
        let AdmitDecision::Refuse(e) = decide(
            &held("A", Some("alice"), None),
            &input("A", true, Some("bob"), None),
            0,
        ) else {
            panic!("expected a refusal");
        };
        assert_eq!(e.status(), 404);
    }

    #[test]
    fn the_holders_key_replays_with_the_same_request_and_refuses_a_different_one() {
        let state = held("A", None, Some(("k", "f1")));
        match decide(&state, &input("B", false, None, Some(("k", "f1"))), 0) {
            AdmitDecision::Replay(r) => {
                assert_eq!((r.status, r.body), (202, admitted_body("A", "S")));
                assert_eq!(r.task_id, "A");
            }
            other => panic!("{other:?}"),
        }
        let AdmitDecision::Refuse(e) =
            decide(&state, &input("B", false, None, Some(("k", "f2"))), 0)
        else {
            panic!("expected a refusal");
        };
        assert_eq!((e.status(), e.code()), (422, "idempotency.key_reused"));
    }

    #[test]
    fn a_different_key_on_a_held_session_is_a_conflict() {
        let state = held("A", None, Some(("k", "f1")));
        let AdmitDecision::Conflict(c) =
            decide(&state, &input("B", false, None, Some(("other", "f1"))), 0)
        else {
            panic!("expected a conflict");
        };
        assert_eq!(c.to_api_error().status(), 409);
    }

    #[test]
    fn a_claim_past_its_recheck_time_is_verified_against_its_row_before_any_409() {
        let state = held("A", None, None);
        assert!(matches!(
            decide(&state, &input("B", false, None, None), 99),
            AdmitDecision::Conflict(_)
        ));
        let AdmitDecision::Verify(claim) = decide(&state, &input("B", false, None, None), 100)
        else {
            panic!("expected a verification");
        };
        assert_eq!(claim.task_id, "A");
    }

    #[test]
    fn only_a_free_session_or_a_claim_due_for_a_look_waits_for_the_lock() {
        let free = SessionState::default();
        let held_a = held("A", Some("p"), Some(("k", "f")));
        let b = input("B", false, Some("p"), None);
        assert!(
            decide(&free, &b, 0).needs_lock(),
            "a free session is written"
        );
        assert!(
            decide(&held_a, &b, 100).needs_lock(),
            "a due claim is judged"
        );
        let from_memory = [
            decide(&held_a, &b, 99),
            decide(&held_a, &input("A", true, Some("p"), None), 99),
            decide(&held_a, &input("B", false, Some("p"), Some(("k", "f"))), 99),
            decide(&held_a, &input("B", false, Some("p"), Some(("k", "g"))), 99),
            decide(&held_a, &input("B", false, Some("q"), None), 0),
        ];
        let kinds: Vec<&str> = from_memory
            .iter()
            .map(|d| {
                assert!(!d.needs_lock(), "{d:?} is answered from memory");
                match d {
                    AdmitDecision::Conflict(_) => "conflict",
                    AdmitDecision::SameTask(_) => "same task",
                    AdmitDecision::Replay(_) => "replay",
                    AdmitDecision::Refuse(e) => e.code(),
                    _ => "other",
                }
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "conflict",
                "same task",
                "replay",
                "idempotency.key_reused",
                "not_found"
            ]
        );
    }

    #[test]
    fn state_survives_a_storage_round_trip() {
        let s = held("A", None, Some(("k", "f")));
        let back: SessionState = serde_json::from_str(&crate::json::to_text(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    fn holder(task: &str, status: Option<&str>, session_owner: Option<&str>) -> ClaimHolder {
        ClaimHolder {
            task_id: task.into(),
            status: status.map(Into::into),
            owner: session_owner.map(Into::into),
            session_owner: session_owner.map(Into::into),
        }
    }

    #[test]
    fn a_non_terminal_d1_holder_is_adopted_for_judgement() {
        let i = input("B", false, Some("p"), None);
        match reconcile(&i, Some(&holder("A", Some("suspended"), Some("p"))), true) {
            Reconcile::Adopt { claim } => {
                assert_eq!(
                    (claim.task_id.as_str(), claim.status.as_str()),
                    ("A", "suspended")
                );
                assert_eq!(claim.recheck_at, 0, "judged from its row before any 409");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dead_d1_holder_is_released_once_then_refused() {
        let i = input("B", false, None, None);
        for dead in [Some("failed"), Some("completed"), None] {
            assert_eq!(
                reconcile(&i, Some(&holder("A", dead, None)), true),
                Reconcile::ReleaseAndRetry {
                    task_id: "A".into()
                }
            );
            let Reconcile::Refuse(c) = reconcile(&i, Some(&holder("A", dead, None)), false) else {
                panic!("expected a refusal once the retry is spent");
            };
            assert_eq!(c.active_task_id.as_deref(), Some("A"));
            assert_eq!(c.error, crate::conflict::BASE_TEXT);
        }
    }

    #[test]
    fn a_claim_released_since_the_refusal_is_retried_once() {
        let i = input("B", false, None, None);
        assert_eq!(reconcile(&i, None, true), Reconcile::Retry);
        let Reconcile::Refuse(c) = reconcile(&i, None, false) else {
            panic!("expected a refusal");
        };
        assert_eq!(c.active_task_id, None);
    }

    #[test]
    fn a_d1_holder_in_another_principals_session_is_foreign() {
        let i = input("B", false, Some("bob"), None);
        assert_eq!(
            reconcile(&i, Some(&holder("A", Some("running"), Some("alice"))), true),
            Reconcile::Foreign {
                owner: Some("alice".into())
            }
        );
    }

    fn run(task: &str, session: &str, owner: Option<&str>, status: &str) -> RunRow {
        crate::json::serde_from_value(crate::json!({
            "task_id": task, "session_id": session, "owner": owner, "instance_id": "default",
            "status": status, "objective_preview": "", "result": null, "error": null,
            "error_code": null, "held_by": null, "lease_epoch": 0, "cancel_requested": false,
            "heartbeat_at": null, "last_seq": 0, "created_at": 1, "updated_at": 1
        }))
        .unwrap()
    }

    #[test]
    fn the_callers_own_client_task_id_is_that_run_again_202_while_active_200_after() {
        let i = input("A", true, Some("p"), None);
        let a = task_id_taken(&i, Some(&run("A", "S", Some("p"), "running"))).unwrap();
        assert_eq!((a.status, a.replayed), (202, false));
        let a = task_id_taken(&i, Some(&run("A", "S", Some("p"), "failed"))).unwrap();
        assert_eq!(a.status, 200);
        assert!(a.body.contains("\"status\":\"failed\""));
    }

    #[test]
    fn a_task_id_of_someone_else_another_session_or_a_minted_id_is_taken() {
        let taken = |i: &AdmitInput, r: Option<&RunRow>| task_id_taken(i, r).unwrap_err().code();
        let mine = run("A", "S", Some("p"), "running");
        assert_eq!(
            taken(&input("A", true, Some("q"), None), Some(&mine)),
            "conflict.task_id_taken"
        );
        assert_eq!(
            taken(&input("A", false, Some("p"), None), Some(&mine)),
            "conflict.task_id_taken"
        );
        assert_eq!(
            taken(
                &input("A", true, Some("p"), None),
                Some(&run("A", "other", Some("p"), "running"))
            ),
            "conflict.task_id_taken"
        );
        assert_eq!(
            taken(&input("A", true, Some("p"), None), None),
            "conflict.task_id_taken"
        );
    }

    #[test]
    fn the_remembered_claim_carries_the_key_binding_and_its_answer() {
        let i = input("T", false, None, Some(("k", "f")));
        let c = claim_of(&i, "{}", 7);
        assert_eq!(c.recheck_at, 7);
        let b = c.idempotency.unwrap();
        assert_eq!(
            (
                b.task_id.as_str(),
                b.response_status,
                b.response_body.as_str()
            ),
            ("T", 202, "{}")
        );
        assert_eq!(c.status, "running");
    }
}
