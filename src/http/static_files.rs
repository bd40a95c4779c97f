//! The static routes (`sema_core::static_file`): the OpenAPI document, its docs page and the
//! operator console's three files. Their bytes are not in the module: a Worker of their own holds
//! them in the platform's asset store (`static/wrangler.toml`, the files written by `scripts/build`),
//! and this Worker reads a static route's file through its `STATIC` service binding and answers it
//! with the core's headers. Any other path, and any other method on these, is the router's as
//! before; no other request meets the asset store.

use crate::{failure::Failure, outgoing::Outgoing};
use sema_core::static_file::StaticFile;
use wasm_bindgen::{prelude::wasm_bindgen, JsValue};
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen(inline_js = "export async function asset_body(env, file) {
  if (!env.STATIC) throw new Error('this deployment has no STATIC binding');
  const a = await env.STATIC.fetch(new Request('https://assets.invalid' + file));
  if (a.status !== 200) {
    await a.body?.cancel();
    throw new Error('static file ' + file + ': status ' + a.status);
  }
  return a.body;
}")]
extern "C" {
    /// The body of `file` from the `STATIC` binding, as a stream; rejects if the binding or the
    /// file is missing (a deployment built without them).
    #[wasm_bindgen(catch)]
    fn asset_body(env: &JsValue, file: &str) -> Result<js_sys::Promise, JsValue>;
}

/// `file` answered with its headers. Fails (a 500: the deployment, not the caller, is at fault)
/// only where the deployment lacks its static files.
pub async fn serve(env: &worker::Env, file: StaticFile) -> Result<Outgoing, Failure> {
    let failed =
        |e: JsValue| Failure::Infra(format!("{}: {}", file.file, crate::failure::js_text(&e)));
    let body = JsFuture::from(asset_body(env.as_ref(), file.file).map_err(failed)?)
        .await
        .map_err(failed)?;
    Outgoing::streamed(&body, &file.headers).map_err(failed)
}
