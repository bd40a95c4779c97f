//! The dispatcher's WebSocket, black-box: a runner connects to `GET /v1/runner/connect`, says
//! `{"type":"ready"}`, and the queue's dispatcher writes the lease itself and pushes
//! `{"type":"lease", ...}`. The dispatcher sees a socket close, so a runner that left is never
//! handed a run; socket and long-poll waiters share one line, first come first served.

use super::{task_of, Site, PROMPTLY};
use crate::helpers::unique;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::{client::IntoClientRequest, Message, WebSocket};

/// A runner's socket to the dispatcher of one queue.
struct Sock {
    ws: WebSocket<TcpStream>,
    runner_id: String,
}

impl Site {
    fn connect(&self, runner_id: &str, queue: &str) -> Sock {
        let rest = self
            .base
            .strip_prefix("http://")
            .expect("an http:// server");
        let url = format!("ws://{rest}/v1/runner/connect?queue={queue}&runnerId={runner_id}");
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("x-sema-role", "runner".parse().unwrap());
        let stream = TcpStream::connect(rest.split('/').next().unwrap()).unwrap();
        let (ws, resp) = tungstenite::client::client(req, stream).expect("the upgrade");
        assert_eq!(resp.status(), 101);
        Sock {
            ws,
            runner_id: runner_id.to_owned(),
        }
    }
}

impl Sock {
    fn ready(&mut self) {
        self.ws
            .send(Message::text(json!({"type": "ready"}).to_string()))
            .unwrap();
    }

    /// The next text frame within `within` (None: nothing came).
    fn next_text(&mut self, within: Duration) -> Option<String> {
        self.ws.get_ref().set_read_timeout(Some(within)).unwrap();
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => return Some(t.as_str().to_owned()),
                Ok(Message::Close(_)) => panic!("the dispatcher closed the socket"),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(e) => panic!("socket: {e}"),
            }
        }
    }

    /// The next lease pushed within `within` (None: nothing came).
    fn lease(&mut self, within: Duration) -> Option<Value> {
        let v: Value = serde_json::from_str(&self.next_text(within)?).unwrap();
        assert_eq!(v["type"], "lease", "{v}");
        Some(v)
    }

    /// Sends a keepalive and reads the next text frame (within `PROMPTLY`).
    fn ping(&mut self) -> String {
        self.ws
            .send(Message::text(sema_core::dispatch::PING_FRAME))
            .unwrap();
        self.next_text(PROMPTLY)
            .expect("an answer to the keepalive")
    }

    fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
        // Read until the server's close answers ours.
        self.ws
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        while self.ws.read().is_ok() {}
    }
}

#[test]
fn a_run_admitted_while_a_websocket_runner_is_ready_is_pushed_to_it_and_held_by_it() {
    let site = Site::runs();
    let queue = unique("q-ws");
    site.warm(&queue);
    let mut s = site.connect("ws-ready", &queue);
    s.ready();
    site.await_stat(&queue, "waiters", 1);
    assert_eq!(site.stats(&queue)["sockets"], 1);
    let admitted_at = Instant::now();
    let task = site.submit(Some(&queue));
    let l = s.lease(PROMPTLY).expect("the ready socket got nothing");
    assert!(admitted_at.elapsed() < PROMPTLY);
    assert_eq!(task_of(&l), task);
    assert!(l["leaseEpoch"].as_i64().unwrap() >= 1, "{l}");
    assert_eq!(site.run(&task)["heldBy"], "ws-ready");
    // The lease is the runner's: it beats (acknowledging it) and finishes.
    let epoch = l["leaseEpoch"].as_i64().unwrap();
    assert_eq!(site.beat(&task, &s.runner_id, epoch).status, 200);
    site.finish_lease(&l, "ws-ready");
    // One lease per ready: nothing more comes until the runner asks again.
    let next = site.submit(Some(&queue));
    assert!(s.lease(Duration::from_millis(500)).is_none());
    s.ready();
    let l = s.lease(PROMPTLY).expect("the second ready got nothing");
    assert_eq!(task_of(&l), next);
    site.finish_lease(&l, "ws-ready");
    s.close();
    site.await_stat(&queue, "sockets", 0);
}

#[test]
fn a_keepalive_ping_gets_a_pong_and_neither_asks_for_a_run_nor_disturbs_a_waiting_one() {
    let site = Site::runs();
    let queue = unique("q-ws-ping");
    site.warm(&queue);
    let mut s = site.connect("ws-ping", &queue);
    assert_eq!(s.ping(), r#"{"type":"pong"}"#);
    site.await_stat(&queue, "sockets", 1);
    assert_eq!(site.stats(&queue)["waiters"], 0, "a ping is not a ready");
    s.ready();
    site.await_stat(&queue, "waiters", 1);
    assert_eq!(s.ping(), r#"{"type":"pong"}"#);
    assert_eq!(
        site.stats(&queue)["waiters"],
        1,
        "a ping keeps the runner in line"
    );
    let task = site.submit(Some(&queue));
    let l = s.lease(PROMPTLY).expect("the ready socket got nothing");
    assert_eq!(task_of(&l), task);
    site.finish_lease(&l, "ws-ping");
    s.close();
}

#[test]
fn a_runner_that_closes_its_socket_while_ready_is_never_leased_a_run() {
    let site = Site::runs();
    let queue = unique("q-ws-gone");
    site.warm(&queue);
    let mut gone = site.connect("ws-gone", &queue);
    gone.ready();
    site.await_stat(&queue, "waiters", 1);
    let mut stays = site.connect("ws-stays", &queue);
    stays.ready();
    site.await_stat(&queue, "waiters", 2);
    // The longest-waiting runner leaves: the dispatcher sees it.
    gone.close();
    site.await_stat(&queue, "sockets", 1);
    assert_eq!(site.stats(&queue)["waiters"], 1);
    let task = site.submit(Some(&queue));
    let l = stays
        .lease(PROMPTLY)
        .expect("the remaining runner got nothing");
    assert_eq!(task_of(&l), task);
    let run = site.run(&task);
    assert_eq!(run["heldBy"], "ws-stays", "{run}");
    site.finish_lease(&l, "ws-stays");
    stays.close();
}

#[test]
fn long_poll_and_websocket_waiters_are_served_first_come() {
    let site = Site::runs();
    let queue = unique("q-ws-mix");
    site.warm(&queue);
    // A socket first, then a long-poll: the older run goes to the socket.
    let mut s = site.connect("ws-mix", &queue);
    s.ready();
    site.await_stat(&queue, "waiters", 1);
    let poll = site.wait_on_thread("poll-mix", &queue, 10_000);
    site.await_stat(&queue, "waiters", 2);
    let first = site.submit(Some(&queue));
    let second = site.submit(Some(&queue));
    let l = s.lease(PROMPTLY).expect("the socket got nothing");
    assert_eq!(task_of(&l), first, "the socket came first");
    let (r, _) = poll.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(task_of(&r.json()), second);
    site.finish_lease(&l, "ws-mix");
    site.finish_lease(&r.json(), "poll-mix");
    // A long-poll first, then the socket: the older run goes to the long-poll.
    let poll = site.wait_on_thread("poll-mix", &queue, 10_000);
    site.await_stat(&queue, "waiters", 1);
    s.ready();
    site.await_stat(&queue, "waiters", 2);
    let first = site.submit(Some(&queue));
    let second = site.submit(Some(&queue));
    let (r, _) = poll.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(task_of(&r.json()), first, "the long-poll came first");
    let l = s.lease(PROMPTLY).expect("the socket got nothing");
    assert_eq!(task_of(&l), second);
    site.finish_lease(&r.json(), "poll-mix");
    site.finish_lease(&l, "ws-mix");
    s.close();
}

#[test]
fn connect_without_an_upgrade_is_426_and_a_bad_query_is_400_even_without_one_and_clients_are_refused(
) {
    let site = Site::runs();
    let r = site.runner().get("/v1/runner/connect?queue=q&runnerId=r");
    r.assert_refusal(426, "runner.upgrade_required");
    let r = site.runner().send(
        "GET",
        "/v1/runner/connect?queue=q&runnerId=not%20safe",
        None,
        &[("upgrade", "websocket")],
    );
    r.assert_refusal(400, "invalid_request");
    // The query is judged before the upgrade: a bad one is 400 with or without it.
    let r = site.runner().get("/v1/runner/connect?queue=q&runnerId=..");
    r.assert_refusal(400, "invalid_request");
    // A malformed percent-escape is refused, as in every listing's query, not passed on literally.
    let r = site
        .runner()
        .get("/v1/runner/connect?queue=q%zz&runnerId=r");
    let refusal = r.assert_refusal(400, "invalid_request");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap()
            .contains("percent-escape"),
        "the refusal names the escape: {refusal}"
    );
    // A decoded id is judged: `%72` is `r`, a safe id, so this reaches the upgrade check.
    let r = site.runner().get("/v1/runner/connect?queue=q&runnerId=%72");
    r.assert_refusal(426, "runner.upgrade_required");
    let r = site.client().get("/v1/runner/connect?queue=q&runnerId=r");
    r.assert_refusal(403, "forbidden");
}

#[test]
fn the_reference_runner_runs_a_script_end_to_end_over_the_websocket() {
    let site = Site::runs();
    let queue = unique("q-ws-runner");
    site.warm(&queue);
    let bin = std::env::var("SEMA_RUNNER_BIN")
        .expect("SEMA_RUNNER_BIN is not set: run through scripts/test");
    let child = std::process::Command::new(bin)
        .args([
            "--url",
            &site.base,
            "--runner-id",
            "ws-ref",
            "--queue",
            &queue,
            "--transport",
            "ws",
            "--max-runs",
            "1",
            // A short keepalive: the idle runner sends several before the run comes.
            "--keepalive-ms",
            "200",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start sema-runner");
    site.await_stat(&queue, "sockets", 1);
    site.await_stat(&queue, "waiters", 1);
    std::thread::sleep(Duration::from_millis(1500));
    let task = site.submit(Some(&queue));
    let start = Instant::now();
    let run = loop {
        let run = site.run(&task);
        if run["status"] == "completed" {
            break run;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{run}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(run["result"]["text"], "queued", "{run}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the runner exited {}", out.status);
    // Every keepalive was answered: the socket was never given up for a reconnect or the poll.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.contains("WebSocket failed"), "{said}");
    site.await_stat(&queue, "sockets", 0);
}
