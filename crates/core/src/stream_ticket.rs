//! Stream tickets: how a browser's `EventSource`, which cannot send an `Authorization` header, opens
//! one run's SSE stream without a long-lived token in its URL.
//!
//! `POST /v1/runs/{taskId}/stream-ticket` (a caller who may read the run) gets `{ticket, expiresAt}`;
//! `GET /v1/runs/{taskId}/events?ticket=<ticket>` is then accepted in place of a bearer token, for
//! that run only, until `expiresAt` ([`TICKET_TTL_MS`] after issue unless configured, see [`ttl_ms`]). A stream opened in time runs
//! on; its own reconnects (`EventSource` retries with `Last-Event-ID`) reuse the ticket until it
//! expires, after which a client asks for a fresh one.
//!
//! The session object of the run issues and checks tickets ([`TicketBook`], its storage): a ticket is
//! 32 random bytes (drawn by the caller: nothing here reads the clock or draws randomness), handed out
//! once and never stored — the book keeps its sha256 with the run, the principal it was issued to
//! and the deadline. No secret needs configuring, and a ticket says nothing about the run or the
//! principal to whoever reads it. At most [`MAX_OUTSTANDING`] tickets per session are kept: expired
//! ones are pruned at every issue, and a full book lets go of the one that expires first.

use crate::{
    auth::{Principal, Role},
    error::ApiError,
    list::parse_query,
};
use serde::{Deserialize, Serialize};

/// How long a ticket may be used to open (or reopen) its stream, from its issue, by default.
pub const TICKET_TTL_MS: i64 = 60_000;
/// The longest lifetime a deployment may configure (`STREAM_TICKET_TTL_SEC`).
pub const TICKET_TTL_MAX_MS: i64 = 600_000;

/// The lifetime of a ticket from the configured seconds: the default when unset or out of
/// 1..=600 s (a knob can shorten a ticket's life or lengthen it a little, never make it lasting).
pub fn ttl_ms(configured_sec: Option<i64>) -> i64 {
    configured_sec
        .and_then(|s| s.checked_mul(1_000))
        .filter(|ms| (1_000..=TICKET_TTL_MAX_MS).contains(ms))
        .unwrap_or(TICKET_TTL_MS)
}
/// Most unexpired tickets one session's book keeps.
pub const MAX_OUTSTANDING: usize = 32;
/// Live tickets one principal may hold in one session: past it, its own soonest-expiring ticket is
/// let go, so one caller issuing in a loop cannot push another principal's tickets out of the book.
pub const MAX_PER_PRINCIPAL: usize = 8;
/// Every ticket starts with this; the rest is 64 lowercase hex digits (32 random bytes).
pub const PREFIX: &str = "st1_";
/// The query parameter that carries a ticket.
pub const QUERY_KEY: &str = "ticket";

/// The one refusal of a ticket that does not open this run's stream: whatever the reason (unknown,
/// forged, expired, issued for another run, malformed, or its run is gone), the caller learns
/// nothing more, not even whether the run exists.
pub fn refusal() -> ApiError {
    ApiError::unauthorized(
        "the stream ticket does not open this run's stream (unknown, expired, or issued for \
         another run); POST /v1/runs/{taskId}/stream-ticket with a bearer token issues a fresh one",
    )
}

/// The ticket text of 32 random bytes.
pub fn mint(random: &[u8; 32]) -> String {
    format!("{PREFIX}{}", crate::hex::encode(random))
}

/// Whether `raw` has the shape of a ticket (prefix and 64 lowercase hex digits).
pub fn well_formed(raw: &str) -> bool {
    raw.strip_prefix(PREFIX).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// What the book stores for a ticket: its digest, never the ticket.
pub fn digest(ticket: &str) -> String {
    crate::hex::sha256(ticket.as_bytes())
}

/// The ticket a query string carries, if any (`ticket=`; given twice is a 400). Its shape is checked
/// by [`TicketBook::check`], so a malformed one gets the same 401 as an unknown one.
pub fn in_query(query: &str) -> Result<Option<String>, ApiError> {
    let mut found = None;
    for (k, v) in parse_query(query)? {
        if k == QUERY_KEY {
            if found.is_some() {
                return Err(ApiError::invalid_request(
                    "`ticket` is given more than once",
                ));
            }
            found = Some(v);
        }
    }
    Ok(found)
}

/// The expiry rule: a ticket opens its stream strictly before its deadline.
pub fn is_live(expires_at: i64, now: i64) -> bool {
    now < expires_at
}

/// One outstanding ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketEntry {
    /// sha256 hex of the ticket.
    pub digest: String,
    pub task_id: String,
    /// The principal it was issued to (`None`: the anonymous principal of local mode) and its role.
    pub principal: Option<String>,
    pub role: Role,
    pub expires_at: i64,
}

crate::tree_struct!(TicketEntry lenient {
    digest: "digest",
    task_id: "task_id",
    principal: "principal",
    role: "role",
    expires_at: "expires_at",
});

/// A ticket just issued: the text (shown once, to the caller) and its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub ticket: String,
    pub expires_at: i64,
}

/// The outstanding tickets of one session (at most [`MAX_OUTSTANDING`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketBook {
    #[serde(default)]
    pub entries: Vec<TicketEntry>,
}

crate::tree_struct!(TicketBook lenient { entries: "entries" = default });

impl TicketBook {
    /// Issues a ticket for `task_id` to `principal` at `now`, living `ttl_ms`, from 32 fresh random
    /// bytes: prunes the expired entries, and when the book is still full lets go of the entry that
    /// expires first. The caller has checked that `principal` may read the run.
    pub fn issue(
        &mut self,
        now: i64,
        ttl_ms: i64,
        random: &[u8; 32],
        task_id: &str,
        principal: &Principal,
    ) -> Issued {
        self.entries.retain(|e| is_live(e.expires_at, now));
        let soonest = |entries: &[TicketEntry], mine: bool| {
            entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !mine || e.principal == principal.id)
                .min_by_key(|(_, e)| e.expires_at)
                .map(|(i, _)| i)
        };
        while self
            .entries
            .iter()
            .filter(|e| e.principal == principal.id)
            .count()
            >= MAX_PER_PRINCIPAL
        {
            let Some(i) = soonest(&self.entries, true) else {
                break;
            };
            self.entries.remove(i);
        }
        while self.entries.len() >= MAX_OUTSTANDING {
            let Some(i) = soonest(&self.entries, false) else {
                break;
            };
            self.entries.remove(i);
        }
        let ticket = mint(random);
        let expires_at = now.saturating_add(ttl_ms);
        self.entries.push(TicketEntry {
            digest: digest(&ticket),
            task_id: task_id.to_owned(),
            principal: principal.id.clone(),
            role: principal.role,
            expires_at,
        });
        Issued { ticket, expires_at }
    }

    /// The principal a ticket stands for on `task_id`'s stream at `now`, whose owner is `owner`:
    /// only a well-formed ticket of this book, issued for this run, not expired, whose principal
    /// may still read the run. Anything else is [`refusal`].
    pub fn check(
        &self,
        now: i64,
        ticket: &str,
        task_id: &str,
        owner: Option<&str>,
    ) -> Result<Principal, ApiError> {
        if !well_formed(ticket) {
            return Err(refusal());
        }
        let d = digest(ticket);
        let entry = self
            .entries
            .iter()
            .find(|e| e.digest == d)
            .filter(|e| e.task_id == task_id && is_live(e.expires_at, now))
            .ok_or_else(refusal)?;
        let principal = Principal {
            id: entry.principal.clone(),
            role: entry.role,
        };
        if !principal.may_access(owner) {
            return Err(refusal());
        }
        Ok(principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Principal {
        Principal {
            id: Some("alice".into()),
            role: Role::Client,
        }
    }

    fn bytes(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn a_ticket_is_the_prefix_and_the_hex_of_its_bytes_and_is_never_stored() {
        let mut book = TicketBook::default();
        let issued = book.issue(1_000, TICKET_TTL_MS, &bytes(0xab), "t-1", &alice());
        assert_eq!(issued.ticket, format!("st1_{}", "ab".repeat(32)));
        assert!(well_formed(&issued.ticket));
        let stored = crate::json::to_text(&book).unwrap();
        assert!(!stored.contains(&issued.ticket[PREFIX.len()..]));
        assert!(stored.contains(&digest(&issued.ticket)));
    }

    #[test]
    fn a_ticket_opens_its_run_for_its_principal_until_just_before_its_deadline() {
        let mut book = TicketBook::default();
        let t = book.issue(1_000, TICKET_TTL_MS, &bytes(1), "t-1", &alice());
        assert_eq!(t.expires_at, 1_000 + TICKET_TTL_MS);
        assert_eq!(
            book.check(1_000, &t.ticket, "t-1", Some("alice")),
            Ok(alice())
        );
        // Reusable while live: EventSource's own reconnects present it again.
        assert!(book
            .check(t.expires_at - 1, &t.ticket, "t-1", Some("alice"))
            .is_ok());
        let late = book
            .check(t.expires_at, &t.ticket, "t-1", Some("alice"))
            .unwrap_err();
        assert_eq!((late.status(), late.code()), (401, "unauthorized"));
    }

    #[test]
    fn a_ticket_for_another_run_or_a_forged_or_malformed_one_is_refused_alike() {
        let mut book = TicketBook::default();
        let t = book.issue(0, TICKET_TTL_MS, &bytes(2), "t-1", &alice());
        let forged = mint(&bytes(3));
        for (ticket, task) in [
            (t.ticket.as_str(), "t-2"),
            (forged.as_str(), "t-1"),
            ("st1_short", "t-1"),
            (&t.ticket.to_uppercase(), "t-1"),
            ("", "t-1"),
        ] {
            let e = book.check(10, ticket, task, Some("alice")).unwrap_err();
            assert_eq!(e, refusal(), "{ticket} for {task}");
        }
    }

    #[test]
    fn a_ticket_whose_principal_may_no_longer_read_the_run_is_refused() {
        let mut book = TicketBook::default();
        let t = book.issue(0, TICKET_TTL_MS, &bytes(4), "t-1", &alice());
        assert!(book.check(1, &t.ticket, "t-1", Some("bob")).is_err());
        let op = Principal {
            id: Some("ops".into()),
            role: Role::Operator,
        };
        let o = book.issue(0, TICKET_TTL_MS, &bytes(5), "t-1", &op);
        assert_eq!(book.check(1, &o.ticket, "t-1", Some("bob")), Ok(op));
    }

    #[test]
    fn the_book_prunes_expired_tickets_and_stays_within_its_bound() {
        let mut book = TicketBook::default();
        let old = book.issue(0, TICKET_TTL_MS, &bytes(6), "t-1", &alice());
        // Past the first deadline: the next issue prunes it.
        book.issue(TICKET_TTL_MS, TICKET_TTL_MS, &bytes(7), "t-1", &alice());
        assert_eq!(book.entries.len(), 1);
        assert!(book.entries.iter().all(|e| e.digest != digest(&old.ticket)));
        let mut first = None;
        // Five principals, eight each: more than the book holds.
        for i in 0..(MAX_OUTSTANDING as u8 + 8) {
            let who = Principal {
                id: Some(format!("p{}", i % 5)),
                role: Role::Client,
            };
            let t = book.issue(
                TICKET_TTL_MS + 1 + i64::from(i),
                TICKET_TTL_MS,
                &bytes(100 + i),
                "t-1",
                &who,
            );
            first.get_or_insert(t);
            assert!(book.entries.len() <= MAX_OUTSTANDING);
        }
        assert_eq!(book.entries.len(), MAX_OUTSTANDING);
        // The ones that expire first were let go.
        let first = first.unwrap();
        assert!(book
            .check(TICKET_TTL_MS + 100, &first.ticket, "t-1", Some("p0"))
            .is_err());
    }

    #[test]
    fn one_principal_issuing_in_a_loop_lets_go_of_its_own_tickets_not_anothers() {
        let mut book = TicketBook::default();
        let bob = Principal {
            id: Some("bob".into()),
            role: Role::Client,
        };
        let kept = book.issue(0, TICKET_TTL_MS, &bytes(1), "t-1", &bob);
        for i in 0..100u8 {
            book.issue(
                1 + i64::from(i),
                TICKET_TTL_MS,
                &bytes(2 + i),
                "t-1",
                &alice(),
            );
        }
        let alices = book
            .entries
            .iter()
            .filter(|e| e.principal.as_deref() == Some("alice"));
        assert_eq!(alices.count(), MAX_PER_PRINCIPAL);
        assert!(book.check(200, &kept.ticket, "t-1", Some("bob")).is_ok());
    }

    #[test]
    fn a_configured_lifetime_is_taken_only_within_one_to_six_hundred_seconds() {
        assert_eq!(ttl_ms(None), TICKET_TTL_MS);
        assert_eq!(ttl_ms(Some(2)), 2_000);
        assert_eq!(ttl_ms(Some(600)), TICKET_TTL_MAX_MS);
        for bad in [0, -5, 601, i64::MAX] {
            assert_eq!(ttl_ms(Some(bad)), TICKET_TTL_MS, "{bad}");
        }
        let mut book = TicketBook::default();
        assert_eq!(
            book.issue(10, 2_000, &bytes(9), "t", &alice()).expires_at,
            2_010
        );
    }

    #[test]
    fn the_query_carries_at_most_one_ticket() {
        assert_eq!(
            in_query("after=3&ticket=st1_x").unwrap().as_deref(),
            Some("st1_x")
        );
        assert_eq!(in_query("after=3").unwrap(), None);
        assert_eq!(in_query("ticket=a&ticket=b").unwrap_err().status(), 400);
    }
}
