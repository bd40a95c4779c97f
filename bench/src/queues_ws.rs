//! Task-queue scenarios over the dispatcher's WebSocket (`GET /v1/runner/connect`; `--ws` of
//! `dispatch-latency` and `idle-runners`). A runner sends `{"type":"ready"}` and the dispatcher
//! writes the lease itself and pushes it.
//!
//! - `dispatch-latency --ws`: one socket, read on a thread of its own (`socket_reader`); per round it
//!   says ready, the admin route shows it waiting, the bench submits and times submit sent → lease
//!   frame arrived (often before the submit's answer). First round: warm-up, apart.
//! - `idle-runners --ws`: N sockets (one thread holds them all: no thread per runner), each ready, on
//!   a queue with no runs; once the admin route shows N waiting, an idle window of `--seconds`:
//!   workerd CPU and RSS, the dispatcher's `waiters`/`sockets`/`cold` at both ends. The sockets'
//!   D1 cost is not visible per response (there is none); the dispatcher queries D1 only when its
//!   memory is cold (reported by `cold`).

use crate::leader::{agent, finish};
use crate::queues::{
    await_waiters, clock_ticks, dist, dist_p, idle_window, latency_session, listening_pids,
    ms_since, queue_stats, rss_kib, submit_into, total,
};
use crate::socket_reader::{Frames, SocketReader};
use crate::{emit, unique};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::{client::IntoClientRequest, Message, WebSocket};

type Sock = WebSocket<TcpStream>;

fn connect(url: &str, queue: &str, runner: &str) -> Result<Sock, String> {
    let rest = url.strip_prefix("http://").ok_or("http:// only")?;
    let mut req = format!("ws://{rest}/v1/runner/connect?queue={queue}&runnerId={runner}")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    req.headers_mut()
        .insert("x-sema-role", "runner".parse().map_err(|_| "header")?);
    let host = rest.split('/').next().unwrap_or(rest);
    let stream = TcpStream::connect(host).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    tungstenite::client::client(req, stream)
        .map(|(ws, _)| ws)
        .map_err(|e| e.to_string())
}

fn ready(ws: &mut Sock) -> Result<(), String> {
    ws.send(Message::text(OURS.ready))
        .map_err(|e| e.to_string())
}

/// `dispatch-latency --ws`.
pub fn dispatch_latency(url: &str, samples: usize, warm_session: bool) {
    let queue = unique("qb-latws");
    let warm = warm_session.then(|| unique("qb-latws-warm"));
    let runner = "bench-dispatch-ws";
    let main = agent();
    let (mut lat, mut submit_ms, mut errors, mut not_waiting) = (vec![], vec![], 0usize, 0usize);
    let mut warmup = json!(null);
    // The lease's arrival less the submit's answer, per round (negative: the lease came first).
    let mut after_submit = vec![];
    // Why the rounds stopped before `samples`, if they did (the socket's reader cannot go on).
    let mut stopped: Option<String> = None;
    let socket = match connect(url, &queue, runner) {
        Ok(ws) => SocketReader::start(ws, OURS),
        Err(e) => {
            emit(json!({"scenario": "dispatch-latency-ws", "errors": 1, "error": e}));
            return;
        }
    };
    for round in 0..=samples {
        if let Err(e) = socket.ready() {
            errors += 1;
            stopped = Some(e);
            break;
        }
        let (held, _) = await_waiters(
            &main,
            url,
            &queue,
            1,
            Duration::from_millis(2),
            Duration::from_secs(5),
        );
        not_waiting += usize::from(!held);
        let sent = Instant::now();
        let sub = submit_into(&main, url, &queue, &latency_session(&warm, "qb-latws"));
        let Some(task) = sub.body["taskId"].as_str().filter(|_| sub.status == 202) else {
            // No lease will come for this round, so the socket's reader cannot go on.
            errors += 1;
            stopped = Some(format!("submit answered {}", sub.status));
            break;
        };
        let (frame, at) = match socket.lease(LEASE_DEADLINE) {
            Ok(read) => read,
            Err(e) => {
                errors += 1;
                stopped = Some(e);
                break;
            }
        };
        let l: Value = serde_json::from_str(&frame).unwrap_or(Value::Null);
        finish(&main, url, runner, &l);
        if l["taskId"] != task {
            errors += 1;
            continue;
        }
        let ms = ms_since(sent, at);
        if round == 0 {
            warmup = json!({"submit_to_lease_ms": ms, "submit_ms": sub.ms});
            continue;
        }
        lat.push(ms);
        submit_ms.push(sub.ms);
        after_submit.push(ms - sub.ms);
    }
    drop(socket);
    let (p50, p99, max) = dist(lat.clone());
    let (s50, s99, _) = dist(submit_ms);
    emit(json!({
        "scenario": "dispatch-latency-ws",
        "session": if warm_session { "warm" } else { "new" },
        "queue": queue,
        "samples": lat.len(),
        "p50_ms": p50,
        "p95_ms": dist_p(&lat, 95.0),
        "p99_ms": p99,
        "max_ms": max,
        "submit_p50_ms": s50,
        "submit_p99_ms": s99,
        "lease_after_submit_response_p50_ms": dist_p(&after_submit, 50.0),
        "lease_after_submit_response_p99_ms": dist_p(&after_submit, 99.0),
        "warmup": warmup,
        "runner_not_waiting_before_submit": not_waiting,
        "errors": errors,
        "stopped_early": stopped,
    }));
}

/// How long a round waits for its lease frame.
const LEASE_DEADLINE: Duration = Duration::from_secs(30);

/// Our runner socket's frames: no answer to `ready` (the admin route shows it waiting).
const OURS: Frames = Frames {
    ready: r#"{"type":"ready"}"#,
    waiting: None,
    lease: is_lease_frame,
};

fn is_lease_frame(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v["type"] == "lease")
}

/// `idle-runners --ws`.
pub fn idle_runners(
    url: &str,
    runners: usize,
    seconds: u64,
    workerd_pids: &[u32],
    ping_every_s: u64,
) {
    let queue = unique("qb-idlews");
    let pids = if workerd_pids.is_empty() {
        listening_pids(url)
    } else {
        workerd_pids.to_vec()
    };
    let hz = clock_ticks();
    let main = agent();
    let rss_before = total(&pids, rss_kib);
    let ramp = Instant::now();
    let mut socks = vec![];
    let mut errors = 0usize;
    let mut first_error = None;
    for i in 0..runners {
        match connect(url, &queue, &format!("bench-idlews-{i}")).and_then(|mut ws| {
            ready(&mut ws)?;
            Ok(ws)
        }) {
            Ok(ws) => socks.push(ws),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    let (all_held, most_seen) = await_waiters(
        &main,
        url,
        &queue,
        socks.len() as u64,
        Duration::from_millis(100),
        Duration::from_secs(120),
    );
    let ramp_ms = ramp.elapsed().as_secs_f64() * 1000.0;
    let start = queue_stats(&main, url, &queue);
    // Keepalives spread evenly: socket i pings in the seconds s with s ≡ i (mod ping_every_s).
    let mut pings = 0usize;
    let w = idle_window(&pids, seconds, hz, &mut |second| {
        if ping_every_s == 0 {
            return;
        }
        for (i, ws) in socks.iter_mut().enumerate() {
            if (i as u64) % ping_every_s == second % ping_every_s
                && ws.send(Message::text(r#"{"type":"ping"}"#)).is_ok()
            {
                pings += 1;
            }
        }
    });
    let (rss_held_start, rss_held_end, window_s, cpu_s) =
        (w.rss_start, w.rss_end, w.window_s, w.cpu_s);
    let end = queue_stats(&main, url, &queue);
    // No run was submitted: a socket that got a lease anyway is an error.
    let (mut unexpected, mut pongs) = (0usize, 0usize);
    for ws in &mut socks {
        let _ = ws.get_ref().set_nonblocking(true);
        while let Ok(m) = ws.read() {
            match m {
                Message::Text(t) if t.as_str() == r#"{"type":"pong"}"# => pongs += 1,
                m => unexpected += usize::from(m.is_text()),
            }
        }
        let _ = ws.get_ref().set_nonblocking(false);
        let _ = ws.close(None);
        let _ = ws.flush();
    }
    drop(socks);
    std::thread::sleep(Duration::from_secs(1));
    let after = queue_stats(&main, url, &queue);
    emit(json!({
        "scenario": "idle-runners-ws",
        "queue": queue,
        "runners": runners,
        "seconds": seconds,
        "sockets_opened": runners - errors,
        "all_held": all_held,
        "most_waiters_seen_in_ramp": most_seen,
        "ramp_ms": ramp_ms,
        "dispatcher_at_window_start": start,
        "dispatcher_at_window_end": end,
        "dispatcher_after_close": after,
        "window_s": window_s,
        "workerd_pids": pids,
        "workerd_cpu_s": cpu_s,
        "workerd_cpu_pct_of_one_core": cpu_s.map(|c| 100.0 * c / window_s),
        "workerd_rss_kib_before": rss_before,
        "workerd_rss_kib_held_start": rss_held_start,
        "workerd_rss_kib_held_end": rss_held_end,
        "unexpected_frames": unexpected,
        "ping_every_s": ping_every_s,
        "pings_sent": pings,
        "pongs_received": pongs,
        "errors": errors,
        "first_error": first_error,
    }));
}
