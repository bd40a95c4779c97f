//! Why a request (or a session object's call) did not succeed: a refusal for the caller, or a failure
//! of ours. Shared by the HTTP layer and the session object; only `http/error.rs` turns it into HTTP.

use sema_core::{session_protocol::SessionReply, sql::DbError, store::StoreError, ApiError};

#[derive(Debug)]
pub enum Failure {
    /// A caller-facing refusal: its status and body come from the core.
    Api(ApiError),
    /// Ours: logged once, answered with an opaque 500.
    Infra(String),
}

/// As logged: a refusal's status, code and message, or our cause.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Api(e) => write!(f, "refused: {e}"),
            Self::Infra(cause) => f.write_str(cause),
        }
    }
}

impl Failure {
    /// The session object's reply for this failure.
    pub fn into_reply(self) -> SessionReply {
        match self {
            Self::Api(e) => SessionReply::Refused(e),
            Self::Infra(cause) => SessionReply::Failed { cause },
        }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<worker::Error> for Failure {
    fn from(e: worker::Error) -> Self {
        match e {
            // worker says this one with `Debug`, which writes nothing in the Worker's build.
            worker::Error::Internal(v) => Self::Infra(format!("runtime: {}", js_text(&v))),
            e => Self::Infra(format!("runtime: {e}")),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Db(db) => db.into(),
            StoreError::Corrupt(_) => Self::Infra(format!("store: {e}")),
        }
    }
}

/// A database failure is ours (an opaque 500) unless the core names a refusal for it (a store not at
/// the expected schema version: 503 `store.schema_mismatch`).
impl From<DbError> for Failure {
    fn from(e: DbError) -> Self {
        match e.refusal() {
            Some(refusal) => Self::Api(refusal),
            None => Self::Infra(format!("store: {e}")),
        }
    }
}

impl From<sema_core::object_codec::Malformed> for Failure {
    fn from(e: sema_core::object_codec::Malformed) -> Self {
        Self::Infra(e.to_string())
    }
}

impl From<sema_core::json::Error> for Failure {
    fn from(e: sema_core::json::Error) -> Self {
        Self::Infra(format!("json: {e}"))
    }
}

/// A value the runtime threw or rejected with, in words: an error's name and message, a string as
/// it is, else its JSON text (the Worker is built with `Debug` writing nothing: `scripts/build`).
pub fn js_text(e: &wasm_bindgen::JsValue) -> String {
    use wasm_bindgen::JsCast;
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return format!(
            "{}: {}",
            String::from(err.name()),
            String::from(err.message())
        );
    }
    e.as_string()
        .or_else(|| js_sys::JSON::stringify(e).ok()?.as_string())
        .unwrap_or_else(|| "a value without text".to_owned())
}
