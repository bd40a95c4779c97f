//! `sema-runner`: a reference runner. It leases runs from a Sema Edge server, executes each objective
//! as a small script (see `script.rs`), streams `text_delta` events, heartbeats (noticing cancel and
//! steer messages; between quick steps only when told something waits, see [`BEAT_EVERY`]), parks
//! runs on human gates (`ask`) and goes on after the decision when a resumed run is leased again,
//! and finishes each run. Runs offline against `scripts/dev`.
//!
//! ```text
//! sema-runner [--url http://127.0.0.1:8787] [--runner-id ID] [--token TOKEN] [--concurrency N]
//!             [--max-runs N] [--wait-ms MS] [--queue Q] [--transport auto|ws|poll]
//! ```
//! Leases arrive on the queue dispatcher's WebSocket (`GET /v1/runner/connect`, `ws://` only: a
//! `https://` server uses the long-poll) when it connects; on any failure the runner falls back to
//! the long-poll (`POST /v1/runner/lease`) and tries the WebSocket again at most every 30 s.
//! Without `--token` it speaks local mode (`X-Sema-Role: runner`). `--help` lists the flags.

mod script;

use clap::Parser;
use script::Step;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Reference runner for Sema Edge: leases runs, executes each objective as a small script, streams
/// text deltas, heartbeats and finishes each run.
#[derive(Clone, Debug, Parser)]
#[command(name = "sema-runner", version)]
struct Config {
    /// Base URL of the Sema Edge server (a trailing `/` is dropped).
    #[arg(long, default_value = "http://127.0.0.1:8787", value_parser = base_url)]
    url: String,
    /// This runner's id; each worker thread appends `-<index>`.
    #[arg(long, default_value_t = format!("runner-{}", std::process::id()))]
    runner_id: String,
    /// Bearer token; without it the runner speaks local mode (`X-Sema-Role: runner`).
    #[arg(long)]
    token: Option<String>,
    /// Worker threads, each leasing and running one run at a time.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Runs each worker thread executes before it stops [default: no limit].
    #[arg(long)]
    max_runs: Option<usize>,
    /// The lease long-poll, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    wait_ms: u64,
    /// The task queue to lease from (one per runner process; run one process per queue).
    #[arg(long, default_value = "default")]
    queue: String,
    /// How leases arrive: the dispatcher's WebSocket falling back to the long-poll (`auto`), the
    /// WebSocket only (`ws`: retried, never polled), or the long-poll only (`poll`).
    #[arg(long, value_enum, default_value_t = Transport::Auto)]
    transport: Transport,
    /// An idle WebSocket sends a keepalive after this long without a frame (the runtime answers
    /// it without waking the dispatcher).
    #[arg(long, default_value_t = 30_000)]
    keepalive_ms: u64,
    /// A keepalive unanswered this long means the socket is half-open: it is given up (reconnected,
    /// or the long-poll takes over). Separate from the interval, so a short interval does not turn
    /// a busy moment of the server into a dropped socket.
    #[arg(long, default_value_t = 10_000)]
    keepalive_timeout_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    Auto,
    Ws,
    Poll,
}

/// The runner's WebSocket to its queue's dispatcher: it says `ready` once per wanted run and reads
/// the pushed lease.
struct Socket {
    ws: tungstenite::WebSocket<std::net::TcpStream>,
    /// `ready` was sent and no lease came since.
    asked: bool,
    /// When the last keepalive was sent, while no pong has come since.
    pinged: Option<Instant>,
    /// When the last frame arrived (or the socket opened).
    heard: Instant,
    keepalive: Duration,
    /// How long a keepalive may go unanswered.
    keepalive_timeout: Duration,
}

/// The keepalive and its answer (`sema_core::dispatch::PING_FRAME` / `PONG_FRAME`): the runtime
/// answers a ping on the dispatcher's behalf without waking it.
const PING: &str = r#"{"type":"ping"}"#;
const PONG: &str = r#"{"type":"pong"}"#;

impl Socket {
    /// Connects to `GET /v1/runner/connect` (plain `http://` servers only).
    fn connect(cfg: &Config) -> Result<Self, String> {
        use tungstenite::client::IntoClientRequest;
        let rest = cfg
            .url
            .strip_prefix("http://")
            .ok_or("the WebSocket needs an http:// server (no TLS in the reference runner)")?;
        let host = rest.split('/').next().unwrap_or(rest);
        let url = format!(
            "ws://{rest}/v1/runner/connect?queue={}&runnerId={}",
            cfg.queue, cfg.runner_id
        );
        let mut req = url.into_client_request().map_err(|e| e.to_string())?;
        let (name, value) = match &cfg.token {
            Some(t) => ("authorization", format!("Bearer {t}")),
            None => ("x-sema-role", "runner".to_owned()),
        };
        req.headers_mut()
            .insert(name, value.parse().map_err(|e| format!("header: {e}"))?);
        let addr = if host.contains(':') {
            host.to_owned()
        } else {
            format!("{host}:80")
        };
        let stream = std::net::TcpStream::connect(&addr).map_err(|e| format!("{addr}: {e}"))?;
        let (ws, _) = tungstenite::client::client(req, stream).map_err(|e| e.to_string())?;
        Ok(Self {
            ws,
            asked: false,
            pinged: None,
            heard: Instant::now(),
            keepalive: Duration::from_millis(cfg.keepalive_ms.max(1)),
            keepalive_timeout: Duration::from_millis(cfg.keepalive_timeout_ms.max(1)),
        })
    }

    /// Waits up to `wait` for a lease: `Ok(None)` when none came (ask again later). A wait that
    /// ends after the keepalive interval without a frame sends a keepalive; one unanswered past
    /// the keepalive timeout means the socket is half-open: an error (the caller reconnects or polls).
    fn lease(&mut self, wait: Duration) -> Result<Option<Value>, String> {
        use tungstenite::Message;
        if !self.asked {
            self.ws
                .send(Message::text(json!({"type": "ready"}).to_string()))
                .map_err(|e| e.to_string())?;
            self.asked = true;
        }
        let wait = wait
            .min(self.keepalive)
            .min(self.keepalive_timeout)
            .max(Duration::from_millis(100));
        self.ws
            .get_ref()
            .set_read_timeout(Some(wait))
            .map_err(|e| e.to_string())?;
        loop {
            let read = self.ws.read();
            if read.is_ok() {
                self.heard = Instant::now();
            }
            match read {
                Ok(Message::Text(t)) if t.as_str() == PONG => self.pinged = None,
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str()).map_err(|e| e.to_string())?;
                    if v["type"] == "lease" {
                        self.asked = false;
                        return Ok(Some(v));
                    }
                    eprintln!("sema-runner: dispatcher said {v}");
                }
                Ok(Message::Close(_)) => return Err("the dispatcher closed the socket".into()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    match self.pinged {
                        Some(at) if at.elapsed() >= self.keepalive_timeout => {
                            return Err("no answer to the keepalive: the socket is half-open".into())
                        }
                        None if self.heard.elapsed() >= self.keepalive => {
                            self.ws
                                .send(Message::text(PING))
                                .map_err(|e| e.to_string())?;
                            self.pinged = Some(Instant::now());
                        }
                        _ => {}
                    }
                    return Ok(None);
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Where the next lease comes from: the socket while it works, else the long-poll.
struct Leases {
    transport: Transport,
    socket: Option<Socket>,
    /// When to try the WebSocket again after a failure.
    retry_at: Instant,
}

impl Leases {
    fn new(transport: Transport) -> Self {
        Self {
            transport,
            socket: None,
            retry_at: Instant::now(),
        }
    }

    /// The next lease, or `None` (none within the wait, or a failure already reported).
    fn next(&mut self, client: &Client) -> Option<Value> {
        let cfg = &client.cfg;
        if self.transport != Transport::Poll
            && self.socket.is_none()
            && Instant::now() >= self.retry_at
        {
            match Socket::connect(cfg) {
                Ok(s) => self.socket = Some(s),
                Err(e) => {
                    eprintln!("sema-runner: WebSocket unavailable ({e}); long-polling");
                    self.retry_at = Instant::now()
                        + Duration::from_secs(if self.transport == Transport::Ws {
                            1
                        } else {
                            30
                        });
                }
            }
        }
        if let Some(s) = self.socket.as_mut() {
            match s.lease(Duration::from_millis(cfg.wait_ms)) {
                Ok(lease) => return lease,
                Err(e) => {
                    let next = if self.transport == Transport::Ws {
                        "reconnecting"
                    } else {
                        "long-polling"
                    };
                    eprintln!("sema-runner: WebSocket failed ({e}); {next}");
                    self.socket = None;
                    self.retry_at = Instant::now()
                        + Duration::from_secs(if self.transport == Transport::Ws {
                            1
                        } else {
                            30
                        });
                    return None;
                }
            }
        }
        if self.transport == Transport::Ws {
            std::thread::sleep(Duration::from_millis(200));
            return None;
        }
        let lease = client.post(
            "/v1/runner/lease",
            json!({"runnerId": cfg.runner_id, "waitMs": cfg.wait_ms, "queue": cfg.queue}),
        );
        match lease {
            Ok(Reply::Ok(v)) => Some(v),
            Ok(_) => None,
            Err(e) => {
                eprintln!("sema-runner: lease failed: {e}");
                std::thread::sleep(Duration::from_millis(500));
                None
            }
        }
    }
}

fn base_url(s: &str) -> Result<String, String> {
    Ok(s.trim_end_matches('/').to_owned())
}

/// The HTTP side: one agent per worker thread.
struct Client {
    agent: ureq::Agent,
    cfg: Config,
}

enum Reply {
    Ok(Value),
    NoContent,
    LeaseLost,
}

impl Client {
    fn post(&self, path: &str, body: Value) -> Result<Reply, String> {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.cfg.url))
            .set("content-type", "application/json");
        req = match &self.cfg.token {
            Some(t) => req.set("authorization", &format!("Bearer {t}")),
            None => req.set("x-sema-role", "runner"),
        };
        match req.send_string(&body.to_string()) {
            Ok(r) if r.status() == 204 => Ok(Reply::NoContent),
            Ok(r) => r.into_json().map(Reply::Ok).map_err(|e| e.to_string()),
            Err(ureq::Error::Status(409, r)) => {
                let v: Value = r.into_json().unwrap_or_default();
                if v["errorCode"] == "lease_lost" {
                    Ok(Reply::LeaseLost)
                } else {
                    Err(format!("409 {v}"))
                }
            }
            Err(ureq::Error::Status(code, r)) => Err(format!(
                "{path}: {code} {}",
                r.into_string().unwrap_or_default()
            )),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }
}

/// What ended a run's script.
enum Outcome {
    Completed(String),
    Failed(String, &'static str),
    Cancelled,
    LeaseLost,
    /// Parked on a gate: the park ended the lease, nothing more to write.
    Parked,
}

/// A step starts with a heartbeat only when the run's last write is older than this, or that write
/// said something waits (steer messages): every append and heartbeat is proof of life, and an
/// append's answer carries the cancel flag and the count of waiting steer messages, so a run whose
/// steps follow each other quickly needs no heartbeat between them.
const BEAT_EVERY: Duration = Duration::from_secs(1);

struct Run<'a> {
    client: &'a Client,
    task_id: String,
    /// The session the lease named: sent with appends and the finish as a routing hint (it spares
    /// the server looking the run's session up).
    session_id: Value,
    epoch: i64,
    text: String,
    next_event: u64,
    /// When the server last heard from this run (its lease, an append, a heartbeat).
    heard: Instant,
    /// The last write's answer said steer messages wait for a heartbeat.
    steer_waits: bool,
}

/// What one heartbeat left to do.
enum Beat {
    /// More steer messages wait than this heartbeat carried.
    More,
    /// The run goes on (`None`) or ends with this outcome.
    Done(Option<Outcome>),
}

impl Run<'_> {
    fn path(&self, verb: &str) -> String {
        format!("/v1/runs/{}/{verb}", self.task_id)
    }

    /// The heartbeat before a step, when it is due ([`BEAT_EVERY`]) or a write said steer
    /// messages wait; else nothing. `Some(outcome)` ends the run.
    fn beat_if_due(&mut self) -> Result<Option<Outcome>, String> {
        if !self.steer_waits && self.heard.elapsed() < BEAT_EVERY {
            return Ok(None);
        }
        self.beat()
    }

    /// Heartbeats; applies steer messages (as `steering_injected` events), beating again at once
    /// while more wait than one heartbeat carries. `Some(outcome)` ends the run.
    fn beat(&mut self) -> Result<Option<Outcome>, String> {
        loop {
            match self.beat_once()? {
                Beat::More => continue,
                Beat::Done(outcome) => return Ok(outcome),
            }
        }
    }

    fn beat_once(&mut self) -> Result<Beat, String> {
        let reply = self.client.post(
            &self.path("heartbeat"),
            json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch}),
        )?;
        let Reply::Ok(v) = reply else {
            return Ok(Beat::Done(Some(Outcome::LeaseLost)));
        };
        self.heard = Instant::now();
        self.steer_waits = false;
        let steer = v["steer"].as_array().cloned().unwrap_or_default();
        if !steer.is_empty() {
            let events: Vec<Value> = steer
                .iter()
                .map(|m| json!({"type": "steering_injected", "data": {"message": m["message"], "steerSeq": m["seq"]}}))
                .collect();
            if let Some(o) = self.append(events)? {
                return Ok(Beat::Done(Some(o)));
            }
        }
        if v["cancelRequested"] == true {
            return Ok(Beat::Done(Some(Outcome::Cancelled)));
        }
        if v["steerPending"].as_i64().unwrap_or(0) > 0 {
            return Ok(Beat::More);
        }
        Ok(Beat::Done(None))
    }

    fn append(&mut self, mut events: Vec<Value>) -> Result<Option<Outcome>, String> {
        for e in &mut events {
            self.next_event += 1;
            // Unique per run: a lease epoch is never reused, and the counter is per lease.
            e["eventId"] = json!(format!("{}-{}", self.epoch, self.next_event));
        }
        match self.client.post(
            &self.path("events"),
            self.hinted(json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "events": events})),
        )? {
            Reply::LeaseLost => Ok(Some(Outcome::LeaseLost)),
            Reply::Ok(v) => {
                self.heard = Instant::now();
                if v["cancelRequested"] == true {
                    return Ok(Some(Outcome::Cancelled));
                }
                self.steer_waits |= v["steerPending"].as_i64().unwrap_or(0) > 0;
                Ok(None)
            }
            Reply::NoContent => Ok(None),
        }
    }

    /// Streams `text` as text_delta events, one per word; `Some(outcome)` ends the run.
    fn say(&mut self, text: &str) -> Result<Option<Outcome>, String> {
        let pieces = script::deltas(text);
        for chunk in pieces.chunks(500) {
            let events = chunk
                .iter()
                .map(|d| json!({"type": "text_delta", "data": {"delta": d}}))
                .collect();
            if let Some(o) = self.append(events)? {
                return Ok(Some(o));
            }
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&pieces.concat());
        Ok(None)
    }

    /// Parks the run on a gate; the park ends the lease either way.
    fn park(&mut self, kind: &str, card: Value) -> Result<Outcome, String> {
        let body = json!({
            "runnerId": self.client.cfg.runner_id,
            "leaseEpoch": self.epoch,
            "gate": {"kind": kind, "card": card},
        });
        match self.client.post(&self.path("park"), body)? {
            Reply::LeaseLost => Ok(Outcome::LeaseLost),
            _ => Ok(Outcome::Parked),
        }
    }

    /// Runs the script from step `from`, first saying `preface` (a resumed run's decision).
    fn execute(
        &mut self,
        steps: &[Step],
        from: usize,
        preface: Option<&str>,
    ) -> Result<Outcome, String> {
        if let Some(text) = preface {
            if let Some(o) = self.beat_if_due()? {
                return Ok(o);
            }
            if let Some(o) = self.say(text)? {
                return Ok(o);
            }
        }
        for (index, step) in steps.iter().enumerate().skip(from) {
            if let Some(o) = self.beat_if_due()? {
                return Ok(o);
            }
            match step {
                Step::Say(text) => {
                    if let Some(o) = self.say(text)? {
                        return Ok(o);
                    }
                }
                Step::Sleep(ms) => {
                    let until = Instant::now() + Duration::from_millis(*ms);
                    while Instant::now() < until {
                        std::thread::sleep(
                            (until - Instant::now()).min(Duration::from_millis(250)),
                        );
                        if let Some(o) = self.beat()? {
                            return Ok(o);
                        }
                    }
                }
                Step::Fail(message) => {
                    return Ok(Outcome::Failed(message.clone(), "runner.script_failed"))
                }
                Step::Ask { kind, text } => return self.park(kind, script::card(text, index)),
            }
        }
        Ok(Outcome::Completed(std::mem::take(&mut self.text)))
    }

    /// `body` with the lease's session as its routing hint (none when the lease named none).
    fn hinted(&self, mut body: Value) -> Value {
        if self.session_id.is_string() {
            body["sessionId"] = self.session_id.clone();
        }
        body
    }

    fn finish(&self, outcome: Outcome) -> Result<(), String> {
        let body = match outcome {
            Outcome::LeaseLost | Outcome::Parked => return Ok(()),
            Outcome::Completed(text) => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "completed", "result": {"text": text}})
            }
            Outcome::Failed(error, code) => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "failed", "error": error, "errorCode": code})
            }
            Outcome::Cancelled => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "cancelled", "error": "cancelled by user"})
            }
        };
        self.client
            .post(&self.path("finish"), self.hinted(body))
            .map(|_| ())
    }
}

fn worker(cfg: Config, index: usize) {
    let client = Client {
        agent: ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build(),
        cfg: Config {
            runner_id: format!("{}-{index}", cfg.runner_id),
            ..cfg.clone()
        },
    };
    let mut done = 0;
    let mut leases = Leases::new(cfg.transport);
    while cfg.max_runs.is_none_or(|m| done < m) {
        let Some(lease) = leases.next(&client) else {
            continue;
        };
        let mut run = Run {
            client: &client,
            task_id: lease["taskId"].as_str().unwrap_or_default().to_owned(),
            session_id: lease["sessionId"].clone(),
            epoch: lease["leaseEpoch"].as_i64().unwrap_or_default(),
            text: String::new(),
            next_event: 0,
            heard: Instant::now(),
            // The lease says what already waits (steer messages queued while the run waited for a
            // runner: the first step's heartbeat takes them); a server that does not say is
            // asked by that heartbeat.
            steer_waits: lease
                .get("steerPending")
                .is_none_or(|n| n.as_i64().unwrap_or(0) > 0),
        };
        let steps = script::parse(lease["objective"].as_str().unwrap_or_default());
        let outcome = match lease.get("resume").filter(|r| !r.is_null()) {
            // Cancelled before this runner got it: nothing to run.
            _ if lease["cancelRequested"] == true => Ok(Outcome::Cancelled),
            None => run.execute(&steps, 0, None),
            Some(resume) => match script::resumption(&steps, resume) {
                Ok(r) => run.execute(&steps, r.next, Some(&r.say)),
                Err(e) => Ok(Outcome::Failed(e, "runner.bad_resume")),
            },
        }
        .unwrap_or_else(|e| Outcome::Failed(e, "runner.error"));
        if let Err(e) = run.finish(outcome) {
            eprintln!("sema-runner: finish of {} failed: {e}", run.task_id);
        }
        done += 1;
    }
}

fn main() {
    let cfg = Config::parse();
    eprintln!(
        "sema-runner {} leasing from {} with {} worker(s)",
        cfg.runner_id, cfg.url, cfg.concurrency
    );
    let handles: Vec<_> = (0..cfg.concurrency)
        .map(|i| {
            let cfg = cfg.clone();
            std::thread::spawn(move || worker(cfg, i))
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_flag_definitions_are_consistent() {
        Config::command().debug_assert();
    }

    #[test]
    fn defaults_are_the_local_dev_server_one_worker_no_limit_and_a_5s_poll() {
        let cfg = Config::try_parse_from(["sema-runner"]).unwrap();
        assert_eq!(cfg.url, "http://127.0.0.1:8787");
        assert_eq!(cfg.runner_id, format!("runner-{}", std::process::id()));
        assert_eq!(cfg.token, None);
        assert_eq!(cfg.concurrency, 1);
        assert_eq!(cfg.max_runs, None);
        assert_eq!(cfg.wait_ms, 5000);
        assert_eq!(cfg.transport, Transport::Auto);
    }

    #[test]
    fn the_transport_flag_takes_auto_ws_and_poll() {
        for (flag, t) in [
            ("auto", Transport::Auto),
            ("ws", Transport::Ws),
            ("poll", Transport::Poll),
        ] {
            let cfg = Config::try_parse_from(["sema-runner", "--transport", flag]).unwrap();
            assert_eq!(cfg.transport, t);
        }
        assert!(Config::try_parse_from(["sema-runner", "--transport", "smoke"]).is_err());
    }

    #[test]
    fn an_https_server_has_no_websocket_in_the_reference_runner() {
        let cfg = Config::try_parse_from(["sema-runner", "--url", "https://example.com"]).unwrap();
        assert!(Socket::connect(&cfg).is_err());
    }

    #[test]
    fn the_test_suites_invocation_parses_and_the_url_loses_its_trailing_slash() {
        let cfg = Config::try_parse_from([
            "sema-runner",
            "--url",
            "http://127.0.0.1:8799/",
            "--runner-id",
            "runner-1",
            "--wait-ms",
            "300",
            "--token",
            "t",
            "--concurrency",
            "4",
            "--max-runs",
            "2",
        ])
        .unwrap();
        assert_eq!(cfg.url, "http://127.0.0.1:8799");
        assert_eq!(cfg.runner_id, "runner-1");
        assert_eq!(cfg.wait_ms, 300);
        assert_eq!(cfg.token.as_deref(), Some("t"));
        assert_eq!((cfg.concurrency, cfg.max_runs), (4, Some(2)));
    }

    #[test]
    fn unknown_flags_and_malformed_numbers_are_refused() {
        assert!(Config::try_parse_from(["sema-runner", "--bogus"]).is_err());
        assert!(Config::try_parse_from(["sema-runner", "--concurrency", "x"]).is_err());
        assert!(Config::try_parse_from(["sema-runner", "--wait-ms"]).is_err());
    }
}
