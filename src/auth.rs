//! Principal resolution for one request, from the `SEMA_TOKENS` secret/var and the request headers.

use sema_core::{auth::Principal, auth::TokenTable, ApiError};
use worker::{Env, Request};

/// Resolves the caller. A malformed `SEMA_TOKENS` is an operator mistake: refuse every request (500,
/// logged) rather than fall back to trusting headers.
pub fn principal(req: &Request, env: &Env) -> Result<Principal, crate::failure::Failure> {
    let configured = env
        .secret("SEMA_TOKENS")
        .map(|s| s.to_string())
        .or_else(|_| env.var("SEMA_TOKENS").map(|v| v.to_string()))
        .ok();
    let table = TokenTable::parse(configured.as_deref()).map_err(crate::failure::Failure::Infra)?;
    let header = |name: &str| req.headers().get(name).ok().flatten();
    table
        .resolve(
            header("authorization").as_deref(),
            header("x-sema-principal").as_deref(),
            header("x-sema-role").as_deref(),
        )
        .map_err(|e: ApiError| e.into())
}
