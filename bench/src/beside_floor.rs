//! `beside-floor`: our admission and its floor's, measured interleaved on two Workers served at
//! once (ours at `--url`, the bench-only floor Worker at `--floor-url`), so that each figure and
//! its floor are taken at the same moment of the machine. Measured minutes apart, as the floor
//! scenario and the admission scenario are, the two drift by more than the overhead they are
//! meant to show (the same floor part measured twice ten minutes apart differs by up to 30%).
//!
//! At each concurrency level, `rounds` rounds; each round measures every side once, in an order
//! that rotates from round to round. Then sequential admissions, one per side in turn, into a warm
//! object (the same session each time; ours cancels its run between, untimed) and into a new one.
//!
//! With the two Workers' workerd pids, each line also carries the CPU time its side's workerd
//! spent per accepted admission (utime + stime over the level, D1 and the objects included: local
//! D1 and every object run in the Worker's own workerd process): a figure the machine's other load
//! moves far less than a rate does.
//!
//! `beside-floor-paths` does the same for the other hot paths, each against its floor in the shape
//! of ours (`floor-paths`): the 409s of simultaneous submits into one session, append → SSE, and
//! the hand-over of a run to a waiting runner (WebSocket and long-poll, warm and new session).
//! Each path's floor goes through the design's parts (`floor_paths::Parts::Design`: the product's
//! own statements on its schema), as admission's does through `schema-alarm-queue`;
//! `--floor-parts bare` measures the bare parts instead, for an A/B of the floor itself.
//!
//! Sides: `ours` (`POST /v1/runs` into a new session, no key); the floor Worker's
//! `schema-alarm-queue` (the design that ships, in plain JavaScript: the product's own admission
//! batch into its schema, storage and alarm written unconfirmed, the queue object told without
//! waiting) and `do-d1-storage-alarm` (the bare parts: three inserts into tables without indexes,
//! storage and alarm); and, given its URL, the floor through the Rust binding (`bench/floor-rs`:
//! the same parts compiled to wasm with the product's crates) as [`RS_FLOOR`] beside the admission
//! and `floor-rs` beside every other path.

use crate::floor::post_part;
use crate::queues::{clock_ticks, cpu_ticks};
use crate::{
    admission_level, captured, contention, emit, events_latency, floor_paths, percentile, queues,
    queues_ws, status_of, submit_run, timed_submit, unique, Ctx, LEVELS,
};
use serde_json::json;
use std::time::Duration;

/// The floor Worker's parts set beside ours, the design's own first.
const FLOOR_PARTS: [&str; 2] = ["schema-alarm-queue", "do-d1-storage-alarm"];

/// The design's floor through the Rust binding, as its side is named: `schema-alarm-queue` on the
/// `bench/floor-rs` Worker.
const RS_FLOOR: &str = "rs:schema-alarm-queue";

/// Where each side runs: the base URLs and, when known, the workerd pids.
pub struct Sides<'a> {
    pub floor: &'a str,
    pub ours_pid: Option<u32>,
    pub floor_pid: Option<u32>,
    /// The floor through the Rust binding, when the run has it.
    pub floor_rs: Option<&'a str>,
    pub floor_rs_pid: Option<u32>,
}

/// Which Worker a side's measurement runs on.
#[derive(Clone, Copy, PartialEq)]
enum On {
    Ours,
    Floor,
    FloorRs,
}

impl On {
    fn of(side: &str) -> On {
        match side {
            "ours" => On::Ours,
            RS_FLOOR | "floor-rs" => On::FloorRs,
            _ => On::Floor,
        }
    }
}

impl<'a> Sides<'a> {
    /// The base URL of a floor side.
    fn url(&self, on: On) -> &'a str {
        match on {
            On::FloorRs => self.floor_rs.unwrap_or(self.floor),
            _ => self.floor,
        }
    }

    /// Runs `f` as one side's measurement: its result, and the CPU ms that side's workerd spent
    /// meanwhile (`None` without its pid).
    fn measure<R>(&self, on: On, ticks: f64, f: impl FnOnce() -> R) -> (R, Option<f64>) {
        let pid = match on {
            On::Ours => self.ours_pid,
            On::Floor => self.floor_pid,
            On::FloorRs => self.floor_rs_pid,
        };
        let before = pid.and_then(cpu_ticks);
        let r = f();
        let spent = before
            .zip(pid.and_then(cpu_ticks))
            .map(|(b, a)| (a - b) as f64 * 1000.0 / ticks);
        (r, spent)
    }
}

pub fn beside_floor(ctx: &Ctx, at: &Sides, rounds: usize, per_level: usize, samples: usize) {
    let ticks = clock_ticks();
    let sides: Vec<&str> = std::iter::once("ours")
        .chain(FLOOR_PARTS)
        .chain(at.floor_rs.map(|_| RS_FLOOR))
        .collect();
    for conc in LEVELS {
        for round in 0..rounds {
            for k in 0..sides.len() {
                let side = sides[(round + k) % sides.len()];
                let on = On::of(side);
                let (mut line, cpu_ms) = at.measure(on, ticks, || {
                    if on == On::Ours {
                        admission_level(conc, per_level, 202, &|agent: &ureq::Agent, _| {
                            timed_submit(agent, &ctx.url, &unique("bfo"))
                        })
                    } else {
                        let part = part_of(side);
                        admission_level(conc, per_level, 200, &|agent: &ureq::Agent, _| {
                            post_part(agent, at.url(on), part, &unique("bfn"))
                        })
                    }
                });
                let accepted =
                    line["requests"].as_u64().unwrap_or(0) - line["errors"].as_u64().unwrap_or(0);
                if let Some(ms) = cpu_ms.filter(|_| accepted > 0) {
                    line["cpu_ms_per_admission"] = json!(ms / accepted as f64);
                }
                line["scenario"] = json!("beside-floor");
                line["side"] = json!(side);
                line["round"] = json!(round);
                emit(line);
            }
        }
    }
    sequential(ctx, at, &sides, samples);
}

/// The floor Worker's part a side names (`rs:` names the same part on the Rust floor).
fn part_of(side: &str) -> &str {
    side.strip_prefix("rs:").unwrap_or(side)
}

/// One submit of ours into `session`: (status, ms). Into a warm session its run is cancelled
/// after, untimed, so the next submit finds the session free; a failed cancel shows as the next
/// submit's 409, counted as an error like any other.
fn ours_submit(agent: &ureq::Agent, url: &str, session: &str, cancel: bool) -> (u16, f64) {
    let (answer, ms) = submit_run(agent, url, session);
    let status = status_of(&answer);
    let task = match answer {
        Ok(r) if cancel => r.into_json::<serde_json::Value>().ok(),
        _ => None,
    };
    if let Some(task) = task.as_ref().and_then(|b| b["taskId"].as_str()) {
        let _ = agent
            .post(&format!("{url}/v1/runs/{task}/cancel"))
            .set("content-type", "application/json")
            .send_string("{}");
    }
    (status, ms)
}

/// `samples` sequential admissions per side and object kind, the sides taking turns.
fn sequential(ctx: &Ctx, at: &Sides, sides: &[&str], samples: usize) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let warm_session = unique("bfw");
    let mut lat = vec![[vec![], vec![]]; sides.len()];
    let mut errors = vec![0usize; sides.len()];
    for i in 0..samples {
        for k in 0..sides.len() {
            let s = (i + k) % sides.len();
            for (kind, warm) in [(0, true), (1, false)] {
                let (status, ms) = match sides[s] {
                    "ours" => {
                        let session = if warm {
                            warm_session.clone()
                        } else {
                            unique("bfs")
                        };
                        ours_submit(&agent, &ctx.url, &session, warm)
                    }
                    side => {
                        let object = if warm {
                            format!("{warm_session}-{}", side.replace(':', "-"))
                        } else {
                            unique("bfs")
                        };
                        post_part(&agent, at.url(On::of(side)), part_of(side), &object)
                    }
                };
                if !matches!(status, 200 | 202) {
                    errors[s] += 1;
                }
                lat[s][kind].push(ms);
            }
        }
    }
    for (s, side) in sides.iter().enumerate() {
        for (kind, objects) in ["warm", "new"].iter().enumerate() {
            let mut l = std::mem::take(&mut lat[s][kind]);
            l.sort_by(|a, b| a.partial_cmp(b).unwrap());
            emit(json!({
                "scenario": "beside-floor-sequential",
                "side": side,
                "objects": objects,
                "samples": samples,
                "errors": errors[s],
                "p50_ms": percentile(&l, 50.0),
                "p99_ms": percentile(&l, 99.0),
            }));
        }
    }
}

/// The sizes of one path's measurement, the same on both sides.
pub struct PathCounts {
    /// Contention: sessions, each given `contenders` simultaneous submits.
    pub sessions: usize,
    pub contenders: usize,
    /// Appends, and hand-overs, per path.
    pub samples: usize,
    /// The paths measured (empty: all of [`PATHS`]); for an A/B of one path, not the report.
    pub only: Vec<String>,
    /// The floors' parts: the design's (the report's), or the bare parts' for an A/B of the floor
    /// itself.
    pub parts: floor_paths::Parts,
}

/// The hot paths set beside their floors (bench/report.py's `INTERLEAVED_PATHS` names them).
const PATHS: [&str; 6] = [
    "contention",
    "append",
    "ws-warm",
    "ws-new",
    "long-poll-warm",
    "long-poll-new",
];

/// The sides measured on every path: ours, the floor, and the Rust floor where the run has it.
fn path_sides(at: &Sides) -> Vec<On> {
    let mut sides = vec![On::Ours, On::Floor];
    if at.floor_rs.is_some() {
        sides.push(On::FloorRs);
    }
    sides
}

/// One path measured on one side (its scenario's own result line, emitted into a capture).
fn run_path(ctx: &Ctx, at: &Sides, path: &str, on: On, n: &PathCounts) {
    let warm = path.ends_with("-warm");
    let floor = at.url(on);
    let ours = on == On::Ours;
    match (path, ours) {
        ("contention", true) => contention(ctx, n.sessions, n.contenders),
        ("contention", false) => floor_paths::contention(floor, n.sessions, n.contenders, n.parts),
        ("append", true) => events_latency(ctx, n.samples),
        ("append", false) => floor_paths::append(floor, n.samples, n.parts),
        (p, true) if p.starts_with("ws-") => queues_ws::dispatch_latency(&ctx.url, n.samples, warm),
        (p, false) if p.starts_with("ws-") => {
            floor_paths::dispatch_ws(floor, n.samples, warm, n.parts, false)
        }
        (_, true) => queues::dispatch_latency(&ctx.url, n.samples, warm),
        (_, false) => floor_paths::dispatch_poll(floor, n.samples, warm, n.parts),
    }
}

/// Operations a side's measurement of `path` carried out, from its result line: submits under
/// contention (the one admitted per session and its 409s), appends received, or hand-overs (the
/// warm-up round included, which ran inside the same CPU window). Ours also finishes each run it
/// hands over (so a warm session is free for the next round); the floor's shape has no finish.
fn operations(path: &str, line: &serde_json::Value) -> u64 {
    let n = |k: &str| line[k].as_u64().unwrap_or(0);
    match path {
        "contention" => n("accepted_total") + n("conflicts_409"),
        "append" => n("samples"),
        _ => n("samples") + 1,
    }
}

/// A warm-up round (every side, every path, small counts, lines dropped), then `rounds` rounds; in
/// each, every path is measured on each of its sides ([`path_sides`]), in an order rotating by
/// round and by path, so with a number of rounds divisible by its sides' count (6: by two and by
/// three) each side goes first equally often on every path. Each result
/// line is its scenario's own, renamed `beside-floor-paths` (the original name kept as
/// `measured`), with the path, side and round, and, given the pids, the side's workerd CPU per
/// operation carried out.
pub fn beside_floor_paths(ctx: &Ctx, at: &Sides, rounds: usize, n: &PathCounts) {
    let ticks = clock_ticks();
    let warm_up = PathCounts {
        sessions: 2,
        contenders: n.contenders,
        samples: 10,
        only: Vec::new(),
        parts: n.parts,
    };
    if let Some(unknown) = n.only.iter().find(|o| !PATHS.contains(&o.as_str())) {
        emit(json!({"scenario": "beside-floor-paths", "errors": 1,
            "error": format!("no path {unknown}: the paths are {}", PATHS.join(", "))}));
        return;
    }
    let paths: Vec<&str> = PATHS
        .into_iter()
        .filter(|p| n.only.is_empty() || n.only.iter().any(|o| o == p))
        .collect();
    for path in paths.iter().copied() {
        for on in path_sides(at) {
            captured(|| run_path(ctx, at, path, on, &warm_up));
        }
    }
    for round in 0..rounds {
        for (i, path) in paths.iter().copied().enumerate() {
            let sides = path_sides(at);
            for k in 0..sides.len() {
                let on = sides[(round + i + k) % sides.len()];
                let (lines, cpu_ms) =
                    at.measure(on, ticks, || captured(|| run_path(ctx, at, path, on, n)));
                for mut line in lines {
                    line["measured"] = line["scenario"].clone();
                    line["scenario"] = json!("beside-floor-paths");
                    line["path"] = json!(path);
                    line["side"] = json!(match on {
                        On::Ours => "ours",
                        On::Floor => "floor",
                        On::FloorRs => "floor-rs",
                    });
                    line["round"] = json!(round);
                    let ops = operations(path, &line);
                    if let Some(ms) = cpu_ms.filter(|_| ops > 0) {
                        line["cpu_ms_per_op"] = json!(ms / ops as f64);
                    }
                    emit(line);
                }
            }
        }
    }
}
