//! Writes the OpenAPI document (`openapi.json`, kept indented for its readers) as compact JSON
//! into `OUT_DIR`, the text `sema_core::openapi::DOCUMENT` serves: whitespace between tokens is
//! dropped, every string is kept byte for byte. The served text is a third smaller, and so is
//! the Worker's module ("Size and start" in docs/ARCHITECTURE.md).

use std::{env, fs, path::Path};

fn main() {
    let source = Path::new("openapi.json");
    println!("cargo::rerun-if-changed={}", source.display());
    let text = fs::read_to_string(source).expect("crates/core/openapi.json is readable");
    let out = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("openapi.json");
    fs::write(out, compact(&text)).expect("OUT_DIR is writable");
}

/// `text` without the whitespace outside its strings (JSON's four: space, tab, CR, LF).
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\r' | '\n') {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}
