//! Run statuses and their classification.
//!
//! A run is non-terminal exactly when its status is `running`, `suspended` or `needs_review`; every
//! other word is terminal. Code tests membership in the non-terminal set and never enumerates the
//! terminal words, so a status this build does not know is treated as terminal (write-once holds).

/// The non-terminal statuses, as SQL list text: `'running','suspended','needs_review'`.
pub const NON_TERMINAL_SQL: &str = "'running','suspended','needs_review'";

pub const RUNNING: &str = "running";
pub const SUSPENDED: &str = "suspended";
pub const NEEDS_REVIEW: &str = "needs_review";
pub const CANCELLED: &str = "cancelled";

/// Terminal statuses a runner may finish a run with.
pub const FINISH_STATUSES: [&str; 5] = ["completed", "failed", "cancelled", "blocked", "timeout"];

/// The message written when a user cancels a run that no runner is driving.
pub const CANCELLED_BY_USER: &str = "cancelled by user";

/// Non-terminal: the run holds its session's claim.
pub fn is_active(status: &str) -> bool {
    matches!(status, RUNNING | SUSPENDED | NEEDS_REVIEW)
}

/// Parked: waiting for a human decision; keeps the claim, has no driving leg.
pub fn is_parked(status: &str) -> bool {
    matches!(status, SUSPENDED | NEEDS_REVIEW)
}

pub fn is_terminal(status: &str) -> bool {
    !is_active(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_three_statuses_are_non_terminal() {
        assert!(is_active("running") && is_active("suspended") && is_active("needs_review"));
        for s in [
            "completed",
            "failed",
            "cancelled",
            "blocked",
            "timeout",
            "",
            "Running",
            "new",
        ] {
            assert!(is_terminal(s), "{s:?} should be terminal");
        }
    }

    #[test]
    fn parked_means_suspended_or_needs_review_only() {
        assert!(is_parked("suspended") && is_parked("needs_review"));
        assert!(!is_parked("running") && !is_parked("failed"));
    }

    #[test]
    fn finish_statuses_are_all_terminal() {
        assert!(FINISH_STATUSES.iter().all(|s| is_terminal(s)));
    }

    #[test]
    fn the_sql_list_names_the_same_three_words() {
        for s in [RUNNING, SUSPENDED, NEEDS_REVIEW] {
            assert!(NON_TERMINAL_SQL.contains(&format!("'{s}'")));
        }
        assert_eq!(NON_TERMINAL_SQL.matches('\'').count(), 6);
    }
}
