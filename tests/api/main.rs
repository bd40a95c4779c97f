//! Black-box tests of the Worker, speaking HTTP to a live `wrangler dev` (local workerd, local D1,
//! local Durable Objects) started by scripts/test. One binary; shared helpers in `helpers.rs`.
// These tests are clients of the Worker, outside it: they read the clock (names, deadlines, seeds),
// which clippy.toml forbids only for the Worker and the core.
#![allow(clippy::disallowed_methods)]

mod admission;
mod bad_input;
mod bounds;
mod cancel;
mod cli_tokens;
mod closed;
mod console;
mod failpoints;
mod helpers;
mod idempotency;
mod leaders;
mod listing;
mod matrix;
mod openapi;
mod principals;
mod roles;
mod sessions;
mod tokens;
