//! The floor of the product's design through the same Rust binding: `bench/floor/floor.js`'s parts,
//! route for route and call for call, compiled to wasm with the crates the product uses (`worker`,
//! wasm-bindgen) and called the way the product calls them (the runtime's request read once, objects
//! by RPC with one string each way, D1's batch on the runtime's own method, storage and alarm written
//! unconfirmed). No logic of ours: what separates the JavaScript floor from this one is the price of
//! the binding (the boundary crossings, the futures executor); what separates this one from the
//! product is the product's own code. Bench only, never deployed (`scripts/bench`).
//!
//! It has the parts `scripts/bench` sets beside ours (`sema-bench beside-floor`, `beside-floor-paths`):
//! `/claim` and `/schema-claim`, `/schema-alarm(-queue)`, `/cancel`, `/append` with `/sse` and
//! `/do-d1-storage` (the run it writes to), `/schema-append` with `/schema-lease`, `/admit-dispatch`
//! and `/schema-dispatch` with `/poll`, `/queue-connect` and `/queue-waiting`. The
//! JavaScript floor's other parts (`/d1`, `/do`, `/do-storage`, `/tell`, `/admit-reserve`, ...) are
//! measured in JavaScript only; here they answer 404.
#![cfg(target_arch = "wasm32")]

mod parts;

use wasm_bindgen::{prelude::wasm_bindgen, JsValue};
use worker::{event, web_sys, Context, Env, Response};

#[wasm_bindgen]
extern "C" {
    /// A floor object's stub, seen through its RPC method (`FloorDo::call`, `FloorQueue::call`).
    type FloorRpc;
    #[wasm_bindgen(method, catch, js_name = call)]
    fn call(
        this: &FloorRpc,
        part: &str,
        id: &JsValue,
        q: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;
    /// The same call with the request's body (`FloorDo::call`'s fourth argument).
    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_with_body(
        this: &FloorRpc,
        part: &str,
        id: &JsValue,
        q: &JsValue,
        body: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;
}

pub use parts::{FloorDo, FloorQueue};

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    parts::route(req, env).await.or_else(|e| {
        parts::text(
            500,
            &e.as_string()
                .unwrap_or_else(|| "a failure without text".into()),
        )
    })
}
