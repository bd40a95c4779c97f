//! The OpenAPI 3.1 document of the HTTP surface (`crates/core/openapi.json`, written by hand) and
//! the readable page of its operations (`GET /docs`).
//!
//! The Worker answers `GET /openapi.json` with [`DOCUMENT`] (the file, compact) and `GET /docs` with
//! [`docs_page`], both rendered at build time into static files (`sema-assets`; see
//! [`crate::static_file`]), both public (like `/health`): the document describes the surface any caller meets, and holds no
//! secret and nothing of any principal's. The tests below keep it honest: the route table and the
//! document name the same operations with the same roles; every code of the error catalogue is in
//! the `ErrorCode` schema with its status and each operation's error responses list only codes of
//! their status; every request body schema names exactly the fields its parser takes and refuses
//! unknown ones; the SSE frames and the bodies the core builds validate against their schemas.
//! `scripts/test` then fuzzes a live Worker from it with schemathesis.

/// The document as served: `crates/core/openapi.json` without the whitespace between its tokens
/// (`build.rs`; the file stays indented for its readers).
pub const DOCUMENT: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.json"));

/// The served document's file in the Worker's static files ([`crate::static_file`]).
pub const DOCUMENT_FILE: &str = "/openapi.json";

/// The docs page's file in the Worker's static files.
pub const DOCS_FILE: &str = "/docs.html";

/// `Cache-Control` of `/openapi.json` and `/docs`: public and the same for every caller, but it
/// changes with a deploy, so shared caches keep it only briefly.
pub const CACHE_CONTROL: &str = "public, max-age=300";

/// The page's only style sheet (inline; allowed by its hash in [`DOCS_CSP`]).
pub const DOCS_STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}\
h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}\
section{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem;margin:.6rem 0}\
.m{display:inline-block;min-width:3.5rem;font-weight:700;font-family:monospace}\
.p{font-family:monospace;font-weight:600}\
.r{color:#555;font-size:.9em}\
code{background:#f3f3f3;padding:0 .2em;border-radius:3px}\
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.15rem .5rem;text-align:left;vertical-align:top}";

/// The page's Content-Security-Policy: nothing may load or run but its own hashed style sheet (the
/// page has no script; it is rendered here from the document).
pub const DOCS_CSP: &str = "default-src 'none'; style-src 'sha256-aAGw32bhIUWALeYT0MwzkMuydKYZqeDzxEICl4dIeEY='; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escaped text with its `` `code` `` spans marked up.
fn prose(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in escape(text).split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn text<'a>(v: &'a crate::json::Value, key: &str) -> &'a str {
    v.get(key).and_then(|s| s.as_str()).unwrap_or("")
}

/// The last segment of a local `$ref` (`#/components/schemas/Name` → `Name`).
fn ref_name(v: &crate::json::Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.rsplit('/').next()
}

/// Resolves a local `$ref` (one level) in `doc`.
fn resolve<'a>(doc: &'a crate::json::Value, v: &'a crate::json::Value) -> &'a crate::json::Value {
    match v.get("$ref").and_then(|r| r.as_str()) {
        Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap_or(v),
        None => v,
    }
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The `/docs` page: every operation of `document` by tag (method, path, summary, roles, body
/// schema, every status with its description), then the error catalogue. Self-contained: no
/// script, no request of its own; everything from the document is escaped.
pub fn docs_page(document: &str) -> String {
    let doc: crate::json::Value = crate::json::parse(document).unwrap_or_default();
    let empty = crate::json::Map::new();
    let paths = doc
        .get("paths")
        .and_then(|p| p.as_object())
        .unwrap_or(&empty);
    let mut html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} API</title>\
         <meta name=\"viewport\" content=\"width=device-width\"><style>{DOCS_STYLE}</style></head><body>\
         <h1>{} API <span class=\"r\">{}</span></h1><p>{}</p>\
         <p>The machine-readable document: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI {}).</p>",
        escape(text(&doc["info"], "title")),
        escape(text(&doc["info"], "title")),
        escape(text(&doc["info"], "version")),
        prose(text(&doc["info"], "description")),
        escape(text(&doc, "openapi")),
    );
    let tags = doc.get("tags").and_then(|t| t.as_array()).cloned();
    for tag in tags.unwrap_or_default() {
        let name = text(&tag, "name");
        html.push_str(&format!(
            "<h2>{}</h2><p>{}</p>",
            escape(name),
            prose(text(&tag, "description"))
        ));
        for (path, item) in paths {
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let tagged = op
                    .get("tags")
                    .and_then(|t| t.as_array())
                    .is_some_and(|t| t.iter().any(|t| t.as_str() == Some(name)));
                if tagged {
                    html.push_str(&operation_html(&doc, method, path, op));
                }
            }
        }
    }
    html.push_str(
        "<h2>Error codes</h2><table><tr><th>errorCode</th><th>status</th><th>when</th></tr>",
    );
    let codes = &doc["components"]["schemas"]["ErrorCode"];
    for code in codes["enum"].as_array().cloned().unwrap_or_default() {
        let c = code.as_str().unwrap_or("");
        html.push_str(&format!(
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(c),
            codes["x-sema-status"][c],
            prose(text(&codes["x-sema-when"], c))
        ));
    }
    html.push_str("</table></body></html>\n");
    html
}

fn operation_html(
    doc: &crate::json::Value,
    method: &str,
    path: &str,
    op: &crate::json::Value,
) -> String {
    let roles = match op.get("security").and_then(|s| s.as_array()) {
        Some(s) if s.is_empty() => "public".to_owned(),
        Some(s) => s
            .first()
            .and_then(|r| r.get("bearer"))
            .and_then(|r| r.as_array())
            .map(|r| {
                r.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
        None => String::new(),
    };
    let mut out = format!(
        "<section id=\"{}\"><div><span class=\"m\">{}</span> <span class=\"p\">{}</span> \
         <span class=\"r\">roles: {}</span></div><p>{}</p>",
        escape(text(op, "operationId")),
        method.to_ascii_uppercase(),
        escape(path),
        escape(&roles),
        prose(text(op, "summary")),
    );
    if let Some(d) = op.get("description").and_then(|d| d.as_str()) {
        out.push_str(&format!("<p>{}</p>", prose(d)));
    }
    if let Some(body) = op.pointer("/requestBody/content/application~1json/schema") {
        out.push_str(&format!(
            "<p class=\"r\">body: <code>{}</code></p>",
            escape(ref_name(body).unwrap_or("object"))
        ));
    }
    out.push_str("<table>");
    if let Some(responses) = op.get("responses").and_then(|r| r.as_object()) {
        for (status, resp) in responses {
            let resp = resolve(doc, resp);
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(status),
                prose(text(resp, "description"))
            ));
        }
    }
    out.push_str("</table></section>");
    out
}

#[cfg(test)]
mod tests;
