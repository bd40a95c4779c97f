//! An object's own storage and a hibernating socket's note, as text, through one JavaScript
//! snippet. Every value the objects keep is a JSON text the core wrote (session state, stream
//! tickets, socket notes), so the runtime is handed a string and hands one back: worker's typed
//! `Storage::get`/`put`, `set_alarm_with_options` and socket attachments convert through
//! serde-wasm-bindgen, which linked that crate, its string cache and float formatting into the
//! module for these few calls ("Size and start").

use crate::failure::{js_text, Failure};
use wasm_bindgen::{prelude::wasm_bindgen, JsValue};
use worker::{wasm_bindgen_futures::JsFuture, worker_sys::DurableObjectStorage, State, WebSocket};

#[wasm_bindgen(inline_js = "export function storage_get(s, key) {
  return s.get(key);
}
export function storage_put(s, key, text, unconfirmed) {
  return s.put(key, text, { allowUnconfirmed: unconfirmed });
}
export function storage_set_alarm(s, at, unconfirmed) {
  return s.setAlarm(at, { allowUnconfirmed: unconfirmed });
}
export function keep_text(ws, text) {
  ws.serializeAttachment(text);
}
export function kept_text(ws) {
  const a = ws.deserializeAttachment();
  return typeof a === 'string' ? a : undefined;
}")]
extern "C" {
    #[wasm_bindgen(catch)]
    fn storage_get(s: &JsValue, key: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn storage_put(
        s: &JsValue,
        key: &str,
        text: &str,
        unconfirmed: bool,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn storage_set_alarm(
        s: &JsValue,
        at: f64,
        unconfirmed: bool,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn keep_text(ws: &JsValue, text: &str) -> Result<(), JsValue>;
    #[wasm_bindgen(catch)]
    fn kept_text(ws: &JsValue) -> Result<Option<String>, JsValue>;
}

/// When a write lets the object's output go.
#[derive(Clone, Copy)]
pub enum Durability {
    /// The runtime's default: replies and outgoing calls wait until the write is durable.
    Confirmed,
    /// Nothing waits for it (`allowUnconfirmed`): the write follows a record kept elsewhere (a D1
    /// commit), or losing it costs only a later look (an alarm set early again).
    Unconfirmed,
}

impl Durability {
    /// The runtime's `allowUnconfirmed` for this durability.
    fn unconfirmed(self) -> bool {
        matches!(self, Self::Unconfirmed)
    }
}

/// An object's storage: string values under string keys, and its alarm.
pub struct ObjectStorage(JsValue);

impl ObjectStorage {
    /// The storage of the object whose `state` this is, beside the state (worker's `State` hands
    /// out its runtime object by value only). Should the runtime refuse it, every call below
    /// fails (as a failure of ours), never the object's construction.
    pub fn of(state: State) -> (State, Self) {
        let raw = state._inner();
        let storage: Option<DurableObjectStorage> = raw.storage().ok();
        let storage = Self(storage.map_or(JsValue::UNDEFINED, JsValue::from));
        (State::from(raw), storage)
    }

    /// The text under `key` (`None`: nothing, or a value that is not text).
    pub async fn get(&self, key: &str) -> Result<Option<String>, Failure> {
        let value = settle(storage_get(&self.0, key), "storage get").await?;
        Ok(value.as_string())
    }

    /// Writes `text` under `key`.
    pub async fn put(&self, key: &str, text: &str, durability: Durability) -> Result<(), Failure> {
        let put = storage_put(&self.0, key, text, durability.unconfirmed());
        settle(put, "storage put").await?;
        Ok(())
    }

    /// Sets the alarm at `at_ms` (milliseconds since the epoch), replacing any set before.
    pub async fn set_alarm(&self, at_ms: i64, durability: Durability) -> Result<(), Failure> {
        let promise = storage_set_alarm(&self.0, at_ms as f64, durability.unconfirmed());
        settle(promise, "setting the alarm").await?;
        Ok(())
    }
}

async fn settle(promise: Result<js_sys::Promise, JsValue>, what: &str) -> Result<JsValue, Failure> {
    let awaited = match promise {
        Ok(p) => JsFuture::from(p).await,
        Err(e) => Err(e),
    };
    awaited.map_err(|e| Failure::Infra(format!("{what}: {}", js_text(&e))))
}

/// Keeps `text` on `ws` (it survives hibernation).
pub fn keep_on_socket(ws: &WebSocket, text: &str) -> Result<(), Failure> {
    let raw: &worker::web_sys::WebSocket = ws.as_ref();
    keep_text(raw, text).map_err(|e| Failure::Infra(format!("socket note: {}", js_text(&e))))
}

/// The text kept on `ws` (`None`: none, or not text).
pub fn kept_on_socket(ws: &WebSocket) -> Option<String> {
    let raw: &worker::web_sys::WebSocket = ws.as_ref();
    kept_text(raw).ok().flatten()
}
