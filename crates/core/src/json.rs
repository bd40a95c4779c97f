//! Typed reads of JSON text through one text parser.
//!
//! `serde_json::from_str::<T>` compiles serde_json's text parser once per type `T` it reads; across
//! the objects' protocols, their replies and the state they store, those copies were about 200 KB of
//! the Worker's wasm (about a seventh of it). [`from_text`] parses the text into a
//! `serde_json::Value` (one parser for the whole program) and reads `T` from that tree, whose
//! per-type code is a fraction of the size. The detour builds one tree per read: a few hundred bytes
//! for most calls, replies and stored states; an append's or a finish's call can carry up to the
//! 1 MiB body limit of event data, whose strings the tree holds once more before the call owns them.
//! Reads of many rows (D1's results) keep the direct parser. Duplicate keys in an object are taken
//! as the last one rather than refused, so a configuration that must be strict (the token table)
//! keeps `serde_json::from_str`.

use serde::de::DeserializeOwned;

/// Reads a `T` from JSON text. Errors are serde_json's: a syntax error names its line and column,
/// a shape error the field (without a position).
pub fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    T::deserialize(serde_json::from_str::<serde_json::Value>(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session_protocol::SessionReply;

    #[test]
    fn unknown_variants_missing_fields_and_broken_text_are_errors_not_defaults() {
        assert!(from_text::<SessionReply>(r#"{"no_such_reply":{}}"#).is_err());
        let missing = from_text::<SessionReply>(r#"{"noted":{}}"#).unwrap_err();
        assert!(missing.to_string().contains("claim_released"), "{missing}");
        let broken = from_text::<SessionReply>(r#"{"noted":"#).unwrap_err();
        assert!(broken.to_string().contains("line 1"), "{broken}");
    }
}
