//! The deployment's knobs (`[vars]` in wrangler.toml, or `--var` in tests), read where they are used.
//! A missing or malformed knob takes its default; none of them can open anything up.

use sema_core::liveness::Staleness;
use worker::Env;

fn int(env: &Env, name: &str) -> Option<i64> {
    env.var(name).ok()?.to_string().trim().parse().ok()
}

/// `RUN_STALE_SEC` (default 120), `RUN_QUEUE_STALE_SEC` (default 3600), `LEASE_ACK_SEC` (default 30).
pub fn staleness(env: &Env) -> Staleness {
    Staleness::from_secs(
        int(env, "RUN_STALE_SEC"),
        int(env, "RUN_QUEUE_STALE_SEC"),
        int(env, "LEASE_ACK_SEC"),
    )
}

/// `SEMA_ADMIT_COMMIT` (default `d1`): `object` lets a session object commit an admission in its
/// own storage and answer before D1 has it (`sema_core::admission::commits_in_object`).
pub fn admit_commit(env: &Env) -> sema_core::admission::CommitPoint {
    let v = env.var("SEMA_ADMIT_COMMIT").ok().map(|v| v.to_string());
    sema_core::admission::CommitPoint::parse(v.as_deref())
}

/// `LEADER_RUN_STALE_MS` (default 24 h): a running leader run older than this is failed.
pub fn leader_run_stale_ms(env: &Env) -> i64 {
    int(env, "LEADER_RUN_STALE_MS")
        .filter(|ms| *ms > 0)
        .unwrap_or(24 * 3_600_000)
}

/// The instance id stored on admitted runs (`INSTANCE_ID`, default `"default"`).
pub fn instance_id(env: &Env) -> String {
    env.var("INSTANCE_ID")
        .map(|v| v.to_string())
        .unwrap_or_else(|_| "default".to_owned())
}

/// `APPROVAL_TIMEOUT_SEC` (default 0 = off): when set, no gate waits longer than this.
pub fn approval_timeout_sec(env: &Env) -> u64 {
    int(env, "APPROVAL_TIMEOUT_SEC")
        .filter(|s| *s > 0)
        .map_or(0, |s| s as u64)
}

/// `STREAM_TICKET_TTL_SEC` (default 60, at most 600): how long a stream ticket opens its stream.
pub fn stream_ticket_ttl_ms(env: &Env) -> i64 {
    sema_core::stream_ticket::ttl_ms(int(env, "STREAM_TICKET_TTL_SEC"))
}

/// `LEADER_ENABLED` (default on): `"false"`, `"0"` or `"off"` turns the leader-run routes off.
pub fn leader_enabled(env: &Env) -> bool {
    env.var("LEADER_ENABLED").map_or(true, |v| {
        !matches!(
            v.to_string().trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "off"
        )
    })
}

/// `RETENTION_DAYS` (default 0 = off): the cron deletes terminal runs last written longer ago.
pub fn retention_days(env: &Env) -> i64 {
    int(env, "RETENTION_DAYS").filter(|d| *d > 0).unwrap_or(0)
}
