//! Request bodies: JSON of at most 1 MiB, refused by its declared length before reading, and cut
//! off while reading when it has none (a chunked body is never buffered whole: past the limit its
//! chunks are read and dropped, up to [`DRAIN_MAX`], so the client reads a clean 413 rather than a
//! connection torn mid-upload; a larger upload is answered without reading further).

use crate::failure::Failure;
use crate::incoming::Incoming;
use futures_util::StreamExt;
use sema_core::{
    wire::{self, BODY_MAX},
    ApiError,
};
use worker::wasm_bindgen_futures::JsFuture;

/// Reads and parses a JSON body: the generic value (for fingerprints) and the typed request.
pub async fn json_body<T: sema_core::json::FromTree>(
    req: &Incoming,
) -> Result<(sema_core::json::Value, T), Failure> {
    let header = |name: &str| req.header(name);
    wire::require_json_content_type(header("content-type").as_deref())?;
    let declared = header("content-length").and_then(|l| l.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > BODY_MAX as u64) {
        return Err(ApiError::payload_too_large(BODY_MAX).into());
    }
    let bytes = match declared {
        // A declared length within the limit bounds the body (the runtime holds it to its
        // framing), so it is read in one call rather than chunk by chunk.
        Some(_) => read_whole(req).await?,
        None => read_capped(req).await?,
    };
    Ok(wire::parse_body(&bytes)?)
}

/// The whole body of a request whose declared length is within [`BODY_MAX`], read by the runtime in
/// one call (a stream read costs one promise per chunk through Rust futures).
async fn read_whole(req: &Incoming) -> Result<Vec<u8>, Failure> {
    let unreadable = || ApiError::invalid_request("request body could not be read");
    let promise = req.raw().array_buffer().map_err(|_| unreadable())?;
    let buffer = JsFuture::from(promise).await.map_err(|_| unreadable())?;
    let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
    if bytes.len() > BODY_MAX {
        return Err(ApiError::payload_too_large(BODY_MAX).into());
    }
    Ok(bytes)
}

/// Bytes of an oversized body read (and dropped) before answering 413.
const DRAIN_MAX: usize = 16 * 1024 * 1024;

/// The body's bytes, refusing with 413 once more than [`BODY_MAX`] have arrived; nothing past the
/// limit is kept.
async fn read_capped(req: &Incoming) -> Result<Vec<u8>, Failure> {
    let unreadable = || ApiError::invalid_request("request body could not be read");
    // worker's byte stream over the body (a body without a declared length is the rare case).
    let mut whole = worker::Request::from(Clone::clone(req.raw()));
    let Ok(mut stream) = whole.stream() else {
        return Ok(Vec::new()); // no body at all: the JSON parse says what is missing
    };
    let mut bytes = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| unreadable())?;
        seen += chunk.len();
        if seen > DRAIN_MAX {
            break;
        }
        if seen <= BODY_MAX {
            bytes.extend_from_slice(&chunk);
        } else if !bytes.is_empty() {
            bytes = Vec::new(); // over the limit: keep nothing, read on only to drain
        }
    }
    if seen > BODY_MAX {
        return Err(ApiError::payload_too_large(BODY_MAX).into());
    }
    Ok(bytes)
}
