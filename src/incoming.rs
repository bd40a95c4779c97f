//! The request as the handlers read it, taken from the runtime's own request rather than worker's
//! `Request`: worker's conversion reads the request's `cf` object on every request (the runtime
//! builds it from JSON on first access), which nothing here uses, and each of its header reads is
//! a crossing of the wasm boundary. Here the method, the URL and every header the API reads
//! (`sema_core::headers::READ_HEADERS`, which the size check reads on every request anyway) come
//! in one crossing, packed as one text (`sema_core::headers::unpack`); another header is read
//! when asked for.

use sema_core::headers::{unpack, Unpacked, READ_HEADERS};
use wasm_bindgen::{prelude::wasm_bindgen, JsValue};
use worker::web_sys;

#[wasm_bindgen(inline_js = "export function read_request(req, names) {
  const h = req.headers;
  let s = req.method + '\\n' + req.url;
  for (let i = 0; i < names.length; i++) {
    const v = h.get(names[i]);
    s += v === null ? '\\n-' : '\\n=' + v;
  }
  return s;
}")]
extern "C" {
    /// `sema_core::headers::Unpacked`'s text of `req`, for the header names in `names`.
    fn read_request(req: &web_sys::Request, names: &JsValue) -> String;
}

thread_local! {
    /// [`READ_HEADERS`]' names as a JavaScript array, built once per isolate.
    static NAMES: JsValue = READ_HEADERS
        .iter()
        .map(|(name, _)| JsValue::from_str(name))
        .collect::<js_sys::Array>()
        .into();
}

pub struct Incoming {
    raw: web_sys::Request,
    packed: String,
    fields: Unpacked,
}

impl Incoming {
    /// The request's method, URL and read headers; `None` if the runtime's text of them is not in
    /// the packed shape (which it always is: see `Unpacked`).
    pub fn new(raw: web_sys::Request) -> Option<Self> {
        let packed = NAMES.with(|names| read_request(&raw, names));
        let fields = unpack(&packed)?;
        Some(Self {
            raw,
            packed,
            fields,
        })
    }

    pub fn method(&self) -> &str {
        &self.packed[self.fields.method.clone()]
    }

    /// The URL as the runtime serialises it (percent-encoded).
    pub fn url(&self) -> &str {
        &self.packed[self.fields.url.clone()]
    }

    pub fn path(&self) -> &str {
        sema_core::list::path_of(self.url())
    }

    /// The value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<String> {
        match READ_HEADERS.iter().position(|(n, _)| *n == name) {
            Some(i) => self.fields.headers[i]
                .clone()
                .map(|r| self.packed[r].to_owned()),
            None => self.raw.headers().get(name).ok().flatten(),
        }
    }

    /// The length in bytes of header `name`'s value, for one of [`READ_HEADERS`] (`None` when
    /// absent, and for any other name).
    pub fn header_len(&self, name: &str) -> Option<usize> {
        let i = READ_HEADERS.iter().position(|(n, _)| *n == name)?;
        self.fields.headers[i].as_ref().map(|r| r.len())
    }

    /// The runtime's request, for reading its body.
    pub fn raw(&self) -> &web_sys::Request {
        &self.raw
    }
}
