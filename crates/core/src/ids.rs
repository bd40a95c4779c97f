//! Identifiers: validated safe ids (task, session, runner) and UUIDv7 minting.
//!
//! A safe id matches `^[A-Za-z0-9_.-]{1,64}$` and is neither `.` nor `..`, so it can be used as a path
//! segment, a Durable Object name and a SQL key without escaping. Ids are case-sensitive.

use serde::Serialize;

/// Maximum length of a safe id.
pub const SAFE_ID_MAX: usize = 64;

/// The id rule, as quoted in refusals.
pub const SAFE_ID_RULE: &str = "must match ^[A-Za-z0-9_.-]{1,64}$ and not be \".\" or \"..\"";

/// Whether `s` is a safe id.
pub fn is_safe_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SAFE_ID_MAX
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

macro_rules! safe_id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `s` against the safe-id rule.
            pub fn parse(s: &str) -> Option<Self> {
                is_safe_id(s).then(|| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

safe_id_type!(
    /// The id of one run.
    TaskId
);
safe_id_type!(
    /// The id of a session (conversation); one Durable Object and one claim per session.
    SessionId
);

impl TaskId {
    /// Mints a UUIDv7 task id from `now_ms` and 10 random bytes (RFC 9562 §5.7): the low 48 bits of
    /// the time in front (big-endian), then the random bytes with the version (7) and the variant
    /// (`10`) written over their top bits, in the hyphenated lowercase form. The caller supplies
    /// the time and the randomness, so the core reads neither a clock nor an entropy source.
    pub fn mint(now_ms: u64, random: [u8; 10]) -> Self {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&now_ms.to_be_bytes()[2..]);
        b[6..].copy_from_slice(&random);
        b[6] = 0x70 | (b[6] & 0x0F);
        b[8] = 0x80 | (b[8] & 0x3F);
        let hex = crate::hex::encode(&b);
        Self(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ))
    }

    /// When a UUIDv7 id was minted (its 48-bit millisecond timestamp); `None` for any other id
    /// (one not in the hyphenated form the server mints, or of another version).
    pub fn minted_at_ms(&self) -> Option<i64> {
        let s = self.0.as_bytes();
        let hyphens_in_place = s.len() == 36 && [8, 13, 18, 23].iter().all(|&i| s[i] == b'-');
        if !hyphens_in_place || s[14] != b'7' {
            return None;
        }
        let digits: String = self.0.split('-').collect();
        if digits.len() != 32 {
            return None;
        }
        let bytes = crate::hex::decode(&digits)?;
        let mut ms = [0u8; 8];
        ms[2..].copy_from_slice(&bytes[..6]);
        Some(i64::from_be_bytes(ms))
    }
}

/// How long a reader of a run by id waits for an admission committed in its session object to
/// reach D1 (`admission::CommitPoint::Object`): the object writes it right after answering, and its
/// alarm retries within a second if that write is lost (a restart included).
pub const OUTBOX_WAIT_MS: i64 = 3_000;

/// Whether a read of `id` that found no row at `now` should look again after a pause, and how
/// long: only an id the server minted within [`OUTBOX_WAIT_MS`] may still be on its way to D1;
/// the pauses double from 10 ms, and the last ends at the window's close. `None`: the run is
/// not there (answer 404).
pub fn outbox_retry_in(id: &TaskId, now: i64, waited: i64) -> Option<i64> {
    let minted = id.minted_at_ms()?;
    let close = minted.saturating_add(OUTBOX_WAIT_MS);
    if now >= close || now < minted.saturating_sub(OUTBOX_WAIT_MS) {
        return None;
    }
    Some(waited.clamp(10, 500).min(close - now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ids_accept_the_documented_alphabet_up_to_64_chars() {
        assert!(is_safe_id("a"));
        assert!(is_safe_id("Task_1.v2-x"));
        assert!(is_safe_id(&"x".repeat(64)));
    }

    #[test]
    fn safe_ids_reject_empty_long_dot_and_foreign_characters() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a%2Fb",
            "a\0",
            &"x".repeat(65),
        ] {
            assert!(!is_safe_id(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn minted_task_ids_are_uuidv7_with_the_timestamp_in_front() {
        let id = TaskId::mint(0x0192_3456_789A, [0xFF; 10]);
        let s = id.as_str();
        assert_eq!(s.len(), 36);
        assert!(s.starts_with("01923456-789a-7"), "{s}");
        // variant bits 10xx
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"), "{s}");
        assert!(is_safe_id(s));
    }

    #[test]
    fn minted_task_ids_keep_the_random_bytes_outside_the_version_and_variant_bits() {
        let id = TaskId::mint(0x0192_3456_789A, [0x00; 10]);
        assert_eq!(id.as_str(), "01923456-789a-7000-8000-000000000000");
        let id = TaskId::mint(
            0x0192_3456_789A,
            *b"\x12\x34\x56\x78\x9a\xbc\xde\xf0\x11\x22",
        );
        assert_eq!(id.as_str(), "01923456-789a-7234-9678-9abcdef01122");
    }

    #[test]
    fn a_minted_id_reads_back_its_time_and_other_ids_have_none() {
        let id = TaskId::mint(1_800_000_000_123, [7; 10]);
        assert_eq!(id.minted_at_ms(), Some(1_800_000_000_123));
        assert_eq!(TaskId::parse("my-task").unwrap().minted_at_ms(), None);
        let v4 = TaskId::parse("0b6e2b44-1f5e-4c1a-9a4e-3c2d1e0f9a8b").unwrap();
        assert_eq!(v4.minted_at_ms(), None);
        let at = |s: &str| TaskId::parse(s).unwrap().minted_at_ms();
        assert_eq!(
            at("01923456-789A-7000-8000-000000000000"),
            Some(0x0192_3456_789A)
        );
        assert_eq!(at("0192345g-789a-7000-8000-000000000000"), None, "not hex");
        assert_eq!(
            at("01923456789a70008000000000000000"),
            None,
            "not hyphenated"
        );
        assert_eq!(at("01923456-789a-7000-8000-00000000000"), None, "too short");
        // Hyphens where digits belong (a safe id may have them anywhere): not an id we minted.
        let hyphens = format!("{}70{}", "-".repeat(14), "-".repeat(20));
        assert_eq!(at(&hyphens), None);
        assert_eq!(at("01923456-789a-7000-8000-0000000000--"), None);
    }

    #[test]
    fn a_missing_run_is_looked_for_again_only_while_its_id_is_fresh() {
        let at = 1_800_000_000_000;
        let id = TaskId::mint(at as u64, [1; 10]);
        assert_eq!(outbox_retry_in(&id, at + 5, 0), Some(10));
        assert_eq!(outbox_retry_in(&id, at + 100, 80), Some(80));
        assert_eq!(outbox_retry_in(&id, at + 1_000, 5_000), Some(500));
        // The last pause ends at the window's close; past it, the answer is 404.
        assert_eq!(outbox_retry_in(&id, at + OUTBOX_WAIT_MS - 3, 400), Some(3));
        assert_eq!(outbox_retry_in(&id, at + OUTBOX_WAIT_MS, 0), None);
        // An id from the far future (a client's forgery) is not waited for.
        assert_eq!(outbox_retry_in(&id, at - OUTBOX_WAIT_MS - 1, 0), None);
        assert_eq!(outbox_retry_in(&TaskId::parse("t1").unwrap(), at, 0), None);
    }

    #[test]
    fn minted_task_ids_keep_only_the_low_48_bits_of_the_time() {
        let id = TaskId::mint(0xABCD_0192_3456_789A, [0x00; 10]);
        assert!(id.as_str().starts_with("01923456-789a-7"), "{id}");
    }

    #[test]
    fn minted_task_ids_sort_by_time() {
        let a = TaskId::mint(1_000, [0xFF; 10]);
        let b = TaskId::mint(1_001, [0x00; 10]);
        assert!(a < b);
    }
}
