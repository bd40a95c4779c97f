//! Listing parameters: query-string parsing, limits and keyset cursors.
//!
//! A cursor is opaque to clients: hex of `<created_at>:<task_id>` of the last row of a page. The next
//! page holds rows strictly older in `(created_at, task_id)` order, so pages never overlap or skip,
//! even while new runs arrive.

use crate::{error::ApiError, ids::is_safe_id};

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;

/// The query of a request URL as the runtime serialises it (WHATWG): what follows the first `?`, up
/// to a `#` (a request URL carries none, but a fragment is never part of the query); `""` when there
/// is none. The text stays percent-encoded, for [`parse_query`]. Read without a URL parser, whose
/// tables would weigh in the Worker's wasm for a split.
pub fn query_of(url: &str) -> &str {
    let url = url.split_once('#').map_or(url, |(u, _)| u);
    url.split_once('?').map_or("", |(_, q)| q)
}

/// The path of a request URL as the runtime serialises it (WHATWG, a special scheme): from the first
/// `/` after the host to the first `?` or `#` (within the path both are percent-encoded); `/` when
/// the URL has no path, and the text itself (made absolute) when it has no scheme. Still
/// percent-encoded, as the route table matches it.
pub fn path_of(url: &str) -> &str {
    let Some(host_at) = url.find("://").map(|i| i + 3) else {
        return url
            .split(['?', '#'])
            .next()
            .filter(|p| p.starts_with('/'))
            .unwrap_or("/");
    };
    match url[host_at..].find('/') {
        Some(i) => {
            let path = &url[host_at + i..];
            &path[..path.find(['?', '#']).unwrap_or(path.len())]
        }
        None => "/",
    }
}

/// Splits and percent-decodes a query string (`+` is a space). Invalid escapes are refused.
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

// Hand-written on purpose: `percent-encoding` and `form_urlencoded` pass a malformed escape through
// literally (and decode invalid UTF-8 lossily), while this API refuses both with a 400; the strict
// decoder is twenty lines and adds nothing to the wasm.
fn percent_decode(s: &str) -> Result<String, ApiError> {
    let bad = || ApiError::invalid_request("query string has an invalid percent-escape");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3).ok_or_else(bad)?;
                out.push(crate::hex::decode(hex).ok_or_else(bad)?[0]);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Parameters of `GET /v1/runs`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunListQuery {
    pub session_id: Option<String>,
    pub status: Option<String>,
    pub limit: i64,
    pub cursor: Option<(i64, String)>,
}

impl RunListQuery {
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let mut q = Self {
            limit: DEFAULT_LIMIT,
            ..Self::default()
        };
        for (k, v) in parse_query(query)? {
            match k.as_str() {
                "sessionId" => {
                    if !is_safe_id(&v) {
                        return Err(ApiError::invalid_field("sessionId", crate::ids::SAFE_ID_RULE));
                    }
                    q.session_id = Some(v);
                }
                "status" => {
                    if v.is_empty() || v.len() > 16 || !v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                        return Err(ApiError::invalid_field("status", "must be a status word"));
                    }
                    q.status = Some(v);
                }
                "limit" => q.limit = parse_limit(&v)?,
                "cursor" => q.cursor = Some(decode_cursor(&v)?),
                other => {
                    return Err(ApiError::invalid_request(format!(
                        "unknown query parameter `{other}`; expected sessionId, status, limit or cursor"
                    )))
                }
            }
        }
        Ok(q)
    }
}

/// A listing's `limit` parameter: an integer in `1..=MAX_LIMIT`, else a 400 naming the field.
pub fn parse_limit(v: &str) -> Result<i64, ApiError> {
    v.parse::<i64>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            ApiError::invalid_field("limit", format!("must be an integer in 1..={MAX_LIMIT}"))
        })
}

/// Cuts a page read with `limit + 1` rows down to `limit`; the cursor after its last row (from
/// `cursor_of`) when the extra row showed that more follow.
pub fn next_page<T>(
    rows: &mut Vec<T>,
    limit: i64,
    cursor_of: impl Fn(&T) -> String,
) -> Option<String> {
    let more = rows.len() as i64 > limit;
    rows.truncate(limit.max(0) as usize);
    more.then(|| rows.last().map(cursor_of)).flatten()
}

/// Encodes the position after `(created_at, task_id)`.
pub fn encode_cursor(created_at: i64, task_id: &str) -> String {
    crate::hex::encode(format!("{created_at}:{task_id}").as_bytes())
}

pub fn decode_cursor(cursor: &str) -> Result<(i64, String), ApiError> {
    let bad = || ApiError::invalid_field("cursor", "is not a cursor this server issued");
    let raw = crate::hex::decode(cursor).ok_or_else(bad)?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    let at: i64 = at.parse().map_err(|_| bad())?;
    if !(0..=crate::sql::JS_SAFE_INT).contains(&at) || !is_safe_id(id) {
        return Err(bad());
    }
    Ok((at, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_path_runs_from_the_host_to_its_query_or_fragment() {
        assert_eq!(path_of("https://h.example/v1/runs?limit=5"), "/v1/runs");
        assert_eq!(
            path_of("http://127.0.0.1:8787/v1/runs/a%3Fb#x"),
            "/v1/runs/a%3Fb"
        );
        assert_eq!(path_of("https://h.example"), "/");
        assert_eq!(path_of("https://h.example?q=1"), "/");
        assert_eq!(path_of("https://h.example/"), "/");
        assert_eq!(path_of("/v1/runs?x"), "/v1/runs");
    }

    #[test]
    fn the_query_of_a_url_is_what_follows_the_first_question_mark_up_to_a_fragment() {
        assert_eq!(query_of("https://h/v1/runs"), "");
        assert_eq!(query_of("https://h/v1/runs?"), "");
        assert_eq!(
            query_of("https://h/v1/runs?sessionId=a%3Fb&limit=5"),
            "sessionId=a%3Fb&limit=5"
        );
        assert_eq!(query_of("https://h/p?a=1?b#frag?c"), "a=1?b");
        assert_eq!(query_of("https://h/p#frag?c"), "");
        assert_eq!(
            parse_query(query_of("http://x/connect?queue=q%20one&runnerId=r+1")).unwrap(),
            vec![
                ("queue".to_owned(), "q one".to_owned()),
                ("runnerId".to_owned(), "r 1".to_owned())
            ]
        );
    }

    #[test]
    fn a_cursor_beyond_2_pow_53_is_refused_not_passed_to_the_database() {
        let c = crate::hex::encode(format!("{}:task-1", 1i64 << 53).as_bytes());
        assert_eq!(decode_cursor(&c).unwrap_err().status(), 400);
    }

    #[test]
    fn cursors_round_trip_and_foreign_cursors_are_refused() {
        let c = encode_cursor(1_700_000_000_000, "task-1");
        assert_eq!(
            decode_cursor(&c).unwrap(),
            (1_700_000_000_000, "task-1".into())
        );
        for bad in [
            "zz",
            "",
            &crate::hex::encode(b"12"),
            &crate::hex::encode(b"x:t"),
            &crate::hex::encode(b"1:a/b"),
        ] {
            assert_eq!(decode_cursor(bad).unwrap_err().status(), 400, "{bad}");
        }
    }

    #[test]
    fn list_queries_parse_filters_and_bound_the_limit() {
        let q = RunListQuery::parse("sessionId=s%2D1&status=running&limit=10").unwrap();
        assert_eq!(q.session_id.as_deref(), Some("s-1"));
        assert_eq!((q.status.as_deref(), q.limit), (Some("running"), 10));
        assert_eq!(RunListQuery::parse("").unwrap().limit, DEFAULT_LIMIT);
        for bad in [
            "limit=0",
            "limit=201",
            "limit=x",
            "sessionId=a/b",
            "foo=1",
            "status=%zz",
        ] {
            assert_eq!(RunListQuery::parse(bad).unwrap_err().status(), 400, "{bad}");
        }
    }
}
