//! The clock and entropy: the only places the Worker reads time or draws randomness. `clippy.toml`
//! forbids both everywhere else; this file alone allows it.
#![allow(clippy::disallowed_methods)]

/// Milliseconds since the Unix epoch (the runtime's clock; within 2^53).
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// Fresh random bytes from the runtime's CSPRNG.
pub fn random<const N: usize>() -> Result<[u8; N], worker::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|e| worker::Error::RustError(format!("getrandom: {e}")))?;
    Ok(buf)
}
