//! `GET /console` and its two assets: the operator console, static files embedded at build time
//! (`src/console/`), answered with the core's headers (`sema_core::console`: self-only CSP,
//! `no-store`, `nosniff`, never framed). They carry no data; the page asks the API for everything
//! with the token the operator pastes, which it keeps in memory only.

use sema_core::console::ConsoleAsset;
use worker::{Headers, Response};

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

pub fn serve(asset: ConsoleAsset) -> Response {
    let body = match asset {
        ConsoleAsset::Page => PAGE,
        ConsoleAsset::Script => SCRIPT,
        ConsoleAsset::Style => STYLE,
    };
    let headers = Headers::new();
    for (k, v) in asset.headers() {
        let _ = headers.set(k, v);
    }
    Response::builder()
        .with_status(200)
        .with_headers(headers)
        .fixed(body.as_bytes().to_vec())
}
