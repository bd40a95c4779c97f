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

/// Checks every header in [`READ_HEADERS`] through `len` (the length in bytes of a header's value
/// by lower-case name, `None` when absent).
pub fn check_sizes<F: Fn(&str) -> Option<usize>>(len: F) -> Result<(), ApiError> {
    for (name, max) in READ_HEADERS {
        if len(name).is_some_and(|n| n > max) {
            return Err(ApiError::header_too_large(name, max));
        }
    }
    Ok(())
}

/// The method, the URL and the values of [`READ_HEADERS`] of one request, as the Worker reads them in
/// one crossing of the wasm boundary: `METHOD \n URL`, then per header of [`READ_HEADERS`], in its
/// order, `\n-` (absent) or `\n=` and the value. No field can hold a line feed: a method is a token,
/// a serialised URL has none (the URL parser drops them), and a header value with one is refused
/// by the runtime before a handler runs. Each field is a byte range of the packed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    pub method: std::ops::Range<usize>,
    pub url: std::ops::Range<usize>,
    pub headers: [Option<std::ops::Range<usize>>; READ_HEADERS.len()],
}

/// Reads the packed request line and headers (see [`Unpacked`]); `None` if the text is not in that
/// shape (a field missing or extra, a header without its marker).
pub fn unpack(packed: &str) -> Option<Unpacked> {
    let mut at = 0;
    let mut fields = packed.split('\n').map(|field| {
        let range = at..at + field.len();
        at = range.end + 1;
        (field, range)
    });
    let (_, method) = fields.next()?;
    let (_, url) = fields.next()?;
    let mut headers: [Option<std::ops::Range<usize>>; READ_HEADERS.len()] = Default::default();
    for slot in &mut headers {
        let (field, range) = fields.next()?;
        *slot = match field.as_bytes().first()? {
            b'-' if field.len() == 1 => None,
            b'=' => Some(range.start + 1..range.end),
            _ => return None,
        };
    }
    match fields.next() {
        Some(_) => None,
        None => Some(Unpacked {
            method,
            url,
            headers,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn with(name: &'static str, len: usize) -> impl Fn(&str) -> Option<usize> {
        move |n: &str| (n == name).then_some(len)
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

    /// What the Worker's snippet (`src/incoming.rs`) writes, here for the tests.
    fn pack(method: &str, url: &str, get: impl Fn(&str) -> Option<&'static str>) -> String {
        let mut s = format!("{method}\n{url}");
        for (name, _) in READ_HEADERS {
            match get(name) {
                Some(v) => s.push_str(&format!("\n={v}")),
                None => s.push_str("\n-"),
            }
        }
        s
    }

    #[test]
    fn a_packed_request_unpacks_to_its_method_url_and_each_header_present_or_absent() {
        let text = pack("POST", "https://h/v1/runs?x=1", |n| match n {
            "authorization" => Some("Bearer t=-"),
            "idempotency-key" => Some(""),
            "content-type" => Some("application/json"),
            _ => None,
        });
        let u = unpack(&text).unwrap();
        assert_eq!(&text[u.method.clone()], "POST");
        assert_eq!(&text[u.url.clone()], "https://h/v1/runs?x=1");
        let got: Vec<Option<&str>> = u
            .headers
            .iter()
            .map(|r| r.clone().map(|r| &text[r]))
            .collect();
        let want: Vec<Option<&str>> = READ_HEADERS
            .iter()
            .map(|(n, _)| match *n {
                "authorization" => Some("Bearer t=-"),
                "idempotency-key" => Some(""),
                "content-type" => Some("application/json"),
                _ => None,
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn packed_text_with_a_field_missing_extra_or_unmarked_is_not_read() {
        let whole = pack("GET", "https://h/", |_| None);
        assert!(unpack(&whole).is_some());
        let missing = whole.rsplit_once('\n').unwrap().0;
        assert_eq!(unpack(missing), None);
        assert_eq!(unpack(&format!("{whole}\n-")), None);
        assert_eq!(unpack(&whole.replacen("\n-", "\nx", 1)), None);
        assert_eq!(unpack(&whole.replacen("\n-", "\n--", 1)), None);
        assert_eq!(unpack(&whole.replacen("\n-", "\n", 1)), None);
        assert_eq!(unpack(""), None);
    }
}
