// A real EventSource (Node 22's built-in, `node --experimental-eventsource`) that does NOT close
// itself on `done`: it lets the browser's reconnection rules run, so a test sees what they do with
// our stream's end. Run by tests/runner/wire.rs as a child process:
//
//   node --experimental-eventsource tests/runner/eventsource_client.mjs URL DEADLINE_MS
//
// Prints one JSON line per thing the EventSource does, in order:
//   {"on":"open"}                                  a connection answered 200 text/event-stream
//   {"on":"message","lastEventId":"7","data":{…}}  an unnamed frame (ledger events and `done`)
//   {"on":"error","readyState":0|2}                0: it will reconnect (after its reconnection time,
//                                                  3 s by default); 2: CLOSED, it gave up for good
// and exits 0 once the EventSource is CLOSED (it never reconnects from there), or prints
// {"on":"deadline"} and exits 2 if DEADLINE_MS passes first (a stream that never ends, or an
// EventSource that keeps reconnecting).
const [url, deadlineMs] = process.argv.slice(2);
if (typeof EventSource !== "function") {
  console.log(JSON.stringify({ on: "no-eventsource", node: process.version }));
  process.exit(3);
}
const print = (line) => console.log(JSON.stringify(line));
const es = new EventSource(url);
const deadline = setTimeout(() => {
  print({ on: "deadline" });
  es.close();
  process.exit(2);
}, Number(deadlineMs));
es.addEventListener("open", () => print({ on: "open" }));
es.addEventListener("message", (e) =>
  print({ on: "message", lastEventId: e.lastEventId, data: JSON.parse(e.data) }),
);
es.addEventListener("error", () => {
  print({ on: "error", readyState: es.readyState });
  if (es.readyState === EventSource.CLOSED) {
    clearTimeout(deadline);
    process.exit(0);
  }
});
