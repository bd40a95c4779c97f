//! The deployment's knobs (`[vars]` in wrangler.toml, or `--var` in tests), read once per isolate
//! into [`Settings`]: a deployment's vars never change under a live isolate (changing one deploys a
//! new version, which new isolates serve), so no request reads them again. A missing or malformed
//! knob takes its default (but `STORE_BACKEND`, which refuses a value it does not know); none of
//! them can open anything up.

use sema_core::{admission::CommitPoint, liveness::Staleness};
use std::{cell::OnceCell, rc::Rc};
use worker::Env;

/// Every knob, as read from the isolate's first `Env`.
#[derive(Debug)]
pub struct Settings {
    /// `RUN_STALE_SEC` (default 120), `RUN_QUEUE_STALE_SEC` (default 3600), `LEASE_ACK_SEC`
    /// (default 30).
    pub staleness: Staleness,
    /// `SEMA_ADMIT_COMMIT` (default `d1`): `object` lets a session object commit an admission in
    /// its own storage and answer before D1 has it (`sema_core::admission::commits_in_object`).
    pub admit_commit: CommitPoint,
    /// `LEADER_RUN_STALE_MS` (default 24 h): a running leader run older than this is failed.
    pub leader_run_stale_ms: i64,
    /// The instance id stored on admitted runs (`INSTANCE_ID`, default `"default"`).
    pub instance_id: String,
    /// `APPROVAL_TIMEOUT_SEC` (default 0 = off): when set, no gate waits longer than this.
    pub approval_timeout_sec: u64,
    /// `STREAM_TICKET_TTL_SEC` (default 60, at most 600): how long a stream ticket opens its stream.
    pub stream_ticket_ttl_ms: i64,
    /// `LEADER_ENABLED` (default on): `"false"`, `"0"` or `"off"` turns the leader-run routes off.
    pub leader_enabled: bool,
    /// `RETENTION_DAYS` (default 0 = off): the cron deletes terminal runs last written longer ago.
    pub retention_days: i64,
    /// `STORE_BACKEND` as set (`store_backend::Backend` decides what it means).
    pub store_backend: String,
    /// `SEMA_TEST_DROP_NOTICES_QUEUE`: a test Worker's knob, never in the repository's config
    /// (`dispatch_do::announce`).
    pub drop_notices_queue: Option<String>,
}

thread_local! {
    static SETTINGS: OnceCell<Rc<Settings>> = const { OnceCell::new() };
}

/// The isolate's settings (read from `env` on the first call).
pub fn settings(env: &Env) -> Rc<Settings> {
    SETTINGS.with(|s| s.get_or_init(|| Rc::new(Settings::read(env))).clone())
}

fn text(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string())
}

fn int(env: &Env, name: &str) -> Option<i64> {
    text(env, name)?.trim().parse().ok()
}

impl Settings {
    fn read(env: &Env) -> Self {
        Self {
            staleness: Staleness::from_secs(
                int(env, "RUN_STALE_SEC"),
                int(env, "RUN_QUEUE_STALE_SEC"),
                int(env, "LEASE_ACK_SEC"),
            ),
            admit_commit: CommitPoint::parse(text(env, "SEMA_ADMIT_COMMIT").as_deref()),
            leader_run_stale_ms: int(env, "LEADER_RUN_STALE_MS")
                .filter(|ms| *ms > 0)
                .unwrap_or(24 * 3_600_000),
            instance_id: text(env, "INSTANCE_ID").unwrap_or_else(|| "default".to_owned()),
            approval_timeout_sec: int(env, "APPROVAL_TIMEOUT_SEC")
                .filter(|s| *s > 0)
                .map_or(0, |s| s as u64),
            stream_ticket_ttl_ms: sema_core::stream_ticket::ttl_ms(int(
                env,
                "STREAM_TICKET_TTL_SEC",
            )),
            leader_enabled: text(env, "LEADER_ENABLED").is_none_or(|v| {
                !matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "false" | "0" | "off"
                )
            }),
            retention_days: int(env, "RETENTION_DAYS").filter(|d| *d > 0).unwrap_or(0),
            store_backend: text(env, "STORE_BACKEND").unwrap_or_default(),
            drop_notices_queue: text(env, "SEMA_TEST_DROP_NOTICES_QUEUE"),
        }
    }
}

/// [`Settings::staleness`].
pub fn staleness(env: &Env) -> Staleness {
    settings(env).staleness
}

/// [`Settings::admit_commit`].
pub fn admit_commit(env: &Env) -> CommitPoint {
    settings(env).admit_commit
}

/// [`Settings::leader_run_stale_ms`].
pub fn leader_run_stale_ms(env: &Env) -> i64 {
    settings(env).leader_run_stale_ms
}

/// [`Settings::instance_id`].
pub fn instance_id(env: &Env) -> String {
    settings(env).instance_id.clone()
}

/// [`Settings::approval_timeout_sec`].
pub fn approval_timeout_sec(env: &Env) -> u64 {
    settings(env).approval_timeout_sec
}

/// [`Settings::stream_ticket_ttl_ms`].
pub fn stream_ticket_ttl_ms(env: &Env) -> i64 {
    settings(env).stream_ticket_ttl_ms
}

/// [`Settings::leader_enabled`].
pub fn leader_enabled(env: &Env) -> bool {
    settings(env).leader_enabled
}

/// [`Settings::retention_days`].
pub fn retention_days(env: &Env) -> i64 {
    settings(env).retention_days
}
