//! Fault tests of the Worker under the real runtime. Each test starts its own `wrangler dev` (local
//! workerd, local D1 and Durable Objects on a fresh `--persist-to` directory under
//! `SEMA_FAULTS_DIR`), so scripts/test runs them one at a time (`--test-threads=1`):
//! - `kill.rs`: the runtime SIGKILLed at named steps (the Worker's test-only failpoints), restarted
//!   on the same state, one reaper tick, then the invariants and a session that is not stuck;
//! - `interleavings.rs`: randomized trials of concurrent submit / cancel / lease / append / park /
//!   decide / finish / reap on a few sessions each, every trial checked against the single-active
//!   and write-once invariants by reading D1 afterwards (`SEMA_TEST_SEED` replays the choices,
//!   `SEMA_CHAOS_TRIALS` sets the count, default 10,000);
//! - `late_lease.rs`: a runner that dies right after leasing a run that waited past its session
//!   object's backed-off looks is reaped by the object's alarm at its stale deadline.
// These tests are clients of the Worker, outside it: they read the clock (names, seeds, durations),
// which clippy.toml forbids only for the Worker and the core.
#![allow(clippy::disallowed_methods)]

mod harness;
mod interleavings;
mod invariants;
mod kill;
mod late_lease;
