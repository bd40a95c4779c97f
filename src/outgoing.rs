//! The Worker's response, as handlers return it and as it is handed to the runtime. A response
//! whose status, headers and body are known in full (every JSON answer, a 204) is built by
//! the runtime in one crossing of the wasm boundary: the headers packed as one text, the body as
//! bytes the runtime copies. worker's `Response` took a crossing per header, one for its headers
//! object, and four more for its init and body. A response the runtime or an object built (a
//! session's SSE stream, the dispatcher's WebSocket upgrade) is passed through as it is.

use crate::d1::METER_HEADER;
use std::borrow::Cow;
use wasm_bindgen::{prelude::wasm_bindgen, JsValue};
use worker::{web_sys, Headers};

#[wasm_bindgen(inline_js = "export function fixed_response(status, body, headers) {
  const h = new Headers();
  const p = headers.split('\\n');
  for (let i = 0; i + 1 < p.length; i += 2) h.append(p[i], p[i + 1]);
  return new Response(body.length === 0 ? null : body.slice(), { status, headers: h });
}
export function streamed_response(body, headers) {
  const unpacked = fixed_response(200, new Uint8Array(0), headers).headers;
  return new Response(body, { status: 200, headers: unpacked });
}")]
extern "C" {
    /// A response of `status` with `body` (copied; none when empty) and `headers` (`name\nvalue\n`
    /// per header). Throws only for a status or header the runtime refuses, none of ours.
    #[wasm_bindgen(catch)]
    fn fixed_response(
        status: u16,
        body: &[u8],
        headers: &str,
    ) -> Result<web_sys::Response, JsValue>;

    /// A 200 passing `body` (a stream) on, with `headers` unpacked as [`fixed_response`] unpacks
    /// them.
    #[wasm_bindgen(catch)]
    fn streamed_response(body: &JsValue, headers: &str) -> Result<web_sys::Response, JsValue>;
}

const JSON_HEADERS: &str =
    "content-type\napplication/json; charset=utf-8\ncache-control\nno-store\n";

pub enum Outgoing {
    /// Known in full: built in one crossing. `headers` holds `name\nvalue\n` per header.
    Fixed {
        status: u16,
        headers: String,
        body: Cow<'static, str>,
    },
    /// Built by the runtime or an object: a stream or a WebSocket upgrade, passed through.
    Built(worker::Response),
}

impl From<worker::Response> for Outgoing {
    fn from(resp: worker::Response) -> Self {
        Self::Built(resp)
    }
}

impl Outgoing {
    /// A JSON response with `status` and a body already serialised, never cached.
    pub fn json(status: u16, body: String) -> Self {
        Self::Fixed {
            status,
            headers: JSON_HEADERS.to_owned(),
            body: Cow::Owned(body),
        }
    }

    /// A 200 passing `body`, a stream the runtime gave us (a static file's), on with `headers`.
    /// Fails only if the runtime refuses a header (none of ours).
    pub fn streamed(body: &JsValue, headers: &[(&str, &str)]) -> Result<Self, JsValue> {
        let mut packed = String::new();
        for (name, value) in headers {
            push_header(&mut packed, name, value);
        }
        Ok(Self::Built(streamed_response(body, &packed)?.into()))
    }

    /// A response of `status` with no body and no headers (a 204).
    pub fn empty(status: u16) -> Self {
        Self::Fixed {
            status,
            headers: String::new(),
            body: Cow::Borrowed(""),
        }
    }

    /// The response with header `name` set to `value` (added to a fixed one: every name is set
    /// once; a value with a line break, which no header of ours has, is not added).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        match &mut self {
            Self::Fixed { headers, .. } => push_header(headers, name, value),
            Self::Built(resp) => {
                let _ = resp.headers().set(name, value);
            }
        }
        self
    }

    pub fn status(&self) -> u16 {
        match self {
            Self::Fixed { status, .. } => *status,
            Self::Built(resp) => resp.status_code(),
        }
    }

    /// As worker's response, for an object's `fetch` (no meter line: an object's cost is reported
    /// by the request that called it).
    pub fn into_response(self) -> worker::Result<worker::Response> {
        match self {
            Self::Fixed {
                status,
                headers,
                body,
            } => Ok(fixed_response(status, body.as_bytes(), &headers)?.into()),
            Self::Built(resp) => Ok(resp),
        }
    }

    /// The runtime's response, with the request's D1 meter line (`meter`) as [`METER_HEADER`].
    /// Fails only if the runtime refuses a fixed response's status or a header (none of ours).
    pub fn into_raw(self, meter: &str) -> Result<web_sys::Response, JsValue> {
        match self {
            Self::Fixed {
                status,
                mut headers,
                body,
            } => {
                push_header(&mut headers, METER_HEADER, meter);
                fixed_response(status, body.as_bytes(), &headers)
            }
            Self::Built(resp) => {
                // One an object passed on (a session's stream, the dispatcher's WebSocket upgrade)
                // has immutable headers (setting one fails), so they are copied.
                if resp.headers().set(METER_HEADER, meter).is_ok() {
                    return Ok(resp.into());
                }
                let headers = Headers::new();
                for (k, v) in resp.headers().entries() {
                    let _ = headers.set(&k, &v);
                }
                let _ = headers.set(METER_HEADER, meter);
                Ok(resp.with_headers(headers).into())
            }
        }
    }
}

/// Adds `name: value` to packed `headers` (`name\nvalue\n`); a value with a line break, which no
/// header of ours has, is left out rather than split.
fn push_header(headers: &mut String, name: &str, value: &str) {
    if !value.contains(['\n', '\r']) {
        for part in [name, "\n", value, "\n"] {
            headers.push_str(part);
        }
    }
}
