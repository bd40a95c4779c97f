//! Principal resolution for one request, from the deployment's auth configuration (`SEMA_AUTH`,
//! `SEMA_TOKENS`) and the request's headers. Closed unless configured: see `sema_core::auth::Auth`.

use crate::failure::Failure;
use sema_core::auth::{Auth, Principal};
use std::rc::Rc;
use worker::Env;

/// The configuration and what it means (`config::Settings::auth`, read once per isolate).
fn auth(env: &Env) -> Rc<Auth> {
    crate::config::settings(env).auth.clone()
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
