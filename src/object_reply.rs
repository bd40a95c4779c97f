//! The messages between the Worker and its objects: small texts (`sema_core::object_codec`), sent
//! by RPC or, for a call that may stream, in a request to the object's `fetch`. worker's
//! `Response::text` reads a body as a stream, chunk by chunk, each chunk a promise awaited through
//! a Rust future, which a CPU profile of submit → lease put at about 6% of the Worker's isolate's
//! busy time; here the runtime reads the whole body in one call. An RPC call is made in one
//! crossing of the wasm boundary (worker's binding lookup took four, one of them reading the
//! binding's class name back as text, and its stub two more).

use wasm_bindgen::{prelude::wasm_bindgen, JsCast, JsValue};
use worker::{wasm_bindgen_futures::JsFuture, web_sys, Env, Request, Response};

#[wasm_bindgen(
    inline_js = "export function call_object(env, binding, name, method, call, failpoint) {
  const stub = env[binding].getByName(name);
  return failpoint == null ? stub[method](call) : stub[method](call, failpoint);
}"
)]
extern "C" {
    /// Calls RPC `method` of the object named `name` in namespace `binding` with `call` (and
    /// `failpoint`, when armed). Throws when the binding or the method is missing.
    #[wasm_bindgen(catch)]
    fn call_object(
        env: &JsValue,
        binding: &str,
        name: &str,
        method: &str,
        call: &str,
        failpoint: Option<&str>,
    ) -> Result<js_sys::Promise, JsValue>;
}

/// Where an RPC call goes: the namespace's binding, the object's name and its method.
pub struct Target<'a> {
    pub binding: &'a str,
    pub name: &'a str,
    pub method: &'a str,
}

/// Sends `call` to `to` by RPC (with the request-armed `failpoint`, if any) and returns the reply's
/// text, its meter line charged to `meter` ([`rpc_answer`]).
pub async fn rpc(
    env: &Env,
    meter: &crate::d1::Meter,
    to: Target<'_>,
    call: &str,
    failpoint: Option<&str>,
) -> Result<String, crate::failure::Failure> {
    let called = call_object(env, to.binding, to.name, to.method, call, failpoint);
    rpc_answer(meter, called).await
}

/// The whole body of `resp`, as text.
pub async fn text(resp: Response) -> worker::Result<String> {
    let raw: web_sys::Response = resp.into();
    let text = JsFuture::from(raw.text()?).await?;
    text.dyn_into::<js_sys::JsString>()
        .map(String::from)
        .map_err(|_| worker::Error::RustError("an object's reply is not text".into()))
}

/// The call an object received in `req`: its body, read as [`sema_core::object_codec`]'s text.
pub async fn call<T: sema_core::object_codec::Codec>(req: &mut Request) -> worker::Result<T> {
    sema_core::object_codec::decode(&req.text().await?)
        .map_err(|e| worker::Error::RustError(e.to_string()))
}

/// What an object's RPC method answered (`sema_core::object_rpc`): its meter line is charged to
/// `meter`, and the reply's text returned. `called` is the method's call: it throws when the stub
/// cannot be called, and its promise rejects when the runtime failed the call.
async fn rpc_answer(
    meter: &crate::d1::Meter,
    called: Result<js_sys::Promise, wasm_bindgen::JsValue>,
) -> Result<String, crate::failure::Failure> {
    use crate::failure::Failure;
    let promise = called.map_err(worker::Error::from)?;
    let text = JsFuture::from(promise)
        .await
        .map_err(worker::Error::from)?
        .as_string()
        .ok_or_else(|| Failure::Infra("an object's RPC answer is not text".into()))?;
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
/// object's meter line).
pub fn rpc_reply<R: sema_core::object_codec::Codec>(
    meter: &crate::d1::Meter,
    reply: &R,
) -> Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue> {
    let text = sema_core::object_codec::encode(reply);
    Ok(wasm_bindgen::JsValue::from_str(
        &sema_core::object_rpc::answer(&meter.header(), &text),
    ))
}
