//! Black-box tests of runs that really execute: the reference runner (`sema-runner`, a separate
//! process) against a dedicated Worker (`SEMA_RUNNER_URL`), with SSE clients. The tests run one at a
//! time (scripts/test passes `--test-threads=1`): runners lease any unheld run, so each test owns the
//! whole server while it runs and leaves every run it made terminal.
// These tests are clients of the Worker, outside it: they read the clock (names, deadlines, seeds),
// which clippy.toml forbids only for the Worker and the core.
#![allow(clippy::disallowed_methods)]

#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;
mod sse;

mod bounds;
mod cli;
mod execution;
mod gates;
mod heal;
mod leaders;
mod protocol;
mod queues;
mod tasks;
mod wire;
