//! Lowercase hex encoding and decoding (digests, cursors), through the `hex` crate. The paths
//! `sema_core::hex::{encode, decode}` stay as the callers' names for it (the Worker mints delivery
//! ids with `encode`; list cursors and token hashes use `decode`).

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Decodes lowercase or uppercase hex; `None` on odd length or a non-hex digit.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    hex::decode(text).ok()
}

/// Lowercase hex SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> String {
    use sha2::Digest;
    encode(&sha2::Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_every_byte_value() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn decoding_rejects_odd_lengths_and_foreign_digits() {
        assert!(decode("abc").is_none());
        assert!(decode("zz").is_none());
        assert!(decode("0g").is_none());
    }

    #[test]
    fn encoding_is_lowercase_and_decoding_takes_either_case() {
        assert_eq!(encode(&[0xAB, 0x0F]), "ab0f");
        assert_eq!(decode("AB0f").unwrap(), vec![0xAB, 0x0F]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn sha256_matches_the_published_test_vector() {
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
