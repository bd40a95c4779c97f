//! Bounds of the request headers the API reads. The platform bounds a request's headers as a whole;
//! these bound each header a handler or the auth check reads, so no code path hashes, parses or
//! copies more than this, and an oversized header gets a clear `431 header_too_large` naming it
//! instead of whatever the value would have caused further in.

use crate::error::ApiError;

/// Each header the API reads, lower-case, with its longest accepted value in bytes.
pub const READ_HEADERS: [(&str, usize); 8] = [
    // `Bearer ` plus a token; tokens are opaque, 4 KiB is far above any sane secret.
    ("authorization", 4096),
    // A principal id (1..=128 safe characters) and a role word, with room to say what is wrong.
    ("x-sema-principal", 256),
    ("x-sema-role", 64),
    // Raw keys are 1..=255 printable ASCII (the idempotency rule says so with a 400 below this).
    ("idempotency-key", 1024),
    // An event seq: at most 16 digits below 2^53.
    ("last-event-id", 64),
    ("accept", 1024),
    ("content-type", 256),
    ("content-length", 32),
];

/// Checks every header in [`READ_HEADERS`] through `get` (a header's value by lower-case name).
pub fn check_sizes<F: Fn(&str) -> Option<String>>(get: F) -> Result<(), ApiError> {
    for (name, max) in READ_HEADERS {
        if get(name).is_some_and(|v| v.len() > max) {
            return Err(ApiError::header_too_large(name, max));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn with(name: &'static str, len: usize) -> impl Fn(&str) -> Option<String> {
        move |n: &str| (n == name).then(|| "x".repeat(len))
    }

    #[test]
    fn a_header_at_its_bound_passes_and_one_byte_more_is_refused_by_name() {
        for (name, max) in READ_HEADERS {
            assert!(check_sizes(with(name, max)).is_ok(), "{name}");
            let e = check_sizes(with(name, max + 1)).unwrap_err();
            assert_eq!(e.code(), ErrorCode::HeaderTooLarge.code());
            assert_eq!(e.status(), 431);
            assert_eq!(e.detail("header"), Some(format!("\"{name}\"").as_str()));
        }
    }

    #[test]
    fn headers_the_api_does_not_read_are_not_its_to_bound() {
        assert!(check_sizes(with("x-custom", 1 << 20)).is_ok());
        assert!(check_sizes(|_| None).is_ok());
    }
}
