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
    /// One per child, in child order.
    pub reports: Vec<Report>,
}

/// What to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Children to start (from `NotStarted`), lowest index first.
    pub start: Vec<usize>,
    /// Running or parked children to cancel (the leader stopped).
    pub cancel: Vec<usize>,
    /// Unstarted children never to start, with what they report.
    pub skip: Vec<(usize, ReportStatus)>,
    /// Settle the leader (only from `running`), once no child runs or waits to start.
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

/// Plans the next step of a `running` leader at `now`.
pub fn plan(drive: &Drive, children: &[ChildState], now: i64) -> Plan {
    let stopping = drive.cancel_requested || drive.deadline_at.is_some_and(|d| now >= d);
    let mut plan = Plan::default();
    // The states after this plan is applied.
    let mut after: Vec<ChildState> = children.to_vec();
    if stopping {
        let skipped = if drive.cancel_requested {
            ReportStatus::Failed
        } else {
            ReportStatus::Timeout
        };
        for (i, c) in children.iter().enumerate() {
            match c {
                ChildState::NotStarted => {
                    plan.skip.push((i, skipped));
                    after[i] = ChildState::Skipped { report: skipped };
                }
                ChildState::Running | ChildState::Parked => plan.cancel.push(i),
                ChildState::Ended { .. } | ChildState::Skipped { .. } => {}
            }
        }
    } else {
        let active = children
            .iter()
            .filter(|c| matches!(c, ChildState::Running | ChildState::Parked))
            .count();
        let room = drive.max_concurrency.max(1).saturating_sub(active);
        for (i, c) in children.iter().enumerate() {
            if plan.start.len() == room {
                break;
            }
            if *c == ChildState::NotStarted {
                plan.start.push(i);
                after[i] = ChildState::Running;
            }
        }
    }
    // Settle once nothing runs or waits to start. A parked child does not hold the leader open
    // unless the leader stopped (then it was just asked to stop, and its end settles the leader).
    let open = after.iter().any(|c| match c {
        ChildState::NotStarted | ChildState::Running => true,
        ChildState::Parked => stopping,
        ChildState::Ended { .. } | ChildState::Skipped { .. } => false,
    });
    if !open {
        let reports: Vec<Report> = after
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
        plan.settle = Some(Settle {
            status: settle_status(&reports),
            reports,
        });
    }
    plan
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
                        // running or parked one is asked to stop.
                        assert!(p.start.is_empty());
                        assert_eq!(p.skip.len(), waiting);
                        let want = if d.cancel_requested {
                            ReportStatus::Failed
                        } else {
                            ReportStatus::Timeout
                        };
                        assert!(p.skip.iter().all(|(_, r)| *r == want));
                        assert_eq!(p.cancel.len(), active);
                    }
                    // Settles exactly when nothing runs or waits (parked counts only when stopping).
                    let open_after = children.iter().any(|c| match c {
                        ChildState::NotStarted => !stopping,
                        ChildState::Running => true,
                        ChildState::Parked => stopping,
                        _ => false,
                    });
                    assert_eq!(p.settle.is_some(), !open_after, "{children:?} {d:?}");
                    if let Some(s) = &p.settle {
                        assert_eq!(s.reports.len(), children.len());
                        let rs: Vec<ReportStatus> = s.reports.iter().map(|r| r.status).collect();
                        let want = if rs
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
}
