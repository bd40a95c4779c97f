//! Stream tickets of this session's runs (`sema_core::stream_ticket`): the book lives in the
//! object's storage (one key, at most `MAX_OUTSTANDING` entries, digests only), with a copy in
//! memory. An issue runs under the object's lock (read, change, write never interleave); a check
//! only reads, and a book it read from storage fills memory only while memory is empty, so it
//! never writes over an issue.

use super::SessionDo;
use crate::{failure::Failure, object_storage::Durability, platform};
use sema_core::{
    auth::{Principal, Role},
    session_protocol::SessionReply,
    stream_ticket::TicketBook,
};

const TICKETS_KEY: &str = "stream_tickets";

impl SessionDo {
    async fn ticket_book(&self) -> Result<TicketBook, Failure> {
        if let Some(book) = self.tickets.borrow().as_ref() {
            return Ok(book.clone());
        }
        let stored = self.storage.get(TICKETS_KEY).await?;
        let book = match stored {
            Some(text) => sema_core::json::from_text(&text)
                .map_err(|e| Failure::Infra(format!("stored stream tickets: {e}")))?,
            None => TicketBook::default(),
        };
        // A check (no lock) may have read storage before an issue wrote it: never let that older
        // read replace a book memory already holds.
        Ok(self.tickets.borrow_mut().get_or_insert(book).clone())
    }

    /// `IssueTicket` (under the lock): a fresh ticket for `task_id`, persisted before it is shown.
    pub(super) async fn issue_ticket(
        &self,
        task_id: &str,
        principal: Option<String>,
        role: Role,
    ) -> Result<SessionReply, Failure> {
        let mut book = self.ticket_book().await?;
        let principal = Principal {
            id: principal,
            role,
        };
        let ttl_ms = crate::config::settings(&self.env).stream_ticket_ttl_ms;
        let issued = book.issue(
            platform::now_ms(),
            ttl_ms,
            &platform::random()?,
            task_id,
            &principal,
        );
        let text = sema_core::json::to_text(&book)?;
        *self.tickets.borrow_mut() = Some(book);
        self.storage
            .put(TICKETS_KEY, &text, Durability::Confirmed)
            .await?;
        Ok(SessionReply::Ticket {
            ticket: issued.ticket,
            expires_at: issued.expires_at,
        })
    }

    /// `CheckTicket`: whom the ticket stands for on `task_id`, or the one 401.
    pub(super) async fn check_ticket(
        &self,
        task_id: &str,
        ticket: &str,
        owner: Option<&str>,
    ) -> Result<SessionReply, Failure> {
        let book = self.ticket_book().await?;
        Ok(
            match book.check(platform::now_ms(), ticket, task_id, owner) {
                Ok(p) => SessionReply::TicketHolder {
                    principal: p.id,
                    role: p.role,
                },
                Err(e) => SessionReply::Refused(e),
            },
        )
    }
}
