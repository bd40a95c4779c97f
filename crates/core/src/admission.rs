//! Admission decisions of a session's Durable Object.
//!
//! The object serialises every claim-changing operation of its session and remembers the claim
//! ([`SessionState`]), so a conflicting submit is answered from memory without a D1 round trip. D1
//! stays the judge: the object's memory is written only after the D1 batch commits, and a D1 refusal
//! (the mirror `task_active` row says the session is held) is adopted into memory. When unsure, the
//! answer is 409 (single-active beats self-healing).

use crate::{
    conflict::{Conflict, Holder},
    idempotency,
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
}

/// The owner of a session (`id == None`: the anonymous principal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOwner {
    pub id: Option<String>,
}

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
}

/// A scoped idempotency key with the request it was bound to and the answer it produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyBinding {
    pub scoped_key: String,
    pub fingerprint: String,
    /// The run the key admitted.
    #[serde(default)]
    pub task_id: String,
    pub response_status: u16,
    pub response_body: String,
}

impl IdempotencyBinding {
    /// The answer to a request presenting this key with `fingerprint`: the original admission again,
    /// or `idempotency.key_reused` for a different request.
    pub fn answer(&self, fingerprint: &str) -> Result<Replay, ApiError> {
        if self.fingerprint == fingerprint {
            Ok(Replay {
                task_id: self.task_id.clone(),
                status: self.response_status,
                body: self.response_body.clone(),
            })
        } else {
            Err(idempotency::key_reused())
        }
    }
}

/// A replayed admission: the stored status and body, sent with `Idempotency-Replayed: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub task_id: String,
    pub status: u16,
    pub body: String,
}

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
    /// Refuse: 404 for someone else's session, or 422 for a reused key.
    Refuse(ApiError),
}

/// Decides a submission against the session's state.
pub fn decide(state: &SessionState, input: &AdmitInput) -> AdmitDecision {
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

/// The body of a fresh admission (also what an idempotency key replays).
pub fn admitted_body(task_id: &str, session_id: &str) -> String {
    serde_json::to_string(&Admitted {
        task_id: task_id.to_owned(),
        session_id: session_id.to_owned(),
        status: crate::status::RUNNING.to_owned(),
    })
    .unwrap_or_default()
}

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
        }
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
                idempotency: key.map(|(k, f)| IdempotencyBinding {
                    scoped_key: k.into(),
                    fingerprint: f.into(),
                    task_id: task.into(),
                    response_status: 202,
                    response_body: admitted_body(task, "S"),
                }),
            }),
        }
    }

    #[test]
    fn a_fresh_session_is_written() {
        assert_eq!(
            decide(&SessionState::default(), &input("T", false, None, None)),
            AdmitDecision::Write
        );
    }

    #[test]
    fn a_held_session_refuses_with_the_running_holder_conflict() {
        let AdmitDecision::Conflict(c) =
            decide(&held("A", None, None), &input("B", false, None, None))
        else {
            panic!("expected a conflict");
        };
        let e = c.to_api_error();
        assert_eq!((e.status, e.code), (409, "conflict.session_active_run"));
        assert_eq!(e.message, crate::conflict::RUNNING_TEXT);
        assert_eq!(e.detail("activeTaskId"), Some("\"A\""));
    }

    #[test]
    fn the_holders_own_client_task_id_gets_202_with_that_run() {
        let d = decide(
            &held("A", Some("p"), None),
            &input("A", true, Some("p"), None),
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
            decide(&held("A", None, None), &input("A", false, None, None)),
            AdmitDecision::Conflict(_)
        ));
    }

    #[test]
    fn another_principals_session_is_not_found() {
        let AdmitDecision::Refuse(e) = decide(
            &held("A", Some("alice"), None),
            &input("A", true, Some("bob"), None),
        ) else {
            panic!("expected a refusal");
        };
        assert_eq!(e.status, 404);
    }

    #[test]
    fn the_holders_key_replays_with_the_same_request_and_refuses_a_different_one() {
        let state = held("A", None, Some(("k", "f1")));
        match decide(&state, &input("B", false, None, Some(("k", "f1")))) {
            AdmitDecision::Replay(r) => {
                assert_eq!((r.status, r.body), (202, admitted_body("A", "S")));
                assert_eq!(r.task_id, "A");
            }
            other => panic!("{other:?}"),
        }
        let AdmitDecision::Refuse(e) = decide(&state, &input("B", false, None, Some(("k", "f2"))))
        else {
            panic!("expected a refusal");
        };
        assert_eq!((e.status, e.code), (422, "idempotency.key_reused"));
    }

    #[test]
    fn a_different_key_on_a_held_session_is_a_conflict() {
        let state = held("A", None, Some(("k", "f1")));
        let AdmitDecision::Conflict(c) =
            decide(&state, &input("B", false, None, Some(("other", "f1"))))
        else {
            panic!("expected a conflict");
        };
        assert_eq!(c.to_api_error().status, 409);
    }

    #[test]
    fn state_survives_a_storage_round_trip() {
        let s = held("A", None, Some(("k", "f")));
        let back: SessionState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
