// The floor of the product's admission design, in plain JavaScript on the same runtime. Each route
// is one platform part or a sum of parts, with no logic of ours: what remains between these
// figures and the product's is the product's own overhead.
//
//   GET  /health                       the trivial route (no D1, no object)
//   POST /d1?id=K                      one D1 batch of three inserts (run, claim, key), from the Worker
//   POST /do?o=NAME                    one Durable Object round trip (new object if NAME is new)
//   POST /do-storage?o=NAME            the object writes one key to its storage, then answers
//   POST /do-d1-storage?o=NAME&id=K    the object runs the D1 batch, then writes storage: today's admission
//   POST /do-d1-storage-alarm?o=NAME&id=K   the same, then sets the object's alarm (the design that
//                                      ships arms one per admission, to watch the claim)
//
// The tables are made once per isolate (CREATE TABLE IF NOT EXISTS), before the first batch.

let tables = null;
function ensureTables(db) {
  tables ??= db.batch([
    db.prepare("CREATE TABLE IF NOT EXISTS floor_run (id TEXT PRIMARY KEY, session TEXT NOT NULL, body TEXT NOT NULL)"),
    db.prepare("CREATE TABLE IF NOT EXISTS floor_claim (session TEXT PRIMARY KEY, id TEXT NOT NULL)"),
    db.prepare("CREATE TABLE IF NOT EXISTS floor_key (k TEXT PRIMARY KEY, id TEXT NOT NULL)"),
  ]);
  return tables;
}

async function admitBatch(db, id) {
  await ensureTables(db);
  await db.batch([
    db.prepare("INSERT INTO floor_run (id, session, body) VALUES (?1, ?1, ?2)").bind(id, "{\"objective\":\"bench\"}"),
    db.prepare("INSERT INTO floor_claim (session, id) VALUES (?1, ?1)").bind(id),
    db.prepare("INSERT INTO floor_key (k, id) VALUES (?1, ?1)").bind(id),
  ]);
}

const ok = () => new Response("{\"ok\":true}", { headers: { "content-type": "application/json" } });

export class FloorDo {
  constructor(state, env) {
    this.state = state;
    this.env = env;
  }

  // An alarm an hour out never fires within a bench run; if it did, there is nothing to watch.
  async alarm() {}

  async fetch(req) {
    const url = new URL(req.url);
    switch (url.pathname) {
      case "/do":
        return ok();
      case "/do-storage":
        await this.state.storage.put("state", "{\"claim\":\"x\"}");
        return ok();
      case "/do-d1-storage":
        await admitBatch(this.env.DB, url.searchParams.get("id"));
        await this.state.storage.put("state", "{\"claim\":\"x\"}");
        return ok();
      case "/do-d1-storage-alarm":
        await admitBatch(this.env.DB, url.searchParams.get("id"));
        await this.state.storage.put("state", "{\"claim\":\"x\"}");
        await this.state.storage.setAlarm(Date.now() + 3_600_000);
        return ok();
      default:
        return new Response("no such part", { status: 404 });
    }
  }
}

export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    if (url.pathname === "/health") {
      return new Response("{\"ok\":true,\"service\":\"sema-floor\"}", { headers: { "content-type": "application/json" } });
    }
    if (req.method !== "POST") return new Response("POST only", { status: 405 });
    if (url.pathname === "/d1") {
      await admitBatch(env.DB, url.searchParams.get("id"));
      return ok();
    }
    const name = url.searchParams.get("o");
    if (!name) return new Response("o= names the object", { status: 400 });
    const stub = env.FLOOR.get(env.FLOOR.idFromName(name));
    return stub.fetch(new Request("https://floor" + url.pathname + url.search, { method: "POST" }));
  },
};
