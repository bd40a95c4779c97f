//! Request bodies: JSON of at most 1 MiB, refused by its declared length before reading, and cut
//! off while reading when it has none (a chunked body is never buffered whole).

use crate::failure::Failure;
use futures_util::StreamExt;
use sema_core::{
    wire::{self, BODY_MAX},
    ApiError,
};
use worker::Request;

/// Reads and parses a JSON body: the generic value (for fingerprints) and the typed request.
pub async fn json_body<T: serde::de::DeserializeOwned>(
    req: &mut Request,
) -> Result<(serde_json::Value, T), Failure> {
    let header = |name: &str| req.headers().get(name).ok().flatten();
    wire::require_json_content_type(header("content-type").as_deref())?;
    if let Some(len) = header("content-length").and_then(|l| l.trim().parse::<u64>().ok()) {
        if len > BODY_MAX as u64 {
            return Err(ApiError::payload_too_large(BODY_MAX).into());
        }
    }
    let bytes = read_capped(req).await?;
    Ok(wire::parse_body(&bytes)?)
}

/// The body's bytes, refusing with 413 as soon as more than [`BODY_MAX`] have arrived.
async fn read_capped(req: &mut Request) -> Result<Vec<u8>, Failure> {
    let unreadable = || ApiError::invalid_request("request body could not be read");
    let Ok(mut stream) = req.stream() else {
        return Ok(Vec::new()); // no body at all: the JSON parse says what is missing
    };
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| unreadable())?;
        if bytes.len() + chunk.len() > BODY_MAX {
            return Err(ApiError::payload_too_large(BODY_MAX).into());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
