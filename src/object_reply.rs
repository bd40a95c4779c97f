//! Reading the messages between the Worker and its objects: small JSON texts. worker's
//! `Response::text` reads a body as a stream, chunk by chunk, each chunk a promise awaited
//! through a Rust future, which a CPU profile of submit → lease put at about 6% of the
//! Worker's isolate's busy time; here the runtime reads the whole body in one call. A call
//! arriving at an object is read as text and parsed by serde_json, rather than by worker's
//! `Request::json` (the runtime's parse, then a walk of the JS object field by field across the
//! wasm boundary).

use wasm_bindgen::JsCast;
use worker::{wasm_bindgen_futures::JsFuture, web_sys, Request, Response};

/// The whole body of `resp`, as text.
pub async fn text(resp: Response) -> worker::Result<String> {
    let raw: web_sys::Response = resp.into();
    let text = JsFuture::from(raw.text()?).await?;
    text.dyn_into::<js_sys::JsString>()
        .map(String::from)
        .map_err(|_| worker::Error::RustError("an object's reply is not text".into()))
}

/// The call an object received in `req`: its body, as JSON.
pub async fn call<T: serde::de::DeserializeOwned>(req: &mut Request) -> worker::Result<T> {
    Ok(sema_core::json::from_text(&req.text().await?)?)
}
