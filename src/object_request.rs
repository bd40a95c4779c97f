//! The requests the Worker sends to an object's `fetch`: a session call that may open a stream, and
//! a runner's WebSocket forwarded to its queue's dispatcher (every other call goes by RPC). Built on
//! the runtime's own `RequestInit`: worker's carries a `cf` member, and converting it links
//! serde_wasm_bindgen's serialisers of the `cf` options (image resizing and the like) into the
//! module for a member these requests never set.

use wasm_bindgen::JsValue;
use worker::{web_sys, Headers, Request};

/// A request of `method` to `url` (an object's own address space: only its path and query are
/// read), with `headers` and a text `body` when given.
pub fn new(
    method: &str,
    url: &str,
    headers: Option<&Headers>,
    body: Option<&str>,
) -> worker::Result<Request> {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    if let Some(headers) = headers {
        init.set_headers(headers.as_ref());
    }
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
    }
    web_sys::Request::new_with_str_and_init(url, &init)
        .map(Request::from)
        .map_err(|e| {
            worker::Error::JsError(
                e.as_string()
                    .unwrap_or_else(|| format!("a request to {url} could not be built")),
            )
        })
}
