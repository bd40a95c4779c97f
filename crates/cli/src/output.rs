//! What `sema` prints and which exit code it ends with: pure functions of the server's JSON, so the
//! human forms are unit-tested. `--json` bypasses all of this and prints the server's bodies verbatim.

use serde_json::Value;

/// The exit codes (documented in `sema --help` and the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did what it says (a watched run completed).
    Ok = 0,
    /// A watched run ended without completing (failed, cancelled, timeout, blocked).
    RunNotCompleted = 1,
    /// Bad usage: unknown command or flag, missing or malformed argument.
    Usage = 2,
    /// The server refused the request with a 4xx other than 409 (its error and errorCode on stderr),
    /// or what was asked for is not there (e.g. no pending gate in the session).
    Refused = 3,
    /// The server failed (5xx) or could not be reached (connection, timeout, a body that is not JSON).
    Server = 4,
    /// 409 conflict: the state does not allow it now (the server's guidance on stderr).
    Conflict = 5,
}

/// The exit code of a run that ended with `status`.
pub fn exit_for_status(status: &str) -> Exit {
    if status == "completed" {
        Exit::Ok
    } else {
        Exit::RunNotCompleted
    }
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// The one-line form of a refusal: `error: <sentence> (<errorCode>)`, or the raw body when it is not
/// the API's `{error, errorCode}` shape.
pub fn refusal_line(status: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["error"].is_string() => match v["errorCode"].as_str() {
            Some(code) => format!("error: {} ({code})", text(&v["error"])),
            None => format!("error: {}", text(&v["error"])),
        },
        _ => format!("error: HTTP {status}: {}", body.trim()),
    }
}

/// What a 409 tells the user to do next: the server's sentence with its `{activeTaskId}` filled in,
/// then the `sema` commands that do it.
pub fn conflict_guidance(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let mut out = refusal_line(409, body);
    let active = v["activeTaskId"].as_str();
    if let Some(id) = active {
        out = out.replace("{activeTaskId}", id);
    }
    let code = text(&v["errorCode"]);
    let mut hints = Vec::new();
    if let Some(id) = active {
        let status = text(&v["activeTaskStatus"]);
        hints.push(format!("the active run is {id} ({status})"));
        if v["pendingGate"].is_object() {
            let kind = text(&v["pendingGate"]["kind"]);
            let path = text(&v["pendingGate"]["decidePath"]);
            hints.push(format!(
                "it waits on a {kind} gate (POST {path}): decide it with `sema approve <sessionId>`, `sema deny <sessionId>` or `sema decide <sessionId> <decision>`, or abandon it with `sema cancel {id}`"
            ));
        } else {
            hints.push(format!(
                "steer it with `sema steer {id} <message>`, watch it with `sema watch {id}`, or stop it with `sema cancel {id}`"
            ));
        }
    } else if code == "conflict.run_not_running" {
        hints.push("the run is not running: `sema get <taskId>` shows its state".to_owned());
    } else if code == "conflict.task_id_taken" {
        hints.push("that task id is used: submit with another --task-id, or none".to_owned());
    } else if code.starts_with("gate") || code.starts_with("wake.") || code == "not_resumable" {
        hints.push(
            "`sema approvals <sessionId>` shows the pending gate and the decisions its path takes"
                .to_owned(),
        );
    }
    for h in hints {
        out.push_str("\n  ");
        out.push_str(&h);
    }
    out
}

/// `sema get`: the run's read face, one `key: value` line per field that is set.
pub fn run_face(v: &Value) -> String {
    let mut out = String::new();
    let order = [
        "taskId",
        "sessionId",
        "status",
        "queue",
        "objectivePreview",
        "heldBy",
        "cancelRequested",
        "createdAt",
        "updatedAt",
        "msSinceLastActivity",
        "error",
        "errorCode",
    ];
    for key in order {
        match &v[key] {
            Value::Null => {}
            Value::String(s) => out.push_str(&format!("{key}: {s}\n")),
            other => out.push_str(&format!("{key}: {other}\n")),
        }
    }
    if let Some(t) = v["result"]["text"].as_str() {
        out.push_str(&format!("result.text: {t}\n"));
    } else if !v["result"].is_null() {
        out.push_str(&format!("result: {}\n", v["result"]));
    }
    out
}

/// `sema runs`: a table, newest first, and the flag that reads the next page.
pub fn runs_table(v: &Value) -> String {
    let runs = v["runs"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "{:<38} {:<24} {:<13} {}\n",
        "TASK ID", "SESSION", "STATUS", "OBJECTIVE"
    );
    for r in &runs {
        let objective: String = text(&r["objectivePreview"])
            .replace('\n', " ")
            .chars()
            .take(40)
            .collect();
        out.push_str(&format!(
            "{:<38} {:<24} {:<13} {}\n",
            text(&r["taskId"]),
            text(&r["sessionId"]),
            text(&r["status"]),
            objective
        ));
    }
    if let Some(c) = v["nextCursor"].as_str() {
        out.push_str(&format!("more: sema runs --cursor {c}\n"));
    }
    out
}

/// `sema sessions`: a table, most recently submitted into first, and the flag for the next page.
pub fn sessions_table(v: &Value) -> String {
    let mut out = format!(
        "{:<24} {:<38} {:<13} {}\n",
        "SESSION", "ACTIVE RUN", "STATUS", "PENDING GATE"
    );
    for s in v["sessions"].as_array().into_iter().flatten() {
        let (run, status) = match s["activeRun"].as_object() {
            Some(a) => (text(&a["taskId"]), text(&a["status"])),
            None => ("-", "-"),
        };
        let gate = match s["pendingGate"].as_object() {
            Some(g) => format!("{} (POST {})", text(&g["kind"]), text(&g["decidePath"])),
            None => "-".to_owned(),
        };
        out.push_str(&format!(
            "{:<24} {:<38} {:<13} {}\n",
            text(&s["sessionId"]),
            run,
            status,
            gate
        ));
    }
    if let Some(c) = v["nextCursor"].as_str() {
        out.push_str(&format!("more: sema sessions --cursor {c}\n"));
    }
    out
}

/// `sema session ID`: the session, its active run and its pending gate's card.
pub fn session_face(v: &Value) -> String {
    let mut out = format!("session {}\n", text(&v["sessionId"]));
    match v["activeRun"].as_object() {
        Some(a) => out.push_str(&format!(
            "  active run: {} ({})\n",
            text(&a["taskId"]),
            text(&a["status"])
        )),
        None => out.push_str("  active run: none\n"),
    }
    if let Some(g) = v["pendingGate"].as_object() {
        out.push_str(&format!(
            "  pending gate: {} on {}, decide at POST {}\n  card: {}\n",
            text(&g["kind"]),
            text(&g["taskId"]),
            text(&g["decidePath"]),
            g.get("card")
                .map_or_else(|| text(&g["cardPreview"]).to_owned(), |c| c.to_string())
        ));
    }
    out.push_str(&format!("  last activity: {}\n", v["lastActivityAt"]));
    out
}

/// `sema approvals`: the pending gate cards.
pub fn approvals_table(v: &Value) -> String {
    let mut out = String::new();
    for a in v["approvals"].as_array().into_iter().flatten() {
        let card = match a["card"]["text"].as_str() {
            Some(t) => t.to_owned(),
            None => a["card"].to_string(),
        };
        out.push_str(&format!(
            "{} {} {} POST {}\n  {}\n",
            text(&a["sessionId"]),
            text(&a["taskId"]),
            text(&a["kind"]),
            text(&a["decidePath"]),
            card
        ));
    }
    if out.is_empty() {
        out.push_str("no pending gates\n");
    }
    if let Some(c) = v["nextCursor"].as_str() {
        out.push_str(&format!("more: sema approvals --cursor {c}\n"));
    }
    out
}

/// The family of a decide path, read from the path the server gave (its last segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideFamily {
    /// `POST /v1/approvals/{sessionId}/decide`: approve | deny, `reason`.
    Approvals,
    /// `POST /v1/assistant/tasks/{taskId}/plan_review`: approve | revise, `feedback`.
    PlanReview,
    /// `POST /v1/assistant/tasks/{taskId}/resume`: continue | stop, `reason`.
    Resume,
    /// `POST /v1/sessions/{sessionId}/wake`: `{objective, meta?}`.
    Wake,
}

impl DecideFamily {
    pub fn of_path(path: &str) -> Option<Self> {
        match path.rsplit('/').next()? {
            "decide" => Some(Self::Approvals),
            "plan_review" => Some(Self::PlanReview),
            "resume" => Some(Self::Resume),
            "wake" => Some(Self::Wake),
            _ => None,
        }
    }

    /// The decision `sema approve` (`yes`) or `sema deny` (`!yes`) sends at this path; `None` at a
    /// wake, which takes an objective (`sema decide <sessionId> wake --objective ...`).
    pub fn verb(self, yes: bool) -> Option<&'static str> {
        match (self, yes) {
            (Self::Approvals | Self::PlanReview, true) => Some("approve"),
            (Self::Approvals, false) => Some("deny"),
            (Self::PlanReview, false) => Some("revise"),
            (Self::Resume, true) => Some("continue"),
            (Self::Resume, false) => Some("stop"),
            (Self::Wake, _) => None,
        }
    }

    /// The body key of the free text: `feedback` at a plan review, `reason` elsewhere.
    pub fn note_key(self) -> &'static str {
        match self {
            Self::PlanReview => "feedback",
            _ => "reason",
        }
    }
}

/// The decide request for a gate: its body, from the decision and the note (`--reason`), or for a
/// wake from the objective and meta. `Err` says what the user must add or change (a usage error).
pub fn decide_body(
    family: DecideFamily,
    decision: &str,
    note: Option<&str>,
    objective: Option<&str>,
    meta: Option<&Value>,
) -> Result<Value, String> {
    if family == DecideFamily::Wake {
        if decision != "wake" {
            return Err(format!(
                "the pending gate is a finished task (task_done): its decision is `wake`, not `{decision}`"
            ));
        }
        let objective = objective.ok_or(
            "a wake starts a new run: give it with --objective <text> (and optionally --meta <json>)",
        )?;
        let mut body = serde_json::json!({ "objective": objective });
        if let Some(m) = meta {
            body["meta"] = m.clone();
        }
        return Ok(body);
    }
    if objective.is_some() || meta.is_some() {
        return Err("--objective and --meta belong to a wake (a task_done gate) only".into());
    }
    let mut body = serde_json::json!({ "decision": decision });
    if let Some(n) = note {
        body[family.note_key()] = Value::from(n);
    }
    Ok(body)
}

/// A watched run's non-text event, as one stderr line (`None`: nothing worth a line).
pub fn event_note(e: &Value) -> Option<String> {
    let kind = text(&e["type"]);
    match kind {
        "text_delta" => None,
        "steering_injected" => Some(format!("[steer] {}", text(&e["message"]))),
        "suspended" | "needs_review" => {
            let gate = &e["gate"];
            let what = if gate.is_object() {
                format!(" on a {} gate", gate["kind"].as_str().unwrap_or("human"))
            } else {
                String::new()
            };
            Some(format!(
                "[{kind}] the run is parked{what}, waiting for a decision: sema approvals (then sema approve|deny|decide <sessionId>)"
            ))
        }
        "resumed" => {
            let mut line = format!("[resumed] decision: {}", text(&e["decision"]));
            if let Some(n) = e["reason"].as_str().or(e["feedback"].as_str()) {
                line.push_str(&format!(" ({n})"));
            }
            Some(line)
        }
        "" => None,
        other => Some(format!("[{other}]")),
    }
}

/// The closing line of a watch: how the run ended.
pub fn done_line(task: &str, result: &Value) -> String {
    let status = result["status"].as_str().unwrap_or("unknown");
    let mut out = format!("run {task} {status}");
    if let Some(e) = result["error"].as_str() {
        out.push_str(&format!(": {e}"));
    }
    if let Some(c) = result["errorCode"].as_str() {
        out.push_str(&format!(" ({c})"));
    }
    out
}

/// `sema leader get`: the leader run and one line per child.
pub fn leader_face(v: &Value) -> String {
    let mut out = String::new();
    for key in [
        "id",
        "status",
        "objectivePreview",
        "maxConcurrency",
        "cancelRequested",
        "error",
    ] {
        match &v[key] {
            Value::Null => {}
            Value::String(s) => out.push_str(&format!("{key}: {s}\n")),
            other => out.push_str(&format!("{key}: {other}\n")),
        }
    }
    for c in v["children"].as_array().into_iter().flatten() {
        let mut line = format!(
            "  {} {} {}",
            text(&c["workerId"]),
            text(&c["state"]),
            text(&c["sessionId"])
        );
        if let Some(t) = c["taskId"].as_str() {
            line.push_str(&format!(" {t}"));
        }
        if let Some(s) = c["runStatus"].as_str() {
            line.push_str(&format!(" {s}"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RUNNING_409: &str = r#"{"error":"session already has an active run — POST /v1/runs/{activeTaskId}/steer injects a message, or POST /v1/runs/{activeTaskId}/cancel stops it","errorCode":"conflict.session_active_run","activeTaskId":"T1","activeTaskStatus":"running"}"#;

    #[test]
    fn only_a_completed_run_exits_zero() {
        assert_eq!(exit_for_status("completed"), Exit::Ok);
        for s in ["failed", "cancelled", "timeout", "blocked"] {
            assert_eq!(exit_for_status(s), Exit::RunNotCompleted);
        }
        let codes = [
            Exit::Ok,
            Exit::RunNotCompleted,
            Exit::Usage,
            Exit::Refused,
            Exit::Server,
            Exit::Conflict,
        ]
        .map(|e| e as i32);
        assert_eq!(codes, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_refusal_shows_the_servers_sentence_and_code_or_the_raw_body() {
        assert_eq!(
            refusal_line(404, r#"{"error":"run not found","errorCode":"not_found"}"#),
            "error: run not found (not_found)"
        );
        assert_eq!(
            refusal_line(502, "Bad Gateway\n"),
            "error: HTTP 502: Bad Gateway"
        );
    }

    #[test]
    fn a_running_conflict_fills_in_the_active_task_and_names_steer_watch_and_cancel() {
        let g = conflict_guidance(RUNNING_409);
        assert!(
            g.starts_with("error: session already has an active run"),
            "{g}"
        );
        assert!(g.contains("POST /v1/runs/T1/steer"), "{g}");
        assert!(!g.contains("{activeTaskId}"), "{g}");
        assert!(g.contains("(conflict.session_active_run)"), "{g}");
        assert!(g.contains("sema steer T1 <message>"), "{g}");
        assert!(g.contains("sema cancel T1"), "{g}");
    }

    #[test]
    fn a_parked_conflict_points_at_the_gates_decide_commands() {
        let body = json!({"error": "parked", "errorCode": "conflict.session_active_run", "activeTaskId": "T2",
            "activeTaskStatus": "suspended", "pendingGate": {"kind": "human", "decidePath": "/v1/approvals/s/decide"}});
        let g = conflict_guidance(&body.to_string());
        assert!(
            g.contains("human gate (POST /v1/approvals/s/decide)"),
            "{g}"
        );
        assert!(g.contains("sema approve <sessionId>"), "{g}");
        assert!(g.contains("sema cancel T2"), "{g}");
    }

    #[test]
    fn other_conflicts_keep_the_servers_sentence_and_add_the_next_step() {
        let g = conflict_guidance(
            r#"{"error":"the run is not running","errorCode":"conflict.run_not_running"}"#,
        );
        assert_eq!(
            g,
            "error: the run is not running (conflict.run_not_running)\n  the run is not running: `sema get <taskId>` shows its state"
        );
        let g = conflict_guidance(r#"{"error":"wrong gate","errorCode":"gate_not_plan_review"}"#);
        assert!(g.contains("`sema approvals <sessionId>`"), "{g}");
    }

    #[test]
    fn the_decide_family_is_read_from_the_path_the_card_gives() {
        use DecideFamily::*;
        for (path, fam) in [
            ("/v1/approvals/s/decide", Approvals),
            ("/v1/assistant/tasks/t/plan_review", PlanReview),
            ("/v1/assistant/tasks/t/resume", Resume),
            ("/v1/sessions/s/wake", Wake),
        ] {
            assert_eq!(DecideFamily::of_path(path), Some(fam));
        }
        assert_eq!(DecideFamily::of_path("/v1/other"), None);
    }

    #[test]
    fn approve_and_deny_take_each_paths_own_words_and_a_wake_has_none() {
        use DecideFamily::*;
        assert_eq!(
            (Approvals.verb(true), Approvals.verb(false)),
            (Some("approve"), Some("deny"))
        );
        assert_eq!(
            (PlanReview.verb(true), PlanReview.verb(false)),
            (Some("approve"), Some("revise"))
        );
        assert_eq!(
            (Resume.verb(true), Resume.verb(false)),
            (Some("continue"), Some("stop"))
        );
        assert_eq!((Wake.verb(true), Wake.verb(false)), (None, None));
    }

    #[test]
    fn the_note_goes_under_feedback_at_a_plan_review_and_reason_elsewhere() {
        use DecideFamily::*;
        assert_eq!(
            decide_body(PlanReview, "revise", Some("shorter"), None, None).unwrap(),
            json!({"decision": "revise", "feedback": "shorter"})
        );
        assert_eq!(
            decide_body(Approvals, "approve", Some("ok"), None, None).unwrap(),
            json!({"decision": "approve", "reason": "ok"})
        );
        assert_eq!(
            decide_body(Resume, "continue", None, None, None).unwrap(),
            json!({"decision": "continue"})
        );
    }

    #[test]
    fn a_wake_needs_an_objective_and_only_a_wake_takes_one() {
        use DecideFamily::*;
        let meta = json!({"k": 1});
        assert_eq!(
            decide_body(Wake, "wake", None, Some("next"), Some(&meta)).unwrap(),
            json!({"objective": "next", "meta": {"k": 1}})
        );
        assert!(decide_body(Wake, "wake", None, None, None).is_err());
        assert!(decide_body(Wake, "approve", None, Some("x"), None).is_err());
        assert!(decide_body(Approvals, "approve", None, Some("x"), None).is_err());
    }

    #[test]
    fn a_run_face_lists_the_set_fields_and_the_result_text() {
        let v = json!({"taskId": "T", "sessionId": "S", "status": "completed", "error": null,
            "cancelRequested": false, "result": {"text": "hi"}});
        assert_eq!(
            run_face(&v),
            "taskId: T\nsessionId: S\nstatus: completed\ncancelRequested: false\nresult.text: hi\n"
        );
    }

    #[test]
    fn the_runs_table_has_a_row_per_run_and_the_next_page_flag() {
        let v = json!({"runs": [{"taskId": "T", "sessionId": "S", "status": "running", "objectivePreview": "a\nb"}],
            "nextCursor": "C"});
        let t = runs_table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[1].starts_with("T ")
                && lines[1].contains(" S ")
                && lines[1].ends_with("running       a b"),
            "{t}"
        );
        assert_eq!(lines[2], "more: sema runs --cursor C");
    }

    #[test]
    fn watch_notes_name_steers_and_parks_and_skip_text() {
        assert_eq!(
            event_note(&json!({"type": "text_delta", "delta": "x"})),
            None
        );
        assert_eq!(
            event_note(&json!({"type": "steering_injected", "message": "go"})),
            Some("[steer] go".into())
        );
        assert!(
            event_note(&json!({"type": "suspended", "gate": {"kind": "human"}}))
                .unwrap()
                .contains("parked on a human gate")
        );
        assert_eq!(
            event_note(&json!({"type": "tool_call"})),
            Some("[tool_call]".into())
        );
    }

    #[test]
    fn the_done_line_says_the_status_and_why() {
        assert_eq!(
            done_line(
                "T",
                &json!({"status": "failed", "error": "boom", "errorCode": "runner.script_failed"})
            ),
            "run T failed: boom (runner.script_failed)"
        );
        assert_eq!(
            done_line("T", &json!({"status": "completed"})),
            "run T completed"
        );
    }
}
