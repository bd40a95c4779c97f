//! Human gates, black-box. A runner parks its run on a gate (`POST /v1/runs/{id}/park`); the session
//! answers submits with the parked 409 materials; the run's owner decides at the path of the gate's
//! kind, and the run resumes (leased again with the decision), ends, or is woken into a new run.
//! Most tests speak the runner protocol by hand on the runner-test Worker; two drive the reference
//! runner process (`ask <kind> <text>` in its script); the expiry tests run on the heal Worker
//! (`APPROVAL_TIMEOUT_SEC=3`, the cron triggered through the scheduled test route).
//!
//! Every response body and SSE frame these tests read is recorded, and each test ends by checking that
//! none of them names a checkpoint token or id (the keys `checkpointId`, `checkpoint_id`, `token`):
//! the token is a secret capability that never leaves the server.

use crate::helpers::{parked_conflict_body, running_conflict_body, unique, Client, Resp};
use crate::sse::{read_sse_at, Frame, Runner};
use serde_json::{json, Value};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Every gate kind, written out here independently of the server's table.
const KINDS: [&str; 7] = [
    "tool_approval",
    "human",
    "irreversible_ask",
    "policy_ask",
    "plan_review",
    "resource_limit",
    "task_done",
];

/// The park word of a kind.
fn park_word(kind: &str) -> &'static str {
    if kind == "plan_review" {
        "needs_review"
    } else {
        "suspended"
    }
}

/// The four decide paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Approvals,
    PlanReview,
    Resume,
    Wake,
}

const PATHS: [Path; 4] = [Path::Approvals, Path::PlanReview, Path::Resume, Path::Wake];

impl Path {
    fn of(kind: &str) -> Path {
        match kind {
            "tool_approval" | "human" | "irreversible_ask" | "policy_ask" => Path::Approvals,
            "plan_review" => Path::PlanReview,
            "resource_limit" => Path::Resume,
            "task_done" => Path::Wake,
            other => panic!("no path for {other}"),
        }
    }

    fn url(self, session: &str, task: &str) -> String {
        match self {
            Path::Approvals => format!("/v1/approvals/{session}/decide"),
            Path::PlanReview => format!("/v1/assistant/tasks/{task}/plan_review"),
            Path::Resume => format!("/v1/assistant/tasks/{task}/resume"),
            Path::Wake => format!("/v1/sessions/{session}/wake"),
        }
    }

    /// The refusal code of this path while the pending gate is of another kind.
    fn wrong_kind_code(self) -> &'static str {
        match self {
            Path::Approvals => "gate_not_tool_approval",
            Path::PlanReview => "gate_not_plan_review",
            Path::Resume => "gate_not_resumable",
            Path::Wake => "wake.gate_pending",
        }
    }

    /// What the path resolves, as its refusal sentence names it.
    fn resolves(self) -> &'static str {
        match self {
            Path::Approvals => "a tool approval or a human ask",
            Path::PlanReview => "a plan review",
            Path::Resume => "a resource limit to resume",
            Path::Wake => "a finished task to wake",
        }
    }

    /// The decision that lets the run go on (a wake's body is its objective).
    fn go_on(self) -> &'static str {
        match self {
            Path::Approvals | Path::PlanReview => "approve",
            Path::Resume => "continue",
            Path::Wake => "wake",
        }
    }

    /// A valid body for this path that lets the run go on.
    fn go_on_body(self) -> Value {
        match self {
            Path::Wake => json!({"objective": "manual after the wake"}),
            _ => json!({"decision": self.go_on()}),
        }
    }
}

// ---- recording: every body and frame is checked for a checkpoint token or id ----------------------

static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn note(text: &str) {
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(text.to_owned());
}

fn rec(r: Resp) -> Resp {
    note(&r.body);
    r
}

fn rec_frames(frames: Vec<Frame>) -> Vec<Frame> {
    for f in &frames {
        note(&f.data.to_string());
    }
    frames
}

/// The keys that would carry a checkpoint token or its id.
const SECRET_KEYS: [&str; 3] = ["checkpointId", "token", "checkpoint_id"];

/// The secret keys `text` names (as JSON keys or quoted words anywhere in it).
fn secret_keys_in(text: &str) -> Vec<&'static str> {
    SECRET_KEYS
        .into_iter()
        .filter(|k| text.contains(&format!("\"{k}\"")))
        .collect()
}

/// Checks every recorded body and frame so far (and forgets them).
fn assert_nothing_secret_seen(also_absent: &[&str]) -> usize {
    let seen = std::mem::take(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()));
    for text in &seen {
        let keys = secret_keys_in(text);
        assert!(keys.is_empty(), "{keys:?} in a response or frame: {text}");
        for s in also_absent {
            assert!(!text.contains(s), "{s:?} in a response or frame: {text}");
        }
    }
    seen.len()
}

/// Made at the start of each test: when the test ends without failing, nothing it read named a
/// checkpoint token or id.
struct Secrecy;

impl Drop for Secrecy {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_nothing_secret_seen(&[]);
        }
    }
}

fn get(c: &Client, path: &str) -> Resp {
    rec(c.get(path))
}

fn post(c: &Client, path: &str, body: &Value) -> Resp {
    rec(c.post_json(path, body))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

// ---- a server and its gates ------------------------------------------------------------------------

/// One Worker under test.
#[derive(Clone)]
struct Site {
    base: String,
}

/// A run parked on a gate by a runner speaking the protocol by hand.
#[derive(Debug, Clone)]
struct Gated {
    task: String,
    session: String,
    runner: String,
    epoch: i64,
    kind: String,
    card: Value,
    /// The run's `heldBy` before any runner leased it (the read face names the instance then): what
    /// it shows again once the park ended the lease.
    unheld: Value,
}

impl Gated {
    fn path(&self) -> Path {
        Path::of(&self.kind)
    }

    fn decide_path(&self) -> String {
        self.path().url(&self.session, &self.task)
    }

    fn conflict_body(&self) -> String {
        parked_conflict_body(
            &self.task,
            park_word(&self.kind),
            &self.kind,
            &self.decide_path(),
        )
    }
}

impl Site {
    /// The runner-test Worker.
    fn runs() -> Self {
        Site {
            base: crate::sse::server(),
        }
    }

    /// The heal Worker (`APPROVAL_TIMEOUT_SEC=3`, cron through the scheduled route).
    fn heal() -> Self {
        Site {
            base: std::env::var("SEMA_HEAL_URL")
                .expect("SEMA_HEAL_URL is not set: run through scripts/test"),
        }
    }

    fn anon(&self) -> Client {
        Client::anonymous().at(&self.base)
    }

    fn user(&self, name: &str) -> Client {
        Client::as_principal(name).at(&self.base)
    }

    fn runner(&self) -> Client {
        self.anon().with_role("runner")
    }

    /// A reader that sees every principal's runs.
    fn reader(&self) -> Client {
        self.user("gate-reader").with_role("operator")
    }

    fn run(&self, task: &str) -> Value {
        let r = get(&self.reader(), &format!("/v1/runs/{task}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    fn ledger(&self, task: &str) -> Vec<Value> {
        let r = get(
            &self.reader(),
            &format!("/v1/runs/{task}/events?limit=1000"),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["events"].as_array().cloned().unwrap_or_default()
    }

    /// Polls the run until `pred` holds (at most 20 s).
    fn wait_until(&self, task: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let r = self.run(task);
            if pred(&r) {
                return r;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}: {r}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads the run's stream from its start until `done`, on a thread of its own.
    fn stream(&self, task: &str) -> JoinHandle<Vec<Frame>> {
        let (base, path) = (self.base.clone(), format!("/v1/runs/{task}/events"));
        std::thread::spawn(move || rec_frames(read_sse_at(&base, &path, None, usize::MAX).0))
    }

    fn submit(&self, c: &Client, session: &str, objective: &str) -> Resp {
        post(
            c,
            "/v1/runs",
            &json!({"sessionId": session, "objective": objective}),
        )
    }

    /// One lease call: the lease, or `None` on 204.
    fn lease_once(&self, runner_id: &str, wait_ms: u64) -> Option<Value> {
        let r = post(
            &self.runner(),
            "/v1/runner/lease",
            &json!({"runnerId": runner_id, "waitMs": wait_ms}),
        );
        match r.status {
            200 => Some(r.json()),
            204 => None,
            other => panic!("lease: {other} {}", r.body),
        }
    }

    /// Leases until it gets `task` (a leftover of another test is finished on the way).
    fn lease_of(&self, task: &str, runner_id: &str) -> Value {
        for _ in 0..50 {
            let Some(l) = self.lease_once(runner_id, 2000) else {
                continue;
            };
            if l["taskId"] == task {
                return l;
            }
            let other = l["taskId"].as_str().unwrap();
            self.finish(other, runner_id, l["leaseEpoch"].as_i64().unwrap());
        }
        panic!("never leased {task}");
    }

    fn runner_write(
        &self,
        task: &str,
        verb: &str,
        runner_id: &str,
        epoch: i64,
        extra: Value,
    ) -> Resp {
        let mut body = json!({"runnerId": runner_id, "leaseEpoch": epoch});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        post(&self.runner(), &format!("/v1/runs/{task}/{verb}"), &body)
    }

    fn finish(&self, task: &str, runner_id: &str, epoch: i64) -> Resp {
        self.runner_write(
            task,
            "finish",
            runner_id,
            epoch,
            json!({"status": "completed"}),
        )
    }

    fn say(&self, task: &str, runner_id: &str, epoch: i64, delta: &str) -> Resp {
        self.runner_write(
            task,
            "events",
            runner_id,
            epoch,
            json!({"events": [{"type": "text_delta", "data": {"delta": delta}}]}),
        )
    }

    fn park(
        &self,
        task: &str,
        runner_id: &str,
        epoch: i64,
        kind: &str,
        card: &Value,
        expires_in_sec: Option<u64>,
    ) -> Resp {
        let mut extra = json!({"gate": {"kind": kind, "card": card}});
        if let Some(s) = expires_in_sec {
            extra["expiresInSec"] = s.into();
        }
        self.runner_write(task, "park", runner_id, epoch, extra)
    }

    /// Submits a run as `owner` into a fresh session, leases it and parks it on `kind`.
    fn parked_with(
        &self,
        owner: &Client,
        kind: &str,
        card: Value,
        expires_in_sec: Option<u64>,
    ) -> Gated {
        let session = unique("gate");
        let task = self.submit(owner, &session, "manual").admitted();
        let unheld = self.run(&task)["heldBy"].clone();
        let runner = unique("gate-runner");
        let epoch = self.lease_of(&task, &runner)["leaseEpoch"]
            .as_i64()
            .unwrap();
        let r = self.park(&task, &runner, epoch, kind, &card, expires_in_sec);
        assert_eq!(
            r.status, 200,
            "setup: the park of a {kind} gate: {}",
            r.body
        );
        Gated {
            task,
            session,
            runner,
            epoch,
            kind: kind.to_owned(),
            card,
            unheld,
        }
    }

    fn parked(&self, kind: &str) -> Gated {
        self.parked_with(
            &self.anon(),
            kind,
            json!({"text": format!("a {kind} card"), "step": 0}),
            None,
        )
    }

    /// A decision at `path` for the gate of `session` / `task`.
    fn decide(&self, c: &Client, path: Path, session: &str, task: &str, body: &Value) -> Resp {
        post(c, &path.url(session, task), body)
    }

    /// The decision that lets `g`'s run go on, as its owner `c`.
    fn go_on(&self, c: &Client, g: &Gated) -> Resp {
        self.decide(c, g.path(), &g.session, &g.task, &g.path().go_on_body())
    }

    fn approvals(&self, c: &Client, query: &str) -> Value {
        let r = get(c, &format!("/v1/approvals{query}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    fn cancel(&self, c: &Client, task: &str) -> Resp {
        rec(c.cancel(task))
    }
}

/// The concatenated `text_delta`s of a ledger.
fn ledger_text(book: &[Value]) -> String {
    book.iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["data"]["delta"].as_str())
        .collect()
}

fn types(book: &[Value]) -> Vec<String> {
    book.iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn frame_kinds(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(Frame::kind).collect()
}

/// The object's keys, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

/// `POST /v1/tasks` (stream form unless `extra` says otherwise), read whole.
fn post_task(c: &Client, session: &str, extra: Value) -> Resp {
    let mut body = json!({"sessionId": session, "objective": "second"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    post(c, "/v1/tasks", &body)
}

// ---- park ----------------------------------------------------------------------------------------

#[test]
fn a_park_answers_its_park_word_and_seq_ends_the_lease_and_records_the_gate_in_the_ledger() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    for kind in KINDS {
        let session = unique("park");
        let task = site.submit(&c, &session, "manual").admitted();
        let unheld = site.run(&task)["heldBy"].clone();
        let runner = unique("parker");
        let lease = site.lease_of(&task, &runner);
        assert!(
            lease.get("resume").is_none_or(Value::is_null),
            "a run that never parked carries no resume: {lease}"
        );
        let epoch = lease["leaseEpoch"].as_i64().unwrap();
        assert_eq!(site.say(&task, &runner, epoch, "thinking").status, 200);
        let card = json!({"text": "may I?", "step": 0, "nested": {"list": [1, "two", null]}});
        let r = site.park(&task, &runner, epoch, kind, &card, None);
        assert_eq!(r.status, 200, "{kind}: {}", r.body);
        assert_eq!(
            r.json(),
            json!({"taskId": task, "status": park_word(kind), "seq": 2}),
            "{kind}"
        );
        let v = site.run(&task);
        assert_eq!(v["status"], park_word(kind), "{kind}: {v}");
        // The park ended the lease: the read face names no runner, as before the first lease.
        assert_eq!(v["heldBy"], unheld, "{kind}: {v}");
        assert_ne!(v["heldBy"], runner.as_str(), "{kind}: {v}");
        let book = site.ledger(&task);
        assert_eq!(types(&book), ["text_delta", park_word(kind)], "{kind}");
        assert_eq!(book[1]["seq"], 2);
        // This Worker has no APPROVAL_TIMEOUT_SEC and the park asked for no deadline: no expiresAt.
        assert_eq!(
            book[1]["data"],
            json!({"gate": {"kind": kind, "card": card}}),
            "{kind}"
        );
        // The lease ended: the parking runner's writes are fenced out, a second park included.
        for (verb, extra) in [
            ("heartbeat", json!({})),
            (
                "events",
                json!({"events": [{"type": "text_delta", "data": {"delta": "late"}}]}),
            ),
            ("finish", json!({"status": "completed"})),
            ("park", json!({"gate": {"kind": kind, "card": {}}})),
        ] {
            site.runner_write(&task, verb, &runner, epoch, extra)
                .assert_refusal(409, "lease_lost");
        }
        assert_eq!(site.ledger(&task).len(), 2, "{kind}: a fenced write wrote");
        // Nobody leases a parked run.
        assert_eq!(site.lease_once(&unique("idle"), 300), None, "{kind}");
        let c2 = site.cancel(&c, &task);
        assert_eq!(c2.json()["status"], "cancelled", "{}", c2.body);
    }
}

#[test]
fn a_park_with_a_deadline_records_when_it_expires() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let before = now_ms();
    let g = site.parked_with(&site.anon(), "human", json!({"q": "ok?"}), Some(600));
    let after = now_ms();
    let book = site.ledger(&g.task);
    let at = book[0]["data"]["expiresAt"]
        .as_i64()
        .unwrap_or_else(|| panic!("no expiresAt: {}", book[0]));
    assert!(
        (before + 600_000..=after + 600_000).contains(&at),
        "expiresAt {at} is not 600 s after the park ({before}..{after})"
    );
    assert_eq!(
        book[0]["data"],
        json!({"gate": {"kind": "human", "card": {"q": "ok?"}}, "expiresAt": at})
    );
    let listed = site.approvals(&site.anon(), &format!("?sessionId={}", g.session));
    assert_eq!(listed["approvals"][0]["expiresAt"], at);
    site.cancel(&site.anon(), &g.task);
}

#[test]
fn a_park_by_a_stale_epoch_or_another_runner_is_lease_lost_and_changes_nothing() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let task = site
        .submit(&site.anon(), &unique("fence"), "manual")
        .admitted();
    let runner = unique("holder");
    let epoch = site.lease_of(&task, &runner)["leaseEpoch"]
        .as_i64()
        .unwrap();
    for (who, e) in [
        (runner.as_str(), epoch - 1),
        (runner.as_str(), epoch + 1),
        ("intruder", epoch),
        ("intruder", 0),
    ] {
        site.park(&task, who, e, "human", &json!({}), None)
            .assert_refusal(409, "lease_lost");
    }
    let v = site.run(&task);
    assert_eq!(
        (v["status"].as_str(), v["heldBy"].as_str()),
        (Some("running"), Some(runner.as_str())),
        "{v}"
    );
    assert!(site.ledger(&task).is_empty());
    assert!(site.approvals(
        &site.anon(),
        &format!("?sessionId={}", v["sessionId"].as_str().unwrap())
    )["approvals"]
        .as_array()
        .unwrap()
        .is_empty());
    // The holder still holds its lease.
    let beat = site.runner_write(&task, "heartbeat", &runner, epoch, json!({}));
    assert_eq!(beat.status, 200, "{}", beat.body);
    assert_eq!(site.finish(&task, &runner, epoch).status, 200);
}

#[test]
fn a_park_with_an_unknown_kind_a_card_that_is_not_an_object_or_a_bad_deadline_is_refused() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let session = unique("badpark");
    let task = site.submit(&site.anon(), &session, "manual").admitted();
    let runner = unique("holder");
    let epoch = site.lease_of(&task, &runner)["leaseEpoch"]
        .as_i64()
        .unwrap();
    let path = format!("/v1/runs/{task}/park");
    let base = json!({"runnerId": runner, "leaseEpoch": epoch});
    let with = |extra: Value| {
        let mut b = base.clone();
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let mut refused = vec![];
    for kind in ["verifier_pause", "", "HUMAN", "human "] {
        refused.push(with(json!({"gate": {"kind": kind, "card": {}}})));
    }
    for card in [
        json!("text"),
        json!([1]),
        Value::Null,
        json!(3),
        json!(true),
    ] {
        refused.push(with(json!({"gate": {"kind": "human", "card": card}})));
    }
    refused.push(with(json!({})));
    refused.push(with(json!({"gate": {"kind": "human"}})));
    refused.push(with(json!({"gate": {"card": {}}})));
    refused.push(with(
        json!({"gate": {"kind": "human", "card": {}, "extra": 1}}),
    ));
    refused.push(with(
        json!({"gate": {"kind": "human", "card": {}}, "extra": 1}),
    ));
    for s in [
        json!(0),
        json!(-1),
        json!(30 * 24 * 3600 + 1),
        json!("60"),
        json!(1.5),
    ] {
        refused.push(with(
            json!({"gate": {"kind": "human", "card": {}}, "expiresInSec": s}),
        ));
    }
    for body in &refused {
        let r = post(&site.runner(), &path, body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(
            matches!(
                r.json()["errorCode"].as_str(),
                Some("invalid_request" | "invalid_json")
            ),
            "{body}: {}",
            r.body
        );
    }
    // A card one byte past 64 KiB of compact JSON is too large; exactly 64 KiB parks.
    let card_of = |bytes: usize| json!({"t": "x".repeat(bytes - 8)});
    assert_eq!(card_of(65_536).to_string().len(), 65_536);
    site.park(&task, &runner, epoch, "human", &card_of(65_537), None)
        .assert_refusal(413, "payload_too_large");
    let v = site.run(&task);
    assert_eq!(
        (v["status"].as_str(), v["heldBy"].as_str()),
        (Some("running"), Some(runner.as_str())),
        "a refused park changed the run: {v}"
    );
    assert!(site.ledger(&task).is_empty());
    let r = site.park(&task, &runner, epoch, "human", &card_of(65_536), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        site.ledger(&task)[0]["data"]["gate"]["card"],
        card_of(65_536)
    );
    site.cancel(&site.anon(), &task);
}

// ---- the parked 409 ------------------------------------------------------------------------------

#[test]
fn every_kind_of_parked_run_answers_every_submit_form_with_its_exact_409_materials() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    for kind in KINDS {
        let g = site.parked(kind);
        let expected = g.conflict_body();
        let r = site.submit(&c, &g.session, "another");
        assert_eq!(r.status, 409, "{kind}: {}", r.body);
        assert_eq!(r.body, expected, "{kind}");
        // The synchronous task form answers the same 409.
        let sync = post_task(&c, &g.session, json!({"stream": false}));
        assert_eq!((sync.status, &sync.body), (409, &expected), "{kind}");
        // The stream form ends with the done frame carrying the same materials (SPEC-core §4.6).
        let stream = post_task(&c, &g.session, json!({}));
        assert_eq!(stream.status, 200, "{kind}: {}", stream.body);
        let conflict: Value = serde_json::from_str(&expected).unwrap();
        let frame = format!(
            "data: {{\"type\":\"done\",\"result\":{{\"status\":\"failed\",\"errorMessage\":{},\"activeTaskId\":\"{}\",\"activeTaskStatus\":\"{}\",\"pendingGate\":{{\"kind\":\"{kind}\",\"decidePath\":\"{}\"}}}}}}\n\n",
            conflict["error"],
            g.task,
            park_word(kind),
            g.decide_path()
        );
        assert_eq!(stream.body, frame, "{kind}");
        // None of the refusals was admitted or stored: the parked run still holds the session alone.
        let listed = get(&c, &format!("/v1/runs?sessionId={}", g.session)).json();
        assert_eq!(
            listed["runs"].as_array().unwrap().len(),
            1,
            "{kind}: {listed}"
        );
        assert_eq!(site.run(&g.task)["status"], park_word(kind));
        let cancelled = site.cancel(&c, &g.task);
        assert_eq!(
            cancelled.json()["status"],
            "cancelled",
            "{}",
            cancelled.body
        );
    }
}

// ---- decisions that let the run go on ------------------------------------------------------------

#[test]
fn approving_resumes_the_run_and_its_next_lease_carries_the_decision_until_it_parks_again() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let card = json!({"text": "rm -rf build?", "step": 0});
    let g = site.parked_with(&c, "tool_approval", card.clone(), None);
    let r = site.decide(
        &c,
        Path::Approvals,
        &g.session,
        &g.task,
        &json!({"decision": "approve", "reason": "it is only the build dir"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"taskId": g.task, "sessionId": g.session, "gate": "tool_approval", "decision": "approve", "status": "running"})
    );
    // Running again and queued: no runner holds it.
    let v = site.run(&g.task);
    assert_eq!(
        (v["status"].as_str(), &v["heldBy"]),
        (Some("running"), &g.unheld),
        "{v}"
    );
    let book = site.ledger(&g.task);
    assert_eq!(types(&book), ["suspended", "resumed"]);
    assert_eq!(
        book[1]["data"],
        json!({"gate": {"kind": "tool_approval"}, "decision": "approve", "reason": "it is only the build dir"})
    );
    // The run is running again: the session's 409 is now the running one, and the gate is settled.
    assert_eq!(
        site.submit(&c, &g.session, "another").body,
        running_conflict_body(&g.task)
    );
    assert!(
        site.approvals(&c, &format!("?sessionId={}", g.session))["approvals"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    site.decide(
        &c,
        Path::Approvals,
        &g.session,
        &g.task,
        &json!({"decision": "deny"}),
    )
    .assert_refusal(409, "not_resumable");
    // The next lease carries the decision, under a new epoch; the parking lease stays lost.
    let l = site.lease_of(&g.task, &g.runner);
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    assert!(epoch > g.epoch, "epoch {epoch} after {}", g.epoch);
    assert_eq!(
        l["resume"],
        json!({"gate": {"kind": "tool_approval", "card": card}, "decision": "approve", "reason": "it is only the build dir"})
    );
    site.runner_write(&g.task, "heartbeat", &g.runner, g.epoch, json!({}))
        .assert_refusal(409, "lease_lost");
    // Parked again (another kind), and decided again: the lease carries the newer decision only.
    let card2 = json!({"text": "and push?", "step": 1});
    let again = site.park(&g.task, &g.runner, epoch, "human", &card2, None);
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["status"], "suspended");
    assert_eq!(
        site.submit(&c, &g.session, "another").body,
        parked_conflict_body(
            &g.task,
            "suspended",
            "human",
            &format!("/v1/approvals/{}/decide", g.session)
        )
    );
    let r = site.decide(
        &c,
        Path::Approvals,
        &g.session,
        &g.task,
        &json!({"decision": "approve"}),
    );
    assert_eq!(r.json()["gate"], "human", "{}", r.body);
    let l2 = site.lease_of(&g.task, &g.runner);
    assert_eq!(
        l2["resume"],
        json!({"gate": {"kind": "human", "card": card2}, "decision": "approve"})
    );
    let epoch2 = l2["leaseEpoch"].as_i64().unwrap();
    assert!(epoch2 > epoch);
    assert_eq!(
        types(&site.ledger(&g.task)),
        ["suspended", "resumed", "suspended", "resumed"]
    );
    assert_eq!(site.finish(&g.task, &g.runner, epoch2).status, 200);
    // A settled gate of a finished run is nothing pending.
    site.decide(
        &c,
        Path::Approvals,
        &g.session,
        &g.task,
        &json!({"decision": "approve"}),
    )
    .assert_refusal(404, "not_found");
}

#[test]
fn a_plan_review_revise_resumes_with_the_feedback_and_a_re_park_is_reviewed_again() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let card = json!({"text": "plan: 1. build 2. test", "step": 0});
    let g = site.parked_with(&c, "plan_review", card.clone(), None);
    assert_eq!(site.run(&g.task)["status"], "needs_review");
    let r = site.decide(
        &c,
        Path::PlanReview,
        &g.session,
        &g.task,
        &json!({"decision": "revise", "feedback": "split step 2 in two"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"taskId": g.task, "sessionId": g.session, "gate": "plan_review", "decision": "revise", "status": "running"})
    );
    let resumed = &site.ledger(&g.task)[1];
    assert_eq!(resumed["type"], "resumed");
    assert_eq!(
        (&resumed["data"]["gate"], &resumed["data"]["decision"]),
        (&json!({"kind": "plan_review"}), &json!("revise"))
    );
    let l = site.lease_of(&g.task, &g.runner);
    assert_eq!(
        l["resume"],
        json!({"gate": {"kind": "plan_review", "card": card}, "decision": "revise", "feedback": "split step 2 in two"})
    );
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    let card2 = json!({"text": "plan: 1. build 2a. unit 2b. e2e", "step": 0});
    let again = site.park(&g.task, &g.runner, epoch, "plan_review", &card2, None);
    assert_eq!(again.json()["status"], "needs_review", "{}", again.body);
    let r = site.decide(
        &c,
        Path::PlanReview,
        &g.session,
        &g.task,
        &json!({"decision": "approve"}),
    );
    assert_eq!(r.json()["decision"], "approve", "{}", r.body);
    let l2 = site.lease_of(&g.task, &g.runner);
    assert_eq!(
        l2["resume"],
        json!({"gate": {"kind": "plan_review", "card": card2}, "decision": "approve"})
    );
    assert_eq!(
        site.finish(&g.task, &g.runner, l2["leaseEpoch"].as_i64().unwrap())
            .status,
        200
    );
}

#[test]
fn continuing_past_a_resource_limit_resumes_the_run_and_stopping_ends_it_cancelled() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let go = site.parked("resource_limit");
    let r = site.decide(
        &c,
        Path::Resume,
        &go.session,
        &go.task,
        &json!({"decision": "continue", "reason": "one more hour"}),
    );
    assert_eq!(
        r.json(),
        json!({"taskId": go.task, "sessionId": go.session, "gate": "resource_limit", "decision": "continue", "status": "running"}),
        "{}",
        r.body
    );
    let l = site.lease_of(&go.task, &go.runner);
    assert_eq!(
        l["resume"],
        json!({"gate": {"kind": "resource_limit", "card": go.card}, "decision": "continue", "reason": "one more hour"})
    );
    assert_eq!(
        site.finish(&go.task, &go.runner, l["leaseEpoch"].as_i64().unwrap())
            .status,
        200
    );

    let stop = site.parked("resource_limit");
    let stream = site.stream(&stop.task);
    let r = site.decide(
        &c,
        Path::Resume,
        &stop.session,
        &stop.task,
        &json!({"decision": "stop", "reason": "too costly"}),
    );
    assert_eq!(
        r.json(),
        json!({"taskId": stop.task, "sessionId": stop.session, "gate": "resource_limit", "decision": "stop", "status": "cancelled"}),
        "{}",
        r.body
    );
    let v = site.run(&stop.task);
    assert_eq!(
        (
            v["status"].as_str(),
            v["errorCode"].as_str(),
            v["heldBy"].is_null()
        ),
        (Some("cancelled"), Some("resource_limit.stopped"), true),
        "{v}"
    );
    assert_eq!(
        v["result"],
        json!({"gate": "resource_limit", "decision": "stop", "reason": "too costly"})
    );
    let book = site.ledger(&stop.task);
    assert_eq!(types(&book), ["suspended", "done"]);
    assert_eq!(book[1]["data"]["errorCode"], "resource_limit.stopped");
    let frames = stream.join().unwrap();
    assert_eq!(frame_kinds(&frames), ["suspended", "done"]);
    assert_eq!(frames[1].data["result"]["status"], "cancelled");
    // The decision stands: a repeat is refused, and no runner ever leases the stopped run.
    site.decide(
        &c,
        Path::Resume,
        &stop.session,
        &stop.task,
        &json!({"decision": "continue"}),
    )
    .assert_refusal(409, "not_resumable");
    assert_eq!(site.lease_once(&unique("idle"), 300), None);
    // The session is free.
    let next = site.submit(&c, &stop.session, "manual").admitted();
    site.cancel(&c, &next);
}

#[test]
fn denying_an_approval_ends_the_run_cancelled_with_approval_denied_and_frees_the_session() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    for kind in ["tool_approval", "human", "irreversible_ask", "policy_ask"] {
        let g = site.parked(kind);
        let r = site.decide(
            &c,
            Path::Approvals,
            &g.session,
            &g.task,
            &json!({"decision": "deny", "reason": "not on a Friday"}),
        );
        assert_eq!(
            r.json(),
            json!({"taskId": g.task, "sessionId": g.session, "gate": kind, "decision": "deny", "status": "cancelled"}),
            "{}",
            r.body
        );
        let v = site.run(&g.task);
        assert_eq!(
            (v["status"].as_str(), v["errorCode"].as_str()),
            (Some("cancelled"), Some("approval.denied")),
            "{kind}: {v}"
        );
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        assert_eq!(
            v["result"],
            json!({"gate": kind, "decision": "deny", "reason": "not on a Friday"})
        );
        let (frames, _) = read_sse_at(
            &site.base,
            &format!("/v1/runs/{}/events", g.task),
            None,
            usize::MAX,
        );
        let frames = rec_frames(frames);
        assert_eq!(frame_kinds(&frames), ["suspended", "done"], "{kind}");
        assert_eq!(frames[1].data["result"]["errorCode"], "approval.denied");
        site.decide(
            &c,
            Path::Approvals,
            &g.session,
            &g.task,
            &json!({"decision": "approve"}),
        )
        .assert_refusal(409, "not_resumable");
        let next = site.submit(&c, &g.session, "manual").admitted();
        site.cancel(&c, &next);
    }
}

#[test]
fn ending_a_parked_run_nobody_watches_reads_no_ledger_and_a_stream_opened_after_still_ends_with_done(
) {
    let site = Site::runs();
    let c = site.anon();
    let deny = json!({"decision": "deny"});
    // Parks a run (its ledger then holds the park's `suspended` event, from which the `done` a
    // watcher is sent would be read), ends it with `end`, a stream open meanwhile or opened only
    // after: the D1 round trips of the ending, and the stream's frames (its `done` checked too).
    let ended = |watched: bool, end: &dyn Fn(&Gated) -> Resp, done: (&str, &str)| {
        let g = site.parked("tool_approval");
        let stream = || {
            let (base, task) = (site.base.clone(), g.task.clone());
            std::thread::spawn(move || {
                read_sse_at(&base, &format!("/v1/runs/{task}/events"), None, usize::MAX).0
            })
        };
        let watcher = watched.then(|| {
            let w = stream();
            let stats = format!("/v1/admin/sessions/{}", g.session);
            let deadline = Instant::now() + Duration::from_secs(15);
            while get(&site.reader(), &stats).json()["streams"] != 1 {
                assert!(Instant::now() < deadline, "the stream never subscribed");
                std::thread::sleep(Duration::from_millis(50));
            }
            w
        });
        let r = end(&g);
        assert_eq!(r.json()["status"], "cancelled", "{}", r.body);
        let frames = watcher.unwrap_or_else(stream).join().unwrap();
        assert_eq!(frame_kinds(&frames), ["suspended", "done"]);
        assert_eq!(frames[1].data["result"][done.0], done.1, "{:?}", frames[1]);
        r.round_trips()
    };
    let cancel = |g: &Gated| site.cancel(&c, &g.task);
    let denial = |g: &Gated| site.decide(&c, Path::Approvals, &g.session, &g.task, &deny);
    let (cancelled, denied) = (("status", "cancelled"), ("errorCode", "approval.denied"));
    // Watched, the ending costs the reads an unwatched one spares: the run's last event (the
    // cancel has the run's row from its own batch), or its row and its last event.
    assert_eq!(
        ended(true, &cancel, cancelled),
        ended(false, &cancel, cancelled) + 1
    );
    assert_eq!(
        ended(true, &denial, denied),
        ended(false, &denial, denied) + 2
    );
}

#[test]
fn waking_a_finished_task_completes_it_with_its_card_and_admits_a_new_run_in_the_session() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let card = json!({"text": "all done", "summary": {"files": 3}});
    let g = site.parked_with(&c, "task_done", card.clone(), None);
    let r = site.decide(
        &c,
        Path::Wake,
        &g.session,
        &g.task,
        &json!({"objective": "manual follow-up"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let woke = r.json();
    assert_eq!(keys(&woke), ["sessionId", "status", "taskId"], "{woke}");
    let new = woke["taskId"].as_str().unwrap().to_owned();
    assert_ne!(new, g.task);
    assert_eq!(
        (woke["sessionId"].as_str(), woke["status"].as_str()),
        (Some(g.session.as_str()), Some("running"))
    );
    let old = site.run(&g.task);
    assert_eq!(
        (
            old["status"].as_str(),
            &old["result"],
            old["heldBy"].is_null()
        ),
        (Some("completed"), &card, true),
        "{old}"
    );
    let book = site.ledger(&g.task);
    assert_eq!(types(&book), ["suspended", "done"]);
    assert_eq!(book[1]["data"]["status"], "completed");
    let fresh = site.run(&new);
    assert_eq!(
        (
            fresh["status"].as_str(),
            fresh["sessionId"].as_str(),
            fresh["objectivePreview"].as_str()
        ),
        (
            Some("running"),
            Some(g.session.as_str()),
            Some("manual follow-up")
        ),
        "{fresh}"
    );
    // The new run holds the session; a second wake finds the gate already decided.
    assert_eq!(
        site.submit(&c, &g.session, "another").body,
        running_conflict_body(&new)
    );
    site.decide(
        &c,
        Path::Wake,
        &g.session,
        &g.task,
        &json!({"objective": "again"}),
    )
    .assert_refusal(409, "not_resumable");
    // The new run is a fresh one: its lease carries no resume.
    let l = site.lease_of(&new, "waker");
    assert!(l.get("resume").is_none_or(Value::is_null), "{l}");
    assert_eq!(
        site.finish(&new, "waker", l["leaseEpoch"].as_i64().unwrap())
            .status,
        200
    );
}

#[test]
fn a_wake_without_an_objective_or_with_unknown_fields_is_refused_and_changes_nothing() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let g = site.parked("task_done");
    for body in [
        json!({}),
        json!({"objective": ""}),
        json!({"objective": 3}),
        json!({"objective": "x", "decision": "approve"}),
        json!({"objective": "x", "sessionId": "elsewhere"}),
        json!("x"),
    ] {
        let r = site.decide(&c, Path::Wake, &g.session, &g.task, &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
    }
    assert_eq!(site.run(&g.task)["status"], "suspended");
    assert_eq!(site.submit(&c, &g.session, "x").body, g.conflict_body());
    site.cancel(&c, &g.task);
}

// ---- refused decisions ---------------------------------------------------------------------------

#[test]
fn a_decision_with_nothing_pending_is_404_at_every_path() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let session = unique("nothing");
    let task = site.submit(&c, &session, "manual").admitted();
    let (no_session, no_task) = (unique("no-session"), unique("no-task"));
    for path in PATHS {
        for (s, t) in [
            (session.as_str(), task.as_str()),
            (no_session.as_str(), no_task.as_str()),
        ] {
            site.decide(&c, path, s, t, &path.go_on_body())
                .assert_refusal(404, "not_found");
        }
    }
    assert_eq!(site.run(&task)["status"], "running");
    assert!(site.ledger(&task).is_empty());
    site.cancel(&c, &task);
}

#[test]
fn a_decision_at_another_kinds_path_is_409_naming_the_path_that_resolves_the_gate() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    for kind in KINDS {
        let g = site.parked(kind);
        let right = g.decide_path();
        for path in PATHS.into_iter().filter(|p| *p != g.path()) {
            let r = site.decide(&c, path, &g.session, &g.task, &path.go_on_body());
            let v = r.assert_refusal(409, path.wrong_kind_code());
            assert_eq!(
                v["error"],
                format!(
                    "the pending gate is a {kind} gate, not {} \u{2014} resolve it via POST {right}",
                    path.resolves()
                ),
                "{kind} at {path:?}"
            );
            assert_eq!(
                v["pendingGate"],
                json!({"kind": kind, "decidePath": right}),
                "{kind} at {path:?}"
            );
        }
        assert_eq!(site.run(&g.task)["status"], park_word(kind), "{kind}");
        assert_eq!(site.ledger(&g.task).len(), 1, "{kind}");
        assert_eq!(site.submit(&c, &g.session, "x").body, g.conflict_body());
        site.cancel(&c, &g.task);
    }
}

#[test]
fn a_decision_outside_its_paths_vocabulary_is_400_and_changes_nothing() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let long = "x".repeat(16 * 1024 + 1);
    let cases = [
        (
            "human",
            vec![
                json!({}),
                json!({"decision": "continue"}),
                json!({"decision": "revise"}),
                json!({"decision": "stop"}),
                json!({"decision": "wake"}),
                json!({"decision": "APPROVE"}),
                json!({"decision": "approve", "feedback": "plan reviews only"}),
                json!({"decision": "approve", "reason": long}),
                json!({"decision": "approve", "extra": 1}),
                json!({"decision": true}),
            ],
        ),
        (
            "plan_review",
            vec![
                json!({"decision": "deny"}),
                json!({"decision": "continue"}),
                json!({"decision": "approve", "reason": "say feedback"}),
                json!({"decision": "revise", "feedback": long}),
            ],
        ),
        (
            "resource_limit",
            vec![
                json!({"decision": "approve"}),
                json!({"decision": "deny"}),
                json!({"decision": "continue", "feedback": "say reason"}),
            ],
        ),
    ];
    for (kind, bodies) in cases {
        let g = site.parked(kind);
        for body in bodies {
            let r = site.decide(&c, g.path(), &g.session, &g.task, &body);
            r.assert_refusal(400, "invalid_request");
        }
        let raw = rec(c.send(
            "POST",
            &g.decide_path(),
            Some(b"{"),
            &[("Content-Type", "application/json")],
        ));
        assert_eq!(raw.status, 400, "{}", raw.body);
        assert_eq!(site.run(&g.task)["status"], park_word(kind));
        assert_eq!(
            site.ledger(&g.task).len(),
            1,
            "{kind}: a refused decision wrote"
        );
        // Still decidable.
        let ok = site.go_on(&c, &g);
        assert_eq!(ok.status, 200, "{}", ok.body);
        site.cancel(&c, &g.task);
    }
}

#[test]
fn only_the_runs_owner_decides_another_client_gets_404_and_an_operator_403() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let alice = site.user(&unique("alice"));
    let bob = site.user(&unique("bob"));
    let ops = site.user(&unique("ops")).with_role("operator");
    let anon = site.anon();
    for kind in ["human", "plan_review", "resource_limit", "task_done"] {
        let g = site.parked_with(&alice, kind, json!({"text": "mine"}), None);
        let path = g.path();
        let body = path.go_on_body();
        let missing = site.decide(&bob, path, &unique("no-session"), &unique("no-task"), &body);
        missing.assert_refusal(404, "not_found");
        for stranger in [&bob, &anon] {
            let r = site.decide(stranger, path, &g.session, &g.task, &body);
            r.assert_refusal(404, "not_found");
            assert_eq!(
                r.body, missing.body,
                "{kind}: a stranger learns the gate exists"
            );
        }
        site.decide(&ops, path, &g.session, &g.task, &body)
            .assert_refusal(403, "forbidden");
        // Nobody but the owner changed anything; the listings follow ownership too.
        assert_eq!(site.run(&g.task)["status"], park_word(kind));
        let q = format!("?sessionId={}", g.session);
        assert_eq!(
            site.approvals(&alice, &q)["approvals"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(site.approvals(&bob, &q)["approvals"], json!([]));
        assert_eq!(site.approvals(&anon, &q)["approvals"], json!([]));
        assert_eq!(
            site.approvals(&ops, &q)["approvals"][0]["taskId"],
            g.task.as_str()
        );
        let r = site.go_on(&alice, &g);
        assert!(matches!(r.status, 200 | 202), "{kind}: {}", r.body);
        let next = if kind == "task_done" {
            r.task_id()
        } else {
            g.task.clone()
        };
        assert_eq!(site.cancel(&alice, &next).json()["status"], "cancelled");
    }
}

#[test]
fn the_approvals_listing_shows_the_callers_pending_gates_oldest_first_in_pages() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let alice = site.user(&unique("lister"));
    let before = now_ms();
    let gates: Vec<Gated> = ["human", "plan_review", "task_done"]
        .iter()
        .map(|k| {
            std::thread::sleep(Duration::from_millis(5));
            site.parked_with(&alice, k, json!({"text": format!("{k} card")}), None)
        })
        .collect();
    let after = now_ms();
    let one = site.approvals(&alice, &format!("?sessionId={}", gates[0].session));
    assert_eq!(keys(&one), ["approvals", "nextCursor"]);
    assert_eq!(one["nextCursor"], Value::Null);
    let a = &one["approvals"][0];
    assert_eq!(one["approvals"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(
        keys(a),
        [
            "card",
            "createdAt",
            "decidePath",
            "expiresAt",
            "kind",
            "sessionId",
            "taskId"
        ]
    );
    let created = a["createdAt"].as_i64().unwrap();
    assert!((before..=after).contains(&created), "createdAt {created}");
    assert_eq!(
        a,
        &json!({
            "sessionId": gates[0].session,
            "taskId": gates[0].task,
            "kind": "human",
            "card": {"text": "human card"},
            "decidePath": format!("/v1/approvals/{}/decide", gates[0].session),
            "expiresAt": null,
            "createdAt": created,
        })
    );
    // All of the caller's pending gates, oldest first, with each kind's decide path.
    let all = site.approvals(&alice, "");
    let listed: Vec<(&str, &str, &str)> = all["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["taskId"].as_str().unwrap(),
                a["kind"].as_str().unwrap(),
                a["decidePath"].as_str().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = gates
        .iter()
        .map(|g| (g.task.clone(), g.kind.clone(), g.decide_path()))
        .collect();
    let want: Vec<(&str, &str, &str)> = want
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    assert_eq!(listed, want);
    // Pages of two, without overlap or gaps.
    let first = site.approvals(&alice, "?limit=2");
    assert_eq!(first["approvals"].as_array().unwrap().len(), 2);
    let cursor = first["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("no cursor: {first}"))
        .to_owned();
    let second = site.approvals(&alice, &format!("?limit=2&cursor={cursor}"));
    assert_eq!(second["nextCursor"], Value::Null, "{second}");
    let paged: Vec<&str> = first["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["approvals"].as_array().unwrap())
        .map(|a| a["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(paged, want.iter().map(|w| w.0).collect::<Vec<_>>());
    for q in [
        "?limit=0",
        "?limit=x",
        "?cursor=garbage",
        "?sessionId=a%20b",
        "?bogus=1",
    ] {
        get(&alice, &format!("/v1/approvals{q}")).assert_refusal(400, "invalid_request");
    }
    // A decided gate and a cancelled run's gate leave the listing.
    assert_eq!(site.go_on(&alice, &gates[0]).status, 200);
    site.cancel(&alice, &gates[1].task);
    let rest = site.approvals(&alice, "");
    assert_eq!(rest["approvals"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(rest["approvals"][0]["taskId"], gates[2].task.as_str());
    site.cancel(&alice, &gates[0].task);
    site.cancel(&alice, &gates[2].task);
    assert_eq!(site.approvals(&alice, "")["approvals"], json!([]));
}

// ---- streams, cancel, races ----------------------------------------------------------------------

#[test]
fn an_open_stream_on_a_parked_run_stays_open_through_the_park_and_the_decision_until_done() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    let session = unique("watched");
    let task = site.submit(&c, &session, "manual").admitted();
    let runner = unique("watched-runner");
    let epoch = site.lease_of(&task, &runner)["leaseEpoch"]
        .as_i64()
        .unwrap();
    let early = site.stream(&task);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(site.say(&task, &runner, epoch, "before").status, 200);
    let card = json!({"text": "go on?", "step": 1});
    assert_eq!(
        site.park(&task, &runner, epoch, "human", &card, None)
            .status,
        200
    );
    // A stream opened on the parked run replays the park and stays open too.
    let late = site.stream(&task);
    std::thread::sleep(Duration::from_millis(800));
    assert!(!early.is_finished(), "the stream ended at the park");
    assert!(!late.is_finished(), "a stream of a parked run ended");
    let r = site.decide(
        &c,
        Path::Approvals,
        &session,
        &task,
        &json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let epoch2 = site.lease_of(&task, &runner)["leaseEpoch"]
        .as_i64()
        .unwrap();
    assert_eq!(site.say(&task, &runner, epoch2, "after").status, 200);
    assert_eq!(site.finish(&task, &runner, epoch2).status, 200);
    for (name, h) in [("early", early), ("late", late)] {
        let frames = h.join().unwrap();
        assert_eq!(
            frame_kinds(&frames),
            ["text_delta", "suspended", "resumed", "text_delta", "done"],
            "{name}: {frames:?}"
        );
        assert_eq!(
            frames.iter().map(|f| f.id).collect::<Vec<_>>(),
            (1..=5).map(Some).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            frames[1].data["gate"],
            json!({"kind": "human", "card": card})
        );
        assert_eq!(frames[2].data["decision"], "approve");
        assert_eq!(frames[4].data["result"]["status"], "completed");
    }
}

#[test]
fn cancelling_a_parked_run_ends_it_cancelled_frees_the_session_and_voids_its_gate() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let c = site.anon();
    for kind in ["human", "plan_review", "resource_limit", "task_done"] {
        let g = site.parked(kind);
        let stream = site.stream(&g.task);
        std::thread::sleep(Duration::from_millis(300));
        let r = site.cancel(&c, &g.task);
        assert_eq!(
            r.status, 200,
            "{kind}: a parked run has no runner to wait for: {}",
            r.body
        );
        assert_eq!(r.json()["status"], "cancelled");
        let v = site.run(&g.task);
        assert_eq!(
            (
                v["status"].as_str(),
                v["error"].as_str(),
                v["heldBy"].is_null()
            ),
            (Some("cancelled"), Some("cancelled by user"), true),
            "{kind}: {v}"
        );
        let frames = stream.join().unwrap();
        assert_eq!(frame_kinds(&frames), [park_word(kind), "done"], "{kind}");
        assert_eq!(frames[1].data["result"]["status"], "cancelled");
        site.go_on(&c, &g).assert_refusal(404, "not_found");
        assert_eq!(
            site.approvals(&c, &format!("?sessionId={}", g.session))["approvals"],
            json!([])
        );
        assert_eq!(site.lease_once(&unique("idle"), 300), None, "{kind}");
        let next = site.submit(&c, &g.session, "manual").admitted();
        site.cancel(&c, &next);
    }
}

#[test]
fn two_concurrent_decisions_on_one_gate_get_exactly_one_200_and_one_not_resumable() {
    let _secrecy = Secrecy;
    let site = Site::runs();
    let rounds = [
        ("tool_approval", "approve", "deny"),
        ("human", "deny", "approve"),
        ("plan_review", "approve", "revise"),
        ("plan_review", "revise", "approve"),
        ("resource_limit", "continue", "stop"),
        ("resource_limit", "stop", "continue"),
        ("irreversible_ask", "approve", "approve"),
        ("policy_ask", "deny", "deny"),
    ];
    for (round, (kind, a, b)) in rounds.into_iter().enumerate() {
        let g = site.parked(kind);
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = [a, b]
            .into_iter()
            .map(|d| {
                let (site, g, barrier) = (site.clone(), g.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let r = site.decide(
                        &site.anon(),
                        g.path(),
                        &g.session,
                        &g.task,
                        &json!({"decision": d}),
                    );
                    (d, r)
                })
            })
            .collect();
        let results: Vec<(&str, Resp)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let won: Vec<_> = results.iter().filter(|(_, r)| r.status == 200).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: {:?}",
            results
                .iter()
                .map(|(d, r)| (d, r.status, &r.body))
                .collect::<Vec<_>>()
        );
        for (_, r) in results.iter().filter(|(_, r)| r.status != 200) {
            r.assert_refusal(409, "not_resumable");
        }
        let winner = won[0].0;
        let book = site.ledger(&g.task);
        let v = site.run(&g.task);
        if matches!(winner, "deny" | "stop") {
            assert_eq!(types(&book), [park_word(kind), "done"], "round {round}");
            assert_eq!(v["status"], "cancelled", "round {round}");
        } else {
            assert_eq!(types(&book), [park_word(kind), "resumed"], "round {round}");
            assert_eq!(book[1]["data"]["decision"], winner, "round {round}");
            assert_eq!(v["status"], "running", "round {round}");
            site.cancel(&site.anon(), &g.task);
        }
    }
    // Two wakes: one new run.
    let g = site.parked("task_done");
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let (site, g, barrier) = (site.clone(), g.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                site.decide(
                    &site.anon(),
                    Path::Wake,
                    &g.session,
                    &g.task,
                    &json!({"objective": format!("manual {i}")}),
                )
            })
        })
        .collect();
    let results: Vec<Resp> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let won: Vec<_> = results.iter().filter(|r| r.status == 202).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    for r in results.iter().filter(|r| r.status != 202) {
        r.assert_refusal(409, "not_resumable");
    }
    let listed = get(&site.anon(), &format!("/v1/runs?sessionId={}", g.session)).json();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 2, "{listed}");
    site.cancel(&site.anon(), &won[0].task_id());
}

// ---- the reference runner ------------------------------------------------------------------------

#[test]
fn every_gate_kind_parks_the_reference_runners_run_and_the_decision_resumes_it() {
    let _secrecy = Secrecy;
    let _runner = Runner::start();
    let site = Site::runs();
    let c = site.anon();
    for kind in KINDS {
        let session = unique("ref-gate");
        let task = site
            .submit(
                &c,
                &session,
                &format!("say before\nask {kind} please check\nsay after"),
            )
            .admitted();
        let parked = site.wait_until(&task, "the park", |r| r["status"] == park_word(kind));
        assert!(
            !parked["heldBy"]
                .as_str()
                .is_some_and(|h| h.starts_with("runner-")),
            "the park ended the runner's lease: {parked}"
        );
        let book = site.ledger(&task);
        assert_eq!(types(&book), ["text_delta", park_word(kind)], "{kind}");
        let card = json!({"text": "please check", "step": 1});
        assert_eq!(
            book[1]["data"],
            json!({"gate": {"kind": kind, "card": card}})
        );
        let path = Path::of(kind);
        let decide_path = path.url(&session, &task);
        assert_eq!(
            site.submit(&c, &session, "again").body,
            parked_conflict_body(&task, park_word(kind), kind, &decide_path),
            "{kind}"
        );
        if kind == "task_done" {
            let r = site.decide(
                &c,
                path,
                &session,
                &task,
                &json!({"objective": "say woken up"}),
            );
            assert_eq!(r.status, 202, "{}", r.body);
            let new = r.task_id();
            let old = site.run(&task);
            assert_eq!(
                (old["status"].as_str(), &old["result"]),
                (Some("completed"), &card)
            );
            let done = site.wait_until(&new, "the woken run", |r| r["status"] == "completed");
            assert_eq!(done["result"], json!({"text": "woken up"}));
            continue;
        }
        let r = site.decide(
            &c,
            path,
            &session,
            &task,
            &json!({"decision": path.go_on()}),
        );
        assert_eq!(r.json()["status"], "running", "{}", r.body);
        let done = site.wait_until(&task, "completion", |r| {
            matches!(r["status"].as_str(), Some("completed" | "failed"))
        });
        let said = format!("decision: {}", path.go_on());
        assert_eq!(
            (done["status"].as_str(), &done["result"]),
            (
                Some("completed"),
                &json!({"text": format!("{said}\nafter")})
            ),
            "{kind}: {done}"
        );
        let book = site.ledger(&task);
        assert_eq!(ledger_text(&book), format!("before{said}after"), "{kind}");
        let t = types(&book);
        assert_eq!(
            (t[1].as_str(), t[2].as_str(), t.last().unwrap().as_str()),
            (park_word(kind), "resumed", "done"),
            "{kind}: {t:?}"
        );
    }
}

#[test]
fn a_script_that_asks_twice_parks_twice_and_says_each_decision_back() {
    let _secrecy = Secrecy;
    let _runner = Runner::start();
    let site = Site::runs();
    let c = site.anon();
    let session = unique("twice");
    let task = site
        .submit(
            &c,
            &session,
            "say start\nask human first check\nsay middle\nask plan_review second check\nsay end",
        )
        .admitted();
    site.wait_until(&task, "the first park", |r| r["status"] == "suspended");
    let r = site.decide(
        &c,
        Path::Approvals,
        &session,
        &task,
        &json!({"decision": "approve", "reason": "fine"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    site.wait_until(&task, "the second park", |r| r["status"] == "needs_review");
    let park2 = site
        .ledger(&task)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "needs_review")
        .unwrap();
    assert_eq!(
        park2["data"]["gate"],
        json!({"kind": "plan_review", "card": {"text": "second check", "step": 3}})
    );
    assert_eq!(
        site.submit(&c, &session, "again").body,
        parked_conflict_body(
            &task,
            "needs_review",
            "plan_review",
            &format!("/v1/assistant/tasks/{task}/plan_review")
        )
    );
    let r = site.decide(
        &c,
        Path::PlanReview,
        &session,
        &task,
        &json!({"decision": "revise", "feedback": "shorter"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let done = site.wait_until(&task, "completion", |r| {
        matches!(r["status"].as_str(), Some("completed" | "failed"))
    });
    assert_eq!(
        done["result"],
        json!({"text": "decision: revise (shorter)\nend"}),
        "{done}"
    );
    assert_eq!(
        ledger_text(&site.ledger(&task)),
        "startdecision: approve (fine)middledecision: revise (shorter)end"
    );
}

#[test]
fn a_denied_ask_ends_the_run_and_the_reference_runner_never_does_what_came_after() {
    let _secrecy = Secrecy;
    let _runner = Runner::start();
    let site = Site::runs();
    let c = site.anon();
    let session = unique("denied");
    let task = site
        .submit(&c, &session, "ask tool_approval delete prod?\nsay deleted")
        .admitted();
    site.wait_until(&task, "the park", |r| r["status"] == "suspended");
    let r = site.decide(
        &c,
        Path::Approvals,
        &session,
        &task,
        &json!({"decision": "deny"}),
    );
    assert_eq!(r.json()["status"], "cancelled", "{}", r.body);
    // The session admits a next run, which the runner executes: by then it would have run the rest.
    let next = site.submit(&c, &session, "say next").admitted();
    site.wait_until(&next, "the next run", |r| r["status"] == "completed");
    let v = site.run(&task);
    assert_eq!(
        (v["status"].as_str(), v["errorCode"].as_str()),
        (Some("cancelled"), Some("approval.denied"))
    );
    assert_eq!(types(&site.ledger(&task)), ["suspended", "done"]);
}

// ---- secrecy -------------------------------------------------------------------------------------

#[test]
fn no_response_or_frame_of_a_gate_round_trip_names_a_checkpoint_token_or_id() {
    let site = Site::runs();
    let c = site.anon();
    for kind in KINDS {
        let g = site.parked(kind);
        let q = format!("?sessionId={}", g.session);
        site.approvals(&c, &q);
        site.approvals(&c, "");
        site.run(&g.task);
        get(&c, &q.replace('?', "/v1/runs?"));
        site.ledger(&g.task);
        site.submit(&c, &g.session, "again");
        post_task(&c, &g.session, json!({}));
        post_task(&c, &g.session, json!({"stream": false}));
        for path in PATHS.into_iter().filter(|p| *p != g.path()) {
            site.decide(&c, path, &g.session, &g.task, &path.go_on_body());
        }
        let stream = site.stream(&g.task);
        let r = site.go_on(&c, &g);
        let follow = if kind == "task_done" {
            r.task_id()
        } else {
            g.task.clone()
        };
        let l = site.lease_of(&follow, &g.runner);
        site.go_on(&c, &g);
        site.finish(&follow, &g.runner, l["leaseEpoch"].as_i64().unwrap());
        stream.join().unwrap();
        site.run(&g.task);
        site.ledger(&g.task);
    }
    let seen = assert_nothing_secret_seen(&[]);
    assert!(seen > 100, "the tour read only {seen} bodies and frames");
}

#[test]
fn the_secret_key_check_finds_each_key_and_nothing_else() {
    assert_eq!(secret_keys_in(r#"{"checkpointId":"ab"}"#), ["checkpointId"]);
    assert_eq!(secret_keys_in(r#"{"a":{"token":1}}"#), ["token"]);
    assert_eq!(
        secret_keys_in(r#"[{"checkpoint_id":null}]"#),
        ["checkpoint_id"]
    );
    assert!(secret_keys_in(r#"{"tokens":1,"text":"a token"}"#).is_empty());
}

// ---- expiry, on the heal Worker (APPROVAL_TIMEOUT_SEC=3) -----------------------------------------

/// Polls `check` until it holds (at most `within`).
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < within {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what}: not within {within:?}");
}

/// A listed gate parked between `before` and `after` (this machine's clock, which the Worker shares)
/// was created within those bounds and expires exactly `wait_ms` after its park.
fn assert_deadline(a: &Value, before: i64, after: i64, wait_ms: i64) {
    let created = a["createdAt"].as_i64().unwrap();
    let expires = a["expiresAt"]
        .as_i64()
        .unwrap_or_else(|| panic!("no deadline: {a}"));
    assert!((before..=after).contains(&created), "createdAt: {a}");
    assert_eq!(expires - created, wait_ms, "{a}");
    assert!(
        (before + wait_ms..=after + wait_ms).contains(&expires),
        "expiresAt is not {wait_ms} ms after the park ({before}..{after}): {a}"
    );
}

/// The gate of `g` has expired: a decision is `gate_expired`; the cron fails the run with
/// `approval.expired` and a `done` event; the session admits again.
fn assert_expires(site: &Site, g: &Gated, stream: JoinHandle<Vec<Frame>>) {
    let c = site.anon();
    let body = g.path().go_on_body();
    site.decide(&c, g.path(), &g.session, &g.task, &body)
        .assert_refusal(409, "gate_expired");
    crate::heal::cron();
    eventually(
        Duration::from_secs(10),
        "the cron fails the expired run",
        || {
            crate::heal::cron();
            site.run(&g.task)["status"] == "failed"
        },
    );
    let v = site.run(&g.task);
    assert_eq!(
        (v["errorCode"].as_str(), v["heldBy"].is_null()),
        (Some("approval.expired"), true),
        "{v}"
    );
    let book = site.ledger(&g.task);
    assert_eq!(types(&book), [park_word(&g.kind), "done"], "{book:?}");
    assert_eq!(book[1]["data"]["errorCode"], "approval.expired");
    let frames = stream.join().unwrap();
    assert_eq!(frame_kinds(&frames), [park_word(&g.kind), "done"]);
    assert_eq!(
        (
            frames[1].data["result"]["status"].as_str(),
            frames[1].data["result"]["errorCode"].as_str()
        ),
        (Some("failed"), Some("approval.expired"))
    );
    // Still expired, never decided, out of the listing; the session admits again.
    site.decide(&c, g.path(), &g.session, &g.task, &body)
        .assert_refusal(409, "gate_expired");
    assert_eq!(
        site.approvals(&c, &format!("?sessionId={}", g.session))["approvals"],
        json!([])
    );
    let next = site.submit(&c, &g.session, "heal me").admitted();
    site.cancel(&c, &next);
}

#[test]
fn a_decision_after_the_gates_deadline_is_gate_expired_and_the_cron_fails_the_run() {
    let _secrecy = Secrecy;
    let site = Site::heal();
    let before = now_ms();
    let g = site.parked_with(&site.anon(), "human", json!({"text": "quick"}), Some(1));
    let after = now_ms();
    let listed = site.approvals(&site.anon(), &format!("?sessionId={}", g.session));
    assert_deadline(&listed["approvals"][0], before, after, 1_000);
    let stream = site.stream(&g.task);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_expires(&site, &g, stream);
}

#[test]
fn a_park_without_a_deadline_expires_after_approval_timeout_sec() {
    let _secrecy = Secrecy;
    let site = Site::heal();
    let c = site.anon();
    // No deadline asked, and one past APPROVAL_TIMEOUT_SEC: both wait 3 s.
    let before = now_ms();
    let gates = [
        site.parked_with(&c, "plan_review", json!({"text": "plan"}), None),
        site.parked_with(&c, "resource_limit", json!({"text": "limit"}), Some(600)),
    ];
    let after = now_ms();
    let mut streams = vec![];
    for g in &gates {
        let listed = site.approvals(&c, &format!("?sessionId={}", g.session));
        let a = &listed["approvals"][0];
        assert_deadline(a, before, after, 3_000);
        assert_eq!(site.ledger(&g.task)[0]["data"]["expiresAt"], a["expiresAt"]);
        streams.push(site.stream(&g.task));
    }
    std::thread::sleep(Duration::from_millis(3_500));
    for (g, stream) in gates.iter().zip(streams) {
        assert_expires(&site, g, stream);
    }
}

#[test]
fn the_checkpoint_id_the_store_keeps_appears_in_no_response_or_frame() {
    let site = Site::heal();
    let c = site.anon();
    let g = site.parked("human");
    let stream = site.stream(&g.task);
    site.approvals(&c, &format!("?sessionId={}", g.session));
    site.run(&g.task);
    site.ledger(&g.task);
    site.submit(&c, &g.session, "again");
    post_task(&c, &g.session, json!({}));
    let rows = crate::heal::d1(&format!(
        "SELECT checkpoint_id FROM gate_checkpoint WHERE task_id = '{}'",
        g.task
    ));
    let id = rows[0]["checkpoint_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no checkpoint row: {rows:?}"))
        .to_owned();
    assert_eq!(id.len(), 64, "a sha256 hex digest: {id}");
    // The gate expires (APPROVAL_TIMEOUT_SEC=3) and the cron ends the run: more surfaces to read.
    eventually(Duration::from_secs(15), "the cron fails the run", || {
        crate::heal::cron();
        site.run(&g.task)["status"] == "failed"
    });
    stream.join().unwrap();
    site.go_on(&c, &g);
    site.ledger(&g.task);
    get(&c, &format!("/v1/runs?sessionId={}", g.session));
    let seen = assert_nothing_secret_seen(&[&id, &id.to_uppercase()]);
    assert!(seen > 8, "read only {seen} bodies and frames");
}
