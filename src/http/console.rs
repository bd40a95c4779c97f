//! `GET /console` and its two assets: the operator console, static files embedded at build time
//! (`src/console/`; the script and style sheet minified by `build.rs`), answered with the core's headers (`sema_core::console`: self-only CSP,
//! `no-store`, `nosniff`, never framed). They carry no data; the page asks the API for everything
//! with the token the operator pastes, which it keeps in memory only.

use crate::outgoing::Outgoing;
use sema_core::console::ConsoleAsset;
use std::borrow::Cow;

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!(concat!(env!("OUT_DIR"), "/console.js"));
const STYLE: &str = include_str!(concat!(env!("OUT_DIR"), "/console.css"));

pub fn serve(asset: ConsoleAsset) -> Outgoing {
    let body = match asset {
        ConsoleAsset::Page => PAGE,
        ConsoleAsset::Script => SCRIPT,
        ConsoleAsset::Style => STYLE,
    };
    Outgoing::page(Cow::Borrowed(body), &asset.headers())
}
