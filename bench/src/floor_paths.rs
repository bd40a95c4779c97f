//! `floor-paths`: the floor of the product's other hot paths, on the bench-only floor Worker
//! (`bench/floor/floor.js`, plain JavaScript on the same workerd). Each scenario has the shape of
//! ours (the same counts and the same order of calls), so the report sets ours beside it:
//!
//! - `floor-contention`: `contenders` simultaneous submits into each of `sessions` fresh objects;
//!   one takes the claim (D1 batch, then storage + alarm written unconfirmed), the others are
//!   answered 409 from memory;
//! - `floor-append`: one event appended per call to an object holding one event stream; from
//!   sending the append to reading its `id:` line on the stream;
//! - `floor-dispatch`: submit → lease with one runner waiting in the queue object, over a
//!   WebSocket (the object writes the lease and pushes it) and a long-poll (the object writes the
//!   lease and answers the wait with it), into a new session object each time and into one warm one. First round:
//!   warm-up, apart. Then, over the WebSocket, a design to weigh (`ws-reserved`): the session
//!   object reserves the waiting socket first and writes the lease in the admission's own batch.
//!
//! Each path through two sets of [`Parts`]: the design's (the product's own statements on its
//! schema: its admission batch, its append batch, its lease statement), which `beside-floor-paths`
//! sets ours beside, as `beside-floor` sets admission beside `schema-alarm-queue`; and the bare
//! parts (the same calls in the same order, writing tables without indexes: three inserts, an event
//! row and a counter, a lease returning two columns).

use crate::queues::ms_since;
use crate::socket_reader::{Frames, SocketReader};
use crate::{contention_rounds, emit, percentile, summary, unique};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tungstenite::WebSocket;

/// How long a round waits for the lease or the event before it counts as an error.
const DEADLINE: Duration = Duration::from_secs(10);

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

/// POST `path` (with its query) on the floor Worker: (status, body, ms).
/// POSTs `path` (a part, its query) to the floor Worker at `url`, with the body ours gets on the
/// path the part stands beside ([`crate::floor::body_for`]).
fn post(agent: &ureq::Agent, url: &str, path: &str) -> (u16, Value, f64) {
    let part = path.split('?').next().unwrap_or(path);
    let session = query_param(path, "o").unwrap_or("bench");
    let t = Instant::now();
    let (status, body) =
        match crate::floor::send(agent.post(&format!("{url}{path}")), part, session) {
            Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
            Err(code) => (code, Value::Null),
        };
    (status, body, t.elapsed().as_secs_f64() * 1000.0)
}

/// The value of `name` in `path`'s query (the bench's names need no decoding).
fn query_param<'a>(path: &'a str, name: &str) -> Option<&'a str> {
    path.split_once('?')?
        .1
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// p50/p95/p99/max of `lat` and of the submits' own times, as one result line.
fn line(scenario: &str, mut lat: Vec<f64>, mut submit: Vec<f64>, errors: usize) -> Value {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    submit.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut l = summary(lat.clone());
    l["scenario"] = json!(scenario);
    l["samples"] = json!(lat.len());
    l["errors"] = json!(errors);
    l["max_ms"] = json!(lat.last());
    if !submit.is_empty() {
        l["submit_p50_ms"] = json!(percentile(&submit, 50.0));
        l["submit_p99_ms"] = json!(percentile(&submit, 99.0));
    }
    l
}

/// Which of the floor Worker's parts a path goes through.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Parts {
    /// The product's own statements on its schema (the design's floor).
    Design,
    /// The same calls writing tables without indexes.
    Bare,
}

impl Parts {
    fn name(self) -> &'static str {
        match self {
            Parts::Design => "design",
            Parts::Bare => "bare",
        }
    }

    /// A submit that takes the claim or meets it.
    fn claim(self) -> &'static str {
        match self {
            Parts::Design => "schema-claim",
            Parts::Bare => "claim",
        }
    }

    /// The part that makes the append scenario's run, and the append.
    fn append(self) -> (&'static str, &'static str) {
        match self {
            Parts::Design => ("schema-lease", "schema-append"),
            Parts::Bare => ("do-d1-storage", "append"),
        }
    }

    /// An admission that tells the queue object, which writes the lease.
    fn hand_over(self) -> &'static str {
        match self {
            Parts::Design => "schema-dispatch",
            Parts::Bare => "admit-dispatch",
        }
    }
}

pub fn floor_paths(url: &str, sessions: usize, contenders: usize, samples: usize) {
    for parts in [Parts::Design, Parts::Bare] {
        contention(url, sessions, contenders, parts);
        append(url, samples, parts);
        for warm in [false, true] {
            dispatch_ws(url, samples, warm, parts, false);
            dispatch_poll(url, samples, warm, parts);
        }
    }
    // A design to weigh beside ours: the lease written in the admission's own D1 batch (into the
    // bare parts' tables).
    for warm in [false, true] {
        dispatch_ws(url, samples, warm, Parts::Bare, true);
    }
}

/// `contenders` simultaneous claims on each of `sessions` new objects: exactly one 202 each.
pub(crate) fn contention(url: &str, sessions: usize, contenders: usize, parts: Parts) {
    let claim = parts.claim();
    let mut l = contention_rounds(
        "floor-contention",
        sessions,
        contenders,
        202,
        || unique("fc"),
        |agent, session| {
            let (status, _, ms) = post(
                agent,
                url,
                &format!("/{claim}?o={session}&id={}", unique("fci")),
            );
            (status, ms)
        },
    );
    l["parts"] = json!(parts.name());
    emit(l);
}

pub(crate) fn append(url: &str, samples: usize, parts: Parts) {
    let (object, run) = (unique("fa"), unique("far"));
    let a = agent();
    let (setup, append) = parts.append();
    let (status, _, _) = post(&a, url, &format!("/{setup}?o={object}&id={run}"));
    if status != 200 {
        let e = format!("{setup} answered {status}");
        emit(json!({"scenario": "floor-append", "parts": parts.name(), "errors": 1, "error": e}));
        return;
    }
    let (tx, rx) = mpsc::channel::<(i64, Instant)>();
    let stream_url = format!("{url}/sse?o={object}");
    // The stream never ends; the reader stops at its read timeout once the appends stop.
    std::thread::spawn(move || {
        let reader = ureq::AgentBuilder::new()
            .timeout_read(Duration::from_secs(5))
            .build();
        let Ok(resp) = reader.get(&stream_url).call() else {
            return;
        };
        for l in BufReader::new(resp.into_reader()).lines() {
            let Ok(l) = l else { return };
            if let Some(id) = l.strip_prefix("id: ") {
                if tx.send((id.parse().unwrap_or(-1), Instant::now())).is_err() {
                    return;
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300)); // let the stream open
    let (mut lat, mut errors) = (vec![], 0);
    for _ in 0..samples {
        let sent = Instant::now();
        let (status, body, _) = post(&a, url, &format!("/{append}?o={object}&id={run}"));
        let seq = body["seqs"][0].as_i64().unwrap_or(-1);
        match rx.recv_timeout(DEADLINE) {
            Ok((got, at)) if status == 200 && got == seq => {
                lat.push(at.duration_since(sent).as_secs_f64() * 1000.0)
            }
            _ => errors += 1,
        }
    }
    let mut l = line("floor-append", lat, vec![], errors);
    l["parts"] = json!(parts.name());
    emit(l);
}

/// Submits one new run through `route` into the warm session object (or a new one) on `queue`:
/// (run id, when it was sent, status, the submit's own ms).
fn submit(
    agent: &ureq::Agent,
    url: &str,
    route: &str,
    warm: &Option<String>,
    queue: &str,
) -> (String, Instant, u16, f64) {
    let run = unique("fdr");
    let session = warm.clone().unwrap_or_else(|| unique("fds"));
    let sent = Instant::now();
    let (status, _, ms) = post(
        agent,
        url,
        &format!("/{route}?o={session}&id={run}&q={queue}"),
    );
    (run, sent, status, ms)
}

fn connect(url: &str, queue: &str) -> Result<WebSocket<TcpStream>, String> {
    let rest = url.strip_prefix("http://").ok_or("http:// only")?;
    let host = rest.split('/').next().unwrap_or(rest);
    let stream = TcpStream::connect(host).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    tungstenite::client::client(format!("ws://{rest}/queue-connect?q={queue}"), stream)
        .map(|(ws, _)| ws)
        .map_err(|e| e.to_string())
}

/// Submit → lease rounds: the first is the warm-up, shown apart.
#[derive(Default)]
struct Rounds {
    lat: Vec<f64>,
    submit: Vec<f64>,
    errors: usize,
    warmup: Value,
    /// Why the rounds stopped before their count, if they did.
    stopped: Option<String>,
}

impl Rounds {
    /// Counts round `round`; whether it was right (the submit accepted, its run leased).
    fn record(&mut self, round: usize, right: bool, ms: f64, submit_ms: f64) -> bool {
        if !right {
            self.errors += 1;
        } else if round == 0 {
            self.warmup = json!({"submit_to_lease_ms": ms, "submit_ms": submit_ms});
        } else {
            self.lat.push(ms);
            self.submit.push(submit_ms);
        }
        right
    }

    fn line(self, transport: &str, parts: Parts, warm: bool) -> Value {
        // The lease's arrival less the submit's answer, per round (negative: the lease came first).
        let mut after: Vec<f64> = self
            .lat
            .iter()
            .zip(&self.submit)
            .map(|(l, s)| l - s)
            .collect();
        after.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let mut l = line("floor-dispatch", self.lat, self.submit, self.errors);
        l["lease_after_submit_response_p50_ms"] =
            json!((!after.is_empty()).then(|| percentile(&after, 50.0)));
        l["transport"] = json!(transport);
        l["parts"] = json!(parts.name());
        l["session"] = json!(if warm { "warm" } else { "new" });
        l["warmup"] = self.warmup;
        l["stopped_early"] = json!(self.stopped);
        l
    }
}

/// Through `parts`' hand-over (the shape of ours), or with `reserve`, the bare parts' `admit-reserve`
/// (the lease in the admission's batch, for a socket the session object reserved first).
pub(crate) fn dispatch_ws(url: &str, samples: usize, warm: bool, parts: Parts, reserve: bool) {
    let route = if reserve {
        "admit-reserve"
    } else {
        parts.hand_over()
    };
    let queue = unique("fq");
    let warm_session = warm.then(|| unique("fdw"));
    let a = agent();
    let transport = if reserve { "ws-reserved" } else { "ws" };
    let socket = match connect(url, &queue) {
        Ok(ws) => SocketReader::start(ws, FLOOR),
        Err(e) => {
            emit(json!({"scenario": "floor-dispatch", "transport": transport,
                "parts": parts.name(), "session": if warm { "warm" } else { "new" },
                "errors": 1, "error": e}));
            return;
        }
    };
    let mut rounds = Rounds::default();
    for round in 0..=samples {
        if let Err(e) = socket.ready().and_then(|_| socket.waiting(DEADLINE)) {
            rounds.errors += 1;
            rounds.stopped = Some(e);
            break;
        }
        let (run, sent, status, sub_ms) = submit(&a, url, route, &warm_session, &queue);
        if status != 202 {
            // No lease will come for this round, so the socket's reader cannot go on.
            rounds.errors += 1;
            rounds.stopped = Some(format!("submit answered {status}"));
            break;
        }
        let (frame, at) = match socket.lease(DEADLINE) {
            Ok(read) => read,
            Err(e) => {
                // The socket is gone or stuck: no further round can be measured.
                rounds.errors += 1;
                rounds.stopped = Some(e);
                break;
            }
        };
        let ms = ms_since(sent, at);
        let got: Value = serde_json::from_str(&frame).unwrap_or(Value::Null);
        rounds.record(round, got["taskId"] == run.as_str(), ms, sub_ms);
    }
    drop(socket);
    emit(rounds.line(transport, parts, warm));
}

/// The floor socket's frames: `ready` answered `waiting`, then the lease.
const FLOOR: Frames = Frames {
    ready: "ready",
    waiting: Some(|t| t == "waiting"),
    lease: |t| t.contains("\"lease\""),
};

pub(crate) fn dispatch_poll(url: &str, samples: usize, warm: bool, parts: Parts) {
    let route = parts.hand_over();
    let queue = unique("fq");
    let warm_session = warm.then(|| unique("fdw"));
    let main = agent();
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(Value, Instant)>();
    let mut rounds = Rounds::default();
    std::thread::scope(|s| {
        s.spawn(|| {
            let a = agent();
            // Each round leases once; 204s (a wait that ran out) and failures are bounded too.
            for _ in 0..(4 * samples + 16) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let (status, body, _) = post(&a, url, &format!("/poll?q={queue}"));
                if status == 200 && tx.send((body, Instant::now())).is_err() {
                    break;
                }
            }
        });
        for round in 0..=samples {
            // The runner is waiting in the queue object before the submit goes.
            let until = Instant::now() + DEADLINE;
            while Instant::now() < until {
                let w = main
                    .get(&format!("{url}/queue-waiting?q={queue}"))
                    .call()
                    .ok()
                    .and_then(|r| r.into_json::<Value>().ok());
                if w.is_some_and(|w| w["waiting"].as_i64().unwrap_or(0) >= 1) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let (run, sent, status, sub_ms) = submit(&main, url, route, &warm_session, &queue);
            let Ok((got, at)) = rx.recv_timeout(DEADLINE) else {
                rounds.errors += 1;
                break; // the runner is gone or stuck: no further round can be measured
            };
            let ms = at.duration_since(sent).as_secs_f64() * 1000.0;
            rounds.record(
                round,
                status == 202 && got["taskId"] == run.as_str(),
                ms,
                sub_ms,
            );
        }
        // Release the runner: one more run reaches it, and it stops after it.
        stop.store(true, Ordering::SeqCst);
        let path = format!(
            "/{route}?o={}&id={}&q={queue}",
            unique("fds"),
            unique("fdr")
        );
        post(&main, url, &path);
        drop(rx);
    });
    emit(rounds.line("long-poll", parts, warm));
}
