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

/// Terminal statuses a runner may finish a run with (the words of [`TerminalStatus`]).
pub const FINISH_STATUSES: [&str; 5] = ["completed", "failed", "cancelled", "blocked", "timeout"];

/// A terminal status the control plane writes (a runner's finish, a terminal write). Typed so that
/// asking the store to "finish" a run with a non-terminal word cannot be written. Stored rows keep
/// their status as text ([`crate::run::RunRow::status`]): a word this build does not know stays
/// readable and counts as terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalStatus {
    Completed,
    Failed,
    Cancelled,
    Blocked,
    Timeout,
}

impl TerminalStatus {
    pub const ALL: [TerminalStatus; 5] = [
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::Blocked,
        Self::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => CANCELLED,
            Self::Blocked => "blocked",
            Self::Timeout => "timeout",
        }
    }

    /// The status named by `word` (exact, case-sensitive), or `None`.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

impl std::fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parked status: the run waits for a human decision, keeps its claim, and has no driving leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParkStatus {
    Suspended,
    NeedsReview,
}

impl ParkStatus {
    pub const ALL: [ParkStatus; 2] = [Self::Suspended, Self::NeedsReview];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Suspended => SUSPENDED,
            Self::NeedsReview => NEEDS_REVIEW,
        }
    }

    /// The parked status named by `word` (exact), or `None`.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

impl std::fmt::Display for ParkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_enum!(ParkStatus {
    0 => Suspended,
    1 => NeedsReview,
});
crate::codec_enum!(TerminalStatus {
    0 => Completed,
    1 => Failed,
    2 => Cancelled,
    3 => Blocked,
    4 => Timeout,
});

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
    fn typed_statuses_round_trip_and_match_the_word_lists() {
        assert_eq!(
            TerminalStatus::ALL.map(TerminalStatus::as_str),
            FINISH_STATUSES
        );
        for s in TerminalStatus::ALL {
            assert_eq!(TerminalStatus::parse(s.as_str()), Some(s));
            assert!(is_terminal(s.as_str()));
        }
        for s in ParkStatus::ALL {
            assert_eq!(ParkStatus::parse(s.as_str()), Some(s));
            assert!(is_parked(s.as_str()));
        }
        for w in ["running", "suspended", "needs_review", "Completed", ""] {
            assert_eq!(TerminalStatus::parse(w), None, "{w:?}");
        }
        assert_eq!(ParkStatus::parse("running"), None);
        assert_eq!(ParkStatus::parse("failed"), None);
    }

    #[test]
    fn the_sql_list_names_the_same_three_words() {
        for s in [RUNNING, SUSPENDED, NEEDS_REVIEW] {
            assert!(NON_TERMINAL_SQL.contains(&format!("'{s}'")));
        }
        assert_eq!(NON_TERMINAL_SQL.matches('\'').count(), 6);
    }
}
