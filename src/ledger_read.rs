//! Reads of a run's ledger that the Worker and the session object share: the `done` frame an ended
//! run closes with, and whether a stream request anchored at some seq has anything left to receive.
//! What they mean is decided in the core (`sema_core::sse_subscriber`); this only fetches the one
//! event that decision may need.

use crate::{cx::Cx, failure::Failure};
use sema_core::{
    run::RunRow,
    sql::event_sql::EVENT_PAGE_MAX_BYTES,
    sse_subscriber::{self, Done, Reconnect},
    store::{EventRow, RunReadStore},
};

/// The run's last ledger event (seq `last_seq`), if it has any: one indexed read.
async fn last_event(store: &impl RunReadStore, run: &RunRow) -> Result<Option<EventRow>, Failure> {
    if run.last_seq == 0 {
        return Ok(None);
    }
    let page = store
        .events_after(&run.task_id, run.last_seq - 1, 1, EVENT_PAGE_MAX_BYTES)
        .await?;
    Ok(page.into_iter().next())
}

/// The `done` an ended run's streams close with: its ledger's `done` event, or one built from the
/// row at `last_seq + 1` (`sse_subscriber::closing_done`).
pub async fn closing_done(store: &impl RunReadStore, run: &RunRow) -> Result<Done, Failure> {
    let last = last_event(store, run).await?;
    Ok(sse_subscriber::closing_done(run, last.as_ref()))
}

/// Whether a stream of `run` anchored at `after` is answered `204 No Content`: the run has ended and
/// `after` is at or past its `done` frame's id (`sse_subscriber::reconnect`). Touches D1 only when
/// the anchor is exactly an ended run's last seq (one read of that event); a live run's stream
/// opens without any.
pub async fn past_done(cx: &Cx, run: &RunRow, after: i64) -> Result<bool, Failure> {
    let verdict = match sse_subscriber::reconnect(run, after) {
        Reconnect::NeedsLastEvent => {
            let last = last_event(&cx.store()?, run).await?;
            sse_subscriber::reconnect_knowing(run, after, last.as_ref())
        }
        other => other,
    };
    Ok(verdict == Reconnect::NoContent)
}
