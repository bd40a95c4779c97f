//! `floor`: the platform parts one admission is made of, measured on the bench-only floor Worker
//! (`bench/floor/floor.js`, plain JavaScript on the same workerd), at the admission scenario's
//! concurrency levels. Each part × object kind × level is one result line, so the report can set
//! every figure of ours beside the floor of its own design.
//!
//! Object kinds: `new` (every request names a new object: the object is created, as a new session's
//! is) and `warm` (each client thread keeps one live object of its own, touched once before the
//! clock starts). D1 ids are unique per request, so every batch inserts.

use crate::{emit, one_event_append, percentile, status_of, submit_body, unique, LEVELS};
use serde_json::json;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// (route, whether it goes through an object).
const PARTS: [(&str, bool); 9] = [
    ("health", false),
    ("d1", false),
    ("do", true),
    ("do-storage", true),
    ("do-d1-storage", true),
    ("do-d1-storage-alarm", true),
    ("schema-alarm", true),
    ("schema-alarm-queue", true),
    (ADMIT_CANCEL, true),
];

/// The design's admission followed by the cancel of its run, as ours admits into a warm session
/// (`admission-warm`: a session admits one run at a time); warm objects only, its latency the
/// admission's, its rate pairs per second.
const ADMIT_CANCEL: &str = "schema-alarm-queue+cancel";

fn hit(agent: &ureq::Agent, url: &str, part: &str, object: &str) -> (bool, f64) {
    let (status, ms) = if part == "health" {
        let t = Instant::now();
        let r = agent.get(&format!("{url}/health")).call();
        (status_of(&r), t.elapsed().as_secs_f64() * 1000.0)
    } else if part == ADMIT_CANCEL {
        let id = unique("f");
        match post_part_as(agent, url, "schema-alarm-queue", object, &id) {
            (200, ms) => (post_part_as(agent, url, "cancel", object, &id).0, ms),
            refused => refused,
        }
    } else {
        post_part(agent, url, part, object)
    };
    (status == 200, ms)
}

/// One request to a part of the floor Worker at `url`, into `object` (a new one when the name is
/// new), with a fresh D1 id: (status, 0 without an HTTP answer; ms).
pub(crate) fn post_part(agent: &ureq::Agent, url: &str, part: &str, object: &str) -> (u16, f64) {
    post_part_as(agent, url, part, object, &unique("f"))
}

/// [`post_part`] with the D1 id `id`.
fn post_part_as(agent: &ureq::Agent, url: &str, part: &str, object: &str, id: &str) -> (u16, f64) {
    let t = Instant::now();
    let status = match send(
        agent.post(&format!("{url}/{part}?o={object}&id={id}")),
        part,
        object,
    ) {
        Ok(r) => r.status(),
        Err(code) => code,
    };
    (status, t.elapsed().as_secs_f64() * 1000.0)
}

/// The body ours gets on the path a floor part stands beside (floor.js `BODY_PARTS`): a submit's
/// into `session` for an admission, a runner's append of one event for `append`; none for a bare
/// part. The floor Workers read it and carry it (the run's objective; the event's row and frame),
/// as ours must.
pub(crate) fn body_for(part: &str, session: &str) -> Option<String> {
    match part.trim_start_matches('/') {
        "claim"
        | "schema-claim"
        | "admit-dispatch"
        | "schema-dispatch"
        | "admit-reserve"
        | "do-d1-storage-alarm"
        | "schema-alarm"
        | "schema-alarm-queue" => Some(submit_body(session).to_string()),
        "append" | "schema-append" => Some(one_event_append(1, "0 ").to_string()),
        _ => None,
    }
}

/// Sends `req` to `part` with [`body_for`] it (JSON), or empty: the answer, or the status of a
/// refusal (0 without an HTTP answer).
pub(crate) fn send(req: ureq::Request, part: &str, session: &str) -> Result<ureq::Response, u16> {
    let answer = match body_for(part, session) {
        Some(body) => req
            .set("content-type", "application/json")
            .send_string(&body),
        None => req.send_string(""),
    };
    answer.map_err(|e| status_of(&Err(e)))
}

/// `only`: the parts to measure (all when empty).
pub fn floor(url: &str, per_level: usize, only: &[String]) {
    if let Some(unknown) = only.iter().find(|p| !PARTS.iter().any(|(n, _)| n == p)) {
        eprintln!("floor: no part named {unknown:?}");
        std::process::exit(2);
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    // Warm-up: the isolate, the tables, the objects' class.
    for i in 0..50 {
        hit(&agent, url, "health", "");
        hit(&agent, url, "do-d1-storage", &format!("warmup-{i}"));
    }
    for (part, via_object) in PARTS {
        if !only.is_empty() && !only.iter().any(|p| p == part) {
            continue;
        }
        let kinds: &[&str] = match (via_object, part) {
            (true, ADMIT_CANCEL) => &["warm"],
            (true, _) => &["new", "warm"],
            (false, _) => &["-"],
        };
        for &kind in kinds {
            for conc in LEVELS {
                let per_thread = per_level.max(conc) / conc;
                let prefix = unique("fo");
                // Every thread has touched its warm object before the clock starts.
                let ready = Barrier::new(conc + 1);
                let mut start = Instant::now();
                let results: Vec<(bool, f64)> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..conc)
                        .map(|t| {
                            let (prefix, ready) = (&prefix, &ready);
                            s.spawn(move || {
                                let agent = ureq::AgentBuilder::new()
                                    .timeout(Duration::from_secs(60))
                                    .build();
                                let warm = format!("{prefix}-w{t}");
                                if kind == "warm" {
                                    hit(&agent, url, part, &warm);
                                }
                                ready.wait();
                                (0..per_thread)
                                    .map(|i| {
                                        let object = match kind {
                                            "warm" => warm.clone(),
                                            _ => format!("{prefix}-n{t}-{i}"),
                                        };
                                        hit(&agent, url, part, &object)
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    ready.wait();
                    start = Instant::now();
                    handles
                        .into_iter()
                        .flat_map(|h| h.join().unwrap())
                        .collect()
                });
                let elapsed = start.elapsed().as_secs_f64();
                let ok = results.iter().filter(|(o, _)| *o).count();
                let mut lat: Vec<f64> = results.iter().map(|(_, l)| *l).collect();
                lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
                emit(json!({
                    "scenario": "floor",
                    "part": part,
                    "objects": kind,
                    "concurrency": conc,
                    "requests": results.len(),
                    "errors": results.len() - ok,
                    "per_s": ok as f64 / elapsed,
                    "p50_ms": percentile(&lat, 50.0),
                    "p99_ms": percentile(&lat, 99.0),
                }));
            }
        }
    }
}

/// `floor-tell`: the floor of the reaper tick's notices. Each round asks the floor Worker to call
/// `objects` new objects from one invocation, `at_once` in flight (`POST /tell`), as the tick tells
/// the sessions whose claims it released; the Worker times the calls itself, so the figure holds
/// no HTTP round trip of the client. One result line per `at_once` value: every round's ms and
/// their median.
pub fn floor_tell(url: &str, objects: usize, at_once: &[usize], rounds: usize) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    // Warm-up: the isolate and the objects' class, on objects of their own.
    for i in 0..20 {
        post_part(&agent, url, "do", &format!("tell-warmup-{i}"));
    }
    for &at in at_once {
        let mut ms = Vec::with_capacity(rounds);
        let mut errors = 0;
        for _ in 0..rounds {
            let answer = agent
                .post(&format!(
                    "{url}/tell?p={}&n={objects}&at={at}",
                    unique("tell")
                ))
                .send_string("");
            match answer
                .ok()
                .and_then(|r| r.into_json::<serde_json::Value>().ok())
                .and_then(|body| body["ms"].as_f64())
            {
                Some(round_ms) => ms.push(round_ms),
                None => errors += 1,
            }
        }
        let mut sorted = ms.clone();
        sorted.sort_by(f64::total_cmp);
        let median = match sorted.len() {
            0 => None,
            n if n % 2 == 1 => Some(sorted[n / 2]),
            n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
        };
        emit(json!({
            "scenario": "floor-tell", "objects": objects, "at_once": at,
            "rounds": rounds, "ms": ms, "p50_ms": median,
            "errors": errors,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_part_beside_a_path_of_ours_gets_the_body_ours_gets_and_a_bare_part_none() {
        for part in [
            "claim",
            "schema-claim",
            "/schema-alarm-queue",
            "do-d1-storage-alarm",
            "admit-dispatch",
            "schema-dispatch",
            "admit-reserve",
        ] {
            let body: serde_json::Value =
                serde_json::from_str(&body_for(part, "s1").expect(part)).unwrap();
            assert_eq!(
                body,
                json!({"sessionId": "s1", "objective": "bench"}),
                "{part}"
            );
        }
        for part in ["/append", "schema-append"] {
            let append: serde_json::Value =
                serde_json::from_str(&body_for(part, "s1").expect(part)).unwrap();
            assert_eq!(append["events"][0]["type"], "text_delta", "{part}");
        }
        for part in [
            "health",
            "d1",
            "do",
            "do-storage",
            "do-d1-storage",
            "schema-lease",
            "cancel",
            "poll",
        ] {
            assert_eq!(body_for(part, "s1"), None, "{part}");
        }
    }
}
