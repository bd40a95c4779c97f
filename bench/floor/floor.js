// The floor of the product's admission design, in plain JavaScript on the same runtime. Each route
// is one platform part or a sum of parts, with no logic of ours: what remains between these
// figures and the product's is the product's own overhead.
//
//   GET  /health                       the trivial route (no D1, no object)
//   POST /d1?id=K                      one D1 batch of three inserts (run, claim, key), from the Worker
//   POST /do?o=NAME                    one Durable Object round trip (new object if NAME is new)
//   POST /do-storage?o=NAME            the object writes one key to its storage, then answers
//   POST /do-d1-storage?o=NAME&id=K    the object runs the D1 batch, then writes storage (confirmed)
//   POST /do-d1-storage-alarm?o=NAME&id=K   the bare parts of the design that ships: the D1 batch,
//                                      then the storage write and the object's alarm (one per
//                                      admission, to watch the claim), both written after D1
//                                      unconfirmed, as ours
//   POST /schema-alarm?o=NAME&id=K     the same with the product's own admission batch into its
//                                      schema (its statements and indexes) in place of three inserts,
//                                      after the object's first read of its state (once per instance,
//                                      as each design part that admits or claims: `known`)
//   POST /schema-alarm-queue?o=NAME&id=K   the design that ships in full: /schema-alarm, then the
//                                      queue object told of the run without waiting, as ours
//   POST /cancel?o=NAME&id=K           the cancel of run K, as ours: the Worker reads the run's row
//                                      (its owner and session), then the object runs the product's
//                                      cancel batch (its five statements) and writes its state
//                                      unconfirmed; `sema-bench floor` pairs it with each warm
//                                      admission, as ours cancels each run of its warm scenario
//
// The product's other paths, each the same platform parts in the same order as ours, for the
// scenarios of `sema-bench floor-paths`:
//   POST /claim?o=NAME&id=K            a submit into a session: a conflict (the object already holds or
//                                      is taking a claim) is answered 409 from memory at once; otherwise
//                                      the object takes the claim, then D1 batch + storage + alarm, 202
//   POST /schema-claim?o=NAME&id=K     /claim through the design's parts: the claim taken as
//                                      /schema-alarm-queue admits (the product's own admission batch
//                                      into its schema, storage + alarm, the queue object told)
//   GET  /sse?o=NAME                   an event stream held by the object
//   POST /append?o=NAME&id=K           the object writes one event and the run's last seq (one D1
//                                      batch), then writes it to every stream it holds, and answers
//   POST /schema-lease?o=NAME&id=K     a run for /schema-append: the product's admission batch, then
//                                      its lease statement for the floor's runner (epoch 1)
//   POST /schema-append?o=NAME&id=K    /append through the design's parts: the product's append batch
//                                      (`event_sql::append`, one event: the fenced update of the run's
//                                      counter returning what waits for its holder, the fenced insert
//                                      of the event's row), the event's type and data from the body
//   GET  /queue-connect?q=Q            a WebSocket held by the queue object (hibernation API); a
//                                      `ready` text is answered `waiting` once the socket is in line
//                                      and its note kept on it (`serializeAttachment`, as ours; the
//                                      design's hand-over writes it again, served, before the lease)
//   POST /poll?q=Q                     a long-poll: waits in the queue object, which writes its lease
//                                      (as the offer that serves it says: one conditional update, or
//                                      the product's lease statement) and answers the wait with it
//   GET  /queue-waiting?q=Q            how many long-polls the queue object holds
//   POST /admit-dispatch?o=NAME&id=K&q=Q   an admission (D1 batch + storage + alarm) that then tells
//                                      the queue object without waiting for it: the object writes
//                                      the lease for a waiting long-poll (its answer) or for a ready
//                                      socket (pushed on it)
//   POST /schema-dispatch?o=NAME&id=K&q=Q  the hand-over of the design that ships: the product's
//                                      admission batch into its schema, storage and alarm as
//                                      /schema-alarm, then the queue object told without waiting;
//                                      it writes the lease with the product's own lease statement
//                                      (`runner_sql::try_lease`) and hands over what a runner is told
//   POST /tell?p=PREFIX&n=N&at=A       the reaper tick's notices: from one invocation, N objects
//                                      (PREFIX-0 … PREFIX-N-1, new if the prefix is) each called once,
//                                      A at a time; each reads its state from storage, as ours does
//                                      when told that a run ended, and answers. Answers
//                                      `{"ms":…}`, the wall time of the N calls inside the Worker
//   POST /admit-reserve?o=NAME&id=K&q=Q    a design to weigh (not ours): the session object first asks
//                                      the queue object for a ready socket; if one is reserved, the
//                                      admission's one D1 batch also writes the lease (the run row is
//                                      inserted leased to it), and the queue object is told to push
//                                      it (not awaited); with none ready, as /admit-dispatch
//
// The tables are made once per isolate (CREATE TABLE IF NOT EXISTS), before the first batch.
//
// Calls into an object travel as ours do: by RPC (`FloorDo.call`, `FloorQueue.call`: the part's
// name and its arguments in, status and body out), except an event stream and a WebSocket upgrade,
// which are `fetch`es (their responses carry the stream or the socket). A part that stands beside one of
// ours whose request has a body (`BODY_PARTS`: a submit's, an append's) reads the body in the Worker,
// as ours must, and passes it on: the object writes it as the run's objective, or as the event's row
// (the design's append: its event's type and data) and the data of its frame. The bench sends each
// such part the body ours gets.

import { DurableObject } from "cloudflare:workers";

let tables = null;
function ensureTables(db) {
  tables ??= db.batch([
    db.prepare(
      "CREATE TABLE IF NOT EXISTS floor_run (id TEXT PRIMARY KEY, session TEXT NOT NULL, body TEXT NOT NULL, " +
        "last_seq INTEGER NOT NULL DEFAULT 0, runner TEXT, epoch INTEGER NOT NULL DEFAULT 0)",
    ),
    db.prepare("CREATE TABLE IF NOT EXISTS floor_event (run TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run, seq))"),
    db.prepare("CREATE TABLE IF NOT EXISTS floor_claim (session TEXT PRIMARY KEY, id TEXT NOT NULL)"),
    db.prepare("CREATE TABLE IF NOT EXISTS floor_key (k TEXT PRIMARY KEY, id TEXT NOT NULL)"),
  ]);
  return tables;
}

/** The admission's batch; with `runner`, the run is inserted already leased to it (epoch 1). */
async function admitBatch(db, id, runner = null, body = "{\"objective\":\"bench\"}") {
  await ensureTables(db);
  await db.batch([
    runner
      ? db.prepare("INSERT INTO floor_run (id, session, body, runner, epoch) VALUES (?1, ?1, ?2, ?3, 1)").bind(id, body, runner)
      : db.prepare("INSERT INTO floor_run (id, session, body) VALUES (?1, ?1, ?2)").bind(id, body),
    db.prepare("INSERT INTO floor_claim (session, id) VALUES (?1, ?1)").bind(id),
    db.prepare("INSERT INTO floor_key (k, id) VALUES (?1, ?1)").bind(id),
  ]);
}

/**
 * The product's own admission batch (`run_sql::admit` for a submit without a key, SQLite text): the
 * session upsert, the run row and the claim, each conditional on the session's owner, into the
 * product's schema with its indexes (applied to this Worker's D1 from `schema/sqlite`).
 */
async function schemaBatch(db, id, objective = "bench") {
  const now = Date.now();
  await db.batch([
    db.prepare(
      "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) " +
        "ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at WHERE session.owner IS excluded.owner",
    ).bind(id, null, now),
    db.prepare(
      "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, objective_preview, meta, " +
        "heartbeat_at, created_at, updated_at, queue) SELECT ?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8, ?8, ?9 " +
        "WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?2 AND owner IS ?3)",
    ).bind(id, id, null, "floor", objective, "bench", "{}", now, "default"),
    db.prepare(
      "INSERT INTO task_active (session_id, task_id, created_at) SELECT ?1, ?2, ?3 " +
        "WHERE EXISTS (SELECT 1 FROM session WHERE session_id = ?1 AND owner IS ?4)",
    ).bind(id, id, now, null),
  ]);
}

/** The product's cancel batch (`run_sql::cancel`, SQLite text) for a run no runner holds. */
async function cancelBatch(db, id) {
  const now = Date.now();
  const live = "('running','suspended','needs_review')";
  await db.batch([
    db.prepare(
      "UPDATE task_run SET status = 'cancelled', error = ?3, cancel_requested = 1, held_by = NULL, updated_at = ?2 " +
        "WHERE task_id = ?1 AND (status IN ('suspended','needs_review') OR (status = 'running' AND held_by IS NULL))",
    ).bind(id, now, "cancelled by user"),
    db.prepare(
      "UPDATE task_run SET cancel_requested = 1, updated_at = ?2 " +
        "WHERE task_id = ?1 AND status = 'running' AND held_by IS NOT NULL AND cancel_requested = 0",
    ).bind(id, now),
    db.prepare(
      `DELETE FROM task_active WHERE task_id = ?1 AND NOT EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 AND status IN ${live})`,
    ).bind(id),
    db.prepare(
      "UPDATE gate_checkpoint SET status = 'voided', pending_session = NULL, updated_at = ?2 WHERE task_id = ?1 AND status = 'pending' " +
        `AND NOT EXISTS (SELECT 1 FROM task_run WHERE task_run.task_id = ?1 AND task_run.status IN ${live})`,
    ).bind(id, now),
    db.prepare("SELECT * FROM task_run WHERE task_id = ?1").bind(id),
  ]);
}

/** The runner the design's append scenario leases its run to (`/schema-lease`), at epoch 1. */
const FLOOR_RUNNER = "floor-runner";

/**
 * The product's append batch for one event (`event_sql::append`, SQLite text) by the run's holder at
 * `epoch`: the event's seq, or null when the fence refused it (the run is not held so).
 */
async function appendSchemaBatch(db, run, epoch, runner, type, data) {
  const now = Date.now();
  const [fence] = await db.batch([
    db.prepare(
      "UPDATE task_run SET last_seq = last_seq + ?3, updated_at = ?4, heartbeat_at = ?4, lease_acked = 1 " +
        "WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?5 AND status = 'running' " +
        "RETURNING last_seq, cancel_requested, (SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 " +
        "AND delivered_at IS NULL) AS steer_pending",
    ).bind(run, epoch, 1, now, runner),
    db.prepare(
      "INSERT INTO run_event (task_id, seq, type, data, event_id, created_at) " +
        "SELECT ?1, last_seq - ?3, ?4, ?5, ?6, ?7 FROM task_run " +
        "WHERE task_id = ?1 AND lease_epoch = ?2 AND held_by = ?8 AND status = 'running'",
    ).bind(run, epoch, 0, type, data, null, now, runner),
  ]);
  return fence.results[0]?.last_seq ?? null;
}

async function appendBatch(db, run, seq, body) {
  await ensureTables(db);
  await db.batch([
    db.prepare("INSERT INTO floor_event (run, seq, body) VALUES (?1, ?2, ?3)").bind(run, seq, body),
    db.prepare("UPDATE floor_run SET last_seq = ?2 WHERE id = ?1").bind(run, seq),
  ]);
}

/** The lease: one conditional update (the run is still unleased), its row read back. */
async function leaseRun(db, id, runner) {
  await ensureTables(db);
  const { results } = await db
    .prepare("UPDATE floor_run SET runner = ?2, epoch = epoch + 1 WHERE id = ?1 AND runner IS NULL RETURNING id, epoch")
    .bind(id, runner)
    .all();
  return results[0] ?? null;
}

/**
 * The product's own lease (`runner_sql::try_lease`, SQLite text) on its schema: the compare-and-set,
 * with what waits for the new holder (cancel, steer count, the decision it resumes from) read back in
 * the same statement. What a runner is told (`dispatch::lease_frame`'s fields, without `type`), or
 * null when it was leased already. The bench's runs resume from no decision (NULL); one would come
 * as the row's array.
 */
const LEASE_SCHEMA =
  "UPDATE task_run SET held_by = ?2, lease_epoch = lease_epoch + 1, lease_acked = 0, heartbeat_at = ?3, updated_at = ?3 " +
  "WHERE task_id = ?1 AND status = 'running' AND held_by IS NULL " +
  "RETURNING task_id, session_id, lease_epoch, objective, meta, last_seq, created_at, cancel_requested, " +
  "(SELECT COUNT(*) FROM steer_message WHERE task_id = ?1 AND delivered_at IS NULL) AS steer_pending, " +
  "CASE WHEN last_seq > 0 THEN (SELECT json_array(gate_kind, card, decision, reason) FROM gate_checkpoint " +
  "WHERE task_id = ?1 AND status = 'resolved' ORDER BY park_seq DESC LIMIT 1) END AS resume";

async function leaseSchemaRun(db, id, runner) {
  // A batch of one statement, as the product sends it.
  const [{ results }] = await db.batch([db.prepare(LEASE_SCHEMA).bind(id, runner, Date.now())]);
  const r = results[0];
  if (!r) return null;
  const lease = {
    taskId: r.task_id,
    sessionId: r.session_id,
    leaseEpoch: r.lease_epoch,
    objective: r.objective,
    meta: JSON.parse(r.meta),
    lastSeq: r.last_seq,
    cancelRequested: r.cancel_requested === 1,
    steerPending: r.steer_pending,
  };
  if (r.resume !== null) lease.resume = JSON.parse(r.resume);
  return lease;
}

/** The bare lease as a runner is told it, or null. */
async function leaseBareRun(db, id, runner) {
  const lease = await leaseRun(db, id, runner);
  return lease && { taskId: lease.id, leaseEpoch: lease.epoch };
}

/** Calls objects PREFIX-0 … PREFIX-(n-1) once each (`/do-read`), `at` in flight; the wall ms taken. */
async function tell(env, prefix, n, at) {
  const started = Date.now();
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const name = `${prefix}-${next++}`;
      await env.FLOOR.get(env.FLOOR.idFromName(name)).call("/do-read");
    }
  };
  await Promise.all(Array.from({ length: at }, lane));
  return Date.now() - started;
}

/**
 * The parts that stand beside a path of ours whose request has a body (a submit's, an append's):
 * the Worker reads it and the object carries it, as ours does (an empty body carries a fixed one).
 */
const BODY_PARTS = new Set(["/claim", "/schema-claim", "/append", "/schema-append", "/admit-dispatch", "/schema-dispatch", "/admit-reserve", "/do-d1-storage-alarm", "/schema-alarm", "/schema-alarm-queue"]);

const queueOf = (env, name) => env.FLOOR_QUEUE.get(env.FLOOR_QUEUE.idFromName(name));
const json = (body, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const enc = new TextEncoder();

const ok = () => new Response("{\"ok\":true}", { headers: { "content-type": "application/json" } });
const OK = [200, "{\"ok\":true}"];
/** The response of an RPC part's `[status, body]`. */
const answer = ([status, body]) =>
  status === 204 ? new Response(null, { status }) : new Response(body, { status, headers: { "content-type": "application/json" } });

export class FloorDo extends DurableObject {
  constructor(state, env) {
    super(state, env);
    this.state = state;
    this.env = env;
  }

  // An alarm an hour out never fires within a bench run; if it did, there is nothing to watch.
  async alarm() {}

  /**
   * An admission of the design that ships: the D1 batch, then the object's copy of the claim and
   * its alarm, both written without waiting for the disk (`allowUnconfirmed`), as ours writes them
   * once D1 holds the run (docs/ARCHITECTURE.md, "Writes after D1, unconfirmed").
   */
  async admit(id, runner = null, body = undefined) {
    await admitBatch(this.env.DB, id, runner, body);
    await this.remember();
  }

  /**
   * The design's parts begin with what the object knows: once per instance it reads its state from
   * storage (a claim an earlier instance took), as ours does before its first answer.
   */
  async known() {
    if (!this.loaded) {
      await this.state.storage.get("state");
      this.loaded = true;
    }
  }

  /**
   * An admission through the design's parts: what the object knows, the product's admission batch,
   * the claim's copy and its alarm, then (given `queue`) that queue told without waiting, as ours.
   */
  async admitDesign(id, body, queue = null) {
    await this.known();
    await schemaBatch(this.env.DB, id, body ?? undefined);
    await this.remember();
    if (queue) queueOf(this.env, queue).call("/offer-schema", null, id).catch(() => {});
  }

  /** The object's copy of the claim and its alarm, written after D1 without waiting for the disk. */
  async remember() {
    const unconfirmed = { allowUnconfirmed: true };
    await this.state.storage.put("state", "{\"claim\":\"x\"}", unconfirmed);
    await this.state.storage.setAlarm(Date.now() + 3_600_000, unconfirmed);
  }

  /** An event stream held by the object (the one part that is a `fetch`: its response streams). */
  async fetch() {
    const { readable, writable } = new TransformStream();
    const writer = writable.getWriter();
    (this.streams ??= new Set()).add(writer);
    writer.write(enc.encode(": open\n\n"));
    return new Response(readable, { headers: { "content-type": "text/event-stream" } });
  }

  /** One part, by RPC: `[status, body]`; `body` is the request's (`BODY_PARTS`), else null. */
  async call(part, id, q, body = null) {
    switch (part) {
      case "/claim":
      case "/schema-claim":
        if (part === "/schema-claim") await this.known();
        if (this.claim) return [409, JSON.stringify({ error: "busy", errorCode: "session_busy" })];
        this.claim = id;
        if (part === "/schema-claim") await this.admitDesign(id, body, "default");
        else await this.admit(id, null, body ?? undefined);
        return [202, JSON.stringify({ taskId: id })];
      case "/schema-lease":
        await schemaBatch(this.env.DB, id);
        return (await leaseSchemaRun(this.env.DB, id, FLOOR_RUNNER)) ? OK : [409, "{\"error\":\"not leased\"}"];
      case "/schema-append": {
        const event = body ?? "{\"events\":[{\"type\":\"text_delta\",\"data\":{}}]}";
        const [first] = JSON.parse(event).events;
        const seq = await appendSchemaBatch(this.env.DB, id, 1, FLOOR_RUNNER, first.type, JSON.stringify(first.data));
        if (seq === null) return [409, "{\"error\":\"the lease is not held\"}"];
        const frame = enc.encode(`id: ${seq}\ndata: ${event}\n\n`);
        for (const w of this.streams ?? []) w.write(frame).catch(() => this.streams.delete(w));
        return [200, JSON.stringify({ seqs: [seq] })];
      }
      case "/append": {
        const seq = (this.seq = (this.seq ?? 0) + 1);
        const event = body ?? "{\"type\":\"text_delta\"}";
        await appendBatch(this.env.DB, id, seq, event);
        const frame = enc.encode(`id: ${seq}\ndata: ${event}\n\n`);
        for (const w of this.streams ?? []) w.write(frame).catch(() => this.streams.delete(w));
        return [200, JSON.stringify({ seqs: [seq] })];
      }
      case "/admit-dispatch":
      case "/admit-reserve": {
        const queue = queueOf(this.env, q);
        // The design to weigh reserves a ready socket first, to write its lease with the run.
        let key = null;
        if (part === "/admit-reserve") key = await queue.call("/reserve");
        await this.admit(id, key, body ?? undefined);
        // Not awaited, as ours: the answer does not wait for the hand-over.
        (key ? queue.call("/deliver", key, id) : queue.call("/offer", null, id)).catch(() => {});
        return [202, JSON.stringify({ taskId: id })];
      }
      case "/schema-dispatch":
        // The queue told without waiting, as ours: the answer does not wait for the hand-over.
        await this.admitDesign(id, body, q);
        return [202, JSON.stringify({ taskId: id })];
      case "/do":
        return OK;
      case "/do-read":
        await this.state.storage.get("state");
        return OK;
      case "/do-storage":
        await this.state.storage.put("state", "{\"claim\":\"x\"}");
        return OK;
      case "/do-d1-storage":
        await admitBatch(this.env.DB, id);
        await this.state.storage.put("state", "{\"claim\":\"x\"}");
        return OK;
      case "/do-d1-storage-alarm":
        await this.admit(id, null, body ?? undefined);
        return OK;
      case "/cancel":
        await cancelBatch(this.env.DB, id);
        await this.state.storage.put("state", "{\"claim\":null}", { allowUnconfirmed: true });
        return OK;
      case "/schema-alarm":
      case "/schema-alarm-queue":
        await this.admitDesign(id, body, part === "/schema-alarm-queue" ? "default" : null);
        return OK;
      default:
        return [404, "no such part"];
    }
  }
}

/** A socket's note as ours keeps it (`dispatch::SocketNote`'s fields, as JSON text). */
const note = (ready) =>
  JSON.stringify({ queue: "floor", runnerId: "floor-socket", key: "floor-socket-key", ready, since: Date.now() });

/** One task queue: waiting long-polls and ready sockets, served first come first served. */
export class FloorQueue extends DurableObject {
  constructor(state, env) {
    super(state, env);
    this.state = state;
    this.env = env;
    this.polls = [];
    this.ready = [];
  }

  async fetch(req) {
    const url = new URL(req.url);
    switch (url.pathname) {
      case "/queue-connect": {
        const pair = new WebSocketPair();
        this.state.acceptWebSocket(pair[1]);
        return new Response(null, { status: 101, webSocket: pair[0] });
      }
      case "/queue-waiting":
        return json({ waiting: this.polls.length, sockets: this.ready.length });
      default:
        return new Response("no such part", { status: 404 });
    }
  }

  /**
   * One part, by RPC: a long-poll's wait (the lease written for it, or null), a reservation (a socket's
   * key, or null), a delivery to a reserved socket, an offer of a new run.
   */
  async call(part, key, id) {
    switch (part) {
      case "/poll":
        return await new Promise((resolve) => {
          this.polls.push(resolve);
          setTimeout(() => resolve(null), 20_000);
        });
      case "/reserve": {
        const ws = this.ready.shift();
        if (!ws) return null;
        const k = `s${(this.nextKey = (this.nextKey ?? 0) + 1)}`;
        (this.reserved ??= new Map()).set(k, ws);
        return k;
      }
      case "/deliver": {
        const ws = this.reserved?.get(key);
        this.reserved?.delete(key);
        ws?.send(JSON.stringify({ type: "lease", taskId: id, leaseEpoch: 1 }));
        return null;
      }
      case "/offer":
      case "/offer-schema": {
        // `/offer`: the lease of a run in the floor's own table; `/offer-schema`: the product's.
        const lease = part === "/offer-schema" ? leaseSchemaRun : leaseBareRun;
        const poll = this.polls.shift();
        if (poll) {
          // As ours: the queue object writes a long-poll's lease and answers its wait with it.
          poll(await lease(this.env.DB, id, "floor-poll"));
          return null;
        }
        const ws = this.ready.shift();
        if (ws) {
          // The design's hand-over marks the socket served in its note before the lease is written (a
          // failure ignored, as ours ignores it).
          if (part === "/offer-schema") {
            try {
              ws.serializeAttachment(note(false));
            } catch {}
          }
          const leased = await lease(this.env.DB, id, "floor-socket");
          if (leased) ws.send(JSON.stringify({ type: "lease", ...leased }));
        }
        return null;
      }
      default:
        throw new Error("no such part");
    }
  }

  async webSocketMessage(ws, msg) {
    if (msg === "ready") {
      // The socket's note, kept on it across hibernation (as ours keeps its `SocketNote`; for every
      // socket, outside the timed window).
      ws.serializeAttachment(note(true));
      this.ready.push(ws);
      ws.send("waiting");
    }
  }

  async webSocketClose(ws) {
    this.ready = this.ready.filter((w) => w !== ws);
  }
}

export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    if (url.pathname === "/health") {
      return new Response("{\"ok\":true,\"service\":\"sema-floor\"}", { headers: { "content-type": "application/json" } });
    }
    const q = url.searchParams.get("q");
    const queue = q && queueOf(env, q);
    if (url.pathname === "/queue-connect" || url.pathname === "/queue-waiting") {
      if (!queue) return new Response("q= names the queue", { status: 400 });
      return queue.fetch(req);
    }
    if (url.pathname === "/sse") {
      const name = url.searchParams.get("o");
      if (!name) return new Response("o= names the object", { status: 400 });
      return env.FLOOR.get(env.FLOOR.idFromName(name)).fetch(req);
    }
    if (req.method !== "POST") return new Response("POST only", { status: 405 });
    if (url.pathname === "/poll") {
      if (!queue) return new Response("q= names the queue", { status: 400 });
      const lease = await queue.call("/poll");
      return lease ? json(lease) : new Response(null, { status: 204 });
    }
    if (url.pathname === "/tell") {
      const prefix = url.searchParams.get("p");
      const n = Number(url.searchParams.get("n"));
      const at = Number(url.searchParams.get("at"));
      if (!prefix || !Number.isInteger(n) || !Number.isInteger(at) || !(n > 0 && n <= 1000) || !(at > 0 && at <= n)) {
        return new Response("p= names the objects, n= (1..1000) counts them, at= (1..n) bounds the calls in flight", { status: 400 });
      }
      return json({ ms: await tell(env, prefix, n, at) });
    }
    if (url.pathname === "/d1") {
      await admitBatch(env.DB, url.searchParams.get("id"));
      return ok();
    }
    const name = url.searchParams.get("o");
    if (!name) return new Response("o= names the object", { status: 400 });
    // A cancel names a run: the Worker reads its row (its owner and session) before the call.
    if (url.pathname === "/cancel") await env.DB.prepare("SELECT * FROM task_run WHERE task_id = ?1").bind(url.searchParams.get("id")).first();
    // A part that stands beside one of ours reads the request's body, as ours must, and carries it
    // (into the run's objective, or the event's row and frame).
    const body = BODY_PARTS.has(url.pathname) ? (await req.text()) || null : null;
    const stub = env.FLOOR.get(env.FLOOR.idFromName(name));
    return answer(await stub.call(url.pathname, url.searchParams.get("id"), q, body));
  },
};
