//! Planning of one reaper tick (the cron's pass over the store): the cutoffs as of `now`, how far a
//! pass may page, which session objects must be told, and the summary the tick records. The cron
//! handler (`src/reaper_cron.rs`) only executes what this plans.
//!
//! Why overlapping or repeated ticks are safe: every store leg re-checks its predicate in the row it
//! writes (a run failed or requeued by one tick no longer matches for the next), stamps what it
//! changed with its own page id and reports only that; telling a session object that a run ended is
//! idempotent (the object re-reads the row).

use crate::{liveness::Staleness, store::SessionTask};
use serde::{Deserialize, Serialize};

/// Rows one page of a pass may change.
pub const PAGE: i64 = 100;
/// Pages one pass may take in one tick; the rest waits for the next tick (every minute).
pub const MAX_PAGES: u32 = 10;
/// Wall time after which a tick starts no new page (well inside a scheduled handler's budget).
pub const BUDGET_MS: i64 = 20_000;
/// Ticks kept in the tick log.
pub const KEEP_TICKS: i64 = 100;
/// Claims one tick examines for debris (claims whose run ended or vanished without releasing
/// them: out-of-band writes, crashes). The window walks the claims in session order from tick to
/// tick, so every claim is examined once per `claims / SWEEP_WINDOW` ticks, at a bounded cost each.
pub const SWEEP_WINDOW: i64 = 1_000;

/// The cutoffs of a tick at `now`: rows heard from before them are due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cutoffs {
    /// Leases granted before this and never acknowledged go back to the queue.
    pub lease_ack: i64,
    /// Held running runs last heard from before this are stale.
    pub held: i64,
    /// Queued running runs waiting since before this are stale.
    pub queued: i64,
}

impl Cutoffs {
    pub fn at(now: i64, s: &Staleness) -> Self {
        Self {
            lease_ack: now - s.lease_ack_ms,
            held: now - s.held_ms,
            queued: now - s.queued_ms,
        }
    }
}

/// Whether a pass takes another page: the last one was full, and neither the page count nor the
/// tick's wall budget is spent.
pub fn another_page(last_page_rows: usize, pages_done: u32, elapsed_ms: i64) -> bool {
    last_page_rows as i64 >= PAGE && pages_done < MAX_PAGES && elapsed_ms < BUDGET_MS
}

/// The id of page `page` of tick `tick`: every page stamps (and reports) only its own rows.
pub fn page_id(tick: &str, pass: &str, page: u32) -> String {
    format!("{tick}.{pass}.{page}")
}

/// The sessions whose object must hear that a run ended: each (session, task) once, in order.
pub fn to_notify<'a>(pairs: impl IntoIterator<Item = &'a SessionTask>) -> Vec<SessionTask> {
    let mut pairs: Vec<SessionTask> = pairs.into_iter().cloned().collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

/// What one tick did: logged as one structured line and kept in the tick log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TickSummary {
    pub tick_id: String,
    pub started_at: i64,
    pub duration_ms: i64,
    /// Unacknowledged leases put back in the queue.
    pub requeued: usize,
    /// Running runs failed as stalled.
    pub reaped: usize,
    /// Parked runs failed because their checkpoint expired.
    pub parked_expired: usize,
    pub terminal_claims_released: usize,
    pub orphan_claims_released: usize,
    /// Leader runs failed as stale.
    pub leaders_failed: usize,
    /// Session objects told that a run ended, and how many of those calls failed.
    pub sessions_told: usize,
    pub notify_failures: usize,
    pub pages: u32,
    pub d1_round_trips: u32,
    /// Rows D1 examined for the whole tick (its `rows_read`).
    pub d1_rows_read: u64,
    /// True when a pass stopped on its page or time budget with work left.
    pub truncated: bool,
    /// The debris sweep's window: it examined claims after `sweep_from` (session order); the next
    /// tick starts after `sweep_next` (empty: start over).
    pub sweep_from: String,
    pub sweep_next: String,
    /// The leader driving pass: running leaders after `leaders_from` (id order) were driven; the
    /// next tick starts after `leaders_next` (empty: start over).
    pub leaders_from: String,
    pub leaders_next: String,
    /// Leaders the pass drove, and of those how many it settled; settles that found the leader
    /// already terminal (reported, never swallowed); drives that failed.
    pub leaders_driven: usize,
    pub leaders_settled: usize,
    pub leader_settles_lost: usize,
    pub leader_drive_failures: usize,
    /// The dispatch sweep: leasable runs announced again to their queues' dispatchers (the bound on
    /// a lost notice), the dispatchers told, and how many of those calls failed.
    pub runs_announced: usize,
    pub queues_told: usize,
    pub announce_failures: usize,
    /// The retention pass: `RETENTION_DAYS` as read (0 = off, the pass did nothing), and the terminal
    /// runs (and their events) it deleted, at most `sessions::RETENTION_PER_TICK` runs and about
    /// `sessions::RETENTION_EVENTS_PER_TICK` events a tick.
    pub retention_days: i64,
    pub retention_runs_deleted: u64,
    pub retention_events_deleted: u64,
    /// The retention batch failed this tick (logged; the next tick tries again).
    pub retention_failed: bool,
    /// Of `duration_ms`, the wall time spent telling session objects (both notice passes): calls
    /// into objects, each of which the runtime may first have to start. The rest of the tick is
    /// its D1 passes, the leader drives and the queues' announcements.
    pub notify_ms: i64,
}

/// Running leader runs the cron drives per tick (a backstop: a child's end drives its leader at once).
pub const LEADER_DRIVE_PAGE: i64 = 25;

/// What a tick reads back of the last tick's summary: where its windows stopped. Only these two
/// fields are read (a missing one, or a summary that does not parse, starts its pass over).
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Resume {
    leaders_next: String,
    sweep_next: String,
}

crate::tree_struct!(Resume lenient {
    leaders_next: "leadersNext" = default,
    sweep_next: "sweepNext" = default,
});

fn resume(last_tick_summary: Option<&str>) -> Resume {
    last_tick_summary
        .and_then(|json| crate::json::from_text::<Resume>(json).ok())
        .unwrap_or_default()
}

/// Where this tick's leader driving pass starts: after the last tick's window, or from the start.
pub fn leaders_start(last_tick_summary: Option<&str>) -> String {
    resume(last_tick_summary).leaders_next
}

/// Where this tick's debris sweep starts: after the last tick's window, or from the start.
pub fn sweep_start(last_tick_summary: Option<&str>) -> String {
    resume(last_tick_summary).sweep_next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_lie_one_allowance_before_now() {
        let s = Staleness {
            held_ms: 2_000,
            queued_ms: 9_000,
            lease_ack_ms: 500,
        };
        assert_eq!(
            Cutoffs::at(10_000, &s),
            Cutoffs {
                lease_ack: 9_500,
                held: 8_000,
                queued: 1_000
            }
        );
    }

    #[test]
    fn a_pass_pages_on_only_while_pages_are_full_and_budgets_remain() {
        assert!(another_page(100, 1, 0));
        assert!(
            !another_page(99, 1, 0),
            "a short page means the pass is done"
        );
        assert!(!another_page(100, MAX_PAGES, 0));
        assert!(!another_page(100, 1, BUDGET_MS));
    }

    #[test]
    fn every_session_is_told_once_per_task() {
        let a = SessionTask::new("s1", "t1");
        let b = SessionTask::new("s2", "t2");
        let told = to_notify([&b, &a, &b]);
        assert_eq!(told, vec![a, b]);
    }

    #[test]
    fn page_ids_are_distinct_per_pass_and_page() {
        assert_ne!(page_id("T", "reap", 1), page_id("T", "reap", 2));
        assert_ne!(page_id("T", "reap", 1), page_id("T", "requeue", 1));
    }

    #[test]
    fn the_sweep_continues_where_the_last_tick_stopped_and_starts_over_without_one() {
        let last = TickSummary {
            sweep_next: "sess-42".into(),
            ..Default::default()
        };
        let json = crate::json::to_text(&last).unwrap();
        assert_eq!(sweep_start(Some(&json)), "sess-42");
        assert_eq!(sweep_start(None), "");
        assert_eq!(sweep_start(Some("not json")), "");
    }

    #[test]
    fn the_leader_window_continues_where_the_last_tick_stopped() {
        let last = TickSummary {
            leaders_next: "lead-7".into(),
            sweep_next: "sess-1".into(),
            ..Default::default()
        };
        let json = crate::json::to_text(&last).unwrap();
        assert_eq!(leaders_start(Some(&json)), "lead-7");
        assert_eq!(leaders_start(Some("{}")), "");
        assert_eq!(leaders_start(None), "");
    }

    #[test]
    fn the_summary_is_camel_case_json() {
        let v = crate::json::to_value(TickSummary {
            tick_id: "t".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(v["tickId"], "t");
        assert!(v.get("terminalClaimsReleased").is_some());
    }

    #[test]
    fn the_resume_reader_answers_as_serde_s_derived_reader_does() {
        crate::json::assert_reads_as_serde::<Resume>(
            crate::json!({"leadersNext": "a", "sweepNext": "b", "other": 1}),
        );
    }
}
