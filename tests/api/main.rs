//! Black-box tests of the Worker, speaking HTTP to a live `wrangler dev` (local workerd, local D1,
//! local Durable Objects) started by scripts/test. One binary; shared helpers in `helpers.rs`.

mod admission;
mod bad_input;
mod cancel;
mod helpers;
mod idempotency;
mod listing;
mod principals;
mod roles;
mod tokens;
