//! The driving logic of a leader run, as a pure state machine: from the leader's settings and its
//! children as they are now, what to do next — which children to start, which to stop, which never
//! to start, and whether the leader settles (and how). No clock, no I/O: the adapter reads the rows,
//! applies the plan with compare-and-set writes, and plans again on the next event (a child ending,
//! a cron tick). A plan made from a stale view is safe to apply because every step it names is
//! conditional on the state it was planned from (a child starts only from `NotStarted`, the leader
//! settles only from `running`), so two drivers planning at once cannot start a child twice.

use crate::leader::LeaderFinish;

/// The error of a child that was never started because the leader stopped first.
pub const CANCELLED_BEFORE_START: &str = "cancelled before start";
/// The error of a leader run cancelled by its owner, and of each child it stopped.
pub const LEADER_CANCELLED: &str = "leader run cancelled";
/// The error of a leader run that failed because its deadline passed with children unfinished.
pub const DEADLINE_PASSED: &str = "leader run deadline passed";
/// The error of a child still running when the leader's deadline passed (it is asked to stop).
pub const STOPPED_AT_DEADLINE: &str = "stopped at the leader run's deadline";

/// A leader run's driving settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drive {
    /// At most this many children are non-terminal (running or parked) at once; at least 1.
    pub max_concurrency: usize,
    /// When the leader stops starting children and asks running ones to stop (ms since the epoch).
    pub deadline_at: Option<i64>,
    /// The leader was cancelled: as at the deadline, but unstarted children report `failed`.
    pub cancel_requested: bool,
}

/// A child as the driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildState {
    /// Admitted to the plan, no run yet.
    NotStarted,
    /// Its run is `running` (queued or leased).
    Running,
    /// Its run is parked on a gate (`suspended` / `needs_review`): it holds a concurrency slot, and
    /// needs a human rather than the driver.
    Parked,
    /// Its run ended with this terminal status.
    Ended {
        status: String,
        error: Option<String>,
    },
    /// Never started: the leader stopped first (deadline or cancel).
    Skipped { report: ReportStatus },
}

/// What a finished leader run says of each child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportStatus {
    Completed,
    Failed,
    Suspended,
    Timeout,
}

impl ReportStatus {
    pub const ALL: [ReportStatus; 4] = [
        Self::Completed,
        Self::Failed,
        Self::Suspended,
        Self::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Suspended => "suspended",
            Self::Timeout => "timeout",
        }
    }
}

/// One child's line in the leader's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub index: usize,
    pub status: ReportStatus,
    pub error: Option<String>,
}

/// How the leader settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    pub status: LeaderFinish,
    /// The leader's `error`: why it failed (`None` unless `status` is `failed`).
    pub error: Option<String>,
    /// One per child, in child order.
    pub reports: Vec<Report>,
}

/// What to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Children to start (from `NotStarted`), lowest index first.
    pub start: Vec<usize>,
    /// Children to ask to stop (the leader stopped): running ones, and parked ones on a cancel.
    pub cancel: Vec<usize>,
    /// Unstarted children never to start, with what they report.
    pub skip: Vec<(usize, ReportStatus)>,
    /// Settle the leader (only from `running`): once no child runs or waits to start, or at once
    /// when the leader stops (its deadline passed, or it was cancelled).
    pub settle: Option<Settle>,
}

/// The report a child gives (`None`: it still runs or waits to start).
pub fn report_of(state: &ChildState) -> Option<(ReportStatus, Option<String>)> {
    match state {
        ChildState::NotStarted | ChildState::Running => None,
        ChildState::Parked => Some((ReportStatus::Suspended, None)),
        ChildState::Skipped { report } => Some((*report, Some(CANCELLED_BEFORE_START.to_owned()))),
        ChildState::Ended { status, error } => Some((
            match status.as_str() {
                "completed" => ReportStatus::Completed,
                "timeout" => ReportStatus::Timeout,
                // Ended waiting for a human: the leader needs one too.
                "blocked" => ReportStatus::Suspended,
                // failed, cancelled, and any word this build does not know.
                _ => ReportStatus::Failed,
            },
            error.clone(),
        )),
    }
}

/// The settling rule, from the children's reports: all completed → `completed`; any failed or
/// timed out → `failed`; otherwise (some parked or blocked) → `needs_human`.
pub fn settle_status(reports: &[Report]) -> LeaderFinish {
    if reports
        .iter()
        .any(|r| matches!(r.status, ReportStatus::Failed | ReportStatus::Timeout))
    {
        LeaderFinish::Failed
    } else if reports.iter().all(|r| r.status == ReportStatus::Completed) {
        LeaderFinish::Completed
    } else {
        LeaderFinish::NeedsHuman
    }
}

/// Why a leader stopped driving: it was cancelled, or its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Cancelled,
    Deadline,
}

impl Drive {
    /// Whether (and why) the leader has stopped at `now`; a cancel outranks the deadline.
    pub fn stop_at(&self, now: i64) -> Option<Stop> {
        if self.cancel_requested {
            Some(Stop::Cancelled)
        } else if self.deadline_at.is_some_and(|d| now >= d) {
            Some(Stop::Deadline)
        } else {
            None
        }
    }
}

/// Plans the next step of a `running` leader at `now`.
///
/// While it drives: start the lowest unstarted children while fewer than `max_concurrency` are
/// running or parked (a parked child holds its slot until it ends); settle once no child runs or
/// waits to start (a parked child does not hold the leader open: it reports `suspended`).
///
/// Once it stops, it settles at once, with every child's report as it stands: unstarted children are
/// never started (`cancelled before start`: `timeout` at the deadline, `failed` on a cancel);
/// running children are asked to stop and report `timeout` (deadline) or `failed` (cancel); parked
/// children are abandoned at the deadline (`suspended`, left to a human) and stopped on a cancel
/// (`failed`). A cancelled leader settles `failed`; one past its deadline by [`settle_status`].
pub fn plan(drive: &Drive, children: &[ChildState], now: i64) -> Plan {
    let mut plan = Plan::default();
    if let Some(stop) = drive.stop_at(now) {
        let (unstarted, stopped, error) = match stop {
            Stop::Cancelled => (ReportStatus::Failed, ReportStatus::Failed, LEADER_CANCELLED),
            Stop::Deadline => (
                ReportStatus::Timeout,
                ReportStatus::Timeout,
                STOPPED_AT_DEADLINE,
            ),
        };
        let mut reports = Vec::with_capacity(children.len());
        for (index, c) in children.iter().enumerate() {
            let (status, error) = match c {
                ChildState::NotStarted => {
                    plan.skip.push((index, unstarted));
                    (unstarted, Some(CANCELLED_BEFORE_START.to_owned()))
                }
                ChildState::Running => {
                    plan.cancel.push(index);
                    (stopped, Some(error.to_owned()))
                }
                ChildState::Parked if stop == Stop::Cancelled => {
                    plan.cancel.push(index);
                    (stopped, Some(error.to_owned()))
                }
                other => report_of(other).unwrap_or((ReportStatus::Suspended, None)),
            };
            reports.push(Report {
                index,
                status,
                error,
            });
        }
        let status = match stop {
            Stop::Cancelled => LeaderFinish::Failed,
            Stop::Deadline => settle_status(&reports),
        };
        let error = match (stop, status) {
            (Stop::Cancelled, _) => Some(LEADER_CANCELLED.to_owned()),
            (Stop::Deadline, LeaderFinish::Failed) => Some(DEADLINE_PASSED.to_owned()),
            _ => None,
        };
        plan.settle = Some(Settle {
            status,
            error,
            reports,
        });
        return plan;
    }
    let active = children
        .iter()
        .filter(|c| matches!(c, ChildState::Running | ChildState::Parked))
        .count();
    let room = drive.max_concurrency.max(1).saturating_sub(active);
    plan.start = children
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == ChildState::NotStarted)
        .map(|(i, _)| i)
        .take(room)
        .collect();
    let open = children
        .iter()
        .any(|c| matches!(c, ChildState::NotStarted | ChildState::Running));
    if !open {
        let reports: Vec<Report> = children
            .iter()
            .enumerate()
            .filter_map(|(index, c)| {
                report_of(c).map(|(status, error)| Report {
                    index,
                    status,
                    error,
                })
            })
            .collect();
        let status = settle_status(&reports);
        let error = (status == LeaderFinish::Failed).then(|| failed_error(&reports));
        plan.settle = Some(Settle {
            status,
            error,
            reports,
        });
    }
    plan
}

/// The error of a leader whose children failed: `"<k> of <n> children failed or timed out"`.
pub fn failed_error(reports: &[Report]) -> String {
    let k = reports
        .iter()
        .filter(|r| matches!(r.status, ReportStatus::Failed | ReportStatus::Timeout))
        .count();
    format!("{k} of {} children failed or timed out", reports.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(status: &str) -> ChildState {
        ChildState::Ended {
            status: status.into(),
            error: None,
        }
    }

    /// Every state a child can be in, one representative each (and every terminal word).
    fn states() -> Vec<ChildState> {
        let mut v = vec![
            ChildState::NotStarted,
            ChildState::Running,
            ChildState::Parked,
            ChildState::Skipped {
                report: ReportStatus::Timeout,
            },
            ChildState::Skipped {
                report: ReportStatus::Failed,
            },
        ];
        for s in ["completed", "failed", "cancelled", "timeout", "blocked"] {
            v.push(ended(s));
        }
        v
    }

    /// Every combination of `n` children over [`states`].
    fn combos(n: usize) -> Vec<Vec<ChildState>> {
        let all = states();
        let mut out = vec![vec![]];
        for _ in 0..n {
            out = out
                .into_iter()
                .flat_map(|prefix: Vec<ChildState>| {
                    all.iter().map(move |s| {
                        let mut p = prefix.clone();
                        p.push(s.clone());
                        p
                    })
                })
                .collect();
        }
        out
    }

    fn drives() -> Vec<Drive> {
        let mut v = vec![];
        for max_concurrency in 1..=3 {
            for deadline_at in [None, Some(100), Some(50)] {
                for cancel_requested in [false, true] {
                    v.push(Drive {
                        max_concurrency,
                        deadline_at,
                        cancel_requested,
                    });
                }
            }
        }
        v
    }

    #[test]
    fn every_plan_over_three_children_keeps_the_bound_and_the_rules() {
        const NOW: i64 = 75;
        let mut checked = 0;
        for n in 0..=3 {
            for children in combos(n) {
                for d in drives() {
                    let p = plan(&d, &children, NOW);
                    let stopping = d.cancel_requested || d.deadline_at.is_some_and(|t| NOW >= t);
                    let active = children
                        .iter()
                        .filter(|c| matches!(c, ChildState::Running | ChildState::Parked))
                        .count();
                    // Starts only unstarted children, lowest first, never past the bound.
                    for &i in &p.start {
                        assert_eq!(children[i], ChildState::NotStarted, "{children:?}");
                    }
                    assert!(p.start.windows(2).all(|w| w[0] < w[1]));
                    assert!(active + p.start.len() <= d.max_concurrency.max(active));
                    // Fills the free slots while children wait.
                    let waiting = children
                        .iter()
                        .filter(|c| **c == ChildState::NotStarted)
                        .count();
                    if !stopping {
                        let room = d.max_concurrency.saturating_sub(active);
                        assert_eq!(p.start.len(), room.min(waiting), "{children:?} {d:?}");
                        assert!(p.cancel.is_empty() && p.skip.is_empty());
                    } else {
                        // Stopping: nothing starts; every unstarted child is skipped; every
                        // running one is asked to stop, and parked ones too on a cancel.
                        assert!(p.start.is_empty());
                        assert_eq!(p.skip.len(), waiting);
                        let want = if d.cancel_requested {
                            ReportStatus::Failed
                        } else {
                            ReportStatus::Timeout
                        };
                        assert!(p.skip.iter().all(|(_, r)| *r == want));
                        for &i in &p.cancel {
                            assert!(
                                children[i] == ChildState::Running
                                    || (d.cancel_requested && children[i] == ChildState::Parked)
                            );
                        }
                        let running = children
                            .iter()
                            .filter(|c| **c == ChildState::Running)
                            .count();
                        let parked = active - running;
                        let cancels = running + if d.cancel_requested { parked } else { 0 };
                        assert_eq!(p.cancel.len(), cancels);
                    }
                    // Settles exactly when nothing runs or waits to start, or at once on a stop.
                    let open = children
                        .iter()
                        .any(|c| matches!(c, ChildState::NotStarted | ChildState::Running));
                    assert_eq!(p.settle.is_some(), stopping || !open, "{children:?} {d:?}");
                    if let Some(s) = &p.settle {
                        assert_eq!(s.reports.len(), children.len());
                        assert!(s.reports.iter().enumerate().all(|(i, r)| r.index == i));
                        let rs: Vec<ReportStatus> = s.reports.iter().map(|r| r.status).collect();
                        let want = if d.cancel_requested
                            || rs
                                .iter()
                                .any(|r| matches!(r, ReportStatus::Failed | ReportStatus::Timeout))
                        {
                            LeaderFinish::Failed
                        } else if rs.iter().all(|r| *r == ReportStatus::Completed) {
                            LeaderFinish::Completed
                        } else {
                            LeaderFinish::NeedsHuman
                        };
                        assert_eq!(s.status, want, "{children:?}");
                        assert_eq!(s.error.is_some(), want == LeaderFinish::Failed);
                        // A child still running when the leader stops never reports completed.
                        for (i, c) in children.iter().enumerate() {
                            if *c == ChildState::Running {
                                assert_ne!(s.reports[i].status, ReportStatus::Completed);
                            }
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, (1 + 10 + 100 + 1000) * 18);
    }

    #[test]
    fn replanning_after_applying_a_plan_never_starts_a_child_twice() {
        let d = Drive {
            max_concurrency: 2,
            deadline_at: None,
            cancel_requested: false,
        };
        let mut children = vec![ChildState::NotStarted; 5];
        let mut started = vec![];
        for step in 0..20 {
            let p = plan(&d, &children, 0);
            if p.settle.is_some() {
                break;
            }
            for &i in &p.start {
                assert!(!started.contains(&i), "step {step}: {i} started twice");
                started.push(i);
                children[i] = ChildState::Running;
            }
            // A stale second driver planning from the same view names the same children, and
            // a start is conditional on `NotStarted`, so applying it again starts nothing.
            assert!(plan(&d, &children, 0).start.is_empty());
            // The lowest running child finishes.
            if let Some(i) = children.iter().position(|c| *c == ChildState::Running) {
                children[i] = ended("completed");
            }
        }
        assert_eq!(started, [0, 1, 2, 3, 4]);
        let last = plan(&d, &children, 0).settle.unwrap();
        assert_eq!(last.status, LeaderFinish::Completed);
    }

    #[test]
    fn every_declared_report_status_has_a_producer() {
        let produced: std::collections::HashSet<ReportStatus> = states()
            .iter()
            .filter_map(|s| report_of(s).map(|(r, _)| r))
            .collect();
        for r in ReportStatus::ALL {
            assert!(produced.contains(&r), "{} has no producer", r.as_str());
        }
    }

    #[test]
    fn at_the_deadline_unstarted_children_report_timeout_cancelled_before_start() {
        let d = Drive {
            max_concurrency: 1,
            deadline_at: Some(10),
            cancel_requested: false,
        };
        let children = vec![ended("completed"), ChildState::NotStarted];
        let p = plan(&d, &children, 10);
        assert_eq!(p.skip, [(1, ReportStatus::Timeout)]);
        let s = p.settle.unwrap();
        assert_eq!(s.status, LeaderFinish::Failed);
        assert_eq!(s.error.as_deref(), Some(DEADLINE_PASSED));
        assert_eq!(
            s.reports[1],
            Report {
                index: 1,
                status: ReportStatus::Timeout,
                error: Some(CANCELLED_BEFORE_START.into())
            }
        );
        // One millisecond earlier the child starts instead.
        assert_eq!(plan(&d, &children, 9).start, [1]);
    }

    #[test]
    fn a_parked_child_leaves_the_leader_needing_a_human_once_the_rest_are_done() {
        let d = Drive {
            max_concurrency: 2,
            deadline_at: None,
            cancel_requested: false,
        };
        let p = plan(&d, &[ended("completed"), ChildState::Parked], 0);
        assert_eq!(p.settle.unwrap().status, LeaderFinish::NeedsHuman);
        let p = plan(&d, &[ended("blocked"), ended("completed")], 0);
        assert_eq!(p.settle.unwrap().status, LeaderFinish::NeedsHuman);
        let p = plan(&d, &[ended("cancelled"), ChildState::Parked], 0);
        assert_eq!(p.settle.unwrap().status, LeaderFinish::Failed);
    }

    #[test]
    fn at_the_deadline_running_children_are_stopped_as_timeout_and_parked_ones_abandoned() {
        let d = Drive {
            max_concurrency: 3,
            deadline_at: Some(10),
            cancel_requested: false,
        };
        let p = plan(
            &d,
            &[ChildState::Running, ChildState::Parked, ended("completed")],
            10,
        );
        assert_eq!(p.cancel, [0]);
        let s = p.settle.unwrap();
        assert_eq!(
            s.reports.iter().map(|r| r.status).collect::<Vec<_>>(),
            [
                ReportStatus::Timeout,
                ReportStatus::Suspended,
                ReportStatus::Completed
            ]
        );
        assert_eq!(s.reports[0].error.as_deref(), Some(STOPPED_AT_DEADLINE));
        assert_eq!(s.status, LeaderFinish::Failed);
        // Only parked and done children at the deadline: the leader needs a human, no error.
        let s = plan(&d, &[ChildState::Parked, ended("completed")], 10)
            .settle
            .unwrap();
        assert_eq!((s.status, s.error), (LeaderFinish::NeedsHuman, None));
    }

    #[test]
    fn a_cancelled_leader_settles_failed_at_once_stopping_every_running_or_parked_child() {
        let d = Drive {
            max_concurrency: 2,
            deadline_at: None,
            cancel_requested: true,
        };
        let children = [
            ended("completed"),
            ChildState::Running,
            ChildState::Parked,
            ChildState::NotStarted,
        ];
        let p = plan(&d, &children, 0);
        assert_eq!(
            (p.cancel.as_slice(), p.skip.as_slice()),
            (&[1, 2][..], &[(3, ReportStatus::Failed)][..])
        );
        let s = p.settle.unwrap();
        assert_eq!(s.status, LeaderFinish::Failed);
        assert_eq!(s.error.as_deref(), Some(LEADER_CANCELLED));
        assert_eq!(s.reports[3].error.as_deref(), Some(CANCELLED_BEFORE_START));
        // Even when every child had completed.
        let s = plan(&d, &[ended("completed")], 0).settle.unwrap();
        assert_eq!(s.status, LeaderFinish::Failed);
    }

    #[test]
    fn a_failed_leader_says_how_many_children_failed() {
        let d = Drive {
            max_concurrency: 2,
            deadline_at: None,
            cancel_requested: false,
        };
        let s = plan(
            &d,
            &[ended("failed"), ended("completed"), ended("timeout")],
            0,
        )
        .settle
        .unwrap();
        assert_eq!(
            s.error.as_deref(),
            Some("2 of 3 children failed or timed out")
        );
    }
}
