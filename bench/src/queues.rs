//! Task-queue scenarios (issue 13): a runner that waits for a run waits in its queue's dispatcher
//! Durable Object, which offers it a run the moment one is admitted.
//!
//! - `dispatch-latency`: one runner waiting (`waitMs` 20000) in a thread; the bench submits a run to
//!   a fresh session and times submit sent → lease received (the runner thread's clock, the same
//!   monotonic clock), the submit's own response time, and the lease response's D1 round trips
//!   (`x-sema-d1`; the lease write alone is 1). Before each submit the admin route must show the
//!   runner waiting. The first round is a warm-up reported apart: it is the new dispatcher's first
//!   wait, which reads the queue's backlog from D1 once (its memory starts cold).
//! - `idle-runners`: N runner threads each holding a long-poll (`waitMs` 25000, re-issued on 204)
//!   on a queue with no runs. Once the admin route shows all N waiting, an idle window of
//!   `--seconds`; reported: D1 round trips summed over every lease response per runner-minute of
//!   waiting (target 0), the dispatcher's `waiters` at the window's start and end, the CPU time
//!   (utime + stime, `/proc/<pid>/stat`) of the workerd process(es) serving the Worker during the
//!   window, and their RSS before the runners came, while held, and after they left. The responses
//!   that cost any D1 round trip are counted apart: a new dispatcher reads its queue's backlog from
//!   D1 on its first wait (and on every wait that arrives while that first read is in flight).
//! - `runs-throughput`: R runs through submit → lease → finish with N runner threads waiting
//!   (`waitMs` > 0) and S submitter threads; runs/s from the first submit sent to the last finish
//!   returned, per-run submit → lease and submit → finish latency, D1 round trips per run.
//!
//! Each scenario run uses its own queue (`unique`), so stray runs of other scenarios never reach its
//! runners. Bounded: every loop has a fixed count or a deadline, every request a timeout; the idle
//! runners' threads have 64 KiB stacks.

use crate::leader::{agent, finish, send, Reply};
use crate::{emit, percentile, unique};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The dispatch-latency runner's long-poll.
const LATENCY_WAIT_MS: u64 = 20_000;
/// The idle runners' long-poll (the server's cap).
const IDLE_WAIT_MS: u64 = 25_000;
/// How often the admin route is read while waiting for runners to be held.
const WAITERS_POLL_EVERY: Duration = Duration::from_millis(2);
/// Most time one dispatch-latency round waits for its runner to be back in the dispatcher.
const WAITER_DEADLINE: Duration = Duration::from_secs(5);
/// Most time a submitted run may take to reach the waiting runner.
const OFFER_DEADLINE: Duration = Duration::from_secs(30);
/// Most time the idle runners may take to be all held.
const RAMP_DEADLINE: Duration = Duration::from_secs(120);
/// The idle runners' thread stack.
const IDLE_STACK: usize = 64 * 1024;
/// Most time the throughput scenario's runs may take.
const THROUGHPUT_DEADLINE: Duration = Duration::from_secs(600);

fn lease_on(agent: &ureq::Agent, url: &str, runner: &str, queue: &str, wait_ms: u64) -> Reply {
    send(
        agent,
        "POST",
        &format!("{url}/v1/runner/lease"),
        Some("runner"),
        Some(&json!({"runnerId": runner, "queue": queue, "waitMs": wait_ms})),
    )
}

/// A run in a fresh session (`<prefix>-…`) of `queue`.
pub(crate) fn submit_on(agent: &ureq::Agent, url: &str, queue: &str, prefix: &str) -> Reply {
    submit_into(agent, url, queue, &unique(prefix))
}

/// Submits `say ok` on `queue` into the session `session`.
pub(crate) fn submit_into(agent: &ureq::Agent, url: &str, queue: &str, session: &str) -> Reply {
    send(
        agent,
        "POST",
        &format!("{url}/v1/runs"),
        None,
        Some(&json!({"sessionId": session, "objective": "say ok", "queue": queue})),
    )
}

/// The session a dispatch-latency round submits into: one for every round when `warm` (its
/// object stays live), else a new one per round (a new object each time).
pub(crate) fn latency_session(warm: &Option<String>, prefix: &str) -> String {
    warm.clone().unwrap_or_else(|| unique(prefix))
}

/// What the queue's dispatcher holds (`GET /v1/admin/queues/{queue}`, operator); `None` on failure.
pub(crate) fn queue_stats(agent: &ureq::Agent, url: &str, queue: &str) -> Option<Value> {
    let r = send(
        agent,
        "GET",
        &format!("{url}/v1/admin/queues/{queue}"),
        Some("operator"),
        None,
    );
    (r.status == 200).then_some(r.body)
}

fn waiters(agent: &ureq::Agent, url: &str, queue: &str) -> Option<u64> {
    queue_stats(agent, url, queue).and_then(|s| s["waiters"].as_u64())
}

/// Reads the admin route every `every` until it shows at least `n` waiters or `deadline` passes:
/// whether it did, and the most it showed.
pub(crate) fn await_waiters(
    agent: &ureq::Agent,
    url: &str,
    queue: &str,
    n: u64,
    every: Duration,
    deadline: Duration,
) -> (bool, u64) {
    let start = Instant::now();
    let most = deadline.as_millis() / every.as_millis().max(1) + 1;
    let mut seen = 0;
    for _ in 0..most {
        let w = waiters(agent, url, queue).unwrap_or(0);
        seen = seen.max(w);
        if w >= n {
            return (true, seen);
        }
        if start.elapsed() >= deadline {
            break;
        }
        std::thread::sleep(every);
    }
    (false, seen)
}

/// `(p50, p99, max)` of `v` (`None`s when empty).
pub(crate) fn dist(mut v: Vec<f64>) -> (Option<f64>, Option<f64>, Option<f64>) {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        return (None, None, None);
    }
    (
        Some(percentile(&v, 50.0)),
        Some(percentile(&v, 99.0)),
        v.last().copied(),
    )
}

pub(crate) fn ms_since(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// The scenario `dispatch-latency`: one warm-up round, then `samples` measured rounds.
pub fn dispatch_latency(url: &str, samples: usize, warm_session: bool) {
    let queue = unique("qb-lat");
    let warm = warm_session.then(|| unique("qb-lat-warm"));
    let runner = "bench-dispatch";
    let rounds = samples + 1;
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(Reply, Instant)>();
    let main = agent();
    let mut lat = vec![];
    let mut submit_ms = vec![];
    // How long after the submit's own response the lease arrived (negative: before it).
    let mut after_submit = vec![];
    let mut lease_rt = vec![];
    let (mut errors, mut not_waiting, mut finish_errors) = (0usize, 0usize, 0usize);
    let mut warmup = json!(null);
    let (empties, runner_errors) = std::thread::scope(|s| {
        let runner_thread = s.spawn(|| {
            let (agent, mut empties, mut errs) = (agent(), 0usize, 0usize);
            // Each round leases once; 204s (a wait that ran out) and errors are bounded too.
            for _ in 0..(4 * rounds + 16) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let l = lease_on(&agent, url, runner, &queue, LATENCY_WAIT_MS);
                let at = Instant::now();
                match l.status {
                    200 => {
                        if tx.send((l, at)).is_err() {
                            break;
                        }
                    }
                    204 => empties += 1,
                    _ => {
                        errs += 1;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            (empties, errs)
        });
        for round in 0..rounds {
            // The runner is back in the dispatcher (it re-issues its lease once it has reported).
            let (held, _) =
                await_waiters(&main, url, &queue, 1, WAITERS_POLL_EVERY, WAITER_DEADLINE);
            not_waiting += usize::from(!held);
            let sent = Instant::now();
            let sub = submit_into(&main, url, &queue, &latency_session(&warm, "qb-lat"));
            let Some(task) = sub.body["taskId"].as_str().filter(|_| sub.status == 202) else {
                errors += 1;
                continue;
            };
            let Ok((l, at)) = rx.recv_timeout(OFFER_DEADLINE) else {
                errors += 1;
                break; // the runner is gone or stuck: no further round can be measured
            };
            if finish(&main, url, runner, &l.body).status != 200 {
                finish_errors += 1;
            }
            if l.body["taskId"] != task {
                errors += 1;
                continue;
            }
            let ms = ms_since(sent, at);
            if round == 0 {
                warmup = json!({"submit_to_lease_ms": ms, "submit_ms": sub.ms,
                    "lease_d1_round_trips": l.d1.round_trips});
                continue;
            }
            lat.push(ms);
            submit_ms.push(sub.ms);
            after_submit.push(ms - sub.ms);
            lease_rt.push(l.d1.round_trips);
        }
        // Release the runner: one more run reaches it, and it stops after reporting it.
        stop.store(true, Ordering::SeqCst);
        let sub = submit_on(&main, url, &queue, "qb-lat-stop");
        if sub.status == 202 {
            if let Ok((l, _)) = rx.recv_timeout(OFFER_DEADLINE) {
                finish(&main, url, runner, &l.body);
            }
        }
        drop(rx);
        runner_thread.join().unwrap()
    });
    let (p50, p99, max) = dist(lat.clone());
    let (s50, s99, smax) = dist(submit_ms);
    let mut rt = lease_rt.clone();
    rt.sort_unstable();
    emit(json!({
        "scenario": "dispatch-latency",
        "queue": queue,
        "session": if warm_session { "warm" } else { "new" },
        "lease_wait_ms": LATENCY_WAIT_MS,
        "samples": lat.len(),
        "p50_ms": p50,
        "p95_ms": dist_p(&lat, 95.0),
        "p99_ms": p99,
        "max_ms": max,
        "submit_p50_ms": s50,
        "submit_p99_ms": s99,
        "submit_max_ms": smax,
        "lease_after_submit_response_p50_ms": dist_p(&after_submit, 50.0),
        "lease_after_submit_response_p99_ms": dist_p(&after_submit, 99.0),
        "lease_after_submit_response_min_ms": after_submit.iter().copied().reduce(f64::min),
        "lease_d1_round_trips_p50": rt.get((rt.len().max(1) - 1) / 2),
        "lease_d1_round_trips_max": rt.last(),
        "leases_not_1_round_trip": rt.iter().filter(|&&r| r != 1).count(),
        "warmup": warmup,
        "runner_not_waiting_before_submit": not_waiting,
        "runner_empty_leases": empties,
        "finish_errors": finish_errors,
        "errors": errors + runner_errors,
    }));
}

pub(crate) fn dist_p(v: &[f64], p: f64) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (!v.is_empty()).then(|| percentile(&v, p))
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`; 100 if unknown).
pub(crate) fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of `pid` in clock ticks (all its threads), from `/proc/<pid>/stat`.
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Resident set size of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The pids listening on `url`'s port, from `ss -ltnpH` (`users:(("workerd",pid=N,fd=M))`).
pub(crate) fn listening_pids(url: &str) -> Vec<u32> {
    let Some(port) = url
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok())
    else {
        return vec![];
    };
    let Ok(out) = std::process::Command::new("ss").arg("-ltnpH").output() else {
        return vec![];
    };
    pids_on_port(&String::from_utf8_lossy(&out.stdout), port)
}

fn pids_on_port(ss: &str, port: u16) -> Vec<u32> {
    let mut pids: Vec<u32> = ss
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(3)
                .and_then(|local| local.rsplit_once(':'))
                .is_some_and(|(_, p)| p == port.to_string())
        })
        .flat_map(|l| {
            l.split("pid=")
                .skip(1)
                .filter_map(|p| p.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// What the Worker's processes spent over an idle window of `seconds`: its length in seconds, the
/// CPU seconds used (`hz` clock ticks a second), and the resident memory at its start and end.
pub(crate) struct IdleWindow {
    pub window_s: f64,
    pub cpu_s: Option<f64>,
    pub rss_start: Option<u64>,
    pub rss_end: Option<u64>,
}

/// Sleeps `seconds` (one second at a time) and measures the Worker's processes across it.
pub(crate) fn idle_window(
    pids: &[u32],
    seconds: u64,
    hz: f64,
    each_second: &mut dyn FnMut(u64),
) -> IdleWindow {
    let rss_start = total(pids, rss_kib);
    let (t0, cpu0) = (Instant::now(), total(pids, cpu_ticks));
    for second in 0..seconds {
        let tick = Instant::now();
        each_second(second);
        std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    let (t1, cpu1) = (Instant::now(), total(pids, cpu_ticks));
    IdleWindow {
        window_s: t1.duration_since(t0).as_secs_f64(),
        cpu_s: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a) as f64 / hz),
        rss_start,
        rss_end: total(pids, rss_kib),
    }
}

pub(crate) fn total<F: Fn(u32) -> Option<u64>>(pids: &[u32], f: F) -> Option<u64> {
    pids.iter().map(|&p| f(p)).sum()
}

/// What one idle runner's lease responses were.
#[derive(Debug, Default)]
struct Idle {
    responses: usize,
    empty: usize,
    leased: usize,
    errors: usize,
    round_trips: u64,
    max_round_trips: u64,
    /// Responses that cost any D1 round trip.
    with_d1: usize,
    /// Time spent in lease requests (waiting), ms.
    waiting_ms: f64,
}

/// The scenario `idle-runners`.
pub fn idle_runners(url: &str, runners: usize, seconds: u64, workerd_pids: &[u32]) {
    let queue = unique("qb-idle");
    let pids = if workerd_pids.is_empty() {
        listening_pids(url)
    } else {
        workerd_pids.to_vec()
    };
    let hz = clock_ticks();
    let main = agent();
    let rss_before = total(&pids, rss_kib);
    let stop = AtomicBool::new(false);
    let spawned = AtomicUsize::new(0);
    // A long-poll re-issued after each 204: at most one per `IDLE_WAIT_MS` of the window, plus slack.
    let max_requests = (seconds * 1000 / IDLE_WAIT_MS) as usize + 3;
    let mut window = json!(null);
    let (idle, spawn_failures): (Vec<Idle>, usize) = std::thread::scope(|s| {
        let mut handles = vec![];
        let mut failures = 0;
        for i in 0..runners {
            let (queue, stop, spawned) = (&queue, &stop, &spawned);
            let h = std::thread::Builder::new()
                .name(format!("idle-{i}"))
                .stack_size(IDLE_STACK)
                .spawn_scoped(s, move || {
                    spawned.fetch_add(1, Ordering::SeqCst);
                    let (agent, runner) = (agent(), format!("bench-idle-{i}"));
                    let mut out = Idle::default();
                    for _ in 0..max_requests {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let l = lease_on(&agent, url, &runner, queue, IDLE_WAIT_MS);
                        out.responses += 1;
                        out.round_trips += l.d1.round_trips;
                        out.max_round_trips = out.max_round_trips.max(l.d1.round_trips);
                        out.with_d1 += usize::from(l.d1.round_trips > 0);
                        out.waiting_ms += l.ms;
                        match l.status {
                            204 => out.empty += 1,
                            200 => {
                                // Nothing is submitted to this queue; finish what came anyway.
                                out.leased += 1;
                                finish(&agent, url, &runner, &l.body);
                            }
                            _ => {
                                out.errors += 1;
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                    out
                });
            match h {
                Ok(h) => handles.push(h),
                Err(_) => failures += 1,
            }
        }
        let started = handles.len() as u64;
        let ramp = Instant::now();
        let (all_held, most_seen) = await_waiters(
            &main,
            url,
            &queue,
            started,
            Duration::from_millis(100),
            RAMP_DEADLINE,
        );
        let ramp_ms = ramp.elapsed().as_secs_f64() * 1000.0;
        // The idle window: nothing but the held long-polls (and re-issues after a 204).
        let waiters_start = waiters(&main, url, &queue);
        let w = idle_window(&pids, seconds, hz, &mut |_| {});
        let (rss_held_start, rss_held_end, window_s, cpu_s) =
            (w.rss_start, w.rss_end, w.window_s, w.cpu_s);
        let waiters_end = waiters(&main, url, &queue);
        stop.store(true, Ordering::SeqCst);
        window = json!({
            "threads_started": started,
            "all_held": all_held,
            "most_waiters_seen_in_ramp": most_seen,
            "ramp_ms": ramp_ms,
            "waiters_at_window_start": waiters_start,
            "waiters_at_window_end": waiters_end,
            "window_s": window_s,
            "workerd_cpu_s": cpu_s,
            "workerd_cpu_pct_of_one_core": cpu_s.map(|c| 100.0 * c / window_s),
            "workerd_rss_kib_held_start": rss_held_start,
            "workerd_rss_kib_held_end": rss_held_end,
        });
        // Each runner returns after its outstanding long-poll ends (at most `IDLE_WAIT_MS`).
        let idle = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (idle, failures)
    });
    let rss_after = total(&pids, rss_kib);
    let waiters_after = waiters(&main, url, &queue);
    let sum = |f: fn(&Idle) -> usize| idle.iter().map(f).sum::<usize>();
    let round_trips: u64 = idle.iter().map(|i| i.round_trips).sum();
    let runner_minutes: f64 = idle.iter().map(|i| i.waiting_ms).sum::<f64>() / 60_000.0;
    let mut line = json!({
        "scenario": "idle-runners",
        "queue": queue,
        "runners": runners,
        "seconds": seconds,
        "lease_wait_ms": IDLE_WAIT_MS,
        "thread_stack_kib": IDLE_STACK / 1024,
        "spawn_failures": spawn_failures,
        "threads_ran": spawned.load(Ordering::SeqCst),
        "responses": sum(|i| i.responses),
        "empty_responses": sum(|i| i.empty),
        "unexpected_leases": sum(|i| i.leased),
        "d1_round_trips_total": round_trips,
        "responses_with_d1": sum(|i| i.with_d1),
        "d1_round_trips_max_one_response": idle.iter().map(|i| i.max_round_trips).max(),
        "runner_minutes_waiting": runner_minutes,
        "d1_round_trips_per_runner_per_minute": (runner_minutes > 0.0).then(|| round_trips as f64 / runner_minutes),
        "workerd_pids": pids,
        "workerd_rss_kib_before": rss_before,
        "workerd_rss_kib_after": rss_after,
        "waiters_after": waiters_after,
        "errors": sum(|i| i.errors) + spawn_failures,
    });
    if let (Some(l), Some(w)) = (line.as_object_mut(), window.as_object()) {
        l.extend(w.clone());
    }
    emit(line);
}

/// What one throughput runner saw: each leased run's task id with when its lease and its finish
/// returned, and the D1 round trips of its lease and finish.
#[derive(Debug, Default)]
struct Driven {
    runs: Vec<(String, Instant, Instant, u64)>,
    empty: usize,
    stops: usize,
    errors: usize,
}

/// The scenario `runs-throughput`.
pub fn runs_throughput(url: &str, runs: usize, runners: usize, submitters: usize, wait_ms: u64) {
    let queue = unique("qb-tput");
    let (runners, submitters) = (runners.max(1), submitters.max(1));
    let main = agent();
    let finished = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let deadline = Instant::now() + THROUGHPUT_DEADLINE;
    let (driven, submitted, t_start, held) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..runners)
            .map(|i| {
                let (queue, finished, done) = (&queue, &finished, &done);
                s.spawn(move || {
                    let (agent, runner) = (agent(), format!("bench-tput-{i}"));
                    let mut out = Driven::default();
                    for _ in 0..(4 * runs + 1000) {
                        if Instant::now() >= deadline {
                            break;
                        }
                        let l = lease_on(&agent, url, &runner, queue, wait_ms);
                        let leased_at = Instant::now();
                        match l.status {
                            200 => {}
                            204 if done.load(Ordering::SeqCst) => break,
                            204 => {
                                out.empty += 1;
                                continue;
                            }
                            _ => {
                                out.errors += 1;
                                std::thread::sleep(Duration::from_millis(10));
                                continue;
                            }
                        }
                        let f = finish(&agent, url, &runner, &l.body);
                        let finished_at = Instant::now();
                        let stop_run = l.body["sessionId"]
                            .as_str()
                            .is_some_and(|s| s.starts_with("qb-tput-stop"));
                        if stop_run {
                            out.stops += 1;
                            break;
                        }
                        if f.status != 200 {
                            out.errors += 1;
                            continue;
                        }
                        let task = l.body["taskId"].as_str().unwrap_or_default().to_owned();
                        out.runs.push((
                            task,
                            leased_at,
                            finished_at,
                            l.d1.round_trips + f.d1.round_trips,
                        ));
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                    out
                })
            })
            .collect();
        // Measure with every runner waiting in the dispatcher.
        let (held, _) = await_waiters(
            &main,
            url,
            &queue,
            runners as u64,
            Duration::from_millis(20),
            Duration::from_secs(30),
        );
        let t_start = Instant::now();
        let per = runs.div_ceil(submitters);
        let submitted: Vec<(Instant, Reply)> = std::thread::scope(|s2| {
            let subs: Vec<_> = (0..submitters)
                .map(|k| {
                    let queue = &queue;
                    let n = per.min(runs.saturating_sub(k * per));
                    s2.spawn(move || {
                        let agent = agent();
                        (0..n)
                            .map(|_| (Instant::now(), submit_on(&agent, url, queue, "qb-tput")))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            subs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let accepted = submitted.iter().filter(|(_, r)| r.status == 202).count();
        // Wait for every accepted run to be finished (bounded by the deadline).
        while finished.load(Ordering::SeqCst) < accepted && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        done.store(true, Ordering::SeqCst);
        // One stop run per runner: each runner leases one, finishes it and leaves.
        for _ in 0..runners {
            submit_on(&main, url, &queue, "qb-tput-stop");
        }
        let driven: Vec<Driven> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (driven, submitted, t_start, held)
    });
    let sent_at: HashMap<String, (Instant, &Reply)> = submitted
        .iter()
        .filter_map(|(at, r)| Some((r.body["taskId"].as_str()?.to_owned(), (*at, r))))
        .collect();
    let (mut to_lease, mut to_finish, mut per_run_rt) = (vec![], vec![], vec![]);
    for (task, leased_at, finished_at, rt) in driven.iter().flat_map(|d| d.runs.iter()) {
        if let Some((sent, sub)) = sent_at.get(task) {
            to_lease.push(ms_since(*sent, *leased_at));
            to_finish.push(ms_since(*sent, *finished_at));
            per_run_rt.push((rt + sub.d1.round_trips) as f64);
        }
    }
    let completed = finished.load(Ordering::SeqCst);
    let accepted = submitted.iter().filter(|(_, r)| r.status == 202).count();
    // The last finish of a measured run to return (stop runs are not counted).
    let end = driven.iter().flat_map(|d| d.runs.iter().map(|r| r.2)).max();
    let elapsed_s = end.map(|e| e.duration_since(t_start).as_secs_f64());
    let (l50, l99, lmax) = dist(to_lease);
    let (f50, f99, _) = dist(to_finish);
    let (s50, s99, _) = dist(submitted.iter().map(|(_, r)| r.ms).collect());
    let (rt50, _, rtmax) = dist(per_run_rt.clone());
    emit(json!({
        "scenario": "runs-throughput",
        "queue": queue,
        "runs": runs,
        "runners": runners,
        "submitters": submitters,
        "lease_wait_ms": wait_ms,
        "runners_waiting_at_start": held,
        "accepted": accepted,
        "completed": completed,
        "elapsed_s": elapsed_s,
        "runs_per_s": elapsed_s.map(|e| completed as f64 / e),
        "submit_to_lease_p50_ms": l50,
        "submit_to_lease_p99_ms": l99,
        "submit_to_lease_max_ms": lmax,
        "submit_to_finish_p50_ms": f50,
        "submit_to_finish_p99_ms": f99,
        "submit_p50_ms": s50,
        "submit_p99_ms": s99,
        "d1_round_trips_per_run_mean": (!per_run_rt.is_empty()).then(|| per_run_rt.iter().sum::<f64>() / per_run_rt.len() as f64),
        "d1_round_trips_per_run_p50": rt50,
        "d1_round_trips_per_run_max": rtmax,
        "empty_leases": driven.iter().map(|d| d.empty).sum::<usize>(),
        "runners_stopped_by_stop_run": driven.iter().map(|d| d.stops).sum::<usize>(),
        "errors": driven.iter().map(|d| d.errors).sum::<usize>() + (runs - accepted) + accepted.saturating_sub(completed),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_pid_is_read_from_ss_output_for_that_port_only() {
        let ss = "LISTEN 0 511 127.0.0.1:8787 0.0.0.0:* users:((\"workerd\",pid=4242,fd=22))\n\
                  LISTEN 0 511 127.0.0.1:40001 0.0.0.0:* users:((\"workerd\",pid=4242,fd=23),(\"workerd\",pid=4243,fd=23))\n\
                  LISTEN 0 511 [::1]:87870 [::]:* users:((\"node\",pid=9,fd=1))\n";
        assert_eq!(pids_on_port(ss, 40001), vec![4242, 4243]);
        assert_eq!(pids_on_port(ss, 8787), vec![4242]);
        assert!(pids_on_port(ss, 878).is_empty());
    }

    #[test]
    fn this_process_has_cpu_time_and_rss() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert_eq!(total(&[me, u32::MAX], rss_kib), None);
    }

    #[test]
    fn dist_is_p50_p99_max() {
        assert_eq!(dist(vec![]), (None, None, None));
        let (p50, p99, max) = dist((1..=100).map(f64::from).collect());
        assert_eq!((p50, p99, max), (Some(51.0), Some(99.0), Some(100.0)));
    }
}
