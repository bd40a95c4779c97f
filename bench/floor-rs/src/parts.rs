//! The parts, as `bench/floor/floor.js` names and does them (its header lists them). Each SQL text
//! and each call is that file's; only the language differs.

use crate::FloorRpc;
use futures_channel::{mpsc, oneshot};
use futures_util::future::{select, Either};
use sema_core::list::{path_of, query_of};
use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
};
use wasm_bindgen::{prelude::wasm_bindgen, JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{
    durable_object, web_sys, worker_sys, D1Database, D1PreparedStatement, DurableObject, Env,
    Headers, Request, Response, SetAlarmOptions, State, WebSocket, WebSocketIncomingMessage,
    WebSocketPair,
};

type Failed = JsValue;

/// A response of `status` with a JSON (or plain) `body`.
pub fn text(status: u16, body: &str) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(body)?
        .with_status(status)
        .with_headers(headers))
}

/// The value of query parameter `name` in `url` (the bench's names and ids need no decoding).
fn param<'a>(url: &'a str, name: &str) -> Option<&'a str> {
    query_of(url)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn stub(env: &Env, binding: &str, name: &str) -> worker::Result<FloorRpc> {
    Ok(env
        .durable_object(binding)?
        .get_by_name(name)?
        .into_rpc::<FloorRpc>())
}

/// The parts that stand beside a path of ours whose request has a body (floor.js `BODY_PARTS`, those
/// this floor has): the Worker reads it and the object carries it, as ours does.
const BODY_PARTS: [&str; 8] = [
    "/claim",
    "/schema-claim",
    "/append",
    "/schema-append",
    "/admit-dispatch",
    "/schema-dispatch",
    "/schema-alarm",
    "/schema-alarm-queue",
];

/// Calls `part` on an object by RPC, with the request's `body` (its text, or null); its answer is
/// `"SSS body"` (status, a space, the body).
async fn call(
    rpc: &FloorRpc,
    part: &str,
    id: Option<&str>,
    q: Option<&str>,
    body: &JsValue,
) -> Result<String, Failed> {
    let answer = JsFuture::from(rpc.call_with_body(part, &opt_str(id), &opt_str(q), body)?).await?;
    answer
        .as_string()
        .ok_or_else(|| JsValue::from_str("an answer that is not text"))
}

/// The response of an RPC part's `"SSS body"`.
fn answer(framed: &str) -> worker::Result<Response> {
    let (status, body) = framed.split_at(3.min(framed.len()));
    match status.parse().unwrap_or(500) {
        204 => Ok(Response::empty()?.with_status(204)),
        status => text(status, body.trim_start()),
    }
}

pub async fn route(req: web_sys::Request, env: Env) -> Result<Response, Failed> {
    let url = req.url();
    let path = path_of(&url);
    if path == "/health" {
        return Ok(text(200, "{\"ok\":true,\"service\":\"sema-floor-rs\"}")?);
    }
    if path == "/sse" {
        let Some(name) = param(&url, "o") else {
            return Ok(text(400, "o= names the object")?);
        };
        let obj = env.durable_object("FLOOR")?.get_by_name(name)?;
        return Ok(obj.fetch_with_request(Request::from(req)).await?);
    }
    let q = param(&url, "q");
    if path == "/queue-connect" || path == "/queue-waiting" {
        let Some(q) = q else {
            return Ok(text(400, "q= names the queue")?);
        };
        let queue = env.durable_object("FLOOR_QUEUE")?.get_by_name(q)?;
        return Ok(queue.fetch_with_request(Request::from(req)).await?);
    }
    if req.method() != "POST" {
        return Ok(text(405, "POST only")?);
    }
    if path == "/poll" {
        let Some(q) = q else {
            return Ok(text(400, "q= names the queue")?);
        };
        let queue = stub(&env, "FLOOR_QUEUE", q)?;
        let lease = JsFuture::from(queue.call("/poll", &JsValue::NULL, &JsValue::NULL)?).await?;
        return Ok(match lease.as_string() {
            Some(lease) => text(200, &lease)?,
            None => Response::empty()?.with_status(204),
        });
    }
    let Some(name) = param(&url, "o") else {
        return Ok(text(400, "o= names the object")?);
    };
    let id = param(&url, "id");
    if path == "/cancel" {
        // A cancel names a run: the Worker reads its row (its owner and session) before the call.
        let db = env.d1("DB")?;
        let stmt = db
            .prepare("SELECT * FROM task_run WHERE task_id = ?1")
            .bind(&[opt_str(id)])?;
        JsFuture::from(stmt.inner().first(None)?).await?;
    }
    // As ours must, a part beside one of our paths with a body reads it, as text (an empty body
    // carries a fixed one, as floor.js).
    let mut body = JsValue::NULL;
    if BODY_PARTS.contains(&path) {
        body = JsFuture::from(req.text()?).await?;
        if body.as_string().is_some_and(|b| b.is_empty()) {
            body = JsValue::NULL;
        }
    }
    let framed = call(&stub(&env, "FLOOR", name)?, path, id, q, &body).await?;
    Ok(answer(&framed)?)
}

fn opt_str(v: Option<&str>) -> JsValue {
    v.map_or(JsValue::NULL, JsValue::from_str)
}

fn now() -> f64 {
    js_sys::Date::now()
}

/// One D1 batch through the runtime's own `batch` (as the product's executor calls it).
async fn batch(db: &D1Database, stmts: Vec<D1PreparedStatement>) -> Result<JsValue, Failed> {
    let statements = stmts
        .iter()
        .map(|s| JsValue::from(s.inner()))
        .collect::<js_sys::Array>();
    let raw: &worker_sys::D1Database = db.as_ref().unchecked_ref();
    JsFuture::from(raw.batch(statements)?).await
}

fn prep(db: &D1Database, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, Failed> {
    Ok(db.prepare(sql).bind(args)?)
}

/// The product's own admission batch (floor.js `schemaBatch`).
async fn schema_batch(db: &D1Database, id: &str, objective: Option<&str>) -> Result<(), Failed> {
    let (id, now) = (JsValue::from_str(id), JsValue::from_f64(now()));
    let null = JsValue::NULL;
    let s = |t: &str| JsValue::from_str(t);
    batch(db, vec![
        prep(db, "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
            ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at WHERE session.owner IS excluded.owner",
            &[id.clone(), null.clone(), now.clone()])?,
        prep(db, "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, objective_preview, meta, \
            heartbeat_at, created_at, updated_at, queue) SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8, ?8, ?9 \
            WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?2 AND owner IS ?3)",
            &[id.clone(), id.clone(), null.clone(), s("floor"), s(objective.unwrap_or("bench")), s("bench"), s("{}"), now.clone(), s("default")])?,
        prep(db, "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 \
            WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner IS ?4)",
            &[id.clone(), id, now, null])?,
    ])
    .await?;
    Ok(())
}

/// The product's cancel batch (floor.js `cancelBatch`).
async fn cancel_batch(db: &D1Database, id: &str) -> Result<(), Failed> {
    let (id, now) = (JsValue::from_str(id), JsValue::from_f64(now()));
    batch(db, vec![
        prep(db, "UPDATE task_run SET status = 'cancelled', error = ?3, cancel_requested = 1, held_by = NULL, updated_at = ?2 \
            WHERE task_id = ?1 AND (status IN ('suspended','needs_review') OR (status = 'running' AND held_by IS NULL))",
            &[id.clone(), now.clone(), JsValue::from_str("cancelled by user")])?,
        prep(db, "UPDATE task_run SET cancel_requested = 1, updated_at = ?2 \
            WHERE task_id = ?1 AND status = 'running' AND held_by IS NOT NULL AND cancel_requested = 0",
            &[id.clone(), now.clone()])?,
        prep(db, "DELETE FROM task_active WHERE task_id = ?1 AND NOT EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
            AND status IN ('running','suspended','needs_review'))", std::slice::from_ref(&id))?,
        prep(db, "UPDATE gate_checkpoint SET status = 'voided', pending_session = NULL, updated_at = ?2 WHERE task_id = ?1 \
            AND status = 'pending' AND NOT EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 \
            AND task_run.status IN ('running','suspended','needs_review'))", &[id.clone(), now])?,
        prep(db, "SELECT * FROM task_run WHERE task_id = ?1", &[id])?,
    ])
    .await?;
    Ok(())
}

const TABLES: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS floor_run (id TEXT PRIMARY KEY, session TEXT NOT NULL, body TEXT NOT NULL, \
     last_seq INTEGER NOT NULL DEFAULT 0, runner TEXT, epoch INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS floor_event (run TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run, seq))",
    "CREATE TABLE IF NOT EXISTS floor_claim (session TEXT PRIMARY KEY, id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS floor_key (k TEXT PRIMARY KEY, id TEXT NOT NULL)",
];

thread_local! {
    static TABLES_MADE: Cell<bool> = const { Cell::new(false) };
}

/// floor.js `ensureTables`, for the parts that write the floor's own tables.
async fn ensure_tables(db: &D1Database) -> Result<(), Failed> {
    if TABLES_MADE.with(Cell::get) {
        return Ok(());
    }
    batch(
        db,
        TABLES
            .iter()
            .map(|t| prep(db, t, &[]))
            .collect::<Result<_, _>>()?,
    )
    .await?;
    TABLES_MADE.with(|c| c.set(true));
    Ok(())
}

/// Three inserts (floor.js `admitBatch`): the run the append scenario writes to.
async fn admit_batch(db: &D1Database, id: &str, body: Option<&str>) -> Result<(), Failed> {
    ensure_tables(db).await?;
    let id = JsValue::from_str(id);
    batch(
        db,
        vec![
            prep(
                db,
                "INSERT INTO floor_run (id, session, body) VALUES (?1, ?1, ?2)",
                &[
                    id.clone(),
                    JsValue::from_str(body.unwrap_or("{\"objective\":\"bench\"}")),
                ],
            )?,
            prep(
                db,
                "INSERT INTO floor_claim (session, id) VALUES (?1, ?1)",
                std::slice::from_ref(&id),
            )?,
            prep(db, "INSERT INTO floor_key (k, id) VALUES (?1, ?1)", &[id])?,
        ],
    )
    .await?;
    Ok(())
}

/// The runner the design's append scenario leases its run to (`/schema-lease`), at epoch 1.
const FLOOR_RUNNER: &str = "floor-runner";

/// The product's append batch for one event (`event_sql::append`, SQLite text; floor.js
/// `appendSchemaBatch`) by the run's holder at `epoch`: the event's seq, or `None` when the fence
/// refused it.
async fn append_schema_batch(
    db: &D1Database,
    run: &str,
    epoch: f64,
    runner: &str,
    kind: &JsValue,
    data: &JsValue,
) -> Result<Option<f64>, Failed> {
    let (run, epoch, runner, now) = (
        JsValue::from_str(run),
        JsValue::from_f64(epoch),
        JsValue::from_str(runner),
        JsValue::from_f64(now()),
    );
    let out = batch(
        db,
        vec![
            prep(
                db,
                "UPDATE task_run SET last_seq = last_seq + ?3, updated_at = ?4, heartbeat_at = ?4, lease_acked = 1 \
                 WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running' \
                 RETURNING last_seq, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 \
                 AND delivered_at IS NULL) AS steer_pending",
                &[run.clone(), epoch.clone(), 1.into(), now.clone(), runner.clone()],
            )?,
            prep(
                db,
                "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) \
                 SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run \
                 WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
                &[run, epoch, 0.into(), kind.clone(), data.clone(), JsValue::NULL, now, runner],
            )?,
        ],
    )
    .await?;
    let fence = js_sys::Array::from(&out).get(0);
    let rows: js_sys::Array = js_sys::Reflect::get(&fence, &"results".into())?.dyn_into()?;
    let row = rows.get(0);
    if row.is_undefined() {
        return Ok(None);
    }
    Ok(js_sys::Reflect::get(&row, &"last_seq".into())?.as_f64())
}

async fn append_batch(db: &D1Database, run: &str, seq: u64, event: &str) -> Result<(), Failed> {
    ensure_tables(db).await?;
    let (run, seq) = (JsValue::from_str(run), JsValue::from_f64(seq as f64));
    batch(
        db,
        vec![
            prep(
                db,
                "INSERT INTO floor_event (run, seq, body) VALUES (?1, ?2, ?3)",
                &[run.clone(), seq.clone(), JsValue::from_str(event)],
            )?,
            prep(
                db,
                "UPDATE floor_run SET last_seq = ?2 WHERE id = ?1",
                &[run, seq],
            )?,
        ],
    )
    .await?;
    Ok(())
}

fn framed(status: u16, body: &str) -> JsValue {
    JsValue::from_str(&format!("{status} {body}"))
}

type Frame = Result<Vec<u8>, worker::Error>;

#[durable_object]
pub struct FloorDo {
    state: State,
    env: Env,
    storage: Option<worker_sys::DurableObjectStorage>,
    claim: RefCell<Option<String>>,
    /// Its state was read from storage (once per instance: floor.js `known`).
    loaded: Cell<bool>,
    seq: Cell<u64>,
    streams: RefCell<Vec<mpsc::Sender<Frame>>>,
}

impl DurableObject for FloorDo {
    fn new(state: State, env: Env) -> Self {
        let raw = state._inner();
        let storage = raw.storage().ok();
        Self {
            state: State::from(raw),
            env,
            storage,
            claim: RefCell::new(None),
            loaded: Cell::new(false),
            seq: Cell::new(0),
            streams: RefCell::new(Vec::new()),
        }
    }

    /// An event stream held by the object (floor.js `FloorDo.fetch`).
    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        let (mut tx, rx) = mpsc::channel::<Frame>(64);
        let _ = tx.try_send(Ok(b": open\n\n".to_vec()));
        self.streams.borrow_mut().push(tx);
        let headers = Headers::new();
        let _ = headers.set("content-type", "text/event-stream");
        Ok(Response::from_stream(rx)?.with_headers(headers))
    }

    /// An alarm an hour out never fires within a bench run.
    async fn alarm(&self) -> worker::Result<Response> {
        Response::empty()
    }
}

impl FloorDo {
    /// Writes `state` to storage without waiting for the disk (`allowUnconfirmed`, which worker's
    /// `Storage::put` has no option for: the runtime's own `put`, as the product calls it).
    async fn put_unconfirmed(&self, state: &str) -> Result<(), Failed> {
        let storage = self
            .storage
            .as_ref()
            .ok_or_else(|| JsValue::from_str("no storage"))?;
        let options = js_sys::Object::new();
        js_sys::Reflect::set(&options, &"allowUnconfirmed".into(), &true.into())?;
        let put: js_sys::Function = js_sys::Reflect::get(storage, &"put".into())?.dyn_into()?;
        let promise = put.call3(storage, &"state".into(), &state.into(), &options)?;
        JsFuture::from(js_sys::Promise::from(promise)).await?;
        Ok(())
    }

    /// Its state read from storage once per instance, before its first answer (floor.js `known`).
    async fn known(&self) -> Result<(), Failed> {
        if self.loaded.get() {
            return Ok(());
        }
        let storage = self
            .storage
            .as_ref()
            .ok_or_else(|| JsValue::from_str("no storage"))?;
        let get: js_sys::Function = js_sys::Reflect::get(storage, &"get".into())?.dyn_into()?;
        let promise = get.call1(storage, &"state".into())?;
        JsFuture::from(js_sys::Promise::from(promise)).await?;
        self.loaded.set(true);
        Ok(())
    }

    /// An admission through the design's parts (floor.js `admitDesign`): what the object knows, the
    /// product's admission batch, the claim's copy and its alarm, then (given `queue`) that queue
    /// told without waiting, as ours.
    async fn admit_design(
        &self,
        id: &str,
        body: Option<&str>,
        queue: Option<&str>,
    ) -> Result<(), Failed> {
        self.known().await?;
        schema_batch(&self.env.d1("DB")?, id, body).await?;
        self.remember().await?;
        if let Some(q) = queue {
            self.offer("/offer-schema", q, id)?;
        }
        Ok(())
    }

    /// The object's copy of the claim and its alarm, written after D1 without waiting for the disk.
    async fn remember(&self) -> Result<(), Failed> {
        self.put_unconfirmed("{\"claim\":\"x\"}").await?;
        let alarm = SetAlarmOptions {
            allow_unconfirmed: Some(true),
            ..Default::default()
        };
        self.state
            .storage()
            .set_alarm_with_options(3_600_000, alarm)
            .await?;
        Ok(())
    }

    /// floor.js `admit`: the three inserts, then the claim's copy and its alarm.
    async fn admit(&self, id: &str, body: Option<&str>) -> Result<(), Failed> {
        admit_batch(&self.env.d1("DB")?, id, body).await?;
        self.remember().await
    }

    /// Queue `q` told of the run without waiting, as the product tells its dispatcher: `offer` is
    /// `/offer` (the lease of a run in the floor's own table) or `/offer-schema` (the product's).
    fn offer(&self, offer: &str, q: &str, id: &str) -> Result<(), Failed> {
        let queue = stub(&self.env, "FLOOR_QUEUE", q)?;
        let promise = queue.call(offer, &JsValue::NULL, &JsValue::from_str(id))?;
        wasm_bindgen_futures::spawn_local(async move {
            let _ = JsFuture::from(promise).await;
        });
        Ok(())
    }
}

#[wasm_bindgen]
impl FloorDo {
    /// One part, by RPC: `"SSS body"`; `body` is the request's ([`BODY_PARTS`]), else none.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(
        &self,
        part: String,
        id: Option<String>,
        q: Option<String>,
        body: Option<String>,
    ) -> Result<JsValue, JsValue> {
        let id = id.unwrap_or_default();
        let body = body.as_deref();
        match part.as_str() {
            "/claim" | "/schema-claim" => {
                if part == "/schema-claim" {
                    self.known().await?;
                }
                if self.claim.borrow().is_some() {
                    return Ok(framed(
                        409,
                        "{\"error\":\"busy\",\"errorCode\":\"session_busy\"}",
                    ));
                }
                *self.claim.borrow_mut() = Some(id.clone());
                if part == "/schema-claim" {
                    self.admit_design(&id, body, Some("default")).await?;
                } else {
                    self.admit(&id, body).await?;
                }
                Ok(framed(202, &format!("{{\"taskId\":\"{id}\"}}")))
            }
            "/schema-lease" => {
                let db = self.env.d1("DB")?;
                schema_batch(&db, &id, None).await?;
                Ok(match lease_schema_run(&db, &id, To::Appender).await? {
                    Some(_) => framed(200, "{\"ok\":true}"),
                    None => framed(409, "{\"error\":\"not leased\"}"),
                })
            }
            "/schema-append" => {
                let event = body.unwrap_or("{\"events\":[{\"type\":\"text_delta\",\"data\":{}}]}");
                let parsed = js_sys::JSON::parse(event)?;
                let events: js_sys::Array =
                    js_sys::Reflect::get(&parsed, &"events".into())?.dyn_into()?;
                let first = events.get(0);
                let kind = js_sys::Reflect::get(&first, &"type".into())?;
                let data = js_sys::JSON::stringify(&js_sys::Reflect::get(&first, &"data".into())?)?;
                let db = self.env.d1("DB")?;
                let Some(seq) =
                    append_schema_batch(&db, &id, 1.0, FLOOR_RUNNER, &kind, &data.into()).await?
                else {
                    return Ok(framed(409, "{\"error\":\"the lease is not held\"}"));
                };
                let frame = format!("id: {seq}\ndata: {event}\n\n").into_bytes();
                self.streams
                    .borrow_mut()
                    .retain_mut(|w| w.try_send(Ok(frame.clone())).is_ok());
                Ok(framed(200, &format!("{{\"seqs\":[{seq}]}}")))
            }
            "/append" => {
                let seq = self.seq.get() + 1;
                self.seq.set(seq);
                let event = body.unwrap_or("{\"type\":\"text_delta\"}");
                append_batch(&self.env.d1("DB")?, &id, seq, event).await?;
                let frame = format!("id: {seq}\ndata: {event}\n\n").into_bytes();
                self.streams
                    .borrow_mut()
                    .retain_mut(|w| w.try_send(Ok(frame.clone())).is_ok());
                Ok(framed(200, &format!("{{\"seqs\":[{seq}]}}")))
            }
            "/cancel" => {
                cancel_batch(&self.env.d1("DB")?, &id).await?;
                self.put_unconfirmed("{\"claim\":null}").await?;
                Ok(framed(200, "{\"ok\":true}"))
            }
            "/schema-alarm" | "/schema-alarm-queue" => {
                let queue = (part == "/schema-alarm-queue").then_some("default");
                self.admit_design(&id, body, queue).await?;
                Ok(framed(200, "{\"ok\":true}"))
            }
            "/admit-dispatch" => {
                self.admit(&id, body).await?;
                // Not awaited, as ours: the answer does not wait for the hand-over.
                self.offer("/offer", q.as_deref().unwrap_or("default"), &id)?;
                Ok(framed(202, &format!("{{\"taskId\":\"{id}\"}}")))
            }
            "/schema-dispatch" => {
                // The queue told without waiting, as ours: the answer does not wait for the hand-over.
                let queue = q.as_deref().unwrap_or("default");
                self.admit_design(&id, body, Some(queue)).await?;
                Ok(framed(202, &format!("{{\"taskId\":\"{id}\"}}")))
            }
            "/do-d1-storage" => {
                admit_batch(&self.env.d1("DB")?, &id, None).await?;
                self.state
                    .storage()
                    .put("state", "{\"claim\":\"x\"}")
                    .await?;
                Ok(framed(200, "{\"ok\":true}"))
            }
            "/do" => Ok(framed(200, "{\"ok\":true}")),
            _ => Ok(framed(404, "no such part in the Rust floor")),
        }
    }
}

/// A lease written by [`lease_run`] or [`lease_schema_run`], as the runner is told it.
type Lease = Option<String>;

/// Who a lease is written for: a long-poll's wait (its answer is the lease's body), a socket (its
/// frame also carries `"type":"lease"`), or the design's append scenario ([`FLOOR_RUNNER`]), as
/// floor.js.
#[derive(Clone, Copy, PartialEq)]
enum To {
    Poll,
    Socket,
    Appender,
}

impl To {
    fn runner(self) -> &'static str {
        match self {
            To::Poll => "floor-poll",
            To::Socket => "floor-socket",
            To::Appender => FLOOR_RUNNER,
        }
    }
}

/// The lease (floor.js `leaseRun`): one conditional update (the run is still unleased), its row read
/// back; the answer a runner gets, `{"taskId","leaseEpoch"}`, or `None` when it was leased already.
async fn lease_run(db: &D1Database, id: &str, to: To) -> Result<Lease, Failed> {
    let runner = to.runner();
    ensure_tables(db).await?;
    let stmt = prep(
        db,
        "UPDATE floor_run SET runner = ?2, epoch = epoch + 1 WHERE id = ?1 AND runner IS NULL RETURNING id, epoch",
        &[JsValue::from_str(id), JsValue::from_str(runner)],
    )?;
    let result = JsFuture::from(stmt.inner().all()?).await?;
    let rows: js_sys::Array = js_sys::Reflect::get(&result, &"results".into())?.dyn_into()?;
    let row = rows.get(0);
    if row.is_undefined() {
        return Ok(None);
    }
    let task = js_sys::Reflect::get(&row, &"id".into())?
        .as_string()
        .unwrap_or_default();
    let epoch = js_sys::Reflect::get(&row, &"epoch".into())?
        .as_f64()
        .unwrap_or(0.0);
    let kind = if to == To::Socket {
        "\"type\":\"lease\","
    } else {
        ""
    };
    Ok(Some(format!(
        "{{{kind}\"taskId\":\"{task}\",\"leaseEpoch\":{epoch}}}"
    )))
}

/// The product's own lease statement (`runner_sql::try_lease`, SQLite text) on the product's schema,
/// as floor.js `leaseSchemaRun`: the compare-and-set with what waits for the new holder (cancel, steer
/// count, the decision it resumes from) read back in the same statement; what a runner is told
/// (`dispatch::lease_body`'s fields; a socket's frame, `to`, also its `"type"`), or `None` when it was
/// leased already.
async fn lease_schema_run(db: &D1Database, id: &str, to: To) -> Result<Lease, Failed> {
    let runner = to.runner();
    let stmt = prep(db, LEASE_SCHEMA, &[id.into(), runner.into(), now().into()])?;
    // A batch of one statement, as the product sends it.
    let out = batch(db, vec![stmt]).await?;
    let result = js_sys::Array::from(&out).get(0);
    let rows: js_sys::Array = js_sys::Reflect::get(&result, &"results".into())?.dyn_into()?;
    let row = rows.get(0);
    if row.is_undefined() {
        return Ok(None);
    }
    let get = |k: &str| js_sys::Reflect::get(&row, &k.into());
    let lease = js_sys::Object::new();
    let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&lease, &k.into(), v);
    if to == To::Socket {
        set("type", &"lease".into())?;
    }
    set("taskId", &get("task_id")?)?;
    set("sessionId", &get("session_id")?)?;
    set("leaseEpoch", &get("lease_epoch")?)?;
    set("objective", &get("objective")?)?;
    let meta = get("meta")?.as_string().unwrap_or_default();
    set("meta", &js_sys::JSON::parse(&meta)?)?;
    set("lastSeq", &get("last_seq")?)?;
    set(
        "cancelRequested",
        &(get("cancel_requested")?.as_f64() == Some(1.0)).into(),
    )?;
    set("steerPending", &get("steer_pending")?)?;
    // The bench's runs resume from no decision (NULL); one would come as the row's array.
    let resume = get("resume")?;
    if let Some(resume) = resume.as_string() {
        set("resume", &js_sys::JSON::parse(&resume)?)?;
    }
    Ok(js_sys::JSON::stringify(&lease)?.as_string())
}

/// `runner_sql::try_lease`'s SQLite text (floor.js `LEASE_SCHEMA`).
const LEASE_SCHEMA: &str = "UPDATE task_run SET held_by = ?2, lease_epoch = lease_epoch + 1, lease_acked = 0, \
    heartbeat_at = ?3, updated_at = ?3 WHERE task_id = ?1 AND status = 'running' AND held_by IS NULL \
    RETURNING task_id, session_id, lease_epoch, objective, meta, last_seq, created_at, cancel_requested, \
    (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) AS steer_pending, \
    CASE WHEN last_seq > 0 THEN (SELECT json_array(gate_kind, card, decision, reason) FROM gate_checkpoint \
    WHERE task_id = ?1 AND status = 'resolved' ORDER BY park_seq DESC LIMIT 1) END AS resume";

/// Keeps a socket's note on it across hibernation (floor.js `note`, as ours keeps its `SocketNote`).
fn keep_note(ws: &WebSocket, ready: bool) -> Result<(), Failed> {
    let raw: &web_sys::WebSocket = ws.as_ref();
    let note = format!(
        "{{\"queue\":\"floor\",\"runnerId\":\"floor-socket\",\"key\":\"floor-socket-key\",\"ready\":{ready},\"since\":{}}}",
        now()
    );
    let keep: js_sys::Function =
        js_sys::Reflect::get(raw, &"serializeAttachment".into())?.dyn_into()?;
    keep.call1(raw, &note.into())?;
    Ok(())
}

/// One task queue (floor.js `FloorQueue`): waiting long-polls and ready sockets, first come first
/// served.
#[durable_object]
pub struct FloorQueue {
    state: State,
    env: Env,
    polls: RefCell<VecDeque<oneshot::Sender<Lease>>>,
    ready: RefCell<VecDeque<WebSocket>>,
}

impl DurableObject for FloorQueue {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            polls: RefCell::new(VecDeque::new()),
            ready: RefCell::new(VecDeque::new()),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        match req.path().as_str() {
            "/queue-connect" => {
                let pair = WebSocketPair::new()?;
                self.state.accept_web_socket(&pair.server);
                Response::from_websocket(pair.client)
            }
            "/queue-waiting" => text(
                200,
                &format!(
                    "{{\"waiting\":{},\"sockets\":{}}}",
                    self.polls.borrow().len(),
                    self.ready.borrow().len()
                ),
            ),
            _ => text(404, "no such part"),
        }
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        msg: WebSocketIncomingMessage,
    ) -> worker::Result<()> {
        if matches!(&msg, WebSocketIncomingMessage::String(t) if t == "ready") {
            keep_note(&ws, true)?;
            self.ready.borrow_mut().push_back(ws.clone());
            ws.send_with_str("waiting")?;
        }
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        _code: usize,
        _reason: String,
        _clean: bool,
    ) -> worker::Result<()> {
        self.ready.borrow_mut().retain(|w| *w != ws);
        Ok(())
    }
}

#[wasm_bindgen]
impl FloorQueue {
    /// One part, by RPC: a long-poll's wait (the lease written for it, or null after 20 s), an offer
    /// of a new run (null).
    #[wasm_bindgen(js_name = call)]
    pub async fn call(
        &self,
        part: String,
        _key: Option<String>,
        id: Option<String>,
    ) -> Result<JsValue, JsValue> {
        match part.as_str() {
            "/poll" => {
                let (tx, rx) = oneshot::channel();
                self.polls.borrow_mut().push_back(tx);
                let timeout = worker::Delay::from(std::time::Duration::from_secs(20));
                match select(rx, timeout).await {
                    Either::Left((Ok(Some(lease)), _)) => Ok(JsValue::from_str(&lease)),
                    _ => Ok(JsValue::NULL),
                }
            }
            "/offer" | "/offer-schema" => {
                let id = id.unwrap_or_default();
                let db = self.env.d1("DB")?;
                let schema = part == "/offer-schema";
                // As ours: the queue object writes a long-poll's lease and answers its wait with it.
                let lease = |to: To| async move {
                    if schema {
                        lease_schema_run(&db, &id, to).await
                    } else {
                        lease_run(&db, &id, to).await
                    }
                };
                let poll = self.polls.borrow_mut().pop_front();
                if let Some(poll) = poll {
                    let _ = poll.send(lease(To::Poll).await?);
                    return Ok(JsValue::NULL);
                }
                let ws = self.ready.borrow_mut().pop_front();
                if let Some(ws) = ws {
                    if schema {
                        // The design's hand-over marks the socket served in its note first (a
                        // failure ignored, as ours ignores it).
                        let _ = keep_note(&ws, false);
                    }
                    if let Some(lease) = lease(To::Socket).await? {
                        ws.send_with_str(lease)?;
                    }
                }
                Ok(JsValue::NULL)
            }
            _ => Err(JsValue::from_str("no such part")),
        }
    }
}
