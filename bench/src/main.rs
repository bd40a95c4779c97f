//! `sema-bench`: scenarios against a running Sema Edge Worker, reporting JSON lines.
//!
//! ```text
//! sema-bench --url URL events-latency [--samples N]   append → SSE receipt latency (one event per call)
//! sema-bench --url URL events-ingest [--batches N] [--batch-size K] [--runs R]
//! sema-bench --url URL admission [--per-level N]     submits to fresh sessions at concurrency 1/8/32/128
//! sema-bench --url URL admission-warm [--per-level N]  submits to warm sessions (each run cancelled after it)
//! sema-bench --url URL contention [--sessions S] [--contenders C]  C simultaneous submits per session
//! sema-bench --url URL fanout [--subscribers N] [--events E]       N SSE clients on one run
//! sema-bench --url URL conflict-under-appends [--writers 4] [--clients 4] [--per-client 50]
//!                                                    409s into a held session, alone and during appends
//! sema-bench --url URL session-object [--rounds N]  admission into a warm vs a new session object
//! sema-bench --url URL beside-floor --floor-url F [--workerd-pid P --floor-workerd-pid Q] [--rounds 3]
//!                                    [--floor-rs-url R --floor-rs-workerd-pid S] [--per-level 256] [--samples 100]
//!                                                    our admission and the floor Worker's, interleaved
//! sema-bench --url URL beside-floor-paths --floor-url F [--workerd-pid P --floor-workerd-pid Q] [--rounds 6]
//!                                    [--floor-rs-url R --floor-rs-workerd-pid S] [--sessions 20] [--contenders 100]
//!                                    [--samples 100] [--paths P,…] [--floor-parts design|bare]
//!                                                    409s, append, hand-overs and their floors, interleaved
//! sema-bench --url URL cost                          D1 round trips and statements per operation
//! sema-bench --url URL leader [--subtasks 100] [--concurrency 8] [--runners 8] [--rounds 3]
//!                                                    leader runs: admission to settle, D1 per child
//! sema-bench --url URL dispatch-latency [--samples 200]  submit → lease with one runner waiting
//! sema-bench --url URL idle-runners [--runners 1000] [--seconds 20] [--workerd-pid PID,…]
//!                                                    D1, waiters, workerd CPU/RSS of idle long-polls
//! sema-bench --url URL runs-throughput [--runs 400] [--runners 8] [--submitters 8]
//!                                                    runs/s through submit → lease → finish
//! sema-bench --url URL end-to-end [--runs 200] [--runners 8] [--clients 8] [--events 10] [--runner-bin PATH]
//!                                                    runs/s with the reference runner, submit → SSE done
//! sema-bench --url URL listing [--samples 100] [--tenant T] [--session S] [--pages 20]
//!                                                    listings on a store seeded by bench/scale_seed.py
//! sema-bench --url PEER peer-admission|peer-contention|peer-end-to-end   the same against LangGraph's dev server
//! sema-bench sqlite-tx [--rows N]                   raw SQLite single-row transactions (storage ceiling)
//! sema-bench follow-cost [--followed 1000,10000,30000] [--hand-overs 2000]
//!                                                    the dispatcher's follow-up bookkeeping per hand-over
//! ```
//! `--url` and `--target` may stand before or after the scenario; `sema-bench help SCENARIO` lists
//! a scenario's flags and defaults.
//! The bench acts as the runner itself (local mode: `X-Sema-Role: runner`) and as the SSE client,
//! except in `end-to-end`, where the reference runner (`sema-runner`, a child process) runs the runs.
//! Bounded: every loop has a fixed count and every request a timeout; loopback only.

mod beside_floor;
mod conflict_load;
mod end_to_end;
mod floor;
mod floor_paths;
mod follow_cost;
mod leader;
mod queues;
mod queues_ws;
mod scale;
mod socket_reader;
mod steer;

use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The label of the server under test (`--target`), stamped on every result line.
static TARGET: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// CPU seconds this process has used (user + system), from /proc/self/stat (Linux). Hand-written: a
/// dozen lines against `libc::getrusage` (an unsafe call) or a whole procfs crate.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// Wall clock and CPU time at the previous result line (the load generator's own cost per line).
static LAST: std::sync::Mutex<Option<(Instant, f64)>> = std::sync::Mutex::new(None);

/// Prints one result line with the target label and the load generator's CPU share since the last.
fn emit(mut line: Value) {
    let now = (Instant::now(), cpu_seconds());
    let mut last = LAST.lock().unwrap();
    let (since, cpu0) = last.unwrap_or((START.get().copied().unwrap_or(now.0), 0.0));
    let wall = now.0.duration_since(since).as_secs_f64();
    *last = Some(now);
    if let Some(obj) = line.as_object_mut() {
        if let Some(t) = TARGET.get() {
            obj.insert("target".into(), json!(t));
        }
        // A line emitted again after a capture (see `captured`) keeps its first figure.
        if wall > 0.0 && !obj.contains_key("load_generator_cpu_pct") {
            obj.insert(
                "load_generator_cpu_pct".into(),
                json!((100.0 * (now.1 - cpu0) / wall).round()),
            );
        }
    }
    if let Some(lines) = CAPTURED.lock().unwrap().as_mut() {
        lines.push(line);
        return;
    }
    println!("{line}");
}

/// While `Some`, result lines are kept here instead of printed (see [`captured`]).
static CAPTURED: std::sync::Mutex<Option<Vec<Value>>> = std::sync::Mutex::new(None);

/// Runs `f`, and returns the result lines it emitted instead of printing them, so that a caller can
/// add what it measured around them (a scenario run as one side of an interleaved comparison).
/// Not reentrant: a capture inside `f` would end this one.
fn captured(f: impl FnOnce()) -> Vec<Value> {
    *CAPTURED.lock().unwrap() = Some(vec![]);
    f();
    CAPTURED.lock().unwrap().take().unwrap_or_default()
}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

struct Ctx {
    url: String,
    agent: ureq::Agent,
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{nanos:x}")
}

impl Ctx {
    fn post(&self, path: &str, role: Option<&str>, body: Value) -> Value {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.url))
            .set("content-type", "application/json");
        if let Some(r) = role {
            req = req.set("x-sema-role", r);
        }
        match req.send_string(&body.to_string()) {
            Ok(r) => r.into_json().unwrap_or(Value::Null),
            Err(e) => panic!("{path}: {e}"),
        }
    }

    /// Submits a run into a queue of its own and leases it as the bench's own runner:
    /// `(task_id, epoch)`. Its own queue, because the default one holds every run the admission
    /// scenarios left unleased: leasing through them first took minutes (and on PostgreSQL never
    /// ended, as unacknowledged leases went back to the queue meanwhile).
    fn leased_run(&self) -> (String, i64) {
        let queue = unique("leased");
        let task = self.post(
            "/v1/runs",
            None,
            json!({"sessionId": unique("bench"), "objective": "bench", "queue": queue}),
        )["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        loop {
            let l = self.post(
                "/v1/runner/lease",
                Some("runner"),
                json!({"runnerId": "bench", "queue": queue, "waitMs": 1000}),
            );
            if l["taskId"] == task.as_str() {
                return (task, l["leaseEpoch"].as_i64().unwrap());
            }
            assert!(!l.is_null(), "lease returned nothing");
        }
    }

    fn finish(&self, task: &str, epoch: i64) {
        self.post(
            &format!("/v1/runs/{task}/finish"),
            Some("runner"),
            json!({"runnerId": "bench", "leaseEpoch": epoch, "status": "completed"}),
        );
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// One event per append call; the time from sending the call to the SSE client reading that event.
fn events_latency(ctx: &Ctx, samples: usize) {
    let (task, epoch) = ctx.leased_run();
    let (tx, rx) = mpsc::channel::<(i64, Instant)>();
    let url = format!("{}/v1/runs/{task}/events", ctx.url);
    let reader = std::thread::spawn(move || {
        let resp = ureq::get(&url)
            .set("accept", "text/event-stream")
            .call()
            .expect("SSE");
        for line in BufReader::new(resp.into_reader()).lines() {
            let line = line.expect("line");
            if let Some(id) = line.strip_prefix("id: ") {
                let seq: i64 = id.parse().unwrap();
                if tx.send((seq, Instant::now())).is_err() {
                    break;
                }
            }
            if line.contains("\"type\":\"done\"") {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300)); // let the stream open
    let mut lat = Vec::with_capacity(samples);
    let mut errors = 0;
    let t_all = Instant::now();
    for i in 0..samples {
        let sent = Instant::now();
        let r = ctx.post(
            &format!("/v1/runs/{task}/events"),
            Some("runner"),
            one_event_append(epoch, &format!("{i} ")),
        );
        let seq = r["seqs"][0].as_i64().unwrap_or(-1);
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok((got, at)) if got == seq => lat.push(at.duration_since(sent).as_secs_f64() * 1000.0),
            _ => errors += 1,
        }
    }
    let elapsed = t_all.elapsed().as_secs_f64();
    ctx.finish(&task, epoch);
    let _ = reader.join();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    emit(json!({
        "scenario": "events-latency",
        "samples": lat.len(),
        "errors": errors,
        "p50_ms": percentile(&lat, 50.0),
        "p95_ms": percentile(&lat, 95.0),
        "p99_ms": percentile(&lat, 99.0),
        "max_ms": lat.last(),
        "calls_per_s": samples as f64 / elapsed,
    }));
}

/// Batched appends on `runs` runs in parallel; events per second over the whole scenario.
fn events_ingest(ctx: &Ctx, batches: usize, batch_size: usize, runs: usize) {
    let leased: Vec<(String, i64)> = (0..runs).map(|_| ctx.leased_run()).collect();
    let start = Instant::now();
    let per_call: Vec<Vec<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = leased
            .iter()
            .map(|(task, epoch)| {
                s.spawn(move || {
                    let mut times = vec![];
                    for b in 0..batches {
                        let events: Vec<Value> = (0..batch_size)
                            .map(|i| json!({"type": "text_delta", "data": {"delta": format!("{b}.{i} ")}}))
                            .collect();
                        let t = Instant::now();
                        let r = ctx.post(&format!("/v1/runs/{task}/events"), Some("runner"), json!({"runnerId": "bench", "leaseEpoch": epoch, "events": events}));
                        assert_eq!(r["seqs"].as_array().map(Vec::len), Some(batch_size), "{r}");
                        times.push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    times
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    for (task, epoch) in &leased {
        ctx.finish(task, *epoch);
    }
    let mut calls: Vec<f64> = per_call.into_iter().flatten().collect();
    calls.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let total = (batches * batch_size * runs) as f64;
    emit(json!({
        "scenario": "events-ingest",
        "runs": runs,
        "batch_size": batch_size,
        "events": total,
        "events_per_s": total / elapsed,
        "call_p50_ms": percentile(&calls, 50.0),
        "call_p99_ms": percentile(&calls, 99.0),
    }));
}

/// Sends one request, returning (status, latency ms); transport errors count as status 0. The
/// body is left unread, as it always was here (so the figures stay comparable run to run).
fn timed_submit(agent: &ureq::Agent, url: &str, session: &str) -> (u16, f64) {
    let (answer, ms) = submit_run(agent, url, session);
    (status_of(&answer), ms)
}

/// The body of the bench's submit into `session` (also sent to the floor parts that stand beside it).
pub(crate) fn submit_body(session: &str) -> Value {
    json!({"sessionId": session, "objective": "bench"})
}

/// The body of a runner's append of one `text_delta` event (also sent to the floor's append).
pub(crate) fn one_event_append(epoch: i64, delta: &str) -> Value {
    json!({"runnerId": "bench", "leaseEpoch": epoch,
        "events": [{"type": "text_delta", "data": {"delta": delta}}]})
}

/// Submits a run into `session`: the answer and its latency in ms.
fn submit_run(
    agent: &ureq::Agent,
    url: &str,
    session: &str,
) -> (Result<ureq::Response, ureq::Error>, f64) {
    let t = Instant::now();
    let answer = agent
        .post(&format!("{url}/v1/runs"))
        .set("content-type", "application/json")
        .send_string(&submit_body(session).to_string());
    (answer, t.elapsed().as_secs_f64() * 1000.0)
}

/// An answer's HTTP status; 0 when there was none.
fn status_of(answer: &Result<ureq::Response, ureq::Error>) -> u16 {
    match answer {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => *code,
        Err(_) => 0,
    }
}

fn summary(mut lat: Vec<f64>) -> Value {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    json!({"p50_ms": percentile(&lat, 50.0), "p95_ms": percentile(&lat, 95.0), "p99_ms": percentile(&lat, 99.0)})
}

/// Submits from `conc` threads at each concurrency level, `per_level` in all, each into a fresh
/// session; `accepted` is the status of a successful submit. One result line per level.
fn admission_levels(
    scenario: &str,
    per_level: usize,
    accepted: u16,
    submit: impl Fn(&ureq::Agent, usize) -> (u16, f64) + Sync,
) {
    for conc in LEVELS {
        let mut line = admission_level(conc, per_level, accepted, &submit);
        line["scenario"] = json!(scenario);
        emit(line);
    }
}

/// The admission scenario's concurrency levels.
const LEVELS: [usize; 4] = [1, 8, 32, 128];

/// `per_level` submits (at least `conc`) from `conc` threads: the level's result line, without
/// its scenario name. `submit` is told which thread (0..conc) calls it.
fn admission_level(
    conc: usize,
    per_level: usize,
    accepted: u16,
    submit: &(impl Fn(&ureq::Agent, usize) -> (u16, f64) + Sync),
) -> Value {
    let per_thread = per_level.max(conc) / conc;
    let start = Instant::now();
    let results: Vec<(u16, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..conc)
            .map(|thread| {
                s.spawn(move || {
                    let agent = ureq::AgentBuilder::new()
                        .timeout(Duration::from_secs(60))
                        .build();
                    (0..per_thread)
                        .map(|_| submit(&agent, thread))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let ok = results.iter().filter(|(s, _)| *s == accepted).count();
    let mut line = summary(results.iter().map(|(_, l)| *l).collect());
    line["concurrency"] = json!(conc);
    line["requests"] = json!(results.len());
    line["errors"] = json!(results.len() - ok);
    // What each error was (0: no HTTP answer), so a stray one can be told apart.
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for (s, _) in results.iter().filter(|(s, _)| *s != accepted) {
        *statuses.entry(s.to_string()).or_default() += 1;
    }
    line["error_statuses"] = json!(statuses);
    line["per_s"] = json!(ok as f64 / elapsed);
    line
}

/// Admissions into distinct fresh sessions, at increasing concurrency.
fn admission(ctx: &Ctx, per_level: usize) {
    admission_levels("admission", per_level, 202, |agent, _| {
        timed_submit(agent, &ctx.url, &unique("adm"))
    });
}

/// Admissions into warm sessions, at increasing concurrency: each thread keeps one session, whose
/// object a submit and cancel before the level has created; each timed submit is followed by the
/// cancel of its run (untimed, but inside the level's window: `per_s` counts admissions, each
/// with its cancel, as a session admitting one run at a time must). A cancel that fails leaves
/// its session held, so the thread's later submits count as errors; the line counts the failed
/// cancels (`cancel_errors`) and the sessions whose warming submit or cancel failed
/// (`warming_errors`: their first timed submit created the object).
fn admission_warm(ctx: &Ctx, per_level: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cancel_errors = AtomicUsize::new(0);
    // (submit status, its latency ms, whether the cancel that followed a 202 succeeded)
    let admit_then_cancel = |agent: &ureq::Agent, session: &str| {
        let (answer, ms) = submit_run(agent, &ctx.url, session);
        let status = status_of(&answer);
        let task = answer
            .ok()
            .and_then(|r| r.into_string().ok())
            .and_then(|body| serde_json::from_str::<Value>(&body).ok())
            .and_then(|v| v["taskId"].as_str().map(str::to_owned));
        let cancelled = task.filter(|_| status == 202).map(|task| {
            agent
                .post(&format!("{}/v1/runs/{task}/cancel", ctx.url))
                .set("content-type", "application/json")
                .send_string("{}")
                .is_ok()
        });
        (status, ms, cancelled)
    };
    for conc in LEVELS {
        let prefix = unique("warm-adm");
        let sessions: Vec<String> = (0..conc).map(|t| format!("{prefix}-{t}")).collect();
        let warming_errors = sessions
            .iter()
            .filter(|s| admit_then_cancel(&ctx.agent, s).2 != Some(true))
            .count();
        cancel_errors.store(0, Ordering::Relaxed);
        let mut line = admission_level(conc, per_level, 202, &|agent, thread| {
            let (status, ms, cancelled) = admit_then_cancel(agent, &sessions[thread]);
            if cancelled == Some(false) {
                cancel_errors.fetch_add(1, Ordering::Relaxed);
            }
            (status, ms)
        });
        line["scenario"] = json!("admission-warm");
        line["cancel_errors"] = json!(cancel_errors.load(Ordering::Relaxed));
        line["warming_errors"] = json!(warming_errors);
        emit(line);
    }
}

/// `contenders` simultaneous submits to each of `sessions` fresh sessions (from `new_session`):
/// counts sessions where exactly one was `accepted`, and the latency of the 409s: the result line.
fn contention_rounds(
    scenario: &str,
    sessions: usize,
    contenders: usize,
    accepted: u16,
    new_session: impl Fn() -> String,
    submit: impl Fn(&ureq::Agent, &str) -> (u16, f64) + Sync,
) -> Value {
    let mut conflicts = vec![];
    let (mut exactly_one, mut accepted_total, mut other) = (0, 0, 0);
    let start = Instant::now();
    for _ in 0..sessions {
        let session = new_session();
        let barrier = std::sync::Barrier::new(contenders);
        let results: Vec<(u16, f64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..contenders)
                .map(|_| {
                    let (barrier, session, submit) = (&barrier, &session, &submit);
                    s.spawn(move || {
                        let agent = ureq::AgentBuilder::new()
                            .timeout(Duration::from_secs(60))
                            .build();
                        barrier.wait();
                        submit(&agent, session)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let ok = results.iter().filter(|(s, _)| *s == accepted).count();
        accepted_total += ok;
        if ok == 1 {
            exactly_one += 1;
        }
        other += results
            .iter()
            .filter(|(s, _)| *s != accepted && *s != 409)
            .count();
        conflicts.extend(results.iter().filter(|(s, _)| *s == 409).map(|(_, l)| *l));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut line = summary(conflicts.clone());
    line["scenario"] = json!(scenario);
    line["sessions"] = json!(sessions);
    line["contenders"] = json!(contenders);
    line["sessions_with_exactly_one_accepted"] = json!(exactly_one);
    line["accepted_total"] = json!(accepted_total);
    line["conflicts_409"] = json!(conflicts.len());
    line["errors"] = json!(other);
    line["requests_per_s"] = json!((sessions * contenders) as f64 / elapsed);
    line
}

/// `contenders` simultaneous submits to each of `sessions` fresh sessions: exactly one 202 each.
fn contention(ctx: &Ctx, sessions: usize, contenders: usize) {
    emit(contention_rounds(
        "contention",
        sessions,
        contenders,
        202,
        || unique("cont"),
        |agent, session| timed_submit(agent, &ctx.url, session),
    ));
}

/// `subscribers` SSE clients on one run; `events` appended one per call; per-delivery latency.
fn fanout(ctx: &Ctx, subscribers: usize, events: usize) {
    let (task, epoch) = ctx.leased_run();
    let (tx, rx) = mpsc::channel::<(i64, Instant)>();
    let ready = std::sync::Arc::new(std::sync::Barrier::new(subscribers + 1));
    let readers: Vec<_> = (0..subscribers)
        .map(|_| {
            let (tx, url, ready) = (
                tx.clone(),
                format!("{}/v1/runs/{task}/events", ctx.url),
                ready.clone(),
            );
            std::thread::spawn(move || {
                let resp = ureq::get(&url).set("accept", "text/event-stream").call();
                ready.wait();
                let Ok(resp) = resp else { return };
                for line in BufReader::new(resp.into_reader()).lines() {
                    let Ok(line) = line else { return };
                    if let Some(id) = line.strip_prefix("id: ") {
                        let _ = tx.send((id.parse().unwrap_or(-1), Instant::now()));
                    }
                    if line.contains("\"type\":\"done\"") {
                        return;
                    }
                }
            })
        })
        .collect();
    drop(tx);
    ready.wait();
    std::thread::sleep(Duration::from_millis(300));
    let mut sent_at = std::collections::HashMap::new();
    for i in 0..events {
        let t = Instant::now();
        let r = ctx.post(
            &format!("/v1/runs/{task}/events"),
            Some("runner"),
            one_event_append(epoch, &format!("{i} ")),
        );
        sent_at.insert(r["seqs"][0].as_i64().unwrap_or(-1), t);
        std::thread::sleep(Duration::from_millis(5));
    }
    ctx.finish(&task, epoch);
    for r in readers {
        let _ = r.join();
    }
    let mut lat = vec![];
    for (seq, at) in rx.iter() {
        if let Some(t) = sent_at.get(&seq) {
            lat.push(at.duration_since(*t).as_secs_f64() * 1000.0);
        }
    }
    let received = lat.len();
    let mut line = summary(lat);
    line["scenario"] = json!("fanout");
    line["subscribers"] = json!(subscribers);
    line["events"] = json!(events);
    line["deliveries"] = json!(received);
    line["missing"] = json!(subscribers * events - received);
    emit(line);
}

/// The storage ceiling: single-row INSERT transactions per second on a SQLite file (WAL).
fn sqlite_tx(rows: usize) {
    let dir = std::env::temp_dir().join(unique("sema-sqlite-tx"));
    std::fs::create_dir_all(&dir).unwrap();
    let conn = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    for (label, sync) in [
        ("synchronous=FULL", "FULL"),
        ("synchronous=NORMAL", "NORMAL"),
    ] {
        conn.pragma_update(None, "synchronous", sync).unwrap();
        let start = Instant::now();
        for i in 0..rows {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            conn.execute("INSERT INTO t (v) VALUES (?1)", [format!("row {i}")])
                .unwrap();
            conn.execute_batch("COMMIT").unwrap();
        }
        let per_s = rows as f64 / start.elapsed().as_secs_f64();
        emit(
            json!({"scenario": "sqlite-tx", "mode": label, "rows": rows, "tx_per_s": per_s, "sqlite": rusqlite::version()}),
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// D1 cost per operation, read from the `x-sema-d1` header the Worker sets (it counts every round
/// trip and statement its executor sends, the session object's included). Independent of machine noise.
/// Triggers one cron tick and reports what the tick says it did (wall time, pages, D1 round trips and
/// rows examined), plus the wall time of the trigger as the client saw it.
fn reaper(ctx: &Ctx, runs: usize, stale: usize) {
    let t = Instant::now();
    let r = ctx
        .agent
        .get(&format!("{}/__scheduled?cron=*+*+*+*+*", ctx.url))
        .call()
        .expect("scheduled route");
    assert_eq!(r.status(), 200);
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    let log: Value = ctx
        .agent
        .get(&format!("{}/v1/admin/reapers", ctx.url))
        .set("x-sema-role", "operator")
        .call()
        .expect("reaper log")
        .into_json()
        .expect("reaper log JSON");
    let tick = &log["ticks"][0];
    emit(json!({
        "scenario": "reaper", "runs": runs, "stale": stale, "trigger_wall_ms": wall_ms,
        "tick_duration_ms": tick["durationMs"], "reaped": tick["reaped"], "pages": tick["pages"],
        "d1_round_trips": tick["d1RoundTrips"], "d1_rows_read": tick["d1RowsRead"],
        "claims_released": tick["terminalClaimsReleased"], "sessions_told": tick["sessionsTold"],
        "notify_ms": tick["notifyMs"],
    }));
}

fn cost(ctx: &Ctx) {
    let call = |method: &str,
                path: &str,
                role: Option<&str>,
                body: Option<Value>,
                key: Option<&str>|
     -> (u16, String, Value) {
        let mut req = ctx.agent.request(method, &format!("{}{path}", ctx.url));
        if let Some(r) = role {
            req = req.set("x-sema-role", r);
        }
        if let Some(k) = key {
            req = req.set("idempotency-key", k);
        }
        let res = match body {
            Some(b) => req
                .set("content-type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        let resp = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{path}: {e}"),
        };
        let meter = resp.header("x-sema-d1").unwrap_or_default().to_owned();
        let status = resp.status();
        (status, meter, resp.into_json().unwrap_or(Value::Null))
    };
    let report = |op: &str, status: u16, meter: &str| {
        let num = |k: &str| {
            meter
                .split(';')
                .find_map(|p| p.trim().strip_prefix(k))
                .and_then(|v| v.parse::<u32>().ok())
        };
        emit(
            json!({"scenario": "cost", "op": op, "status": status, "d1_round_trips": num("round-trips="), "d1_statements": num("statements=")}),
        );
    };
    let session = unique("cost");
    let (s, m, v) = call(
        "POST",
        "/v1/runs",
        None,
        Some(json!({"sessionId": session, "objective": "x"})),
        None,
    );
    report("admission (new session)", s, &m);
    let task = v["taskId"].as_str().unwrap_or_default().to_owned();
    let (s, m, _) = call(
        "POST",
        "/v1/runs",
        None,
        Some(json!({"sessionId": session, "objective": "y"})),
        None,
    );
    report("conflicting submit (409)", s, &m);
    let keyed = json!({"sessionId": unique("cost"), "objective": "x"});
    let (s, m, v) = call("POST", "/v1/runs", None, Some(keyed.clone()), Some("k1"));
    report("admission with Idempotency-Key", s, &m);
    let (s, m, _) = call("POST", "/v1/runs", None, Some(keyed.clone()), Some("k1"));
    report("idempotent replay (same key, same body)", s, &m);
    // The same retry once its run has ended and its session is free again.
    let keyed_task = v["taskId"].as_str().unwrap_or_default().to_owned();
    call(
        "POST",
        &format!("/v1/runs/{keyed_task}/cancel"),
        None,
        None,
        None,
    );
    let (s, m, _) = call("POST", "/v1/runs", None, Some(keyed), Some("k1"));
    report("idempotent replay after its run ended", s, &m);
    let (s, m, _) = call("GET", &format!("/v1/runs/{task}"), None, None, None);
    report("read run", s, &m);
    // Leases until `task` is the one leased (at most 4 tries; nothing else is unheld on the bench
    // server but the runs this scenario admits), reporting each try when `counted`: its lease.
    let lease_of = |task: &str, counted: bool| -> Option<Value> {
        for _ in 0..4 {
            let (s, m, v) = call(
                "POST",
                "/v1/runner/lease",
                Some("runner"),
                Some(json!({"runnerId": "cost"})),
                None,
            );
            if counted {
                report("lease", s, &m);
            }
            if v["taskId"] == task {
                return Some(v);
            }
        }
        None
    };
    let epoch = lease_of(&task, true).map_or(0, |v| v["leaseEpoch"].as_i64().unwrap_or_default());
    let (s, m, _) = call(
        "POST",
        &format!("/v1/runs/{task}/heartbeat"),
        Some("runner"),
        Some(json!({"runnerId": "cost", "leaseEpoch": epoch})),
        None,
    );
    report("heartbeat", s, &m);
    let events: Vec<Value> = (0..100)
        .map(|i| json!({"type": "text_delta", "data": {"delta": format!("{i}")}}))
        .collect();
    let (s, m, _) = call(
        "POST",
        &format!("/v1/runs/{task}/events"),
        Some("runner"),
        Some(json!({"runnerId": "cost", "leaseEpoch": epoch, "events": events})),
        None,
    );
    report(
        "event batch (100 events; first call for the run in this isolate)",
        s,
        &m,
    );
    let (s, m, _) = call(
        "POST",
        &format!("/v1/runs/{task}/events"),
        Some("runner"),
        Some(json!({"runnerId": "cost", "leaseEpoch": epoch, "events": [{"type": "x"}]})),
        None,
    );
    report("event batch (1 event; later call)", s, &m);
    let (s, m, _) = call(
        "POST",
        &format!("/v1/runs/{task}/finish"),
        Some("runner"),
        Some(json!({"runnerId": "cost", "leaseEpoch": epoch, "status": "completed"})),
        None,
    );
    report("finish", s, &m);
    let (s, m, _) = call("POST", &format!("/v1/runs/{task}/cancel"), None, None, None);
    report("cancel (already terminal)", s, &m);
    // A runner that sends its lease's sessionId back as a hint: its first write of a run needs no
    // lookup of the run's session.
    let hinted = unique("cost");
    let (_, _, v) = call(
        "POST",
        "/v1/runs",
        None,
        Some(json!({"sessionId": hinted, "objective": "x"})),
        None,
    );
    let task = v["taskId"].as_str().unwrap_or_default().to_owned();
    if let Some(v) = lease_of(&task, false) {
        let epoch = v["leaseEpoch"].as_i64().unwrap_or_default();
        let (s, m, _) = call(
            "POST",
            &format!("/v1/runs/{task}/events"),
            Some("runner"),
            Some(
                json!({"runnerId": "cost", "leaseEpoch": epoch, "sessionId": v["sessionId"], "events": [{"type": "x"}]}),
            ),
            None,
        );
        report(
            "event batch (1 event; first call for the run, with the session hint)",
            s,
            &m,
        );
        call(
            "POST",
            &format!("/v1/runs/{task}/finish"),
            Some("runner"),
            Some(json!({"runnerId": "cost", "leaseEpoch": epoch, "status": "completed"})),
            None,
        );
    }
}

/// A fresh thread id for the peer (LangGraph thread ids must be UUIDs).
fn uuid_like() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The peer's submit: a run on a thread with `multitask_strategy: "reject"` (one active run per
/// thread), creating the thread if needed.
fn peer_submit(agent: &ureq::Agent, url: &str, thread: &str, hold_ms: u64) -> (u16, f64) {
    let t = Instant::now();
    let body = json!({
        "assistant_id": "stub",
        "input": {"objective": "bench", "hold_ms": hold_ms},
        "multitask_strategy": "reject",
        "if_not_exists": "create",
    });
    let answer = agent
        .post(&format!("{url}/threads/{thread}/runs"))
        .set("content-type", "application/json")
        .send_string(&body.to_string());
    (status_of(&answer), t.elapsed().as_secs_f64() * 1000.0)
}

/// Admission scenario against the peer: runs on fresh threads at increasing concurrency.
fn peer_admission(ctx: &Ctx, per_level: usize) {
    admission_levels("peer-admission", per_level, 200, |agent, _| {
        peer_submit(agent, &ctx.url, &uuid_like(), 0)
    });
}

/// Contention against the peer: `contenders` simultaneous runs on one thread, `reject`, the first
/// holding the thread for 5 s.
fn peer_contention(ctx: &Ctx, sessions: usize, contenders: usize) {
    emit(contention_rounds(
        "peer-contention",
        sessions,
        contenders,
        200,
        uuid_like,
        |agent, thread| peer_submit(agent, &ctx.url, thread, 5_000),
    ));
}

/// Where admission time goes: sequential submits into one warm session object (cancelled between
/// submits) versus submits that each create a new session object; plus the trivial route.
fn session_object(ctx: &Ctx, rounds: usize) {
    let time = |f: &dyn Fn() -> Value| {
        let t = Instant::now();
        let v = f();
        (t.elapsed().as_secs_f64() * 1000.0, v)
    };
    let warm_session = unique("warm");
    let (mut warm, mut new, mut health) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (ms, v) = time(&|| {
            ctx.post(
                "/v1/runs",
                None,
                json!({"sessionId": warm_session, "objective": "x"}),
            )
        });
        warm.push(ms);
        if let Some(task) = v["taskId"].as_str() {
            ctx.post(&format!("/v1/runs/{task}/cancel"), None, json!({}));
        }
        let (ms, _) = time(&|| {
            ctx.post(
                "/v1/runs",
                None,
                json!({"sessionId": unique("new"), "objective": "x"}),
            )
        });
        new.push(ms);
        let t = Instant::now();
        let _ = ctx.agent.get(&format!("{}/health", ctx.url)).call();
        health.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    for (what, lat) in [
        ("GET /health", health),
        ("admission into a warm session object", warm),
        ("admission creating a new session object", new),
    ] {
        let mut line = summary(lat);
        line["scenario"] = json!("session-object");
        line["what"] = json!(what);
        line["samples"] = json!(rounds);
        emit(line);
    }
}

/// Scenarios against a running Sema Edge Worker (or the LangGraph peer), one JSON line per result.
#[derive(Debug, Parser)]
#[command(name = "sema-bench", version)]
struct Cli {
    /// Base URL of the server under test.
    #[arg(long, global = true, default_value = "http://127.0.0.1:8787")]
    url: String,
    /// Label of the server under test, stamped on every result line.
    #[arg(long, global = true)]
    target: Option<String>,
    #[command(subcommand)]
    scenario: Scenario,
}

/// Where the two sides of an interleaved comparison run (`beside-floor`, `beside-floor-paths`).
#[derive(Debug, clap::Args)]
struct SidesArgs {
    /// Base URL of the floor Worker.
    #[arg(long)]
    floor_url: String,
    /// Our Worker's workerd pid (for its CPU per operation).
    #[arg(long)]
    workerd_pid: Option<u32>,
    /// The floor Worker's workerd pid.
    #[arg(long)]
    floor_workerd_pid: Option<u32>,
    /// Base URL of the floor through the Rust binding (`bench/floor-rs`), a third side where given.
    #[arg(long)]
    floor_rs_url: Option<String>,
    /// Its workerd pid.
    #[arg(long)]
    floor_rs_workerd_pid: Option<u32>,
}

impl SidesArgs {
    fn sides(&self) -> beside_floor::Sides<'_> {
        beside_floor::Sides {
            floor: &self.floor_url,
            ours_pid: self.workerd_pid,
            floor_pid: self.floor_workerd_pid,
            floor_rs: self.floor_rs_url.as_deref(),
            floor_rs_pid: self.floor_rs_workerd_pid,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Append → SSE receipt latency (one event per call).
    EventsLatency {
        /// Append calls measured.
        #[arg(long, default_value_t = 300)]
        samples: usize,
    },
    /// Batched appends on several runs in parallel: events per second.
    EventsIngest {
        /// Append calls per run.
        #[arg(long, default_value_t = 20)]
        batches: usize,
        /// Events per append call.
        #[arg(long, default_value_t = 100)]
        batch_size: usize,
        /// Runs appended to in parallel.
        #[arg(long, default_value_t = 2)]
        runs: usize,
    },
    /// C clients steering one running run at once (M messages each) while its runner heartbeats:
    /// how fairly the session object's lock shares the object (the steers' latency tail).
    SteerFlood {
        /// Clients sending at once.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Steers per client.
        #[arg(long, default_value_t = 40)]
        per_client: usize,
        /// Bytes per message (64 KiB, the largest a steer may carry).
        #[arg(long, default_value_t = 64 * 1024)]
        message_bytes: usize,
    },
    /// Conflicting submits into a held session, first alone, then while W threads append to its
    /// run without pause: whether a 409 waits behind the session object's writes.
    ConflictUnderAppends {
        /// Threads appending one event per call in the second phase.
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Threads submitting.
        #[arg(long, default_value_t = 4)]
        clients: usize,
        /// Submits per thread and phase.
        #[arg(long, default_value_t = 50)]
        per_client: usize,
    },
    /// Submits to fresh sessions at concurrency 1/8/32/128.
    Admission {
        /// Submits at each concurrency level.
        #[arg(long, default_value_t = 256)]
        per_level: usize,
    },
    /// Submits to warm sessions (one per thread, each run cancelled after its submit) at
    /// concurrency 1/8/32/128.
    AdmissionWarm {
        /// Submits at each concurrency level.
        #[arg(long, default_value_t = 256)]
        per_level: usize,
    },
    /// C simultaneous submits per session.
    Contention {
        /// Fresh sessions contended for, one after another.
        #[arg(long, default_value_t = 50)]
        sessions: usize,
        /// Simultaneous submits per session.
        #[arg(long, default_value_t = 100)]
        contenders: usize,
    },
    /// N SSE clients on one run.
    Fanout {
        /// SSE clients reading the run.
        #[arg(long, default_value_t = 100)]
        subscribers: usize,
        /// Events appended to the run.
        #[arg(long, default_value_t = 100)]
        events: usize,
    },
    /// Raw SQLite single-row transactions (storage ceiling; no server).
    SqliteTx {
        /// Single-row transactions per mode.
        #[arg(long, default_value_t = 2000)]
        rows: usize,
    },
    /// The dispatcher's follow-up bookkeeping per hand-over with N leases followed (native, the
    /// core's code; no server).
    FollowCost {
        /// Leases already followed, one measurement each (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,30000")]
        followed: Vec<usize>,
        /// Hand-overs timed at each level.
        #[arg(long, default_value_t = 2000)]
        hand_overs: usize,
    },
    /// D1 round trips and statements per operation.
    Cost,
    /// Our admission and the floor Worker's (`bench/floor/`, and `bench/floor-rs/` where given),
    /// interleaved on the Workers served at once: per concurrency level, rounds measuring each side once in a rotating order; then
    /// sequential admissions into a warm and a new object, the sides taking turns.
    BesideFloor {
        #[command(flatten)]
        sides: SidesArgs,
        /// Rounds per concurrency level.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Submits per side, level and round.
        #[arg(long, default_value_t = 256)]
        per_level: usize,
        /// Sequential admissions per side and object kind.
        #[arg(long, default_value_t = 100)]
        samples: usize,
    },
    /// Our other hot paths and their floors (`floor-paths`), interleaved on the Workers served at
    /// once: a warm-up round, then per round each path measured on each side, in an order rotating
    /// by round and by path.
    BesideFloorPaths {
        #[command(flatten)]
        sides: SidesArgs,
        /// Rounds (a multiple of 6: each side then goes first equally often on every path).
        #[arg(long, default_value_t = 6)]
        rounds: usize,
        /// Contention: sessions per side and round.
        #[arg(long, default_value_t = 20)]
        sessions: usize,
        #[arg(long, default_value_t = 100)]
        contenders: usize,
        /// Appends and hand-overs per side, path and round.
        #[arg(long, default_value_t = 100)]
        samples: usize,
        /// Only these paths (comma-separated: contention, append, ws-warm, ws-new, long-poll-warm,
        /// long-poll-new), for an A/B of one path; the report's run measures them all.
        #[arg(long, value_delimiter = ',')]
        paths: Vec<String>,
        /// The floors' parts: the design's (the product's own statements on its schema; the
        /// report's), or, for an A/B of the floor itself, the bare parts (tables without indexes).
        #[arg(long, value_enum, default_value_t = floor_paths::Parts::Design)]
        floor_parts: floor_paths::Parts,
    },
    /// Admission into a warm vs a new session object.
    SessionObject {
        /// Rounds, each one admission into a warm and one into a new session object.
        #[arg(long, default_value_t = 100)]
        rounds: usize,
    },
    /// One reaper tick over a store seeded out of band (`scripts/bench` seeds it): triggers the
    /// cron through the scheduled test route and reports the tick's own summary.
    Reaper {
        /// Runs in the seeded store (reported, not created here).
        #[arg(long, default_value_t = 100_000)]
        runs: usize,
        /// Of those, how many were seeded silent past the cutoff.
        #[arg(long, default_value_t = 100)]
        stale: usize,
    },
    /// Leader runs: per round one leader of N subtasks driven to its end by the bench's runners;
    /// admission to settle, D1 round trips per child, the most children non-terminal at once.
    Leader {
        /// Subtasks (child runs) of each round's leader run.
        #[arg(long, default_value_t = 100)]
        subtasks: usize,
        /// The leader's `maxConcurrency`.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Runner threads leasing and finishing children.
        #[arg(long, default_value_t = 8)]
        runners: usize,
        /// Leader runs, one after another.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// The runners' lease long-poll (`waitMs`).
        #[arg(long, default_value_t = 1000)]
        lease_wait_ms: u64,
        /// The most one round may take; past it the round is an error and its leader is cancelled.
        #[arg(long, default_value_t = 300)]
        round_deadline_s: u64,
    },
    /// Task queues: submit sent → lease received with one runner waiting (`waitMs` 20000) in the
    /// scenario's own queue; the submit's latency and the lease's D1 round trips.
    DispatchLatency {
        /// Measured submits (after one warm-up round).
        #[arg(long, default_value_t = 200)]
        samples: usize,
        /// The runner waits on the dispatcher's WebSocket (`GET /v1/runner/connect`) instead.
        #[arg(long)]
        ws: bool,
        /// Every submit goes into one session (each run is finished before the next submit), so
        /// the session object is warm; without it each submit opens a new session (a new object).
        #[arg(long)]
        warm_session: bool,
    },
    /// Task queues: N runners each holding a long-poll (`waitMs` 25000) on an empty queue: D1
    /// round trips per runner per minute, the dispatcher's waiters, workerd CPU and RSS.
    IdleRunners {
        /// Runner threads (64 KiB stacks), one long-poll each.
        #[arg(long, default_value_t = 1000)]
        runners: usize,
        /// The idle window, once every runner is held.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// The workerd process(es) serving the Worker (comma-separated); none: the pids `ss -ltnpH`
        /// shows listening on `--url`'s port.
        #[arg(long, value_delimiter = ',')]
        workerd_pid: Vec<u32>,
        /// Each runner holds a ready WebSocket to the dispatcher instead of a long-poll.
        #[arg(long)]
        ws: bool,
        /// With `--ws`: each socket sends a keepalive every this many seconds of the window
        /// (spread evenly; answered by the runtime, not the dispatcher); 0 = none.
        #[arg(long, default_value_t = 0)]
        ping_every_s: u64,
    },
    /// Task queues: runs/s through submit → lease → finish with runners waiting in the dispatcher.
    RunsThroughput {
        /// Runs submitted (each into a fresh session) and driven to `completed`.
        #[arg(long, default_value_t = 400)]
        runs: usize,
        /// Runner threads leasing and finishing.
        #[arg(long, default_value_t = 8)]
        runners: usize,
        /// Threads submitting.
        #[arg(long, default_value_t = 8)]
        submitters: usize,
        /// The runners' lease long-poll (`waitMs`, > 0: they wait in the dispatcher).
        #[arg(long, default_value_t = 20_000)]
        lease_wait_ms: u64,
    },
    /// End to end with N reference runners (the `sema-runner` binary, started as a child): runs/s
    /// through submit → lease → E appends → finish → the SSE client reads `done`, and per-run
    /// submit → done latency (the runner does no work).
    EndToEnd {
        /// Runs submitted (each into a fresh session) and read to their `done` frame.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// The reference runner's worker threads (`--concurrency`).
        #[arg(long, default_value_t = 8)]
        runners: usize,
        /// Client threads submitting and reading streams.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// `say` lines per run's objective: one text_delta append each.
        #[arg(long, default_value_t = 10)]
        events: usize,
        /// The reference runner binary.
        #[arg(long, default_value = "target/release/sema-runner")]
        runner_bin: String,
    },
    /// The platform's floor: the parts of one admission (trivial route, D1 batch, object round
    /// trip, object storage, object + D1 + storage) on the bench-only floor Worker
    /// (`bench/floor/`), new and warm objects, at concurrency 1/8/32/128.
    Floor {
        /// Requests per part, object kind and level.
        #[arg(long, default_value_t = 256)]
        per_level: usize,
        /// Only these parts (comma-separated route names); all when absent.
        #[arg(long, value_delimiter = ',')]
        parts: Vec<String>,
    },
    /// The floor of the reaper tick's notices on the bench-only floor Worker (`bench/floor/`):
    /// `objects` new objects called from one invocation, `at_once` in flight, timed inside it.
    FloorTell {
        /// Objects per round (the tick's stale runs, one session each).
        #[arg(long, default_value_t = 100)]
        objects: usize,
        /// Calls in flight (comma-separated values; the tick's own is 8).
        #[arg(long, value_delimiter = ',', default_value = "8")]
        at_once: Vec<usize>,
        /// Rounds per value of `at_once`.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// The floor of the other hot paths on the bench-only floor Worker (`bench/floor/`): 409s under
    /// simultaneous submits, append → stream receipt, submit → lease with a runner waiting
    /// (WebSocket and long-poll; new and warm session objects); each through the design's parts
    /// and through the bare parts.
    FloorPaths {
        /// Fresh objects for the contention rounds.
        #[arg(long, default_value_t = 50)]
        sessions: usize,
        /// Simultaneous submits per object.
        #[arg(long, default_value_t = 100)]
        contenders: usize,
        /// Appends timed, and submit → lease rounds per transport and session kind.
        #[arg(long, default_value_t = 200)]
        samples: usize,
    },
    /// Listings as one tenant on a store seeded out of band (`bench/scale_seed.py`): the tenant's
    /// runs (first page and a deep keyset page), a session's runs, runs by status, sessions, approvals.
    Listing {
        /// Requests per kind of listing.
        #[arg(long, default_value_t = 100)]
        samples: usize,
        /// The tenant listing (`X-Sema-Principal`): `tenant-4` owns seeded parked sessions.
        #[arg(long, default_value = "tenant-4")]
        tenant: String,
        /// The session whose runs are listed.
        #[arg(long, default_value = "scale-s-4")]
        session: String,
        /// Pages followed by `nextCursor` before the deep page is timed.
        #[arg(long, default_value_t = 20)]
        pages: usize,
    },
    /// Admission against LangGraph's dev server.
    PeerAdmission {
        /// Submits at each concurrency level.
        #[arg(long, default_value_t = 256)]
        per_level: usize,
    },
    /// Contention against LangGraph's dev server.
    PeerContention {
        /// Fresh sessions contended for, one after another.
        #[arg(long, default_value_t = 10)]
        sessions: usize,
        /// Simultaneous submits per session.
        #[arg(long, default_value_t = 100)]
        contenders: usize,
    },
    /// End to end against LangGraph's dev server: runs/s and submit → end of stream of stub runs
    /// streamed to their end (the graph runs in-process: no runner, no appends).
    PeerEndToEnd {
        /// Runs, each on a fresh thread, streamed to their end.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Client threads.
        #[arg(long, default_value_t = 8)]
        clients: usize,
    },
}

fn main() {
    let _ = START.set(Instant::now());
    let cli = Cli::parse();
    if let Some(target) = cli.target {
        let _ = TARGET.set(target);
    }
    let ctx = Ctx {
        url: cli.url,
        agent: ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(30))
            .build(),
    };
    match cli.scenario {
        Scenario::EventsLatency { samples } => events_latency(&ctx, samples),
        Scenario::EventsIngest {
            batches,
            batch_size,
            runs,
        } => events_ingest(&ctx, batches, batch_size, runs),
        Scenario::Admission { per_level } => admission(&ctx, per_level),
        Scenario::AdmissionWarm { per_level } => admission_warm(&ctx, per_level),
        Scenario::SteerFlood {
            clients,
            per_client,
            message_bytes,
        } => steer::steer_flood(&ctx.url, clients, per_client, message_bytes),
        Scenario::ConflictUnderAppends {
            writers,
            clients,
            per_client,
        } => conflict_load::conflict_under_appends(&ctx.url, writers, clients, per_client),
        Scenario::Contention {
            sessions,
            contenders,
        } => contention(&ctx, sessions, contenders),
        Scenario::Fanout {
            subscribers,
            events,
        } => fanout(&ctx, subscribers, events),
        Scenario::SqliteTx { rows } => sqlite_tx(rows),
        Scenario::FollowCost {
            followed,
            hand_overs,
        } => follow_cost::follow_cost(&followed, hand_overs),
        Scenario::Cost => cost(&ctx),
        Scenario::Reaper { runs, stale } => reaper(&ctx, runs, stale),
        Scenario::SessionObject { rounds } => session_object(&ctx, rounds),
        Scenario::BesideFloor {
            sides,
            rounds,
            per_level,
            samples,
        } => beside_floor::beside_floor(&ctx, &sides.sides(), rounds, per_level, samples),
        Scenario::BesideFloorPaths {
            sides,
            rounds,
            sessions,
            contenders,
            samples,
            paths,
            floor_parts,
        } => {
            let counts = beside_floor::PathCounts {
                sessions,
                contenders,
                samples,
                only: paths,
                parts: floor_parts,
            };
            beside_floor::beside_floor_paths(&ctx, &sides.sides(), rounds, &counts)
        }
        Scenario::Leader {
            subtasks,
            concurrency,
            runners,
            rounds,
            lease_wait_ms,
            round_deadline_s,
        } => leader::leader(
            &ctx.url,
            subtasks,
            concurrency,
            runners,
            rounds,
            lease_wait_ms,
            Duration::from_secs(round_deadline_s),
        ),
        Scenario::DispatchLatency {
            samples,
            ws: false,
            warm_session,
        } => queues::dispatch_latency(&ctx.url, samples, warm_session),
        Scenario::DispatchLatency {
            samples,
            ws: true,
            warm_session,
        } => queues_ws::dispatch_latency(&ctx.url, samples, warm_session),
        Scenario::IdleRunners {
            runners,
            seconds,
            workerd_pid,
            ws: false,
            ..
        } => queues::idle_runners(&ctx.url, runners, seconds, &workerd_pid),
        Scenario::IdleRunners {
            runners,
            seconds,
            workerd_pid,
            ws: true,
            ping_every_s,
        } => queues_ws::idle_runners(&ctx.url, runners, seconds, &workerd_pid, ping_every_s),
        Scenario::RunsThroughput {
            runs,
            runners,
            submitters,
            lease_wait_ms,
        } => queues::runs_throughput(&ctx.url, runs, runners, submitters, lease_wait_ms),
        Scenario::EndToEnd {
            runs,
            runners,
            clients,
            events,
            runner_bin,
        } => end_to_end::end_to_end(&ctx.url, runs, runners, clients, events, &runner_bin),
        Scenario::PeerEndToEnd { runs, clients } => {
            end_to_end::peer_end_to_end(&ctx.url, runs, clients)
        }
        Scenario::Floor { per_level, parts } => floor::floor(&ctx.url, per_level, &parts),
        Scenario::FloorTell {
            objects,
            at_once,
            rounds,
        } => floor::floor_tell(&ctx.url, objects, &at_once, rounds),
        Scenario::FloorPaths {
            sessions,
            contenders,
            samples,
        } => floor_paths::floor_paths(&ctx.url, sessions, contenders, samples),
        Scenario::Listing {
            samples,
            tenant,
            session,
            pages,
        } => scale::listing(&ctx.url, samples, &tenant, &session, pages),
        Scenario::PeerAdmission { per_level } => peer_admission(&ctx, per_level),
        Scenario::PeerContention {
            sessions,
            contenders,
        } => peer_contention(&ctx, sessions, contenders),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_flag_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn scripts_bench_invocations_parse_with_the_global_flags_before_the_scenario() {
        let cli = Cli::try_parse_from([
            "sema-bench",
            "--url",
            "http://127.0.0.1:1",
            "--target",
            "peer",
            "peer-contention",
            "--sessions",
            "3",
            "--contenders",
            "100",
        ])
        .unwrap();
        assert_eq!(cli.url, "http://127.0.0.1:1");
        assert_eq!(cli.target.as_deref(), Some("peer"));
        assert!(matches!(
            cli.scenario,
            Scenario::PeerContention {
                sessions: 3,
                contenders: 100
            }
        ));
        let cli = Cli::try_parse_from(["sema-bench", "sqlite-tx"]).unwrap();
        assert_eq!(cli.url, "http://127.0.0.1:8787");
        assert!(matches!(cli.scenario, Scenario::SqliteTx { rows: 2000 }));
        let cli = Cli::try_parse_from(["sema-bench", "floor-tell", "--at-once", "8,100"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::FloorTell { objects: 100, ref at_once, rounds: 5 } if at_once == &[8, 100]
        ));
    }

    #[test]
    fn defaults_are_the_documented_counts() {
        let cli =
            Cli::try_parse_from(["sema-bench", "events-ingest", "--url", "http://x"]).unwrap();
        assert_eq!(cli.url, "http://x");
        assert!(matches!(
            cli.scenario,
            Scenario::EventsIngest {
                batches: 20,
                batch_size: 100,
                runs: 2
            }
        ));
    }

    #[test]
    fn the_listing_scenario_lists_as_the_seeded_tenant_with_parked_sessions_by_default() {
        let cli = Cli::try_parse_from(["sema-bench", "listing"]).unwrap();
        match cli.scenario {
            Scenario::Listing {
                samples,
                tenant,
                session,
                pages,
            } => {
                assert_eq!((samples, pages), (100, 20));
                assert_eq!(
                    (tenant.as_str(), session.as_str()),
                    ("tenant-4", "scale-s-4")
                );
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_leader_scenario_takes_its_documented_defaults() {
        let cli = Cli::try_parse_from(["sema-bench", "--url", "http://x", "leader"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::Leader {
                subtasks: 100,
                concurrency: 8,
                runners: 8,
                rounds: 3,
                lease_wait_ms: 1000,
                round_deadline_s: 300
            }
        ));
    }

    #[test]
    fn the_task_queue_scenarios_take_their_documented_defaults() {
        let cli = Cli::try_parse_from(["sema-bench", "dispatch-latency"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::DispatchLatency {
                samples: 200,
                ws: false,
                warm_session: false
            }
        ));
        let cli = Cli::try_parse_from(["sema-bench", "idle-runners"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::IdleRunners { runners: 1000, seconds: 20, ref workerd_pid, ws: false, ping_every_s: 0 } if workerd_pid.is_empty()
        ));
        let cli = Cli::try_parse_from(["sema-bench", "runs-throughput"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::RunsThroughput {
                runs: 400,
                runners: 8,
                submitters: 8,
                lease_wait_ms: 20_000
            }
        ));
        let cli = Cli::try_parse_from([
            "sema-bench",
            "--url",
            "http://127.0.0.1:1",
            "idle-runners",
            "--workerd-pid",
            "12,34",
        ])
        .unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::IdleRunners { ref workerd_pid, .. } if workerd_pid == &[12, 34]
        ));
    }

    #[test]
    fn the_end_to_end_scenarios_take_their_documented_defaults_and_the_scripts_bench_flags() {
        let cli = Cli::try_parse_from(["sema-bench", "end-to-end"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::EndToEnd { runs: 200, runners: 8, clients: 8, events: 10, ref runner_bin }
                if runner_bin == "target/release/sema-runner"
        ));
        let cli = Cli::try_parse_from(["sema-bench", "peer-end-to-end"]).unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::PeerEndToEnd {
                runs: 200,
                clients: 8
            }
        ));
        let cli = Cli::try_parse_from([
            "sema-bench",
            "--url",
            "http://127.0.0.1:1",
            "--target",
            "workerd-direct",
            "end-to-end",
            "--runs",
            "30",
            "--runners",
            "8",
        ])
        .unwrap();
        assert_eq!(cli.target.as_deref(), Some("workerd-direct"));
        assert!(matches!(
            cli.scenario,
            Scenario::EndToEnd {
                runs: 30,
                runners: 8,
                ..
            }
        ));
        let cli = Cli::try_parse_from([
            "sema-bench",
            "--url",
            "http://127.0.0.1:1",
            "--target",
            "peer",
            "peer-end-to-end",
            "--runs",
            "30",
        ])
        .unwrap();
        assert!(matches!(
            cli.scenario,
            Scenario::PeerEndToEnd {
                runs: 30,
                clients: 8
            }
        ));
    }

    #[test]
    fn a_missing_or_unknown_scenario_is_refused() {
        assert!(Cli::try_parse_from(["sema-bench"]).is_err());
        assert!(Cli::try_parse_from(["sema-bench", "nope"]).is_err());
        assert!(Cli::try_parse_from(["sema-bench", "admission", "--per-level", "x"]).is_err());
    }
}
