//! Randomized interleavings: `SEMA_CHAOS_TRIALS` trials (default 10,000) of concurrent submit,
//! cancel, lease, append, heartbeat, park, decide, finish and reaper ticks on a few sessions each,
//! against two Workers of its own (the sessions split between them) with small liveness knobs (so
//! alarms, takeovers, requeues and gate expiries happen between and during trials). Every request of a trial is sent at once (one
//! thread each); when all have answered, D1 is read (one read transaction) and checked:
//! - single-active: never two active runs in a session, every active run holds its session's claim,
//!   no claim for a run that is not active, and the session's object names the same claim as D1
//!   (asked after every third trial, and of every session at the end);
//! - write-once: a run once seen terminal never changes status, result, error or ledger again, and
//!   a terminal write that was acknowledged (finish 200, cancel 200, decision 200) is what is stored;
//! - the ledger: seqs dense `1..=last_seq`, an event once seen never rewritten, every acknowledged
//!   append stored at the seqs it was given, at most one `done` and only last;
//! - no answer is a 5xx or outside the route's documented statuses.
//!
//! Workers (threads of this test) own disjoint sessions and run their trials one after another, so
//! a trial's sessions are quiescent when it checks them (apart from alarms and other trials' ticks,
//! which the object-agreement check waits out). Sessions live across trials, so later trials send
//! stale epochs, cancels of ended runs and decisions on resolved gates at the runs earlier ones
//! left. The choices of trial `i` come from a generator seeded with the printed seed and `i`:
//! `SEMA_TEST_SEED=<seed>` replays them (timing, and so the interleavings, still vary).

use crate::harness::{d1_reader, migrate, test_seed, work_dir, Api, Resp, Rng, Wrangler};
use crate::invariants::{is_active, Run, Snapshot, TerminalFace};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Concurrent workers (each owning `SESSIONS_PER_WORKER` sessions), spread over `SHARDS` Workers.
const WORKERS: usize = 8;
/// Workers under test, each its own `wrangler dev` (its own workerd, its own local D1): the local
/// runtime serves every request of one on one thread, so two of them keep both of this machine's
/// cores busy. Worker thread `w` talks to shard `w % SHARDS`.
const SHARDS: usize = 2;
/// Trials after which the touched sessions' objects are compared with D1 (the rest check D1 only).
const OBJECT_CHECK_EVERY: usize = 3;
const SESSIONS_PER_WORKER: usize = 4;
/// How long the object may disagree with D1 after a trial: its alarm's re-check period
/// (`RUN_STALE_SEC`, 4 s) and as long again for a loaded machine.
const AGREE_WITHIN: Duration = Duration::from_secs(8);

/// The gates a runner parks on (their decide paths: approvals for the first two, plan review).
const PARK_KINDS: [&str; 3] = ["human", "tool_approval", "plan_review"];
/// What a runner's finish may say.
const FINISH_STATUSES: [&str; 5] = ["completed", "failed", "cancelled", "blocked", "timeout"];

fn trials() -> usize {
    std::env::var("SEMA_CHAOS_TRIALS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(10_000)
}

fn vars() -> Vec<String> {
    [
        "SEMA_AUTH:local",
        "RUN_STALE_SEC:4",
        "RUN_QUEUE_STALE_SEC:8",
        "LEASE_ACK_SEC:2",
        "APPROVAL_TIMEOUT_SEC:4",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// What the test knows of one session (a hint for choosing requests; D1 is the judge).
#[derive(Default)]
struct Model {
    id: String,
    queue: String,
    runs: Vec<String>,
    /// Leases won, latest last (stale ones stay: they are sent again on purpose).
    leases: Vec<(String, i64)>,
    /// Idempotency keys used, with the objective sent under each.
    keys: Vec<(String, String)>,
    /// The face of each run when first seen terminal.
    terminal: HashMap<String, TerminalFace>,
    /// The terminal status an acknowledged write reported.
    acked_terminal: HashMap<String, (String, String)>,
    /// Every event seen or acknowledged: (task, seq) → (type, data).
    events: HashMap<(String, i64), (String, Value)>,
    next_event: u64,
    /// The session's active run and its status as of the last check (weights the next choices).
    active: Option<(String, String)>,
}

#[derive(Debug, Clone)]
enum Step {
    Append(usize),
    Heartbeat,
    Park(&'static str),
    Finish(&'static str),
}

#[derive(Debug, Clone)]
enum Op {
    Submit {
        s: usize,
        key: Option<String>,
        objective: String,
    },
    Cancel {
        s: usize,
        task: String,
    },
    Runner {
        s: usize,
        lease: Option<(String, i64)>,
        steps: Vec<Step>,
        first_event: u64,
    },
    Decide {
        s: usize,
        path: String,
        body: Value,
    },
    Reap,
}

/// What an op learnt, applied to the models once the trial's requests have all answered.
#[derive(Debug)]
enum Note {
    Admitted(usize, String),
    Key(usize, String, String),
    Leased(usize, String, i64),
    Acked(usize, String, i64, String, Value),
    Ended(usize, String, String, String),
    Bad(String),
    Count(&'static str, u16),
}

struct Stats {
    counts: Mutex<BTreeMap<(&'static str, u16), u64>>,
    failures: Mutex<Vec<String>>,
    done: AtomicUsize,
}

#[test]
fn ten_thousand_randomized_interleavings_keep_one_active_run_per_session_and_terminal_runs_written_once(
) {
    let n = trials();
    let seed = test_seed();
    let dir = work_dir("interleavings");
    let shards: Vec<(std::path::PathBuf, Wrangler, String)> = (0..SHARDS)
        .map(|i| {
            let state = dir.join(format!("state-{i}"));
            migrate(&state);
            let worker = Wrangler::start(&state, dir.join(format!("wrangler-{i}.log")), &vars());
            let url = worker.direct_url();
            eprintln!("Worker {i}: {} (wrangler dev {})", url, worker.url);
            (state, worker, url)
        })
        .collect();
    let stats = Arc::new(Stats {
        counts: Mutex::new(BTreeMap::new()),
        failures: Mutex::new(Vec::new()),
        done: AtomicUsize::new(0),
    });
    let started = Instant::now();
    let tag = format!("{:x}", seed & 0xffff_ffff);
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (_, _, url) = &shards[w % SHARDS];
            let state = shards[w % SHARDS].0.clone();
            let (url, stats, tag) = (url.clone(), stats.clone(), tag.clone());
            std::thread::spawn(move || run_worker(w, n, seed, &url, &state, &stats, &tag))
        })
        .collect();
    let models: Vec<Vec<Model>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let took = started.elapsed();
    // Quiescence: one last tick on each Worker, then everything every trial saw must still hold,
    // everywhere.
    let mut failures = stats.failures.lock().unwrap().clone();
    let (mut runs, mut events) = (0, 0);
    for (i, (state, _, url)) in shards.iter().enumerate() {
        Api::new(url).cron();
        let mut conn = d1_reader(state);
        let all = Snapshot::read(&mut conn, None);
        runs += all.runs.len();
        events += all.events.values().map(Vec::len).sum::<usize>();
        failures.extend(
            all.violations()
                .into_iter()
                .map(|v| format!("at the end (Worker {i}): {v}")),
        );
        let api = Api::new(url);
        for m in models.iter().skip(i).step_by(SHARDS).flatten() {
            failures.extend(
                check_model(m, &all)
                    .into_iter()
                    .map(|v| format!("at the end (Worker {i}): {v}")),
            );
            if let Some(f) = object_disagrees(&api, &mut conn, &m.id) {
                failures.push(format!("at the end (Worker {i}): {f}"));
            }
        }
    }
    let counts = stats.counts.lock().unwrap();
    eprintln!(
        "{n} trials in {:.1} s ({:.0} trials/s), {} workers × {} sessions on {} Workers; {} runs, {} events in D1",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        WORKERS,
        SESSIONS_PER_WORKER,
        SHARDS,
        runs,
        events
    );
    for ((op, status), k) in counts.iter() {
        eprintln!("  {op:<10} {status}: {k}");
    }
    // The trials must have exercised what they claim to: each kind of write won at least once.
    for (op, status) in [
        ("submit", 202),
        ("submit", 409),
        ("cancel", 200),
        ("lease", 200),
        ("append", 200),
        ("append", 409),
        ("park", 200),
        ("decide", 200),
        ("finish", 200),
        ("finish", 409),
        ("reap", 200),
    ] {
        if n >= 1_000 && !counts.contains_key(&(op, status)) {
            failures.push(format!(
                "no {op} ever answered {status}: the trials did not exercise it"
            ));
        }
    }
    drop(shards);
    assert!(
        failures.is_empty(),
        "{} failures (replay the choices with SEMA_TEST_SEED={seed} SEMA_CHAOS_TRIALS={n}):\n{}",
        failures.len(),
        failures
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn run_worker(
    w: usize,
    n: usize,
    seed: u64,
    url: &str,
    state: &Path,
    stats: &Stats,
    tag: &str,
) -> Vec<Model> {
    let api = Api::new(url);
    let mut conn = d1_reader(state);
    let mut models: Vec<Model> = (0..SESSIONS_PER_WORKER)
        .map(|i| {
            let id = format!("chaos-{tag}-{w}-{i}");
            Model {
                queue: format!("q-{id}"),
                id,
                ..Default::default()
            }
        })
        .collect();
    let mut trial = w;
    while trial < n {
        let mut rng = Rng::new(seed ^ (trial as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let ops = choose(&mut rng, &mut models, trial);
        let notes: Vec<Note> = std::thread::scope(|scope| {
            let handles: Vec<_> = ops
                .iter()
                .map(|op| {
                    let api = api.clone();
                    let models = &models;
                    scope.spawn(move || perform(&api, models, op))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let touched: Vec<usize> = {
            let mut t: Vec<usize> = ops
                .iter()
                .filter_map(|op| match op {
                    Op::Submit { s, .. }
                    | Op::Cancel { s, .. }
                    | Op::Runner { s, .. }
                    | Op::Decide { s, .. } => Some(*s),
                    Op::Reap => None,
                })
                .collect();
            t.sort_unstable();
            t.dedup();
            t
        };
        let mut failures = Vec::new();
        for note in notes {
            match note {
                Note::Admitted(s, t) => {
                    if !models[s].runs.contains(&t) {
                        models[s].runs.push(t);
                    }
                }
                Note::Key(s, k, o) => models[s].keys.push((k, o)),
                Note::Leased(s, t, e) => models[s].leases.push((t, e)),
                Note::Acked(s, t, seq, kind, data) => {
                    let m = &mut models[s];
                    if let Some(prev) = m.events.get(&(t.clone(), seq)) {
                        if *prev != (kind.clone(), data.clone()) {
                            failures.push(format!(
                                "{t}#{seq} acknowledged twice with different events: {prev:?} and {kind} {data}"
                            ));
                        }
                    }
                    m.events.insert((t, seq), (kind, data));
                }
                Note::Ended(s, t, status, by) => {
                    if let Some((prev, prev_by)) = models[s].acked_terminal.get(&t) {
                        if *prev != status {
                            failures.push(format!(
                                "{t} acknowledged terminal twice: {prev} ({prev_by}) and {status} ({by})"
                            ));
                        }
                    } else {
                        models[s].acked_terminal.insert(t, (status, by));
                    }
                }
                Note::Bad(b) => failures.push(b),
                Note::Count(op, status) => {
                    *stats
                        .counts
                        .lock()
                        .unwrap()
                        .entry((op, status))
                        .or_default() += 1;
                }
            }
        }
        let ids: Vec<String> = touched.iter().map(|&s| models[s].id.clone()).collect();
        let snap = Snapshot::read(&mut conn, Some(&ids));
        failures.extend(snap.violations());
        for &s in &touched {
            failures.extend(check_model(&models[s], &snap));
            remember(&mut models[s], &snap);
            // The object's view costs a request per session: asked after every
            // `OBJECT_CHECK_EVERY`-th trial (and of every session at the end).
            if trial.is_multiple_of(OBJECT_CHECK_EVERY) {
                if let Some(f) = object_disagrees(&api, &mut conn, &models[s].id) {
                    failures.push(f);
                }
            }
        }
        if !failures.is_empty() {
            let mut all = stats.failures.lock().unwrap();
            for f in failures {
                all.push(format!("trial {trial} (worker {w}, ops {ops:?}): {f}"));
            }
        }
        let done = stats.done.fetch_add(1, Ordering::Relaxed) + 1;
        if done.is_multiple_of(1_000) {
            eprintln!("{done} trials");
        }
        trial += WORKERS;
    }
    models
}

/// Draws one trial: 2 (sometimes 3) of the worker's sessions, 1 or 2 requests into each, and
/// sometimes a reaper tick.
fn choose(rng: &mut Rng, models: &mut [Model], trial: usize) -> Vec<Op> {
    let k = if rng.chance(4) { 3 } else { 2 };
    let mut picked: Vec<usize> = (0..models.len()).collect();
    for i in 0..k {
        let j = i + rng.below((picked.len() - i) as u64) as usize;
        picked.swap(i, j);
    }
    picked.truncate(k);
    let mut ops = Vec::new();
    for &s in &picked {
        for _ in 0..1 + rng.below(2) {
            ops.push(choose_op(rng, &mut models[s], s, trial));
        }
    }
    if rng.chance(15) {
        ops.push(Op::Reap);
    }
    ops
}

/// One request (or runner chain) into a session, weighted by what the last check saw there: a
/// free session mostly gets submits, a running one runner work, a parked one decisions; every
/// kind stays possible everywhere (stale epochs, cancels of ended runs, decisions on nothing).
fn choose_op(rng: &mut Rng, m: &mut Model, s: usize, trial: usize) -> Op {
    let state = m.active.as_ref().map(|(_, st)| st.as_str());
    let weights: [u64; 4] = match state {
        None => [6, 1, 2, 1],
        Some("running") => [2, 1, 6, 1],
        Some(_) => [2, 1, 1, 6],
    };
    let mut roll = rng.below(weights.iter().sum());
    let mut kind = 0;
    while roll >= weights[kind] {
        roll -= weights[kind];
        kind += 1;
    }
    let last_run = m.runs.last().cloned();
    match (kind, last_run) {
        (1, Some(last)) => {
            // Mostly the latest run; sometimes an older (ended) one.
            let task = if rng.chance(4) {
                rng.pick(&m.runs).clone()
            } else {
                last
            };
            Op::Cancel { s, task }
        }
        (2, _) => {
            // The latest lease while it may still hold; sometimes an old one; else lease now.
            let lease = match m.leases.last() {
                Some(_) if rng.chance(5) => Some(rng.pick(&m.leases).clone()),
                Some(l) if state == Some("running") && rng.chance(2) => Some(l.clone()),
                _ => None,
            };
            let mut steps = Vec::new();
            for _ in 0..1 + rng.below(2) {
                steps.push(match rng.below(8) {
                    0..=2 => Step::Append(1 + rng.below(3) as usize),
                    3 => Step::Heartbeat,
                    4 => Step::Park(PARK_KINDS[rng.below(PARK_KINDS.len() as u64) as usize]),
                    _ => Step::Finish(
                        FINISH_STATUSES[rng.below(FINISH_STATUSES.len() as u64) as usize],
                    ),
                });
            }
            let first_event = m.next_event;
            m.next_event += 8;
            Op::Runner {
                s,
                lease,
                steps,
                first_event,
            }
        }
        (3, Some(last)) => {
            let task = m.active.as_ref().map(|(t, _)| t.clone()).unwrap_or(last);
            if state == Some("needs_review") || rng.chance(6) {
                let body = if rng.chance(2) {
                    json!({"decision": "approve"})
                } else {
                    json!({"decision": "revise", "feedback": "shorter"})
                };
                Op::Decide {
                    s,
                    path: format!("/v1/assistant/tasks/{task}/plan_review"),
                    body,
                }
            } else {
                let body = if rng.chance(2) {
                    json!({"decision": "approve"})
                } else {
                    json!({"decision": "deny", "reason": "no"})
                };
                Op::Decide {
                    s,
                    path: format!("/v1/approvals/{}/decide", m.id),
                    body,
                }
            }
        }
        _ => {
            let (key, objective) = if !m.keys.is_empty() && rng.chance(4) {
                let (k, o) = rng.pick(&m.keys).clone();
                (Some(k), o)
            } else if rng.chance(3) {
                let k = format!("k-{trial}-{}", rng.below(1 << 30));
                (Some(k.clone()), format!("o-{k}"))
            } else {
                (None, format!("say trial {trial}"))
            };
            Op::Submit { s, key, objective }
        }
    }
}

/// Sends one op's requests (a runner's steps one after another) and says what it learnt.
fn perform(api: &Api, models: &[Model], op: &Op) -> Vec<Note> {
    let mut notes = Vec::new();
    let runner = api.as_role("runner");
    match op {
        Op::Submit { s, key, objective } => {
            let m = &models[*s];
            let body = json!({"sessionId": m.id, "objective": objective, "queue": m.queue});
            let headers: Vec<(&str, &str)> = key
                .as_deref()
                .map(|k| ("Idempotency-Key", k))
                .into_iter()
                .collect();
            let r = api.send("POST", "/v1/runs", Some(&body), &headers);
            if let Some(resp) = expect(&mut notes, "submit", &r, &[200, 202, 409]) {
                if resp.status == 202 || resp.status == 200 {
                    if let Some(t) = resp.json()["taskId"].as_str() {
                        notes.push(Note::Admitted(*s, t.to_owned()));
                    }
                    if let Some(k) = key {
                        notes.push(Note::Key(*s, k.clone(), objective.clone()));
                    }
                }
                if resp.status == 409 && resp.json()["errorCode"] != "conflict.session_active_run" {
                    notes.push(Note::Bad(format!("submit 409: {}", resp.body)));
                }
            }
        }
        Op::Cancel { s, task } => {
            let r = api.post(&format!("/v1/runs/{task}/cancel"), &json!({}));
            if let Some(resp) = expect(&mut notes, "cancel", &r, &[200, 202]) {
                if resp.status == 200 {
                    let status = resp.json()["status"].as_str().unwrap_or("").to_owned();
                    if is_active(&status) {
                        notes.push(Note::Bad(format!("cancel 200 with status {status}")));
                    } else {
                        notes.push(Note::Ended(*s, task.clone(), status, "cancel".into()));
                    }
                }
            }
        }
        Op::Runner {
            s,
            lease,
            steps,
            first_event,
        } => {
            let m = &models[*s];
            let (task, epoch) = match lease {
                Some(l) => l.clone(),
                None => {
                    let r = runner.post(
                        "/v1/runner/lease",
                        &json!({"runnerId": "chaos", "queue": m.queue, "waitMs": 0}),
                    );
                    match expect(&mut notes, "lease", &r, &[200, 204]) {
                        Some(resp) if resp.status == 200 => {
                            let l = resp.json();
                            let t = l["taskId"].as_str().unwrap_or("").to_owned();
                            let e = l["leaseEpoch"].as_i64().unwrap_or(0);
                            if l["sessionId"] != m.id.as_str() {
                                notes.push(Note::Bad(format!("leased another session's run: {l}")));
                            }
                            notes.push(Note::Leased(*s, t.clone(), e));
                            (t, e)
                        }
                        _ => return notes,
                    }
                }
            };
            let holder = json!({"runnerId": "chaos", "leaseEpoch": epoch});
            let mut next_event = *first_event;
            for step in steps {
                match step {
                    Step::Append(k) => {
                        let events: Vec<Value> = (0..*k)
                            .map(|_| {
                                next_event += 1;
                                json!({"type": "text_delta", "data": {"delta": format!("d{next_event}")},
                                       "eventId": format!("e-{}-{next_event}", m.id)})
                            })
                            .collect();
                        let mut body = holder.clone();
                        body["events"] = json!(events);
                        let r = runner.post(&format!("/v1/runs/{task}/events"), &body);
                        if let Some(resp) = expect(&mut notes, "append", &r, &[200, 409]) {
                            if resp.status == 200 {
                                let seqs = resp.json()["seqs"].clone();
                                let seqs: Vec<i64> = seqs
                                    .as_array()
                                    .map(|a| a.iter().filter_map(Value::as_i64).collect())
                                    .unwrap_or_default();
                                if seqs.len() != events.len() {
                                    notes.push(Note::Bad(format!(
                                        "append seqs {seqs:?} for {k} events"
                                    )));
                                }
                                for (seq, e) in seqs.iter().zip(&events) {
                                    notes.push(Note::Acked(
                                        *s,
                                        task.clone(),
                                        *seq,
                                        "text_delta".into(),
                                        e["data"].clone(),
                                    ));
                                }
                            } else {
                                check_code(&mut notes, "append", &resp, &["lease_lost"]);
                            }
                        }
                    }
                    Step::Heartbeat => {
                        let r = runner.post(&format!("/v1/runs/{task}/heartbeat"), &holder);
                        if let Some(resp) = expect(&mut notes, "heartbeat", &r, &[200, 409]) {
                            if resp.status == 409 {
                                check_code(&mut notes, "heartbeat", &resp, &["lease_lost"]);
                            }
                        }
                    }
                    Step::Park(kind) => {
                        let mut body = holder.clone();
                        body["gate"] = json!({"kind": kind, "card": {"q": "ok?"}});
                        let r = runner.post(&format!("/v1/runs/{task}/park"), &body);
                        if let Some(resp) = expect(&mut notes, "park", &r, &[200, 409]) {
                            if resp.status == 409 {
                                check_code(
                                    &mut notes,
                                    "park",
                                    &resp,
                                    &["lease_lost", "gate.pending"],
                                );
                            }
                        }
                    }
                    Step::Finish(status) => {
                        let mut body = holder.clone();
                        body["status"] = json!(status);
                        body["result"] = json!({"by": "chaos"});
                        let r = runner.post(&format!("/v1/runs/{task}/finish"), &body);
                        if let Some(resp) = expect(&mut notes, "finish", &r, &[200, 409]) {
                            if resp.status == 200 {
                                notes.push(Note::Ended(
                                    *s,
                                    task.clone(),
                                    (*status).to_owned(),
                                    "finish".into(),
                                ));
                            } else {
                                check_code(&mut notes, "finish", &resp, &["lease_lost"]);
                            }
                        }
                    }
                }
            }
        }
        Op::Decide { s, path, body } => {
            let r = api.post(path, body);
            if let Some(resp) = expect(&mut notes, "decide", &r, &[200, 404, 409]) {
                let v = resp.json();
                if resp.status == 200 {
                    let status = v["status"].as_str().unwrap_or("").to_owned();
                    if !is_active(&status) {
                        if let Some(t) = v["taskId"].as_str() {
                            notes.push(Note::Ended(*s, t.to_owned(), status, "decide".into()));
                        }
                    }
                }
            }
        }
        Op::Reap => {
            let r = api.get("/__scheduled?cron=*+*+*+*+*");
            expect(&mut notes, "reap", &r, &[200]);
        }
    }
    notes
}

/// Counts an answer and flags one outside `ok`; the response, when there was one.
fn expect(
    notes: &mut Vec<Note>,
    name: &'static str,
    r: &Result<Resp, String>,
    ok: &[u16],
) -> Option<Resp> {
    match r {
        Err(e) => {
            notes.push(Note::Bad(format!("{name}: transport error {e}")));
            None
        }
        Ok(resp) => {
            notes.push(Note::Count(name, resp.status));
            if !ok.contains(&resp.status) {
                notes.push(Note::Bad(format!(
                    "{name} answered {}: {}",
                    resp.status, resp.body
                )));
            }
            Some(resp.clone())
        }
    }
}

fn check_code(notes: &mut Vec<Note>, name: &str, resp: &Resp, codes: &[&str]) {
    let code = resp.json()["errorCode"].as_str().unwrap_or("").to_owned();
    if !codes.contains(&code.as_str()) {
        notes.push(Note::Bad(format!("{name} 409 with {code}: {}", resp.body)));
    }
}

/// The write-once and ledger checks of one session's model against a snapshot.
fn check_model(m: &Model, snap: &Snapshot) -> Vec<String> {
    let mut v = Vec::new();
    for t in &m.runs {
        if !snap.runs.contains_key(t) {
            v.push(format!("admitted run {t} of {} is not in D1", m.id));
        }
    }
    for (t, face) in &m.terminal {
        match snap.runs.get(t) {
            Some(r) if r.terminal_face() == *face => {}
            other => v.push(format!(
                "terminal run {t} changed: was {face:?}, now {:?}",
                other.map(Run::terminal_face)
            )),
        }
    }
    for (t, (status, by)) in &m.acked_terminal {
        match snap.runs.get(t) {
            Some(r) if r.status == *status => {}
            other => v.push(format!(
                "{by} of {t} was acknowledged as {status}, D1 has {:?}",
                other.map(|r| &r.status)
            )),
        }
    }
    for ((t, seq), (kind, data)) in &m.events {
        let Some(r) = snap.runs.get(t) else { continue };
        if r.session_id != m.id {
            continue;
        }
        let stored = snap
            .events
            .get(t)
            .and_then(|es| es.iter().find(|e| e.seq == *seq));
        match stored {
            Some(e)
                if e.kind == *kind
                    && serde_json::from_str::<Value>(&e.data).ok().as_ref() == Some(data) => {}
            other => v.push(format!(
                "event {t}#{seq} ({kind} {data}) lost or rewritten: {other:?}"
            )),
        }
    }
    v
}

/// After a check passed: remember terminal faces and every stored event, to hold later ones to them.
fn remember(m: &mut Model, snap: &Snapshot) {
    m.active = snap
        .runs
        .values()
        .find(|r| r.session_id == m.id && is_active(&r.status))
        .map(|r| (r.task_id.clone(), r.status.clone()));
    for r in snap.runs.values().filter(|r| r.session_id == m.id) {
        if !is_active(&r.status) {
            m.terminal
                .entry(r.task_id.clone())
                .or_insert_with(|| r.terminal_face());
        }
        if !m.runs.contains(&r.task_id) {
            m.runs.push(r.task_id.clone());
        }
        for e in snap.events.get(&r.task_id).into_iter().flatten() {
            if let Ok(data) = serde_json::from_str::<Value>(&e.data) {
                m.events
                    .entry((r.task_id.clone(), e.seq))
                    .or_insert((e.kind.clone(), data));
            }
        }
    }
}

/// The object's claim against D1's, waiting out changes in flight (an alarm, another trial's tick):
/// a claim D1 let go of without telling the object (a notice lost or still on its way) must be
/// let go of by the object's own alarm within one `RUN_STALE_SEC` (4 s here), so a disagreement
/// that persists past [`AGREE_WITHIN`] is a failure.
fn object_disagrees(api: &Api, conn: &mut rusqlite::Connection, session: &str) -> Option<String> {
    let start = Instant::now();
    loop {
        let object = api.object_claim(session);
        let snap = Snapshot::read(conn, Some(&[session.to_owned()]));
        let d1 = snap.claims.get(session).cloned();
        if object == d1 {
            return None;
        }
        if start.elapsed() > AGREE_WITHIN {
            // What D1 says of the run the object names.
            let named = object.as_ref().and_then(|t| snap.runs.get(t));
            return Some(format!(
                "session {session}: the object's claim {object:?} and D1's {d1:?} differ for {AGREE_WITHIN:?}; \
                 D1 has the object's run as {:?} (status, code, error)",
                named.map(|r| (&r.status, &r.error_code, &r.error))
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
