//! The deployment's knobs (`[vars]` in wrangler.toml, or `--var` in tests), read once per isolate
//! into [`Settings`]: a deployment's vars never change under a live isolate (changing one deploys a
//! new version, which new isolates serve), so no request reads them again. A missing or malformed
//! knob takes its default (but `STORE_BACKEND`, which refuses a value it does not know, and
//! `SEMA_AUTH` / `SEMA_TOKENS`, which close the deployment); none of them can open anything up.

use sema_core::{admission::CommitPoint, auth::Auth, liveness::Staleness};
use std::{cell::OnceCell, rc::Rc};
use wasm_bindgen::JsCast;
use worker::Env;

/// Every knob, as read from the isolate's first `Env` (no `Debug`: it holds the token table).
pub struct Settings {
    /// `SEMA_AUTH` and `SEMA_TOKENS`, and what they mean (`sema_core::auth::Auth`; closed unless
    /// configured, which is logged once).
    pub auth: Rc<Auth>,
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

fn int(env: &Env, name: &str) -> Option<i64> {
    text(env, name)?.trim().parse().ok()
}

impl Settings {
    fn read(env: &Env) -> Self {
        let auth = Auth::configure(
            text(env, "SEMA_AUTH").as_deref(),
            tokens_text(env).as_deref(),
        );
        if let Auth::Closed { reason } = &auth {
            worker::console_error!("closed deployment: {reason}");
        }
        Self {
            auth: Rc::new(auth),
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
