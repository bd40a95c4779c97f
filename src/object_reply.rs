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

/// What an object's RPC method answered (`sema_core::object_rpc`): its meter line is charged to
/// `meter`, and the reply's JSON returned. `called` is the method's call: it throws when the stub
/// cannot be called, and its promise rejects when the runtime failed the call.
pub async fn rpc_answer(
    meter: &crate::d1::Meter,
    called: Result<js_sys::Promise, wasm_bindgen::JsValue>,
) -> Result<String, crate::failure::Failure> {
    use crate::failure::Failure;
    let promise = called.map_err(worker::Error::from)?;
    let text = JsFuture::from(promise)
        .await
        .map_err(worker::Error::from)?
        .dyn_into::<js_sys::JsString>()
        .map(String::from)
        .map_err(|_| Failure::Infra("an object's RPC answer is not text".into()))?;
    let Some((line, reply)) = sema_core::object_rpc::split(&text) else {
        return Err(Failure::Infra(
            "an object's RPC answer has no meter line".into(),
        ));
    };
    // The object's D1 cost is part of the calling request's.
    meter.add_header(line);
    Ok(reply.to_owned())
}

/// What an object's RPC method resolves to for `reply` (`sema_core::object_rpc::answer`, with the
/// object's meter line); it rejects only when the reply cannot be written as JSON.
pub fn rpc_reply<R: serde::Serialize>(
    meter: &crate::d1::Meter,
    reply: &R,
) -> Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue> {
    let json = serde_json::to_string(reply)
        .map_err(|e| wasm_bindgen::JsValue::from_str(&e.to_string()))?;
    Ok(wasm_bindgen::JsValue::from_str(
        &sema_core::object_rpc::answer(&meter.header(), &json),
    ))
}
