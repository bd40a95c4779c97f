//! The `leader` scenario: one leader run of `subtasks` children per round, `maxConcurrency` =
//! `concurrency`, driven to its end by `runners` runner threads of the bench that lease and finish
//! children at once (`completed`) through the ordinary runner protocol.
//!
//! What is timed, per round:
//! - `admission_to_settle_ms`: from just before `POST /v1/leader/runs` to the return of the finish
//!   that made the runner side count every child finished. A child's finish drives the leader before
//!   it answers, so the leader is settled by then; one `GET /v1/leader/runs/{id}` right after confirms
//!   it (`settle_confirmed_by_first_get`). Should that GET still show `running`, the runner polls GET
//!   every 10 ms and the figure becomes the return of the first GET showing a terminal status.
//! - D1 cost, from each response's `x-sema-d1` header: the admission POST, successful leases, empty
//!   leases (204, reported apart), finishes; divided by the number of children. The drive's share of
//!   a child's finish = its mean round trips minus those of a plain finish (a run outside any leader,
//!   leased and finished the same way, measured first in the same process).
//! - `max_nonterminal_children_observed`: the most children `running` or `parked` in any GET a sampler
//!   thread makes 15 ms after its previous one answered (plus the admission answer). After the round, the exact figure from the
//!   server's own clock: each child run's `createdAt` (started) and `updatedAt` (finished, as the run
//!   is terminal) read back with `GET /v1/runs/{id}`, the most intervals open at once
//!   (`max_nonterminal_children_by_run_times`; at an equal millisecond an end counts before a start).
//!
//! Leftover unheld runs of earlier scenarios would be leased first (oldest first), so each round
//! starts by draining them (leased and finished; counted as `strays_drained`, not in any figure).
//! Bounded: every loop has a fixed count or the round's deadline, every request a timeout.

use crate::{emit, percentile, unique};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the sampler reads the leader run during a round.
const SAMPLE_EVERY: Duration = Duration::from_millis(15);
/// How often the settle is polled when the first GET after the last finish still shows `running`.
const SETTLE_POLL_EVERY: Duration = Duration::from_millis(10);
/// How long a leader the sampler saw settled may wait for the runners to count every child finished.
const STALL_GRACE: Duration = Duration::from_secs(5);
/// Most stray runs one drain leases and finishes.
const DRAIN_MAX: usize = 20_000;
/// Plain (non-leader) finishes measured for the baseline.
const PLAIN_SAMPLES: usize = 5;
/// Every request's timeout (a lease waits at most `waitMs`, capped by the server at 25 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What one request cost in D1, from its `x-sema-d1` header (`round-trips=N; statements=M`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct D1 {
    pub(crate) round_trips: u64,
    pub(crate) statements: u64,
}

impl D1 {
    fn parse(header: &str) -> Self {
        let num = |key: &str| {
            header
                .split(';')
                .find_map(|p| p.trim().strip_prefix(key))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        Self {
            round_trips: num("round-trips="),
            statements: num("statements="),
        }
    }

    fn add(&mut self, other: D1) {
        self.round_trips += other.round_trips;
        self.statements += other.statements;
    }
}

/// One request's outcome: status (0 = transport error), D1 cost, JSON body (null when none), and
/// the time from sending it to having read its body.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) d1: D1,
    pub(crate) body: Value,
    pub(crate) ms: f64,
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(REQUEST_TIMEOUT).build()
}

/// Submits one run into a new session on `queue` and leases it as `runner` (`waitMs` 5000): its
/// task id and lease epoch, or what the two calls answered.
pub(crate) fn submit_and_lease(
    a: &ureq::Agent,
    url: &str,
    session: &str,
    queue: &str,
    runner: &str,
) -> Result<(String, i64), String> {
    let submit = send(
        a,
        "POST",
        &format!("{url}/v1/runs"),
        None,
        Some(&json!({"sessionId": session, "objective": "held", "queue": queue})),
    );
    let lease = send(
        a,
        "POST",
        &format!("{url}/v1/runner/lease"),
        Some("runner"),
        Some(&json!({"runnerId": runner, "queue": queue, "waitMs": 5000})),
    );
    match (
        lease.body["taskId"].as_str(),
        lease.body["leaseEpoch"].as_i64(),
    ) {
        (Some(task), Some(epoch)) => Ok((task.to_owned(), epoch)),
        _ => Err(format!(
            "no lease: submit {} {}, lease {} {}",
            submit.status, submit.body, lease.status, lease.body
        )),
    }
}

pub(crate) fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    role: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let t = Instant::now();
    let mut req = agent.request(method, url);
    if let Some(r) = role {
        req = req.set("x-sema-role", r);
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
        Err(_) => {
            return Reply {
                status: 0,
                d1: D1::default(),
                body: Value::Null,
                ms: t.elapsed().as_secs_f64() * 1000.0,
            }
        }
    };
    let d1 = D1::parse(resp.header("x-sema-d1").unwrap_or_default());
    let status = resp.status();
    let body = resp.into_json().unwrap_or(Value::Null);
    Reply {
        status,
        d1,
        body,
        ms: t.elapsed().as_secs_f64() * 1000.0,
    }
}

fn lease(agent: &ureq::Agent, url: &str, runner: &str, wait_ms: u64) -> Reply {
    send(
        agent,
        "POST",
        &format!("{url}/v1/runner/lease"),
        Some("runner"),
        Some(&json!({"runnerId": runner, "waitMs": wait_ms})),
    )
}

pub(crate) fn finish(agent: &ureq::Agent, url: &str, runner: &str, leased: &Value) -> Reply {
    let task = leased["taskId"].as_str().unwrap_or_default();
    send(
        agent,
        "POST",
        &format!("{url}/v1/runs/{task}/finish"),
        Some("runner"),
        Some(
            &json!({"runnerId": runner, "leaseEpoch": leased["leaseEpoch"], "status": "completed"}),
        ),
    )
}

/// Requests of one kind: how many, their D1 cost in all, and each one's round trips and latency.
#[derive(Debug, Default)]
struct Tally {
    count: usize,
    d1: D1,
    round_trips: Vec<u64>,
    ms: Vec<f64>,
}

impl Tally {
    fn add(&mut self, r: &Reply) {
        self.count += 1;
        self.d1.add(r.d1);
        self.round_trips.push(r.d1.round_trips);
        self.ms.push(r.ms);
    }

    fn merge(&mut self, other: Tally) {
        self.count += other.count;
        self.d1.add(other.d1);
        self.round_trips.extend(other.round_trips);
        self.ms.extend(other.ms);
    }

    fn mean_round_trips(&self) -> Option<f64> {
        (self.count > 0).then(|| self.d1.round_trips as f64 / self.count as f64)
    }

    fn p50_ms(&self) -> Option<f64> {
        let mut v = self.ms.clone();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (!v.is_empty()).then(|| percentile(&v, 50.0))
    }

    fn p50_round_trips(&self) -> Option<u64> {
        let mut v = self.round_trips.clone();
        v.sort_unstable();
        (!v.is_empty()).then(|| v[(v.len() - 1) / 2])
    }
}

/// Leases and finishes every unheld running run until the server has none: `(runs, ms)`.
fn drain(url: &str, threads: usize) -> (usize, f64) {
    let t = Instant::now();
    let per_thread = DRAIN_MAX / threads.max(1);
    let drained: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|i| {
                s.spawn(move || {
                    let (agent, runner) = (agent(), format!("bench-drain-{i}"));
                    let mut n = 0;
                    for _ in 0..per_thread {
                        let l = lease(&agent, url, &runner, 0);
                        if l.status != 200 {
                            break;
                        }
                        finish(&agent, url, &runner, &l.body);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    (drained, t.elapsed().as_secs_f64() * 1000.0)
}

/// Finishes of runs outside any leader (fresh session, leased, finished at once, no events): the
/// baseline a child's finish is compared with. Stray runs leased on the way are finished too.
fn plain_finishes(url: &str, samples: usize) -> (Tally, usize) {
    let (agent, runner) = (agent(), "bench-plain");
    let mut tally = Tally::default();
    let mut errors = 0;
    for _ in 0..samples {
        let sub = send(
            &agent,
            "POST",
            &format!("{url}/v1/runs"),
            None,
            Some(&json!({"sessionId": unique("plain"), "objective": "say ok"})),
        );
        let Some(task) = sub.body["taskId"].as_str() else {
            errors += 1;
            continue;
        };
        let mut found = false;
        for _ in 0..50 {
            let l = lease(&agent, url, runner, 1000);
            if l.status != 200 {
                continue;
            }
            let f = finish(&agent, url, runner, &l.body);
            if l.body["taskId"] == task {
                if f.status == 200 {
                    tally.add(&f);
                } else {
                    errors += 1;
                }
                found = true;
                break;
            }
        }
        errors += usize::from(!found);
    }
    (tally, errors)
}

/// What the runner side of one round saw.
#[derive(Debug, Default)]
struct Seen {
    leases: Tally,
    empty_leases: Tally,
    finishes: Tally,
    strays: usize,
    errors: usize,
}

/// How the round settled, as the runner that finished the last child found it.
#[derive(Debug)]
struct Settle {
    at: Instant,
    status: String,
    confirmed_by_first_get: bool,
    children_completed: usize,
}

/// The state runners and the sampler share during one round.
struct Round<'a> {
    url: &'a str,
    id: String,
    /// Session-name prefix of this leader's children (`leader-<id>-`).
    prefix: String,
    children: usize,
    wait_ms: u64,
    /// Just before the admission POST.
    t0: Instant,
    deadline: Instant,
    finished: AtomicUsize,
    stop: AtomicBool,
    settle: Mutex<Option<Settle>>,
}

/// What the sampler saw.
#[derive(Debug, Default)]
struct Sampled {
    max_nonterminal: usize,
    samples: usize,
    round_trips: u64,
    /// When a GET first showed the leader settled.
    first_terminal: Option<Instant>,
}

fn is_terminal(status: &str) -> bool {
    !status.is_empty() && status != "running"
}

/// Children a leader-run body shows as non-terminal (`running` or `parked`).
fn nonterminal(body: &Value) -> usize {
    body["children"].as_array().map_or(0, |c| {
        c.iter()
            .filter(|c| matches!(c["state"].as_str(), Some("running" | "parked")))
            .count()
    })
}

fn completed_children(body: &Value) -> usize {
    body["children"].as_array().map_or(0, |c| {
        c.iter()
            .filter(|c| c["state"] == "ended" && c["runStatus"] == "completed")
            .count()
    })
}

impl Round<'_> {
    fn get(&self, agent: &ureq::Agent) -> Reply {
        send(
            agent,
            "GET",
            &format!("{}/v1/leader/runs/{}", self.url, self.id),
            None,
            None,
        )
    }

    /// One runner: lease and finish at once until every child is finished or the deadline passes.
    fn runner(&self, i: usize) -> Seen {
        let (agent, runner) = (agent(), format!("bench-leader-{i}"));
        let mut seen = Seen::default();
        for _ in 0..(4 * self.children + 1000) {
            if self.stop.load(Ordering::SeqCst) || Instant::now() >= self.deadline {
                break;
            }
            let l = lease(&agent, self.url, &runner, self.wait_ms);
            match l.status {
                200 => {}
                204 => {
                    seen.empty_leases.add(&l);
                    continue;
                }
                _ => {
                    seen.errors += 1;
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            }
            let ours = l.body["sessionId"]
                .as_str()
                .is_some_and(|s| s.starts_with(&self.prefix));
            if !ours {
                seen.strays += 1;
                finish(&agent, self.url, &runner, &l.body);
                continue;
            }
            seen.leases.add(&l);
            let f = finish(&agent, self.url, &runner, &l.body);
            let at = Instant::now();
            if f.status != 200 {
                seen.errors += 1;
                continue;
            }
            seen.finishes.add(&f);
            if self.finished.fetch_add(1, Ordering::SeqCst) + 1 == self.children {
                self.confirm(&agent, at, &mut seen);
            }
        }
        seen
    }

    /// After the last child's finish (returned at `at`): one GET confirms the leader settled; if it
    /// still shows `running`, GET is polled until a terminal status or the deadline.
    fn confirm(&self, agent: &ureq::Agent, at: Instant, seen: &mut Seen) {
        let mut first = true;
        while Instant::now() < self.deadline {
            let g = self.get(agent);
            let status = g.body["status"].as_str().unwrap_or_default();
            if g.status == 200 && is_terminal(status) {
                *self.settle.lock().unwrap() = Some(Settle {
                    at: if first { at } else { Instant::now() },
                    status: status.to_owned(),
                    confirmed_by_first_get: first,
                    children_completed: completed_children(&g.body),
                });
                break;
            }
            if g.status != 200 {
                seen.errors += 1;
            }
            first = false;
            std::thread::sleep(SETTLE_POLL_EVERY);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Reads the leader run every [`SAMPLE_EVERY`] until the round stops. A leader it sees settled
    /// while the runners have not counted every child finished (a child failed, say) stops the round
    /// after [`STALL_GRACE`] rather than at the deadline.
    fn sampler(&self) -> Sampled {
        let agent = agent();
        let mut out = Sampled::default();
        let most = (self.deadline - self.t0).as_millis() / SAMPLE_EVERY.as_millis() + 1;
        for _ in 0..most {
            if self.stop.load(Ordering::SeqCst) || Instant::now() >= self.deadline {
                break;
            }
            let g = self.get(&agent);
            if g.status == 200 {
                out.max_nonterminal = out.max_nonterminal.max(nonterminal(&g.body));
                out.samples += 1;
                out.round_trips += g.d1.round_trips;
                if is_terminal(g.body["status"].as_str().unwrap_or_default()) {
                    let first = *out.first_terminal.get_or_insert_with(Instant::now);
                    if first.elapsed() > STALL_GRACE {
                        self.stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
        out
    }
}

/// The most children non-terminal at once by the server's clock: every child run's `createdAt` and,
/// once terminal, `updatedAt` (still running: open until now). `None` when a read fails.
fn overlap_by_run_times(agent: &ureq::Agent, url: &str, id: &str) -> Option<usize> {
    let leader = send(
        agent,
        "GET",
        &format!("{url}/v1/leader/runs/{id}"),
        None,
        None,
    );
    let mut edges: Vec<(i64, i32)> = vec![];
    for child in leader.body["children"].as_array()? {
        let Some(task) = child["taskId"].as_str() else {
            continue; // never started
        };
        let run = send(agent, "GET", &format!("{url}/v1/runs/{task}"), None, None);
        let created = run.body["createdAt"].as_i64()?;
        edges.push((created, 1));
        let terminal = ["completed", "failed", "cancelled", "blocked", "timeout"];
        if terminal.contains(&run.body["status"].as_str().unwrap_or_default()) {
            edges.push((run.body["updatedAt"].as_i64()?, -1));
        }
    }
    edges.sort_unstable(); // (t, -1) before (t, +1): an end counts before a start at the same ms
    let (mut open, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        max = max.max(open);
    }
    Some(max as usize)
}

fn p50(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (!v.is_empty()).then(|| percentile(&v, 50.0))
}

/// The scenario: a plain-finish baseline, then `rounds` leader runs; one line per round, a summary.
pub fn leader(
    url: &str,
    subtasks: usize,
    concurrency: usize,
    runners: usize,
    rounds: usize,
    lease_wait_ms: u64,
    round_deadline: Duration,
) {
    let runners = runners.max(1);
    let (mut strays_drained, mut drain_ms) = drain(url, runners);
    let (plain, plain_errors) = plain_finishes(url, PLAIN_SAMPLES);
    let plain_rt = plain.mean_round_trips();
    let agent = agent();
    let mut lines: Vec<Value> = vec![];
    let mut errors_total = plain_errors;
    for round in 1..=rounds {
        if round > 1 {
            let (n, ms) = drain(url, runners);
            strays_drained += n;
            drain_ms += ms;
        }
        let body = json!({
            "objective": "bench leader",
            "subtasks": vec![json!({"objective": "say ok"}); subtasks],
            "maxConcurrency": concurrency,
        });
        let t0 = Instant::now();
        let adm = send(
            &agent,
            "POST",
            &format!("{url}/v1/leader/runs"),
            None,
            Some(&body),
        );
        let Some(id) = adm.body["id"].as_str().filter(|_| adm.status == 201) else {
            errors_total += 1;
            emit(json!({
                "scenario": "leader", "what": "round", "round": round, "error": "admission refused",
                "status": adm.status, "body": adm.body, "errors": 1,
            }));
            continue;
        };
        let state = Round {
            url,
            id: id.to_owned(),
            prefix: format!("leader-{id}-"),
            children: subtasks,
            wait_ms: lease_wait_ms,
            t0,
            deadline: t0 + round_deadline,
            finished: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            settle: Mutex::new(None),
        };
        let (seen, sampled) = std::thread::scope(|s| {
            let sampler = s.spawn(|| state.sampler());
            let handles: Vec<_> = (0..runners)
                .map(|i| {
                    let state = &state;
                    s.spawn(move || state.runner(i))
                })
                .collect();
            let mut seen = Seen::default();
            for h in handles {
                let r = h.join().unwrap();
                seen.leases.merge(r.leases);
                seen.empty_leases.merge(r.empty_leases);
                seen.finishes.merge(r.finishes);
                seen.strays += r.strays;
                seen.errors += r.errors;
            }
            // Every runner has stopped: a round that ran out its deadline stops the sampler too.
            state.stop.store(true, Ordering::SeqCst);
            (seen, sampler.join().unwrap())
        });
        let settle = state.settle.lock().unwrap().take();
        let mut errors = seen.errors;
        if settle.is_none() {
            errors += 1;
            send(
                &agent,
                "POST",
                &format!("{url}/v1/leader/runs/{id}/cancel"),
                None,
                Some(&json!({})),
            );
        }
        errors_total += errors;
        let n = subtasks as f64;
        let polls = seen.empty_leases.d1;
        let mut without_polls = adm.d1;
        without_polls.add(seen.leases.d1);
        without_polls.add(seen.finishes.d1);
        let mut all = without_polls;
        all.add(polls);
        let child_finish_rt = seen.finishes.mean_round_trips();
        let settle_ms = settle
            .as_ref()
            .map(|s| s.at.duration_since(t0).as_secs_f64() * 1000.0);
        let max_nonterminal = sampled.max_nonterminal.max(nonterminal(&adm.body));
        let by_times = overlap_by_run_times(&agent, url, id);
        let line = json!({
            "scenario": "leader",
            "what": "round",
            "round": round,
            "subtasks": subtasks,
            "max_concurrency": concurrency,
            "runners": runners,
            "lease_wait_ms": lease_wait_ms,
            "admission_to_settle_ms": settle_ms,
            "children_per_s": settle_ms.map(|ms| n / (ms / 1000.0)),
            "admission_ms": adm.ms,
            "leader_status": settle.as_ref().map(|s| s.status.clone()),
            "children_completed": settle.as_ref().map(|s| s.children_completed),
            "settle_confirmed_by_first_get": settle.as_ref().map(|s| s.confirmed_by_first_get),
            "d1_round_trips_per_child": all.round_trips as f64 / n,
            "d1_round_trips_per_child_excluding_empty_polls": without_polls.round_trips as f64 / n,
            "d1_statements_per_child": all.statements as f64 / n,
            "admission_d1_round_trips": adm.d1.round_trips,
            "admission_d1_statements": adm.d1.statements,
            "leases": seen.leases.count,
            "lease_d1_round_trips": seen.leases.d1.round_trips,
            "empty_leases": seen.empty_leases.count,
            "empty_lease_d1_round_trips": polls.round_trips,
            "finishes": seen.finishes.count,
            "finish_d1_round_trips": seen.finishes.d1.round_trips,
            "child_finish_d1_round_trips_mean": child_finish_rt,
            "child_finish_d1_round_trips_p50": seen.finishes.p50_round_trips(),
            "child_finish_d1_round_trips_max": seen.finishes.round_trips.iter().max(),
            "plain_finish_d1_round_trips": plain_rt,
            "drive_d1_round_trips_per_finish": child_finish_rt.zip(plain_rt).map(|(c, p)| c - p),
            "child_finish_p50_ms": seen.finishes.p50_ms(),
            "plain_finish_p50_ms": plain.p50_ms(),
            "lease_p50_ms": seen.leases.p50_ms(),
            "max_nonterminal_children_observed": max_nonterminal,
            "nonterminal_samples": sampled.samples + 1,
            "sampler_d1_round_trips": sampled.round_trips,
            "first_sampled_settled_ms": sampled.first_terminal.map(|t| t.duration_since(state.t0).as_secs_f64() * 1000.0),
            "max_nonterminal_children_by_run_times": by_times,
            "bound_respected": max_nonterminal <= concurrency
                && by_times.is_some_and(|m| m <= concurrency),
            "strays": seen.strays,
            "errors": errors,
        });
        emit(line.clone());
        lines.push(line);
    }
    let med = |k: &str| p50(lines.iter().filter_map(|l| l[k].as_f64()).collect());
    let most = |k: &str| lines.iter().filter_map(|l| l[k].as_u64()).max();
    let settled = lines
        .iter()
        .filter(|l| l["admission_to_settle_ms"].is_number())
        .count();
    let bound_respected = lines.iter().all(|l| l["bound_respected"] == true);
    emit(json!({
        "scenario": "leader",
        "what": "summary",
        "rounds": rounds,
        "rounds_settled": settled,
        "subtasks": subtasks,
        "max_concurrency": concurrency,
        "runners": runners,
        "lease_wait_ms": lease_wait_ms,
        "admission_to_settle_ms_p50": med("admission_to_settle_ms"),
        "admission_to_settle_ms_min": lines.iter().filter_map(|l| l["admission_to_settle_ms"].as_f64()).reduce(f64::min),
        "admission_to_settle_ms_max": lines.iter().filter_map(|l| l["admission_to_settle_ms"].as_f64()).reduce(f64::max),
        "children_per_s_p50": med("children_per_s"),
        "admission_ms_p50": med("admission_ms"),
        "d1_round_trips_per_child_p50": med("d1_round_trips_per_child"),
        "d1_round_trips_per_child_excluding_empty_polls_p50": med("d1_round_trips_per_child_excluding_empty_polls"),
        "d1_statements_per_child_p50": med("d1_statements_per_child"),
        "admission_d1_round_trips_p50": med("admission_d1_round_trips"),
        "empty_leases_p50": med("empty_leases"),
        "empty_lease_d1_round_trips_p50": med("empty_lease_d1_round_trips"),
        "child_finish_d1_round_trips_mean_p50": med("child_finish_d1_round_trips_mean"),
        "plain_finish_d1_round_trips": plain_rt,
        "plain_finish_samples": plain.count,
        "drive_d1_round_trips_per_finish_p50": med("drive_d1_round_trips_per_finish"),
        "child_finish_p50_ms_p50": med("child_finish_p50_ms"),
        "plain_finish_p50_ms": plain.p50_ms(),
        "max_nonterminal_children_observed": most("max_nonterminal_children_observed"),
        "max_nonterminal_children_by_run_times": most("max_nonterminal_children_by_run_times"),
        "bound_respected": bound_respected,
        "strays_drained": strays_drained,
        "drain_ms": drain_ms,
        "errors": errors_total,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_header_parses_and_a_missing_one_is_zero() {
        assert_eq!(
            D1::parse("round-trips=3; statements=7"),
            D1 {
                round_trips: 3,
                statements: 7
            }
        );
        assert_eq!(D1::parse(""), D1::default());
    }

    #[test]
    fn only_running_and_parked_children_count_as_nonterminal() {
        let body = json!({"children": [
            {"state": "running"}, {"state": "parked"}, {"state": "not_started"},
            {"state": "ended", "runStatus": "completed"}, {"state": "skipped"},
        ]});
        assert_eq!(nonterminal(&body), 2);
        assert_eq!(completed_children(&body), 1);
        assert_eq!(nonterminal(&Value::Null), 0);
    }
}
