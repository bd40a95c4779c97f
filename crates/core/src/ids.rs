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
    /// Mints a UUIDv7 task id from `now_ms` and 10 random bytes (RFC 9562 §5.7).
    pub fn mint(now_ms: u64, random: [u8; 10]) -> Self {
        let mut b = [0u8; 16];
        let ms = now_ms & 0xFFFF_FFFF_FFFF;
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        b[6..].copy_from_slice(&random);
        b[6] = 0x70 | (b[6] & 0x0F);
        b[8] = 0x80 | (b[8] & 0x3F);
        let h = crate::hex::encode(&b);
        Self(format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        ))
    }
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
    fn minted_task_ids_sort_by_time() {
        let a = TaskId::mint(1_000, [0xFF; 10]);
        let b = TaskId::mint(1_001, [0x00; 10]);
        assert!(a < b);
    }
}
