//! `sema`: the command-line client of Sema Edge. It submits runs and watches them live (SSE,
//! resumed with `Last-Event-ID` after a dropped connection, so nothing is lost or shown twice), lists,
//! reads, cancels and steers runs, decides the pending gate of a session at the path its card names,
//! and submits and reads leader runs. Human output by default; `--json` prints the server's JSON.
//!
//! Pure parts live in `sse.rs` (frame parser, resume cursor, backoff) and `output.rs` (what is
//! printed, exit codes); `http.rs` is the blocking client. The crate does not depend on the Worker.

mod http;
mod output;
mod sse;

use clap::{Args, Parser, Subcommand};
use http::{encode, query, Api, Failure};
use output::{DecideFamily, Exit};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};

const EXIT_CODES: &str = "\
Exit codes:
  0  ok (a watched run completed)
  1  the watched run ended failed, cancelled, timeout or blocked
  2  usage error (unknown command or flag, missing or malformed argument)
  3  the server refused the request (HTTP 4xx other than 409; its error and errorCode on stderr),
     or there is nothing to act on (no pending gate in the session)
  4  server error (HTTP 5xx) or network failure (connection refused, timeout, stream lost for good)
  5  conflict (HTTP 409): the run or session is not in a state that allows it; the server's
     guidance and the sema commands that resolve it on stderr

Environment: SEMA_URL (server, default http://127.0.0.1:8787), SEMA_TOKEN (bearer token),
SEMA_PRINCIPAL (local-mode dev servers only: sent as X-Sema-Principal when there is no token).";

/// Command-line client of Sema Edge: submit and watch runs, steer and cancel them, decide gates.
#[derive(Debug, Parser)]
#[command(name = "sema", version, after_help = EXIT_CODES)]
struct Cli {
    /// Base URL of the Sema Edge server.
    #[arg(
        long,
        env = "SEMA_URL",
        default_value = "http://127.0.0.1:8787",
        global = true
    )]
    url: String,
    /// Bearer token (sent as `Authorization: Bearer <token>`).
    #[arg(long, env = "SEMA_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Local-mode dev servers only (SEMA_AUTH=local): the principal, sent as `X-Sema-Principal`
    /// when no token is given.
    #[arg(long, env = "SEMA_PRINCIPAL", global = true)]
    principal: Option<String>,
    /// Machine output: the server's JSON bodies verbatim (a watch prints one frame's JSON per
    /// line, the last one `{"type":"done",...}`); errors still go to stderr, and the server's
    /// error body to stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Submit a run (POST /v1/runs); prints its task id. With --watch, streams it until it ends.
    Submit(SubmitArgs),
    /// Stream a run's events live (SSE) until it ends: text on stdout, notes on stderr.
    Watch(WatchArgs),
    /// List your runs, newest first (GET /v1/runs).
    Runs {
        /// Only this session's runs.
        #[arg(long)]
        session: Option<String>,
        /// Only runs in this status (e.g. running, completed, failed, suspended).
        #[arg(long)]
        status: Option<String>,
        /// Runs per page.
        #[arg(long)]
        limit: Option<u32>,
        /// The page after this cursor (from a previous page's `nextCursor`).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Read a run (GET /v1/runs/{taskId}).
    Get { task_id: String },
    /// Cancel a run (POST /v1/runs/{taskId}/cancel).
    Cancel { task_id: String },
    /// Queue a message into a running run (POST /v1/runs/{taskId}/steer).
    Steer { task_id: String, message: String },
    /// List pending gates (GET /v1/approvals).
    Approvals {
        /// Only this session's gate.
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Let the pending gate of a session go on: approve (approvals, plan review) or continue
    /// (resource limit), at the path its card names.
    Approve(GateArgs),
    /// Refuse the pending gate of a session: deny (approvals), revise (plan review) or stop
    /// (resource limit), at the path its card names.
    Deny(GateArgs),
    /// Send an explicit decision to the pending gate of a session, at the path its card names:
    /// approve|deny (tool_approval, human, irreversible_ask, policy_ask), approve|revise
    /// (plan_review), continue|stop (resource_limit), wake --objective (task_done).
    Decide(DecideArgs),
    /// Leader runs: one objective fanned out to subtask runs.
    #[command(subcommand)]
    Leader(LeaderCommand),
    /// Your sessions, most recently submitted into first, each with its active run and pending
    /// gate (GET /v1/sessions).
    Sessions {
        /// Sessions per page.
        #[arg(long)]
        limit: Option<u32>,
        /// The page after this cursor (from a previous page's `nextCursor`).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One session (GET /v1/sessions/{sessionId}), or with --delete, delete it whole: its runs,
    /// events, gates, steer messages and idempotency keys (DELETE; refused with exit 5 while a run
    /// of it is running or parked).
    Session {
        session_id: String,
        #[arg(long)]
        delete: bool,
    },
}

#[derive(Debug, Args)]
struct SubmitArgs {
    /// The objective (`-` reads it from stdin).
    objective: String,
    /// The session to run in [default: a fresh one, `cli-<time>-<pid>`].
    #[arg(long, short)]
    session: Option<String>,
    /// Your own task id (else the server mints one).
    #[arg(long)]
    task_id: Option<String>,
    /// Free JSON object stored with the run.
    #[arg(long, value_parser = json_object)]
    meta: Option<Value>,
    /// The task queue whose runners take the run.
    #[arg(long)]
    queue: Option<String>,
    /// Makes the submit safe to retry: the same key and body answer with the same run.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// After submitting, stream the run until it ends (exit 0 completed, 1 otherwise); the task id
    /// goes to stderr.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    reconnect: ReconnectArgs,
}

#[derive(Debug, Args)]
struct WatchArgs {
    task_id: String,
    /// Start after this event seq (events up to it are not shown).
    #[arg(long)]
    after: Option<i64>,
    #[command(flatten)]
    reconnect: ReconnectArgs,
}

#[derive(Debug, Args, Clone, Copy)]
struct ReconnectArgs {
    /// Reconnect attempts in a row without hearing from the server before giving up (exit 4).
    #[arg(long, default_value_t = 20)]
    max_reconnects: u32,
}

#[derive(Debug, Args)]
struct GateArgs {
    session_id: String,
    /// Why (sent as `reason`, or as `feedback` at a plan review).
    #[arg(long)]
    reason: Option<String>,
}

#[derive(Debug, Args)]
struct DecideArgs {
    session_id: String,
    /// approve, deny, revise, continue, stop or wake (the server checks it fits the gate).
    decision: String,
    /// Why (sent as `reason`, or as `feedback` at a plan review).
    #[arg(long, alias = "feedback")]
    reason: Option<String>,
    /// A wake's new run objective.
    #[arg(long)]
    objective: Option<String>,
    /// A wake's new run meta (a JSON object).
    #[arg(long, value_parser = json_object)]
    meta: Option<Value>,
}

#[derive(Debug, Subcommand)]
enum LeaderCommand {
    /// Submit a leader run (POST /v1/leader/runs); prints its id.
    Submit {
        /// The leader's objective.
        objective: String,
        /// A subtask objective (repeat for each; 1 to 100).
        #[arg(long = "subtask", required = true)]
        subtasks: Vec<String>,
        /// Most subtask runs unfinished at once (1 to 16).
        #[arg(long)]
        max_concurrency: Option<u32>,
        /// Deadline in milliseconds (at most 24 h).
        #[arg(long)]
        deadline_ms: Option<u64>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Read a leader run with its children (GET /v1/leader/runs/{id}).
    Get { id: String },
}

fn json_object(s: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(s) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("must be a JSON object".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// What a command prints and how it ends.
struct Ctx {
    api: Api,
    json: bool,
}

impl Ctx {
    /// Reports a failed request on stderr (and, with --json, the server's body on stdout) and
    /// returns its exit code.
    fn fail(&self, f: Failure) -> Exit {
        match f {
            Failure::Status(code, body) => {
                if self.json && !body.is_empty() {
                    println!("{}", body.trim_end());
                }
                match code {
                    409 => {
                        eprintln!("{}", output::conflict_guidance(&body));
                        Exit::Conflict
                    }
                    400..=499 => {
                        eprintln!("{}", output::refusal_line(code, &body));
                        Exit::Refused
                    }
                    _ => {
                        eprintln!("{}", output::refusal_line(code, &body));
                        Exit::Server
                    }
                }
            }
            Failure::Network(e) => {
                eprintln!("error: could not reach the server: {e}");
                Exit::Server
            }
        }
    }

    /// Prints a reply: verbatim with --json, else `human` of its JSON.
    fn show(&self, r: Result<http::Reply, Failure>, human: impl FnOnce(&Value) -> String) -> Exit {
        let reply = match r {
            Ok(r) => r,
            Err(f) => return self.fail(f),
        };
        if self.json {
            println!("{}", reply.body.trim_end());
            return Exit::Ok;
        }
        match reply.json() {
            Ok(v) => {
                print!("{}", human(&v));
                Exit::Ok
            }
            Err(f) => self.fail(f),
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let ctx = Ctx {
        api: Api::new(&cli.url, cli.token.clone(), cli.principal.clone()),
        json: cli.json,
    };
    let exit = run(&ctx, cli.command);
    let _ = std::io::stdout().flush();
    std::process::exit(exit as i32);
}

fn usage(message: &str) -> Exit {
    eprintln!("error: {message}\n\nFor more information, try '--help'.");
    Exit::Usage
}

fn run(ctx: &Ctx, command: Command) -> Exit {
    match command {
        Command::Submit(a) => submit(ctx, a),
        Command::Watch(a) => watch(ctx, &a.task_id, a.after, a.reconnect),
        Command::Runs {
            session,
            status,
            limit,
            cursor,
        } => {
            let q = query(&[
                ("sessionId", session),
                ("status", status),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ]);
            ctx.show(ctx.api.get(&format!("/v1/runs{q}")), output::runs_table)
        }
        Command::Sessions { limit, cursor } => {
            let q = query(&[("limit", limit.map(|l| l.to_string())), ("cursor", cursor)]);
            ctx.show(
                ctx.api.get(&format!("/v1/sessions{q}")),
                output::sessions_table,
            )
        }
        Command::Session { session_id, delete } => {
            let path = format!("/v1/sessions/{}", encode(&session_id));
            if delete {
                ctx.show(ctx.api.send("DELETE", &path, None, &[]), |v| {
                    let n = v["runsDeleted"].as_u64().unwrap_or(0);
                    let s = if n == 1 { "" } else { "s" };
                    format!("session {session_id} deleted ({n} run{s})\n")
                })
            } else {
                ctx.show(ctx.api.get(&path), output::session_face)
            }
        }
        Command::Get { task_id } => ctx.show(
            ctx.api.get(&format!("/v1/runs/{}", encode(&task_id))),
            output::run_face,
        ),
        Command::Cancel { task_id } => {
            let r = ctx
                .api
                .post(&format!("/v1/runs/{}/cancel", encode(&task_id)), None);
            let status = r.as_ref().map(|r| r.status).unwrap_or(0);
            ctx.show(r, |v| {
                let s = v["status"].as_str().unwrap_or("unknown");
                if status == 202 {
                    format!("cancel requested for run {task_id}: its runner stops it at its next heartbeat (now {s})\n")
                } else {
                    format!("run {task_id} {s}\n")
                }
            })
        }
        Command::Steer { task_id, message } => ctx.show(
            ctx.api.post(
                &format!("/v1/runs/{}/steer", encode(&task_id)),
                Some(&json!({ "message": message })),
            ),
            |v| {
                format!(
                    "steer message {} {} for run {task_id}\n",
                    v["seq"],
                    v["status"].as_str().unwrap_or("queued")
                )
            },
        ),
        Command::Approvals {
            session,
            limit,
            cursor,
        } => {
            let q = query(&[
                ("sessionId", session),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ]);
            ctx.show(
                ctx.api.get(&format!("/v1/approvals{q}")),
                output::approvals_table,
            )
        }
        Command::Approve(g) => gate_verb(ctx, &g, true),
        Command::Deny(g) => gate_verb(ctx, &g, false),
        Command::Decide(d) => match pending_gate(ctx, &d.session_id) {
            Ok((path, family)) => decide_at(
                ctx,
                &path,
                family,
                &d.decision,
                d.reason.as_deref(),
                d.objective.as_deref(),
                d.meta.as_ref(),
            ),
            Err(e) => e,
        },
        Command::Leader(l) => leader(ctx, l),
    }
}

fn fresh_session() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("cli-{ms:x}-{}", std::process::id())
}

fn submit(ctx: &Ctx, a: SubmitArgs) -> Exit {
    let objective = if a.objective == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            return usage(&format!("could not read the objective from stdin: {e}"));
        }
        s
    } else {
        a.objective
    };
    let mut body = json!({
        "sessionId": a.session.unwrap_or_else(fresh_session),
        "objective": objective,
    });
    for (k, v) in [
        ("taskId", a.task_id.map(Value::from)),
        ("meta", a.meta),
        ("queue", a.queue.map(Value::from)),
    ] {
        if let Some(v) = v {
            body[k] = v;
        }
    }
    let headers: Vec<(&str, &str)> = a
        .idempotency_key
        .as_deref()
        .map(|k| ("idempotency-key", k))
        .into_iter()
        .collect();
    let reply = match ctx.api.send("POST", "/v1/runs", Some(&body), &headers) {
        Ok(r) => r,
        Err(f) => return ctx.fail(f),
    };
    let v = match reply.json() {
        Ok(v) => v,
        Err(f) => return ctx.fail(f),
    };
    let Some(task) = v["taskId"].as_str().map(str::to_owned) else {
        return ctx.fail(Failure::Network(format!("no taskId in {}", reply.body)));
    };
    if ctx.json {
        println!("{}", reply.body.trim_end());
    } else if a.watch {
        eprintln!("task {task}");
    } else {
        println!("{task}");
    }
    if a.watch {
        let _ = std::io::stdout().flush();
        return watch(ctx, &task, None, a.reconnect);
    }
    Exit::Ok
}

/// Longest SSE line accepted (an event's data is at most 1 MiB of JSON, escaped).
const MAX_LINE: u64 = 8 << 20;

/// Why one connection of a watch stopped.
enum Stop {
    /// The run ended with this `{status, result?, error?, errorCode?}`.
    Done(Value),
    /// The connection dropped or stalled; `heard` says whether it delivered anything new.
    Dropped { why: String, heard: bool },
}

/// Streams the run's events until its `done`, reconnecting after drops with `Last-Event-ID` (the
/// last seq shown): nothing lost, nothing shown twice. Exit: 0 completed, 1 other ends.
fn watch(ctx: &Ctx, task: &str, after: Option<i64>, rc: ReconnectArgs) -> Exit {
    let mut cursor = sse::Cursor::after(after);
    let mut out = TextOut::default();
    let mut attempt: u32 = 0;
    loop {
        let why = match ctx.api.open_stream(task, cursor.last_event_id()) {
            Ok(resp) if resp.status() == 204 => {
                // At or past the done frame: the run is over; read how it ended.
                return match ctx.api.get(&format!("/v1/runs/{}", encode(task))) {
                    Ok(r) => match r.json() {
                        Ok(face) => {
                            let result = json!({"status": face["status"], "result": face["result"],
                                "error": face["error"], "errorCode": face["errorCode"]});
                            finish(ctx, task, &mut out, &result)
                        }
                        Err(f) => ctx.fail(f),
                    },
                    Err(f) => ctx.fail(f),
                };
            }
            Ok(resp) => match read_connection(ctx, resp, &mut cursor, &mut out) {
                Stop::Done(result) => return finish(ctx, task, &mut out, &result),
                Stop::Dropped { why, heard } => {
                    if heard {
                        attempt = 0;
                    }
                    why
                }
            },
            Err(Failure::Status(code, body)) if code < 500 => {
                return ctx.fail(Failure::Status(code, body))
            }
            Err(Failure::Status(code, body)) => output::refusal_line(code, &body),
            Err(Failure::Network(e)) => e,
        };
        if attempt >= rc.max_reconnects {
            eprintln!(
                "error: the event stream of run {task} is lost ({why}); gave up after {attempt} reconnects"
            );
            return Exit::Server;
        }
        let resume = cursor
            .last_event_id()
            .map_or("from the start".to_owned(), |s| format!("after seq {s}"));
        eprintln!("sema: stream dropped ({why}); reconnecting {resume}");
        std::thread::sleep(sse::backoff(attempt));
        attempt += 1;
    }
}

/// Reads one connection's frames, showing each new event once.
fn read_connection(
    ctx: &Ctx,
    resp: ureq::Response,
    cursor: &mut sse::Cursor,
    out: &mut TextOut,
) -> Stop {
    let mut reader = BufReader::new(resp.into_reader());
    let mut parser = sse::Parser::default();
    let mut heard = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf) {
            Ok(n) => n,
            Err(e) => {
                return Stop::Dropped {
                    why: e.to_string(),
                    heard,
                }
            }
        };
        if n == 0 || buf.last() != Some(&b'\n') {
            // The end of the body (or a line cut off by it) before `done`: the connection dropped.
            let why = if n as u64 >= MAX_LINE {
                "a line longer than 8 MiB".to_owned()
            } else {
                "the connection closed before the run's done frame".to_owned()
            };
            return Stop::Dropped { why, heard };
        }
        let line = String::from_utf8_lossy(&buf);
        let Some(frame) = parser.line(&line) else {
            continue;
        };
        if frame.event.as_deref() == Some("heartbeat") {
            heard = true;
        }
        match cursor.see(&frame) {
            sse::Seen::Event(e) => {
                heard = true;
                if ctx.json {
                    println!("{e}");
                } else if let Some(d) = e["delta"].as_str().filter(|_| e["type"] == "text_delta") {
                    out.text(d);
                } else if let Some(note) = output::event_note(&e) {
                    out.note(&note);
                }
            }
            sse::Seen::Done(result) => return Stop::Done(result),
            sse::Seen::Repeat | sse::Seen::Other => {}
        }
    }
}

fn finish(ctx: &Ctx, task: &str, out: &mut TextOut, result: &Value) -> Exit {
    let mut result = result.clone();
    if let Some(o) = result.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    if ctx.json {
        println!("{}", json!({"type": "done", "result": result}));
    } else {
        out.end_text();
        eprintln!("{}", output::done_line(task, &result));
    }
    output::exit_for_status(result["status"].as_str().unwrap_or(""))
}

/// The text of a watch on stdout, its notes on stderr. On a terminal each note starts a line of its
/// own; stdout redirected gets exactly the run's text (and one closing newline), nothing inserted.
struct TextOut {
    /// Text was printed and its last character is not a newline.
    open_line: bool,
    /// stdout is a terminal (shared with the notes' stderr, so a note breaks the text's line).
    terminal: bool,
}

impl Default for TextOut {
    fn default() -> Self {
        use std::io::IsTerminal;
        Self {
            open_line: false,
            terminal: std::io::stdout().is_terminal(),
        }
    }
}

impl TextOut {
    fn text(&mut self, delta: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(delta.as_bytes());
        let _ = stdout.flush();
        if !delta.is_empty() {
            self.open_line = !delta.ends_with('\n');
        }
    }

    fn note(&mut self, note: &str) {
        if self.terminal {
            self.end_text();
        }
        eprintln!("{note}");
    }

    fn end_text(&mut self) {
        if self.open_line {
            println!();
            let _ = std::io::stdout().flush();
            self.open_line = false;
        }
    }
}

/// The pending gate of a session: its decide path (as the card gives it) and that path's family.
fn pending_gate(ctx: &Ctx, session: &str) -> Result<(String, DecideFamily), Exit> {
    let q = query(&[
        ("sessionId", Some(session.to_owned())),
        ("limit", Some("1".into())),
    ]);
    let page = ctx
        .api
        .get(&format!("/v1/approvals{q}"))
        .and_then(|r| r.json())
        .map_err(|f| ctx.fail(f))?;
    let Some(card) = page["approvals"].as_array().and_then(|a| a.first()) else {
        eprintln!("error: session {session} has no pending gate (`sema approvals` lists them)");
        return Err(Exit::Refused);
    };
    let path = card["decidePath"].as_str().unwrap_or_default().to_owned();
    match DecideFamily::of_path(&path) {
        Some(f) => Ok((path, f)),
        None => {
            eprintln!(
                "error: the {} gate of session {session} names no decide path this sema knows ({path:?})",
                card["kind"].as_str().unwrap_or("?")
            );
            Err(Exit::Refused)
        }
    }
}

fn gate_verb(ctx: &Ctx, g: &GateArgs, yes: bool) -> Exit {
    let (path, family) = match pending_gate(ctx, &g.session_id) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let Some(decision) = family.verb(yes) else {
        eprintln!(
            "error: the pending gate of session {} is a finished task (task_done): it is woken with a new objective\n  sema decide {} wake --objective <text>",
            g.session_id, g.session_id
        );
        return Exit::Conflict;
    };
    decide_at(
        ctx,
        &path,
        family,
        decision,
        g.reason.as_deref(),
        None,
        None,
    )
}

fn decide_at(
    ctx: &Ctx,
    path: &str,
    family: DecideFamily,
    decision: &str,
    note: Option<&str>,
    objective: Option<&str>,
    meta: Option<&Value>,
) -> Exit {
    let body = match output::decide_body(family, decision, note, objective, meta) {
        Ok(b) => b,
        Err(e) => return usage(&e),
    };
    ctx.show(ctx.api.post(path, Some(&body)), |v| {
        if family == DecideFamily::Wake {
            format!(
                "woken: new run {} in session {}\n",
                v["taskId"].as_str().unwrap_or("?"),
                v["sessionId"].as_str().unwrap_or("?")
            )
        } else {
            format!(
                "{decision}: run {} is {}\n",
                v["taskId"].as_str().unwrap_or("?"),
                v["status"].as_str().unwrap_or("?")
            )
        }
    })
}

fn leader(ctx: &Ctx, l: LeaderCommand) -> Exit {
    match l {
        LeaderCommand::Submit {
            objective,
            subtasks,
            max_concurrency,
            deadline_ms,
            idempotency_key,
        } => {
            let mut body = json!({
                "objective": objective,
                "subtasks": subtasks.iter().map(|s| json!({"objective": s})).collect::<Vec<_>>(),
            });
            if let Some(m) = max_concurrency {
                body["maxConcurrency"] = m.into();
            }
            if let Some(d) = deadline_ms {
                body["deadlineMs"] = d.into();
            }
            let headers: Vec<(&str, &str)> = idempotency_key
                .as_deref()
                .map(|k| ("idempotency-key", k))
                .into_iter()
                .collect();
            ctx.show(
                ctx.api
                    .send("POST", "/v1/leader/runs", Some(&body), &headers),
                |v| format!("{}\n", v["id"].as_str().unwrap_or("?")),
            )
        }
        LeaderCommand::Get { id } => ctx.show(
            ctx.api.get(&format!("/v1/leader/runs/{}", encode(&id))),
            output::leader_face,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sema").chain(args.iter().copied()))
    }

    #[test]
    fn the_flag_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_before_or_after_the_command() {
        let a = parse(&["--json", "get", "T", "--url", "http://h:1"]).unwrap();
        assert!(a.json);
        assert_eq!(a.url, "http://h:1");
        assert!(matches!(a.command, Command::Get { task_id } if task_id == "T"));
    }

    #[test]
    fn submit_takes_its_options_and_a_meta_that_must_be_an_object() {
        let a = parse(&[
            "submit",
            "say hi",
            "-s",
            "S",
            "--watch",
            "--meta",
            r#"{"a":1}"#,
        ])
        .unwrap();
        let Command::Submit(s) = a.command else {
            panic!("not a submit")
        };
        assert_eq!(
            (s.objective.as_str(), s.session.as_deref(), s.watch),
            ("say hi", Some("S"), true)
        );
        assert_eq!(s.meta, Some(serde_json::json!({"a": 1})));
        assert_eq!(s.reconnect.max_reconnects, 20);
        assert!(parse(&["submit", "x", "--meta", "[1]"]).is_err());
        assert!(parse(&["submit", "x", "--meta", "{"]).is_err());
    }

    #[test]
    fn missing_arguments_and_unknown_commands_are_usage_errors_with_exit_2() {
        for args in [
            &[][..],
            &["get"],
            &["steer", "T"],
            &["frobnicate"],
            &["runs", "--limit", "x"],
            &["leader", "submit", "o"],
            &["decide", "S"],
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
    }

    #[test]
    fn the_help_documents_the_exit_codes_and_the_environment() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "Exit codes:",
            "  5  conflict (HTTP 409)",
            "SEMA_URL",
            "SEMA_TOKEN",
        ] {
            assert!(help.contains(needle), "{needle} missing from:\n{help}");
        }
    }
}
