//! `sema-bench`: scenarios against a running Sema Edge Worker, reporting JSON lines.
//!
//! ```text
//! sema-bench --url URL events-latency [--samples N]   append → SSE receipt latency (one event per call)
//! sema-bench --url URL events-ingest [--batches N] [--batch-size K] [--runs R]
//! ```
//! The bench acts as the runner itself (local mode: `X-Sema-Role: runner`) and as the SSE client.
//! Bounded: every loop has a fixed count and every request a timeout; loopback only.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

    /// Submits a run and leases it as the bench's own runner: `(task_id, epoch)`.
    fn leased_run(&self) -> (String, i64) {
        let task = self.post(
            "/v1/runs",
            None,
            json!({"sessionId": unique("bench"), "objective": "bench"}),
        )["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        // Lease until we get our run (the bench server runs nothing else).
        loop {
            let l = self.post(
                "/v1/runner/lease",
                Some("runner"),
                json!({"runnerId": "bench", "waitMs": 1000}),
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
            json!({"leaseEpoch": epoch, "status": "completed"}),
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
            json!({"leaseEpoch": epoch, "events": [{"type": "text_delta", "data": {"delta": format!("{i} ")}}]}),
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
    println!(
        "{}",
        json!({
            "scenario": "events-latency",
            "samples": lat.len(),
            "errors": errors,
            "p50_ms": percentile(&lat, 50.0),
            "p95_ms": percentile(&lat, 95.0),
            "p99_ms": percentile(&lat, 99.0),
            "max_ms": lat.last(),
            "calls_per_s": samples as f64 / elapsed,
        })
    );
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
                        let r = ctx.post(&format!("/v1/runs/{task}/events"), Some("runner"), json!({"leaseEpoch": epoch, "events": events}));
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
    println!(
        "{}",
        json!({
            "scenario": "events-ingest",
            "runs": runs,
            "batch_size": batch_size,
            "events": total,
            "events_per_s": total / elapsed,
            "call_p50_ms": percentile(&calls, 50.0),
            "call_p99_ms": percentile(&calls, 99.0),
        })
    );
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut url = "http://127.0.0.1:8787".to_owned();
    if let Some(i) = args.iter().position(|a| a == "--url") {
        url = args.get(i + 1).cloned().expect("--url needs a value");
        args.drain(i..=i + 1);
    }
    let flag = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse().expect("a number"))
            .unwrap_or(default)
    };
    let ctx = Ctx {
        url,
        agent: ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(30))
            .build(),
    };
    match args.first().map(String::as_str) {
        Some("events-latency") => events_latency(&ctx, flag("--samples", 300)),
        Some("events-ingest") => events_ingest(
            &ctx,
            flag("--batches", 20),
            flag("--batch-size", 100),
            flag("--runs", 2),
        ),
        _ => {
            eprintln!("usage: sema-bench [--url URL] events-latency [--samples N] | events-ingest [--batches N] [--batch-size K] [--runs R]");
            std::process::exit(2);
        }
    }
}
