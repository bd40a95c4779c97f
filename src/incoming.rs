//! The request as the handlers read it, taken from the runtime's own request rather than worker's
//! `Request`: worker's conversion reads the request's `cf` object on every request (the runtime
//! builds it from JSON on first access), which nothing here uses, and each of its header reads is
//! a crossing of the wasm boundary. Here the method and the URL are read once, and so is every
//! header the API reads (`sema_core::headers::READ_HEADERS`, which the size check reads on every
//! request anyway); another header is read when asked for.

use sema_core::headers::READ_HEADERS;
use worker::web_sys;

pub struct Incoming {
    raw: web_sys::Request,
    headers: web_sys::Headers,
    method: String,
    url: String,
    /// The values of [`READ_HEADERS`], in its order.
    read: [Option<String>; READ_HEADERS.len()],
}

impl Incoming {
    pub fn new(raw: web_sys::Request) -> Self {
        let headers = raw.headers();
        let read = READ_HEADERS.map(|(name, _)| headers.get(name).ok().flatten());
        Self {
            method: raw.method(),
            url: raw.url(),
            raw,
            headers,
            read,
        }
    }

    pub fn method(&self) -> &str {
        &self.method
    }

    /// The URL as the runtime serialises it (percent-encoded).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn path(&self) -> &str {
        sema_core::list::path_of(&self.url)
    }

    /// The value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<String> {
        match READ_HEADERS.iter().position(|(n, _)| *n == name) {
            Some(i) => self.read[i].clone(),
            None => self.headers.get(name).ok().flatten(),
        }
    }

    /// The runtime's request, for reading its body.
    pub fn raw(&self) -> &web_sys::Request {
        &self.raw
    }
}
