//! `conflict-under-appends`: conflicting submits into a session whose runner keeps appending.
//!
//! Every append is a write the session object serialises (its claim-and-ledger lock, held across
//! the D1 batch), and a submit into the held session is a 409 the object can answer from memory.
//! Phase `idle` sends the submits with nothing else in flight (the conflict path's own cost);
//! phase `appending` sends the same submits while `writers` threads append one event per call
//! without pause: a 409 that queued behind the appends shows as the gap between the two phases.

use crate::leader::{agent, send, submit_and_lease};
use crate::{emit, percentile, unique};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub fn conflict_under_appends(url: &str, writers: usize, clients: usize, per_client: usize) {
    let queue = unique("conflict-load");
    let session = unique("conflict-load");
    let a = agent();
    let (task, epoch) = match submit_and_lease(&a, url, &session, &queue, "conflict-bench") {
        Ok(run) => run,
        Err(error) => {
            emit(json!({"scenario": "conflict-under-appends", "errors": 1, "error": error}));
            return;
        }
    };
    for phase in ["idle", "appending"] {
        let stop = Arc::new(AtomicBool::new(false));
        let phase_writers = if phase == "idle" { 0 } else { writers };
        let appenders: Vec<_> = (0..phase_writers)
            .map(|_| {
                let (url, task, stop) = (url.to_owned(), task.clone(), stop.clone());
                std::thread::spawn(move || {
                    let a = agent();
                    let mut lat = Vec::new();
                    let mut errors = 0usize;
                    while !stop.load(Ordering::SeqCst) {
                        let r = send(
                            &a,
                            "POST",
                            &format!("{url}/v1/runs/{task}/events"),
                            Some("runner"),
                            Some(&json!({"runnerId": "conflict-bench", "leaseEpoch": epoch,
                                "events": [{"type": "text_delta", "data": {"delta": "x"}}]})),
                        );
                        if r.status == 200 {
                            lat.push(r.ms);
                        } else {
                            errors += 1;
                        }
                    }
                    (lat, errors)
                })
            })
            .collect();
        if !appenders.is_empty() {
            // Let the appends fill the object's queue before the first submit.
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let started = Instant::now();
        let submitters: Vec<_> = (0..clients)
            .map(|_| {
                let (url, session, queue) = (url.to_owned(), session.clone(), queue.clone());
                std::thread::spawn(move || {
                    let a = agent();
                    (0..per_client)
                        .map(|_| {
                            let r = send(
                                &a,
                                "POST",
                                &format!("{url}/v1/runs"),
                                None,
                                Some(&json!({"sessionId": session, "objective": "refused", "queue": queue})),
                            );
                            let named = r.body["activeTaskId"].as_str().map(str::to_owned);
                            (r.status, named, r.ms)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<(u16, Option<String>, f64)> = submitters
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        let wall = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let (mut append_lat, mut append_errors) = (Vec::new(), 0);
        for t in appenders {
            let (lat, errors) = t.join().unwrap();
            append_lat.extend(lat);
            append_errors += errors;
        }
        append_lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let conflicts: Vec<f64> = {
            let mut v: Vec<f64> = results
                .iter()
                .filter(|r| r.0 == 409 && r.1.as_deref() == Some(task.as_str()))
                .map(|r| r.2)
                .collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v
        };
        let pct = |v: &[f64], p: f64| (!v.is_empty()).then(|| percentile(v, p));
        emit(json!({
            "scenario": "conflict-under-appends",
            "phase": phase,
            "writers": phase_writers,
            "clients": clients,
            "submits": results.len(),
            "conflicts_409": conflicts.len(),
            "conflict_per_s": conflicts.len() as f64 / wall,
            "p50_ms": pct(&conflicts, 50.0),
            "p99_ms": pct(&conflicts, 99.0),
            "max_ms": conflicts.last().copied(),
            "appends": append_lat.len(),
            "appends_per_s": append_lat.len() as f64 / wall,
            "append_p50_ms": pct(&append_lat, 50.0),
            "append_p99_ms": pct(&append_lat, 99.0),
            "errors": results.len() - conflicts.len() + append_errors,
        }));
    }
    let _ = send(
        &a,
        "POST",
        &format!("{url}/v1/runs/{task}/finish"),
        Some("runner"),
        Some(&json!({"runnerId": "conflict-bench", "leaseEpoch": epoch, "status": "completed"})),
    );
}
