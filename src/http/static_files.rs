//! The static routes (`sema_core::static_file`): the OpenAPI document, its docs page and the
//! operator console's three files. Their bytes are not in the module: a Worker of their own holds
//! them in the platform's asset store (`static/wrangler.toml`, the files written by `scripts/build`),
//! and this Worker reads a static route's file through its `STATIC` service binding and answers it
//! with the core's headers. Any other path, and any other method on these, is the router's as
//! before; no other request meets the asset store.

use crate::{failure::Failure, outgoing::Outgoing};
use sema_core::static_file::StaticFile;
use wasm_bindgen::{prelude::wasm_bindgen, JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::web_sys;

#[wasm_bindgen(
    inline_js = "export async function asset_response(env, file, headers) {
  if (!env.STATIC) throw new Error('this deployment has no STATIC binding');
  const a = await env.STATIC.fetch(new Request('https://assets.invalid' + file));
  if (a.status !== 200) {
    await a.body?.cancel();
    throw new Error('static file ' + file + ': status ' + a.status);
  }
  const h = new Headers();
  const p = headers.split('\\n');
  for (let i = 0; i + 1 < p.length; i += 2) h.append(p[i], p[i + 1]);
  return new Response(a.body, { status: 200, headers: h });
}"
)]
extern "C" {
    /// A 200 with the body of `file` from the `STATIC` binding and `headers` (`name\nvalue\n` per
    /// header); rejects if the binding or the file is missing (a deployment built without them).
    #[wasm_bindgen(catch)]
    fn asset_response(env: &JsValue, file: &str, headers: &str)
        -> Result<js_sys::Promise, JsValue>;
}

/// `file` answered with its headers. Fails (a 500: the deployment, not the caller, is at fault)
/// only where the deployment lacks its static files.
pub async fn serve(env: &worker::Env, file: StaticFile) -> Result<Outgoing, Failure> {
    let headers = crate::outgoing::pack_headers(&file.headers);
    let failed =
        |e: JsValue| Failure::Infra(format!("{}: {}", file.file, crate::failure::js_text(&e)));
    let promise = asset_response(env.as_ref(), file.file, &headers).map_err(failed)?;
    let resp = JsFuture::from(promise).await.map_err(failed)?;
    Ok(Outgoing::from(worker::Response::from(
        resp.unchecked_into::<web_sys::Response>(),
    )))
}
