//! Principal resolution for one request, from the deployment's auth configuration (`SEMA_AUTH`,
//! `SEMA_TOKENS`) and the request's headers. Closed unless configured: see `sema_core::auth::Auth`.

use crate::failure::Failure;
use sema_core::auth::{Auth, Principal};
use std::{cell::OnceCell, rc::Rc};
use wasm_bindgen::JsCast;
use worker::Env;

thread_local! {
    /// The configuration and what it means, read once per isolate (as `config::Settings`: a
    /// secret or var changed deploys a new version, which new isolates serve).
    static CONFIGURED: OnceCell<Rc<Auth>> = const { OnceCell::new() };
}

/// `SEMA_TOKENS` as text: a secret or a string var holds the JSON; a TOML table (`[vars.SEMA_TOKENS]`)
/// arrives as an object, taken as the same table.
fn tokens_text(env: &Env) -> Option<String> {
    if let Ok(s) = env.secret("SEMA_TOKENS") {
        return Some(s.to_string());
    }
    if let Ok(v) = env.var("SEMA_TOKENS") {
        return Some(v.to_string());
    }
    let value = js_sys::Reflect::get(env, &"SEMA_TOKENS".into()).ok()?;
    if value.is_undefined() {
        return None;
    }
    // A table (a plain object), or a TOML array, number or boolean: the runtime's JSON text of it,
    // which the table's parse then judges (worker's `object_var` walked it across the boundary
    // through serde_wasm_bindgen, only for it to be written back as text here). Any other object
    // is a binding of that name, not a table: read as `null`, which the parse refuses, and never
    // stringified (an RPC binding answers every property, `toJSON` included, with a call).
    let plain = value
        .dyn_ref::<js_sys::Object>()
        .is_none_or(|o| js_sys::Array::is_array(o) || o.constructor().name() == "Object");
    if !plain {
        return Some("null".into());
    }
    js_sys::JSON::stringify(&value).ok()?.as_string()
}

fn auth(env: &Env) -> Rc<Auth> {
    CONFIGURED.with(|c| {
        c.get_or_init(|| {
            let mode = env.var("SEMA_AUTH").ok().map(|v| v.to_string());
            let auth = Auth::configure(mode.as_deref(), tokens_text(env).as_deref());
            if let Auth::Closed { reason } = &auth {
                worker::console_error!("closed deployment: {reason}");
            }
            Rc::new(auth)
        })
        .clone()
    })
}

/// Resolves the caller of `req`.
pub fn principal(req: &crate::incoming::Incoming, env: &Env) -> Result<Principal, Failure> {
    let header = |name: &str| req.header(name);
    Ok(auth(env).resolve(
        header("authorization").as_deref(),
        header("x-sema-principal").as_deref(),
        header("x-sema-role").as_deref(),
    )?)
}

/// Refuses like every authenticated route on a closed deployment (`503 auth.not_configured`): for
/// the one route that authenticates by a stream ticket instead of a header.
pub fn ensure_open(env: &Env) -> Result<(), Failure> {
    match auth(env).as_ref() {
        Auth::Closed { reason } => Err(sema_core::auth::not_configured(reason).into()),
        Auth::Local | Auth::Tokens(_) => Ok(()),
    }
}
