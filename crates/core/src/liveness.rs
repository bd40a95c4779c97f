//! Evidence of life for a run, and the judgement of a contested claim.
//!
//! A running run is heard from when it is admitted, leased, heartbeats or appends: the store keeps the
//! last of these in `heartbeat_at`. A run a runner holds is **stale** once it has not been heard from
//! for `held_ms` (`RUN_STALE_SEC`); a run nobody holds yet (queued for a runner) once it has waited
//! `queued_ms` (`RUN_QUEUE_STALE_SEC`). A lease never acknowledged by a heartbeat or append within
//! `lease_ack_ms` (`LEASE_ACK_SEC`) goes back to the queue (the store's requeue, run by the reapers).
//! Parked runs are never judged here: their fate belongs to their gate.
//!
//! The same judgement serves the session object (adjudicating a claim, arming its alarm), the cron
//! reapers (their cutoffs) and the read face (a stale row reads `failed` before any reaper ran), so
//! the three never disagree.

use crate::{
    run::{RunFace, RunRow},
    status,
};

/// The error a stale run reads with, and is failed with by the reapers (one definition, beside the
/// reaper's SQL).
pub use crate::sql::claim_sql::{STALLED_CODE, STALLED_ERROR};

/// How long a running run may go unheard before it counts as stale (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staleness {
    /// A run a runner holds: since its last heartbeat, append or lease.
    pub held_ms: i64,
    /// A run waiting for a runner: since its admission (or since its lease was requeued).
    pub queued_ms: i64,
    /// A lease with no heartbeat or append since it was granted goes back to the queue after this.
    pub lease_ack_ms: i64,
}

impl Staleness {
    pub const DEFAULT_RUN_STALE_SEC: i64 = 120;
    pub const DEFAULT_QUEUE_STALE_SEC: i64 = 3_600;
    pub const DEFAULT_LEASE_ACK_SEC: i64 = 30;

    /// From the knobs in seconds; a missing or non-positive knob takes its default.
    pub fn from_secs(
        run_stale: Option<i64>,
        queue_stale: Option<i64>,
        lease_ack: Option<i64>,
    ) -> Self {
        let pick = |v: Option<i64>, d: i64| v.filter(|s| *s > 0).unwrap_or(d).saturating_mul(1000);
        Self {
            held_ms: pick(run_stale, Self::DEFAULT_RUN_STALE_SEC),
            queued_ms: pick(queue_stale, Self::DEFAULT_QUEUE_STALE_SEC),
            lease_ack_ms: pick(lease_ack, Self::DEFAULT_LEASE_ACK_SEC),
        }
    }

    /// The moment a running run becomes stale if nothing is heard from it: `None` for a run that is
    /// not running (parked or terminal).
    pub fn deadline(&self, run: &RunRow) -> Option<i64> {
        if run.status != status::RUNNING {
            return None;
        }
        let heard = run.heartbeat_at.unwrap_or(run.updated_at);
        let allowed = if run.held_by.is_some() {
            self.held_ms
        } else {
            self.queued_ms
        };
        Some(heard.saturating_add(allowed))
    }

    /// Whether `run` is running and has not been heard from in time.
    pub fn is_stale(&self, run: &RunRow, now: i64) -> bool {
        self.deadline(run).is_some_and(|d| now > d)
    }

    /// When a session object looks again at a claim whose holder it judged live at `now` with
    /// `deadline` ([`Verdict::Live`]): at that deadline, but no later than one held-run cutoff from
    /// now. A run still waiting for a runner is looked at after as long again as it has waited,
    /// between one and [`QUEUED_LOOK_MAX_CUTOFFS`] cutoffs: its looks fall at 1, 2, 4, 8, 12, 16 …
    /// cutoffs after it was queued (with the defaults, 10 looks in a queue deadline of an hour
    /// where one a cutoff made 30), so a backlog of queued runs wakes its objects a third as often.
    /// A look that backed off may come long after the run was leased; so whoever writes a lease of
    /// a run that has waited that long tells its object ([`Staleness::lease_told`]), which then
    /// looks at it within one cutoff again, and a silent runner's run is reaped at its stale
    /// deadline as before.
    pub fn recheck_at(&self, holder: Option<&RunRow>, deadline: Option<i64>, now: i64) -> i64 {
        let waited = holder
            .filter(|r| r.status == status::RUNNING && r.held_by.is_none())
            .map_or(0, |r| {
                now.saturating_sub(r.heartbeat_at.unwrap_or(r.updated_at))
            });
        let most = self.held_ms.saturating_mul(QUEUED_LOOK_MAX_CUTOFFS);
        let cap = now.saturating_add(waited.clamp(self.held_ms, most.max(self.held_ms)));
        deadline.map_or(cap, |d| d.min(cap))
    }

    /// Whether the session object of a run leased at `now`, admitted at `created_at`, must be told
    /// of the lease: when the run may have waited past a look that backed off
    /// ([`Staleness::recheck_at`]), that is longer than one cutoff. (A requeued run's wait began
    /// later than its admission, so it may be told when it need not be; never the other way.)
    pub fn lease_told(&self, created_at: i64, now: i64) -> bool {
        now.saturating_sub(created_at) > self.held_ms
    }
}

/// The longest a session object waits between two looks at a claim whose run waits for a runner,
/// in held-run cutoffs ([`Staleness::recheck_at`]).
pub const QUEUED_LOOK_MAX_CUTOFFS: i64 = 4;

/// The verdict on a claim a submit found held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The holder may still be driven or resumed: 409. `deadline` is when to look again (a running
    /// holder's stale deadline), if any.
    Live { deadline: Option<i64> },
    /// Nothing can drive the holder: its row is missing or terminal. Release the claim; nothing is
    /// written to the row.
    Dead,
    /// The holder is running but has gone silent past its cutoff: fail it with `reason` (guarded on
    /// the row as read), move the claim, admit.
    Stale { reason: String },
}

/// Judges the holder of a claim from its row as read now (`None`: no row). Positive evidence only:
/// a missing or terminal row, or a running row past its cutoff. Everything else is live (parked
/// runs included: their gate decides), so when unsure the answer is 409.
pub fn judge(holder: Option<&RunRow>, now: i64, s: &Staleness) -> Verdict {
    let Some(run) = holder else {
        return Verdict::Dead;
    };
    if status::is_terminal(&run.status) {
        return Verdict::Dead;
    }
    if s.is_stale(run, now) {
        return Verdict::Stale {
            reason: orphaned_reason(run),
        };
    }
    Verdict::Live {
        deadline: s.deadline(run),
    }
}

/// How long a parked run with nothing that could resume it keeps its claim (SPEC-core §2.4 rule 6:
/// a settle margin for a park racing its gate's write, not a time-to-live).
pub const PARKED_SETTLE_MS: i64 = 30_000;

/// SPEC-core §2.4 rule 6, for a parked holder (`None` for any other status: use [`judge`]). A gate
/// of the run's that is pending — or expired, which the expiry reaper will settle — keeps it live;
/// with neither, it is live for [`PARKED_SETTLE_MS`] after its last write, then stale.
pub fn judge_parked(run: &RunRow, has_gate: bool, now: i64) -> Option<Verdict> {
    if !status::is_parked(&run.status) {
        return None;
    }
    let settle_until = run.updated_at.saturating_add(PARKED_SETTLE_MS);
    Some(if has_gate {
        Verdict::Live { deadline: None }
    } else if now < settle_until {
        Verdict::Live {
            deadline: Some(settle_until),
        }
    } else {
        Verdict::Stale {
            reason: format!(
                "parked run ({}) has no resumable checkpoint \u{2014} claim reclaimed",
                run.status
            ),
        }
    })
}

/// The read face as of `now` (SPEC-api §5.8): a running row past its cutoff reads `failed` with
/// `run.stalled` before any reaper has written it; a non-terminal row says how long it has been quiet.
pub fn read_face<'a>(run: &'a RunRow, now: i64, s: &Staleness) -> RunFace<'a> {
    let mut face = run.face();
    if status::is_terminal(&run.status) {
        return face;
    }
    let heard = run.heartbeat_at.unwrap_or(run.updated_at);
    face.ms_since_last_activity = Some(now.saturating_sub(heard).max(0));
    if s.is_stale(run, now) {
        face.status = "failed";
        face.held_by = None;
        face.error = Some(STALLED_ERROR);
        face.error_code = Some(STALLED_CODE);
    }
    face
}

/// SPEC-api §6.4's reason for a run whose driver is gone, with `<who>` rendered from the lease: the
/// runner that held it and when it was last heard from, or that no runner ever took it.
pub fn orphaned_reason(run: &RunRow) -> String {
    let heard = iso_utc(run.heartbeat_at.unwrap_or(run.updated_at));
    let who = match &run.held_by {
        Some(runner) => format!("runner {runner} last heard {heard}"),
        None => format!("no runner, queued since {heard}"),
    };
    format!("run orphaned by engine restart (claim held by {who}, which is gone)")
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`. Written here (days → civil date,
/// H. Hinnant's algorithm) rather than pulling a date crate into the wasm Worker for one format.
pub fn iso_utc(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1_000 % 60,
        rem % 1_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Staleness = Staleness {
        held_ms: 2_000,
        queued_ms: 10_000,
        lease_ack_ms: 1_000,
    };

    fn run(status: &str, held_by: Option<&str>, heartbeat_at: i64) -> RunRow {
        crate::json::serde_from_value(crate::json!({
            "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
            "status": status, "objective_preview": "", "result": null, "error": null,
            "error_code": null, "held_by": held_by, "lease_epoch": 1, "cancel_requested": false,
            "heartbeat_at": heartbeat_at, "last_seq": 0, "created_at": 0, "updated_at": 0
        }))
        .unwrap()
    }

    #[test]
    fn a_held_run_is_stale_only_after_the_held_cutoff_and_a_queued_one_after_the_queue_cutoff() {
        let held = run("running", Some("r1"), 1_000);
        assert!(!S.is_stale(&held, 3_000));
        assert!(S.is_stale(&held, 3_001));
        let queued = run("running", None, 1_000);
        assert!(!S.is_stale(&queued, 11_000));
        assert!(S.is_stale(&queued, 11_001));
    }

    #[test]
    fn parked_and_terminal_runs_have_no_deadline() {
        for status in ["suspended", "needs_review", "completed", "failed"] {
            assert_eq!(S.deadline(&run(status, None, 0)), None, "{status}");
            assert!(!S.is_stale(&run(status, None, 0), i64::MAX));
        }
    }

    #[test]
    fn a_parked_holder_is_live_while_a_gate_can_resume_it_and_stale_after_the_settle_margin() {
        let parked = run("suspended", None, 0);
        assert_eq!(judge_parked(&run("running", None, 0), false, 0), None);
        assert_eq!(
            judge_parked(&parked, true, i64::MAX),
            Some(Verdict::Live { deadline: None })
        );
        assert_eq!(
            judge_parked(&parked, false, PARKED_SETTLE_MS - 1),
            Some(Verdict::Live {
                deadline: Some(PARKED_SETTLE_MS)
            })
        );
        assert_eq!(
            judge_parked(&run("needs_review", None, 0), false, PARKED_SETTLE_MS),
            Some(Verdict::Stale {
                reason:
                    "parked run (needs_review) has no resumable checkpoint \u{2014} claim reclaimed"
                        .into()
            })
        );
    }

    #[test]
    fn a_missing_or_terminal_holder_is_dead() {
        assert_eq!(judge(None, 0, &S), Verdict::Dead);
        assert_eq!(
            judge(Some(&run("cancelled", None, 0)), 0, &S),
            Verdict::Dead
        );
    }

    #[test]
    fn a_running_holder_heard_from_in_time_is_live_until_its_deadline() {
        assert_eq!(
            judge(Some(&run("running", Some("r1"), 1_000)), 2_500, &S),
            Verdict::Live {
                deadline: Some(3_000)
            }
        );
    }

    #[test]
    fn a_parked_holder_is_live_however_old() {
        assert_eq!(
            judge(Some(&run("suspended", None, 0)), i64::MAX / 2, &S),
            Verdict::Live { deadline: None }
        );
    }

    #[test]
    fn a_silent_running_holder_is_stale_with_the_orphaned_reason_naming_its_runner() {
        let Verdict::Stale { reason } = judge(Some(&run("running", Some("r1"), 0)), 2_001, &S)
        else {
            panic!("expected stale");
        };
        assert_eq!(reason, "run orphaned by engine restart (claim held by runner r1 last heard 1970-01-01T00:00:00.000Z, which is gone)");
        let Verdict::Stale { reason } = judge(Some(&run("running", None, 0)), 10_001, &S) else {
            panic!("expected stale");
        };
        assert!(reason.contains("claim held by no runner, queued since 1970-01-01T00:00:00.000Z"));
    }

    #[test]
    fn a_held_or_parked_holder_is_looked_at_again_by_its_deadline_and_within_one_cutoff() {
        let held = run("running", Some("r1"), 1_000);
        assert_eq!(S.recheck_at(Some(&held), S.deadline(&held), 1_500), 3_000);
        let parked = run("suspended", None, 0);
        assert_eq!(S.recheck_at(Some(&parked), None, 50_000), 52_000);
        assert_eq!(S.recheck_at(Some(&parked), Some(50_500), 50_000), 50_500);
        assert_eq!(S.recheck_at(None, None, 7), 2_007);
    }

    #[test]
    fn a_queued_holder_is_looked_at_again_after_as_long_again_as_it_has_waited_up_to_four_cutoffs()
    {
        let s = Staleness {
            queued_ms: 100_000,
            ..S
        };
        let queued = run("running", None, 1_000);
        let deadline = s.deadline(&queued);
        // Queued at 1 s: the looks fall 2, 4, 8 s after it, then every 8 s (four cutoffs), then at
        // its deadline.
        let mut looks = vec![];
        let mut now = 1_000 + s.held_ms;
        while now < 101_000 {
            looks.push(now - 1_000);
            now = s.recheck_at(Some(&queued), deadline, now);
        }
        let expected: Vec<i64> = [2_000, 4_000]
            .into_iter()
            .chain((8_000..=96_000).step_by(8_000))
            .collect();
        assert_eq!(looks, expected, "then the deadline, {now}");
        assert_eq!(now, 101_000);
        // Within the first cutoff, one cutoff from now.
        assert_eq!(s.recheck_at(Some(&queued), deadline, 1_500), 3_500);
    }

    #[test]
    fn a_lease_is_told_to_its_session_object_only_after_a_wait_longer_than_one_cutoff() {
        assert!(!S.lease_told(1_000, 1_000));
        assert!(!S.lease_told(1_000, 3_000));
        assert!(S.lease_told(1_000, 3_001));
        // No look backs off within the first cutoff: a lease told from then on misses none.
        let queued = run("running", None, 1_000);
        let first_look = 1_000 + S.held_ms;
        assert_eq!(
            S.recheck_at(Some(&queued), S.deadline(&queued), first_look),
            first_look + S.held_ms
        );
    }

    #[test]
    fn knobs_default_when_missing_or_not_positive() {
        let s = Staleness::from_secs(None, Some(0), Some(2));
        assert_eq!(
            (s.held_ms, s.queued_ms, s.lease_ack_ms),
            (120_000, 3_600_000, 2_000)
        );
    }

    #[test]
    fn a_stale_running_row_reads_failed_with_run_stalled_before_any_reaper() {
        let r = run("running", Some("r1"), 1_000);
        let v = crate::json::to_value(read_face(&r, 3_001, &S)).unwrap();
        assert_eq!(
            (
                v["status"].clone(),
                v["errorCode"].clone(),
                v["error"].clone(),
                v["heldBy"].clone()
            ),
            (
                "failed".into(),
                "run.stalled".into(),
                STALLED_ERROR.into(),
                crate::json::Value::Null
            )
        );
        assert_eq!(v["msSinceLastActivity"], 2_001);
    }

    #[test]
    fn a_fresh_row_reads_as_stored_with_its_quiet_time_and_a_terminal_one_without() {
        let r = run("running", Some("r1"), 1_000);
        let v = crate::json::to_value(read_face(&r, 1_500, &S)).unwrap();
        assert_eq!(
            (v["status"].as_str(), v["msSinceLastActivity"].as_i64()),
            (Some("running"), Some(500))
        );
        let v = crate::json::to_value(read_face(&r, 500, &S)).unwrap();
        assert_eq!(v["msSinceLastActivity"], 0, "never negative");
        let v = crate::json::to_value(read_face(&run("completed", None, 0), 9_999, &S)).unwrap();
        assert!(v.get("msSinceLastActivity").is_none());
    }

    #[test]
    fn iso_times_are_utc_with_milliseconds() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(1_764_553_745_123), "2025-12-01T01:49:05.123Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_utc(-1), "1969-12-31T23:59:59.999Z");
    }
}
