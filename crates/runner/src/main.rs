//! `sema-runner`: a reference runner. It leases runs from a Sema Edge server, executes each objective
//! as a small script (see `script.rs`), streams `text_delta` events, heartbeats (noticing cancel and
//! steer messages), parks runs on human gates (`ask`) and goes on after the decision when a resumed
//! run is leased again, and finishes each run. Runs offline against `scripts/dev`.
//!
//! ```text
//! sema-runner [--url http://127.0.0.1:8787] [--runner-id ID] [--token TOKEN] [--concurrency N]
//!             [--max-runs N] [--wait-ms MS]
//! ```
//! Without `--token` it speaks local mode (`X-Sema-Role: runner`). `--help` lists the flags.

mod script;

use clap::Parser;
use script::Step;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Reference runner for Sema Edge: leases runs, executes each objective as a small script, streams
/// text deltas, heartbeats and finishes each run.
#[derive(Clone, Debug, Parser)]
#[command(name = "sema-runner", version)]
struct Config {
    /// Base URL of the Sema Edge server (a trailing `/` is dropped).
    #[arg(long, default_value = "http://127.0.0.1:8787", value_parser = base_url)]
    url: String,
    /// This runner's id; each worker thread appends `-<index>`.
    #[arg(long, default_value_t = format!("runner-{}", std::process::id()))]
    runner_id: String,
    /// Bearer token; without it the runner speaks local mode (`X-Sema-Role: runner`).
    #[arg(long)]
    token: Option<String>,
    /// Worker threads, each leasing and running one run at a time.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Runs each worker thread executes before it stops [default: no limit].
    #[arg(long)]
    max_runs: Option<usize>,
    /// The lease long-poll, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    wait_ms: u64,
    /// The task queue to lease from (one per runner process; run one process per queue).
    #[arg(long, default_value = "default")]
    queue: String,
}

fn base_url(s: &str) -> Result<String, String> {
    Ok(s.trim_end_matches('/').to_owned())
}

/// The HTTP side: one agent per worker thread.
struct Client {
    agent: ureq::Agent,
    cfg: Config,
}

enum Reply {
    Ok(Value),
    NoContent,
    LeaseLost,
}

impl Client {
    fn post(&self, path: &str, body: Value) -> Result<Reply, String> {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.cfg.url))
            .set("content-type", "application/json");
        req = match &self.cfg.token {
            Some(t) => req.set("authorization", &format!("Bearer {t}")),
            None => req.set("x-sema-role", "runner"),
        };
        match req.send_string(&body.to_string()) {
            Ok(r) if r.status() == 204 => Ok(Reply::NoContent),
            Ok(r) => r.into_json().map(Reply::Ok).map_err(|e| e.to_string()),
            Err(ureq::Error::Status(409, r)) => {
                let v: Value = r.into_json().unwrap_or_default();
                if v["errorCode"] == "lease_lost" {
                    Ok(Reply::LeaseLost)
                } else {
                    Err(format!("409 {v}"))
                }
            }
            Err(ureq::Error::Status(code, r)) => Err(format!(
                "{path}: {code} {}",
                r.into_string().unwrap_or_default()
            )),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }
}

/// What ended a run's script.
enum Outcome {
    Completed(String),
    Failed(String, &'static str),
    Cancelled,
    LeaseLost,
    /// Parked on a gate: the park ended the lease, nothing more to write.
    Parked,
}

struct Run<'a> {
    client: &'a Client,
    task_id: String,
    epoch: i64,
    text: String,
    next_event: u64,
}

/// What one heartbeat left to do.
enum Beat {
    /// More steer messages wait than this heartbeat carried.
    More,
    /// The run goes on (`None`) or ends with this outcome.
    Done(Option<Outcome>),
}

impl Run<'_> {
    fn path(&self, verb: &str) -> String {
        format!("/v1/runs/{}/{verb}", self.task_id)
    }

    /// Heartbeats; applies steer messages (as `steering_injected` events), beating again at once
    /// while more wait than one heartbeat carries. `Some(outcome)` ends the run.
    fn beat(&mut self) -> Result<Option<Outcome>, String> {
        loop {
            match self.beat_once()? {
                Beat::More => continue,
                Beat::Done(outcome) => return Ok(outcome),
            }
        }
    }

    fn beat_once(&mut self) -> Result<Beat, String> {
        let reply = self.client.post(
            &self.path("heartbeat"),
            json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch}),
        )?;
        let Reply::Ok(v) = reply else {
            return Ok(Beat::Done(Some(Outcome::LeaseLost)));
        };
        let steer = v["steer"].as_array().cloned().unwrap_or_default();
        if !steer.is_empty() {
            let events: Vec<Value> = steer
                .iter()
                .map(|m| json!({"type": "steering_injected", "data": {"message": m["message"], "steerSeq": m["seq"]}}))
                .collect();
            if let Some(o) = self.append(events)? {
                return Ok(Beat::Done(Some(o)));
            }
        }
        if v["cancelRequested"] == true {
            return Ok(Beat::Done(Some(Outcome::Cancelled)));
        }
        if v["steerPending"].as_i64().unwrap_or(0) > 0 {
            return Ok(Beat::More);
        }
        Ok(Beat::Done(None))
    }

    fn append(&mut self, mut events: Vec<Value>) -> Result<Option<Outcome>, String> {
        for e in &mut events {
            self.next_event += 1;
            // Unique per run: a lease epoch is never reused, and the counter is per lease.
            e["eventId"] = json!(format!("{}-{}", self.epoch, self.next_event));
        }
        match self.client.post(
            &self.path("events"),
            json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "events": events}),
        )? {
            Reply::LeaseLost => Ok(Some(Outcome::LeaseLost)),
            _ => Ok(None),
        }
    }

    /// Streams `text` as text_delta events, one per word; `Some(outcome)` ends the run.
    fn say(&mut self, text: &str) -> Result<Option<Outcome>, String> {
        let pieces = script::deltas(text);
        for chunk in pieces.chunks(500) {
            let events = chunk
                .iter()
                .map(|d| json!({"type": "text_delta", "data": {"delta": d}}))
                .collect();
            if let Some(o) = self.append(events)? {
                return Ok(Some(o));
            }
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&pieces.concat());
        Ok(None)
    }

    /// Parks the run on a gate; the park ends the lease either way.
    fn park(&mut self, kind: &str, card: Value) -> Result<Outcome, String> {
        let body = json!({
            "runnerId": self.client.cfg.runner_id,
            "leaseEpoch": self.epoch,
            "gate": {"kind": kind, "card": card},
        });
        match self.client.post(&self.path("park"), body)? {
            Reply::LeaseLost => Ok(Outcome::LeaseLost),
            _ => Ok(Outcome::Parked),
        }
    }

    /// Runs the script from step `from`, first saying `preface` (a resumed run's decision).
    fn execute(
        &mut self,
        steps: &[Step],
        from: usize,
        preface: Option<&str>,
    ) -> Result<Outcome, String> {
        if let Some(text) = preface {
            if let Some(o) = self.beat()? {
                return Ok(o);
            }
            if let Some(o) = self.say(text)? {
                return Ok(o);
            }
        }
        for (index, step) in steps.iter().enumerate().skip(from) {
            if let Some(o) = self.beat()? {
                return Ok(o);
            }
            match step {
                Step::Say(text) => {
                    if let Some(o) = self.say(text)? {
                        return Ok(o);
                    }
                }
                Step::Sleep(ms) => {
                    let until = Instant::now() + Duration::from_millis(*ms);
                    while Instant::now() < until {
                        std::thread::sleep(
                            (until - Instant::now()).min(Duration::from_millis(250)),
                        );
                        if let Some(o) = self.beat()? {
                            return Ok(o);
                        }
                    }
                }
                Step::Fail(message) => {
                    return Ok(Outcome::Failed(message.clone(), "runner.script_failed"))
                }
                Step::Ask { kind, text } => return self.park(kind, script::card(text, index)),
            }
        }
        Ok(Outcome::Completed(std::mem::take(&mut self.text)))
    }

    fn finish(&self, outcome: Outcome) -> Result<(), String> {
        let body = match outcome {
            Outcome::LeaseLost | Outcome::Parked => return Ok(()),
            Outcome::Completed(text) => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "completed", "result": {"text": text}})
            }
            Outcome::Failed(error, code) => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "failed", "error": error, "errorCode": code})
            }
            Outcome::Cancelled => {
                json!({"runnerId": self.client.cfg.runner_id, "leaseEpoch": self.epoch, "status": "cancelled", "error": "cancelled by user"})
            }
        };
        self.client.post(&self.path("finish"), body).map(|_| ())
    }
}

fn worker(cfg: Config, index: usize) {
    let client = Client {
        agent: ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build(),
        cfg: Config {
            runner_id: format!("{}-{index}", cfg.runner_id),
            ..cfg.clone()
        },
    };
    let mut done = 0;
    while cfg.max_runs.is_none_or(|m| done < m) {
        let lease = client.post(
            "/v1/runner/lease",
            json!({"runnerId": client.cfg.runner_id, "waitMs": cfg.wait_ms, "queue": cfg.queue}),
        );
        let lease = match lease {
            Ok(Reply::Ok(v)) => v,
            Ok(_) => continue,
            Err(e) => {
                eprintln!("sema-runner: lease failed: {e}");
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        let mut run = Run {
            client: &client,
            task_id: lease["taskId"].as_str().unwrap_or_default().to_owned(),
            epoch: lease["leaseEpoch"].as_i64().unwrap_or_default(),
            text: String::new(),
            next_event: 0,
        };
        let steps = script::parse(lease["objective"].as_str().unwrap_or_default());
        let outcome = match lease.get("resume").filter(|r| !r.is_null()) {
            None => run.execute(&steps, 0, None),
            Some(resume) => match script::resumption(&steps, resume) {
                Ok(r) => run.execute(&steps, r.next, Some(&r.say)),
                Err(e) => Ok(Outcome::Failed(e, "runner.bad_resume")),
            },
        }
        .unwrap_or_else(|e| Outcome::Failed(e, "runner.error"));
        if let Err(e) = run.finish(outcome) {
            eprintln!("sema-runner: finish of {} failed: {e}", run.task_id);
        }
        done += 1;
    }
}

fn main() {
    let cfg = Config::parse();
    eprintln!(
        "sema-runner {} leasing from {} with {} worker(s)",
        cfg.runner_id, cfg.url, cfg.concurrency
    );
    let handles: Vec<_> = (0..cfg.concurrency)
        .map(|i| {
            let cfg = cfg.clone();
            std::thread::spawn(move || worker(cfg, i))
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_flag_definitions_are_consistent() {
        Config::command().debug_assert();
    }

    #[test]
    fn defaults_are_the_local_dev_server_one_worker_no_limit_and_a_5s_poll() {
        let cfg = Config::try_parse_from(["sema-runner"]).unwrap();
        assert_eq!(cfg.url, "http://127.0.0.1:8787");
        assert_eq!(cfg.runner_id, format!("runner-{}", std::process::id()));
        assert_eq!(cfg.token, None);
        assert_eq!(cfg.concurrency, 1);
        assert_eq!(cfg.max_runs, None);
        assert_eq!(cfg.wait_ms, 5000);
    }

    #[test]
    fn the_test_suites_invocation_parses_and_the_url_loses_its_trailing_slash() {
        let cfg = Config::try_parse_from([
            "sema-runner",
            "--url",
            "http://127.0.0.1:8799/",
            "--runner-id",
            "runner-1",
            "--wait-ms",
            "300",
            "--token",
            "t",
            "--concurrency",
            "4",
            "--max-runs",
            "2",
        ])
        .unwrap();
        assert_eq!(cfg.url, "http://127.0.0.1:8799");
        assert_eq!(cfg.runner_id, "runner-1");
        assert_eq!(cfg.wait_ms, 300);
        assert_eq!(cfg.token.as_deref(), Some("t"));
        assert_eq!((cfg.concurrency, cfg.max_runs), (4, Some(2)));
    }

    #[test]
    fn unknown_flags_and_malformed_numbers_are_refused() {
        assert!(Config::try_parse_from(["sema-runner", "--bogus"]).is_err());
        assert!(Config::try_parse_from(["sema-runner", "--concurrency", "x"]).is_err());
        assert!(Config::try_parse_from(["sema-runner", "--wait-ms"]).is_err());
    }
}
