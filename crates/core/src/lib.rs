//! Sema Edge core: the pure domain of the run control plane.
//!
//! Nothing here touches a platform: no `worker`, no clock reads, no randomness. Callers pass `now`
//! (milliseconds since the Unix epoch) and fresh random bytes; the core plans SQL statements, decides
//! from the rows they return, and builds the wire bodies. The Worker (`src/`) executes and transports.

pub mod admission;
pub mod answer;
pub mod auth;
pub mod concurrent;
pub mod conflict;
pub mod console;
pub mod dispatch;
pub mod error;
pub mod fair_lock;
pub mod gate;
pub mod headers;
pub mod hex;
pub mod idempotency;
pub mod ids;
pub mod json;
pub mod json_tree;
pub mod json_write;
pub mod leader;
pub mod leader_drive;
pub mod leader_wire;
pub mod list;
pub mod liveness;
pub mod object_codec;
pub mod object_rpc;
pub mod openapi;
pub mod queue;
pub mod reaper;
pub mod route;
pub mod run;
pub mod runner_wire;
pub mod schema;
pub mod session_protocol;
pub mod sessions;
pub mod sql;
pub mod sse;
pub mod sse_subscriber;
pub mod static_file;
pub mod status;
pub mod store;
pub mod stream_ticket;
pub mod text_map;
pub mod wire;

pub use error::ApiError;
