//! `steer-flood`: many clients steering one running run at once while its runner heartbeats.
//!
//! Every steer is a call the run's session object serialises (its claim-and-ledger lock), so this
//! measures how fairly that lock shares the object under a steady stream of calls: a lock that lets
//! newcomers barge in shows as a long tail (some steers wait seconds while the median stays low).
//! The run is in the scenario's own queue; the runner takes pages of steers with each heartbeat, so
//! the queue fills (429 `steer.queue_full`) and drains while the clients keep sending.

use crate::leader::{agent, send, submit_and_lease};
use crate::{emit, percentile, unique};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The runner's pause between heartbeats.
const BEAT_EVERY: Duration = Duration::from_millis(20);

pub fn steer_flood(url: &str, clients: usize, per_client: usize, message_bytes: usize) {
    let queue = unique("steer");
    let a = agent();
    let (task, epoch) = match submit_and_lease(&a, url, &unique("steer"), &queue, "steer-bench") {
        Ok(run) => run,
        Err(error) => {
            emit(json!({"scenario": "steer-flood", "errors": 1, "error": error}));
            return;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let delivered = Arc::new(Mutex::new(0usize));
    let beater = {
        let (url, task, stop, delivered) = (
            url.to_owned(),
            task.clone(),
            stop.clone(),
            delivered.clone(),
        );
        std::thread::spawn(move || {
            let a = agent();
            let mut errors = 0;
            while !stop.load(Ordering::SeqCst) {
                let b = send(
                    &a,
                    "POST",
                    &format!("{url}/v1/runs/{task}/heartbeat"),
                    Some("runner"),
                    Some(&json!({"runnerId": "steer-bench", "leaseEpoch": epoch})),
                );
                match b.body["steer"].as_array() {
                    Some(got) if b.status == 200 => *delivered.lock().unwrap() += got.len(),
                    _ => errors += 1,
                }
                std::thread::sleep(BEAT_EVERY);
            }
            errors
        })
    };
    let started = Instant::now();
    let senders: Vec<_> = (0..clients)
        .map(|who| {
            let (url, task) = (url.to_owned(), task.clone());
            std::thread::spawn(move || {
                let a = agent();
                (0..per_client)
                    .map(|i| {
                        let head = format!("{who}-{i}-");
                        let message = format!(
                            "{head}{}",
                            "s".repeat(message_bytes.saturating_sub(head.len()))
                        );
                        let r = send(
                            &a,
                            "POST",
                            &format!("{url}/v1/runs/{task}/steer"),
                            None,
                            Some(&json!({"message": message})),
                        );
                        (r.status, r.ms)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<(u16, f64)> = senders
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    let wall = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let beat_errors = beater.join().unwrap();
    let _ = send(
        &a,
        "POST",
        &format!("{url}/v1/runs/{task}/finish"),
        Some("runner"),
        Some(&json!({"runnerId": "steer-bench", "leaseEpoch": epoch, "status": "completed"})),
    );
    let mut lat: Vec<f64> = results.iter().map(|r| r.1).collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let count = |s: u16| results.iter().filter(|r| r.0 == s).count();
    let queued = count(202);
    let refused = count(429);
    emit(json!({
        "scenario": "steer-flood",
        "clients": clients,
        "steers": results.len(),
        "message_bytes": message_bytes,
        "queued_202": queued,
        "refused_429": refused,
        "delivered_by_heartbeats": *delivered.lock().unwrap(),
        "per_s": results.len() as f64 / wall,
        "p50_ms": percentile(&lat, 50.0),
        "p99_ms": percentile(&lat, 99.0),
        "max_ms": lat.last().copied(),
        "errors": results.len() - queued - refused + beat_errors,
    }));
}
