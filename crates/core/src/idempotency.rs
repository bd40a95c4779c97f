//! Idempotency keys.
//!
//! A submit key is scoped to its principal: the stored key is sha256-hex(owner + 0x1F + raw), so two
//! principals never share a key, the column has a fixed width, and raw keys never reach the database.
//! The key is bound forever to the run it admitted, together with a fingerprint of the request; the
//! same key with a different request is refused (`idempotency.key_reused`). 409s are never stored.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};

/// A scoped idempotency key with the request it was bound to and the answer it produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyBinding {
    pub scoped_key: String,
    pub fingerprint: String,
    /// The run the key admitted.
    #[serde(default)]
    pub task_id: String,
    pub response_status: u16,
    pub response_body: String,
}

crate::tree_struct!(IdempotencyBinding lenient {
    scoped_key: "scoped_key",
    fingerprint: "fingerprint",
    task_id: "task_id" = default,
    response_status: "response_status",
    response_body: "response_body",
});

impl IdempotencyBinding {
    /// The answer to a request presenting this key with `fingerprint`: the original admission again,
    /// or `idempotency.key_reused` for a different request.
    pub fn answer(&self, fingerprint: &str) -> Result<Replay, ApiError> {
        if self.fingerprint == fingerprint {
            Ok(Replay {
                task_id: self.task_id.clone(),
                status: self.response_status,
                body: self.response_body.clone(),
            })
        } else {
            Err(key_reused())
        }
    }
}

/// A replayed admission: the stored status and body, sent with `Idempotency-Replayed: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub task_id: String,
    pub status: u16,
    pub body: String,
}

/// Longest raw `Idempotency-Key` accepted.
pub const RAW_KEY_MAX: usize = 255;

/// sha256-hex of `(owner ?? "") + "\x1f" + raw`: 64 lowercase hex chars.
pub fn scoped_key(owner: Option<&str>, raw: &str) -> String {
    let mut material = Vec::with_capacity(owner.map_or(0, str::len) + 1 + raw.len());
    material.extend_from_slice(owner.unwrap_or("").as_bytes());
    material.push(0x1f);
    material.extend_from_slice(raw.as_bytes());
    crate::hex::sha256(&material)
}

/// Validates a raw header value: 1..=255 printable ASCII characters.
pub fn parse_raw_key(raw: &str) -> Result<&str, ApiError> {
    if raw.is_empty() || raw.len() > RAW_KEY_MAX || !raw.bytes().all(|b| (0x20..0x7f).contains(&b))
    {
        return Err(ApiError::invalid_request(format!(
            "Idempotency-Key must be 1..{RAW_KEY_MAX} printable ASCII characters"
        )));
    }
    Ok(raw)
}

/// Fingerprint of a request: the route plus the body re-serialised canonically (object keys sorted,
/// insignificant whitespace removed, escapes resolved), so formatting differences do not count as a
/// different request. A number that is not a 64-bit integer counts as spelt (`1.5` and `1.50` are
/// two requests; see `json_tree`): a retry sends the same text.
pub fn fingerprint(route: &str, body: &crate::json::Value) -> String {
    let canonical = body.text();
    crate::hex::sha256(format!("{route}\n{canonical}").as_bytes())
}

/// The refusal for a key presented again with a different request.
pub fn key_reused() -> ApiError {
    ApiError::new(
        crate::error::ErrorCode::KeyReused,
        "this Idempotency-Key was already used with a different request; use a new key for a new request",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_keys_are_64_lowercase_hex_and_deterministic() {
        let k = scoped_key(Some("alice"), "k1");
        assert_eq!(k.len(), 64);
        assert!(k
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(k, scoped_key(Some("alice"), "k1"));
    }

    #[test]
    fn the_same_raw_key_under_different_principals_gives_different_keys() {
        assert_ne!(scoped_key(Some("alice"), "k"), scoped_key(Some("bob"), "k"));
        assert_ne!(scoped_key(None, "k"), scoped_key(Some("alice"), "k"));
    }

    #[test]
    fn an_anonymous_owner_hashes_as_empty_string_unit_separator_raw() {
        assert_eq!(scoped_key(None, "raw"), crate::hex::sha256(b"\x1fraw"));
        assert_eq!(scoped_key(Some(""), "raw"), scoped_key(None, "raw"));
    }

    #[test]
    fn the_separator_prevents_owner_and_key_from_sliding_into_each_other() {
        assert_ne!(scoped_key(Some("ab"), "c"), scoped_key(Some("a"), "bc"));
    }

    #[test]
    fn long_owner_and_long_raw_key_still_fit_the_column() {
        assert_eq!(
            scoped_key(Some(&"o".repeat(190)), &"k".repeat(255)).len(),
            64
        );
    }

    #[test]
    fn raw_keys_must_be_short_printable_ascii() {
        assert!(parse_raw_key("abc-123").is_ok());
        assert!(parse_raw_key("").is_err());
        assert!(parse_raw_key(&"k".repeat(256)).is_err());
        assert!(parse_raw_key("a\tb").is_err());
    }

    #[test]
    fn fingerprints_ignore_formatting_but_not_content_or_route() {
        let a: crate::json::Value = serde_json::from_str(r#"{"b":1, "a":[1,2]}"#).unwrap();
        let b: crate::json::Value = serde_json::from_str(r#"{"a":[1,2],"b":1}"#).unwrap();
        let c: crate::json::Value = serde_json::from_str(r#"{"a":[2,1],"b":1}"#).unwrap();
        assert_eq!(
            fingerprint("POST /v1/runs", &a),
            fingerprint("POST /v1/runs", &b)
        );
        assert_ne!(
            fingerprint("POST /v1/runs", &a),
            fingerprint("POST /v1/runs", &c)
        );
        assert_ne!(
            fingerprint("POST /v1/runs", &a),
            fingerprint("POST /v1/tasks", &a)
        );
    }
}
