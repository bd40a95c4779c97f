//! The document agrees with the code: the route table, the role of each route, the error catalogue,
//! the request parsers, the SSE frames and the bodies the core builds.

use super::*;
use crate::{
    auth::Role,
    error::{ApiError, ErrorCode},
    route::{match_route, tests::TABLE, Access, Route},
};
use crate::{json, json::Value};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

fn doc() -> Value {
    serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
}

/// Every documented operation: `(METHOD, path template) -> operation`.
fn operations(doc: &Value) -> BTreeMap<(String, String), Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            assert!(
                METHODS.contains(&method.as_str()),
                "{path}: `{method}` is not an operation this API routes"
            );
            ops.insert((method.to_ascii_uppercase(), path.clone()), op.clone());
        }
    }
    ops
}

/// A concrete path for a template: every `{id}` becomes a safe sample id.
fn sample(template: &str) -> String {
    template
        .split('/')
        .map(|s| if s.starts_with('{') { "sample-1" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

fn resolved<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    let mut v = v;
    while let Some(r) = v.get("$ref").and_then(|r| r.as_str()) {
        v = doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {r}"));
    }
    v
}

#[test]
fn the_served_document_is_the_committed_one_without_the_whitespace_between_its_tokens() {
    let committed = include_str!("../../openapi.json");
    let (served, committed_tree): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(DOCUMENT).unwrap(),
        serde_json::from_str(committed).unwrap(),
    );
    assert_eq!(served, committed_tree);
    // A JSON string holds no raw control character, so none is left between tokens; and every
    // byte dropped was whitespace.
    assert!(!DOCUMENT.contains(['\n', '\t', '\r']));
    let dropped = committed.len() - DOCUMENT.len();
    let spaces = |t: &str| t.bytes().filter(|b| b.is_ascii_whitespace()).count();
    assert_eq!(spaces(committed) - spaces(DOCUMENT), dropped);
}

#[test]
fn every_documented_operation_is_routed_to_exactly_the_route_of_its_template() {
    let doc = doc();
    for ((method, path), _) in operations(&doc) {
        let route = match_route(&method, &sample(&path))
            .unwrap_or_else(|e| panic!("{method} {path} is documented but not routed: {e}"));
        assert_eq!(
            route.template(),
            (method.as_str(), path.as_str()),
            "{method} {path} routes to {route:?}, whose template differs"
        );
    }
}

#[test]
fn every_route_of_the_table_is_documented() {
    let ops = operations(&doc());
    let mut seen = BTreeSet::new();
    for (method, path) in TABLE {
        let route = match_route(method, path).unwrap();
        seen.insert(route.variant_index());
        let (m, t) = route.template();
        assert!(
            ops.contains_key(&(m.to_owned(), t.to_owned())),
            "{m} {t} ({route:?}) is routed but missing from crates/core/openapi.json"
        );
    }
    assert_eq!(
        seen.len(),
        Route::VARIANT_COUNT,
        "TABLE reaches every variant"
    );
    // A variant may stand for several operations (the console's page and its two assets); the
    // other direction (every operation routes to its template) is the test above.
    assert!(ops.len() >= Route::VARIANT_COUNT, "an operation per route");
}

/// The roles an operation's `security` admits, per scheme; `None` for a public operation.
fn documented_roles(op: &Value) -> Option<BTreeSet<String>> {
    let security = op["security"]
        .as_array()
        .expect("every operation states its security");
    if security.is_empty() {
        return None;
    }
    let roles = |scheme: &str| -> BTreeSet<String> {
        let req = security
            .iter()
            .find(|r| r.get(scheme).is_some())
            .unwrap_or_else(|| panic!("no `{scheme}` requirement"));
        req[scheme]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect()
    };
    let bearer = roles("bearer");
    assert_eq!(
        bearer,
        roles("localRole"),
        "both schemes name the same roles"
    );
    Some(bearer)
}

#[test]
fn every_operation_names_the_roles_its_route_admits() {
    let ops = operations(&doc());
    for (method, path) in TABLE {
        let route = match_route(method, path).unwrap();
        let (m, t) = route.template();
        let op = &ops[&(m.to_owned(), t.to_owned())];
        let expected = (route.access() != Access::Public).then(|| {
            [
                (Role::Client, "client"),
                (Role::Runner, "runner"),
                (Role::Operator, "operator"),
            ]
            .into_iter()
            .filter(|(r, _)| route.access().permits(*r))
            .map(|(_, name)| name.to_owned())
            .collect::<BTreeSet<_>>()
        });
        assert_eq!(documented_roles(op), expected, "{m} {t}");
    }
}

#[test]
fn the_error_code_schema_is_the_catalogue_with_each_status() {
    let doc = doc();
    let schema = &doc["components"]["schemas"]["ErrorCode"];
    let documented: Vec<&str> = schema["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let catalogue: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
    assert_eq!(
        documented, catalogue,
        "the ErrorCode enum is ErrorCode::ALL, in order"
    );
    for c in ErrorCode::ALL {
        assert_eq!(
            schema["x-sema-status"][c.code()].as_u64(),
            Some(u64::from(c.status())),
            "`{}` is documented with another status than {}",
            c.code(),
            c.status()
        );
        assert!(
            schema["x-sema-when"][c.code()].is_string(),
            "`{}` has no x-sema-when",
            c.code()
        );
    }
    assert_eq!(
        schema["x-sema-status"].as_object().unwrap().len(),
        ErrorCode::ALL.len()
    );
}

/// The codes an error response admits (`allOf: [Error, {errorCode: {enum}}]`), or `None` for a
/// success response.
fn error_codes(doc: &Value, resp: &Value) -> Option<Vec<String>> {
    let schema = resolved(doc, resp).pointer("/content/application~1json/schema")?;
    let all = schema.get("allOf")?.as_array()?;
    assert_eq!(all[0]["$ref"], "#/components/schemas/Error");
    Some(
        all[1]["properties"]["errorCode"]["enum"]
            .as_array()
            .expect("an error response enumerates its codes")
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect(),
    )
}

#[test]
fn every_error_response_lists_only_codes_of_its_status_and_every_code_is_answered_somewhere() {
    let doc = doc();
    let mut answered = BTreeSet::new();
    for ((method, path), op) in operations(&doc) {
        let responses = op["responses"].as_object().unwrap();
        for (status, resp) in responses {
            let status: u16 = status.parse().expect("numeric statuses only");
            let Some(codes) = error_codes(&doc, resp) else {
                assert!(
                    status < 400,
                    "{method} {path} {status}: an error without the Error schema"
                );
                continue;
            };
            for code in codes {
                let c = ErrorCode::from_code(&code)
                    .unwrap_or_else(|| panic!("{method} {path}: `{code}` is not in the catalogue"));
                assert_eq!(
                    c.status(),
                    status,
                    "{method} {path}: `{code}` under {status}"
                );
                answered.insert(c.code());
            }
        }
        // What any route may answer, whatever it does.
        let has = |s: &str| responses.contains_key(s);
        assert!(
            has("431"),
            "{method} {path}: header bounds apply everywhere"
        );
        if documented_roles(&op).is_some() {
            for s in ["400", "401", "403", "500", "503"] {
                assert!(
                    has(s),
                    "{method} {path}: authenticated routes may answer {s}"
                );
            }
        }
        if op.get("requestBody").is_some() {
            for s in ["400", "413", "415"] {
                assert!(has(s), "{method} {path}: body routes may answer {s}");
            }
        }
    }
    for c in ErrorCode::ALL {
        // A 405 answers a method the path does not have: no operation can document it.
        if c != ErrorCode::MethodNotAllowed {
            assert!(
                answered.contains(c.code()),
                "no operation documents `{}`",
                c.code()
            );
        }
    }
}

#[test]
fn every_response_carries_the_d1_header_but_the_websocket_upgrade() {
    let doc = doc();
    for ((method, path), op) in operations(&doc) {
        for (status, resp) in op["responses"].as_object().unwrap() {
            let header = resolved(&doc, resp).pointer("/headers/x-sema-d1");
            assert_eq!(
                header.is_some(),
                status != "101",
                "{method} {path} {status}: x-sema-d1"
            );
        }
    }
}

/// The field names a strict serde struct takes, read from its refusal of an unknown field.
fn parser_fields<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> BTreeSet<String> {
    let e = T::deserialize(crate::json::Tree(&json!({"zz-unknown": 1})))
        .unwrap_err()
        .to_string();
    let expected = e
        .split_once("expected")
        .unwrap_or_else(|| panic!("{e}: not a refusal of an unknown field"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn schema_fields(doc: &Value, name: &str) -> BTreeSet<String> {
    let s = &doc["components"]["schemas"][name];
    assert_eq!(
        s["additionalProperties"],
        json!(false),
        "{name}: the parser refuses unknown fields"
    );
    s["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn required(doc: &Value, name: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][name]["required"]
        .as_array()
        .map(|r| r.iter().map(|x| x.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn every_request_body_schema_names_exactly_the_fields_its_parser_takes() {
    use crate::{gate, leader_wire, runner_wire, wire};
    let doc = doc();
    let cases: Vec<(&str, BTreeSet<String>)> = vec![
        ("SubmitRun", parser_fields::<wire::SubmitRunBody>()),
        ("SubmitTask", parser_fields::<runner_wire::TaskBody>()),
        ("Steer", parser_fields::<runner_wire::SteerBody>()),
        ("LeaseRequest", parser_fields::<runner_wire::LeaseBody>()),
        ("Heartbeat", parser_fields::<runner_wire::HeartbeatBody>()),
        ("AppendEvents", parser_fields::<runner_wire::EventsBody>()),
        ("EventIn", parser_fields::<runner_wire::EventIn>()),
        ("Finish", parser_fields::<runner_wire::FinishBody>()),
        ("Park", parser_fields::<gate::ParkBody>()),
        (
            "SubmitLeader",
            parser_fields::<leader_wire::SubmitLeaderBody>(),
        ),
    ];
    for (name, fields) in cases {
        assert_eq!(schema_fields(&doc, name), fields, "{name}");
    }
    // Nested bodies.
    let park = &doc["components"]["schemas"]["Park"]["properties"]["gate"];
    let gate_fields: BTreeSet<String> = park["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(park["additionalProperties"], json!(false));
    assert_eq!(gate_fields, parser_fields::<gate::GateBody>());
    let sub = &doc["components"]["schemas"]["SubmitLeader"]["properties"]["subtasks"]["items"];
    assert_eq!(sub["additionalProperties"], json!(false));
    let sub_fields: BTreeSet<String> = sub["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(sub_fields, parser_fields::<leader_wire::SubtaskBody>());
    // The decide paths take `decision` and one note key each (the other is refused by validate).
    let decide = parser_fields::<gate::DecideBody>();
    for (name, path) in [
        ("DecideApproval", gate::DecidePath::Approvals),
        ("DecidePlanReview", gate::DecidePath::PlanReview),
        ("DecideResume", gate::DecidePath::Resume),
    ] {
        assert_eq!(schema_fields(&doc, name), decide, "{name}");
        // The path's own note is text; the other key is taken only as null, as `validate` does.
        let props = &doc["components"]["schemas"][name]["properties"];
        let other = if path.note_key() == "reason" {
            "feedback"
        } else {
            "reason"
        };
        assert_eq!(
            props[path.note_key()]["type"],
            json!(["string", "null"]),
            "{name}"
        );
        assert_eq!(props[other]["type"], json!("null"), "{name}");
        let parse = |v: Value| {
            gate::DecideBody::deserialize(crate::json::Tree(&v))
                .unwrap()
                .validate(path)
        };
        let word = path.decisions()[0].as_str();
        assert!(
            parse(json!({"decision": word, other: null})).is_ok(),
            "{name}"
        );
        assert!(
            parse(json!({"decision": word, other: "x"})).is_err(),
            "{name}"
        );
        let words: Vec<Value> = path.decisions().iter().map(|d| json!(d.as_str())).collect();
        assert_eq!(
            doc["components"]["schemas"][name]["properties"]["decision"]["enum"],
            Value::Array(words),
            "{name}"
        );
    }
    // The wake body is checked by its handler: objective and meta only.
    assert_eq!(
        schema_fields(&doc, "Wake"),
        BTreeSet::from(["objective".to_owned(), "meta".to_owned()])
    );
    // A field the parser requires (no serde default) is required in the schema too.
    for (name, parse) in [
        ("SubmitRun", r#"{}"#),
        ("Heartbeat", r#"{}"#),
        ("Finish", r#"{}"#),
    ] {
        let e = match name {
            "SubmitRun" => serde_json::from_str::<wire::SubmitRunBody>(parse).unwrap_err(),
            "Heartbeat" => serde_json::from_str::<runner_wire::HeartbeatBody>(parse).unwrap_err(),
            _ => serde_json::from_str::<runner_wire::FinishBody>(parse).unwrap_err(),
        };
        let missing = e.to_string();
        let field = missing.split('`').nth(1).unwrap().to_owned();
        assert!(required(&doc, name).contains(&field), "{name}: {field}");
    }
}

#[test]
fn the_body_routes_take_the_schema_their_handler_parses() {
    let ops = operations(&doc());
    for (method, path, schema) in [
        ("POST", "/v1/runs", "SubmitRun"),
        ("POST", "/v1/tasks", "SubmitTask"),
        ("POST", "/v1/runs/{taskId}/steer", "Steer"),
        ("POST", "/v1/runner/lease", "LeaseRequest"),
        ("POST", "/v1/runs/{taskId}/heartbeat", "Heartbeat"),
        ("POST", "/v1/runs/{taskId}/events", "AppendEvents"),
        ("POST", "/v1/runs/{taskId}/finish", "Finish"),
        ("POST", "/v1/runs/{taskId}/park", "Park"),
        ("POST", "/v1/approvals/{sessionId}/decide", "DecideApproval"),
        (
            "POST",
            "/v1/assistant/tasks/{taskId}/plan_review",
            "DecidePlanReview",
        ),
        (
            "POST",
            "/v1/assistant/tasks/{taskId}/resume",
            "DecideResume",
        ),
        ("POST", "/v1/sessions/{sessionId}/wake", "Wake"),
        ("POST", "/v1/leader/runs", "SubmitLeader"),
    ] {
        let op = &ops[&(method.to_owned(), path.to_owned())];
        assert_eq!(
            op.pointer("/requestBody/content/application~1json/schema/$ref"),
            Some(&json!(format!("#/components/schemas/{schema}"))),
            "{method} {path}"
        );
    }
    let with_body = ops
        .values()
        .filter(|o| o.get("requestBody").is_some())
        .count();
    assert_eq!(with_body, 13, "every body route is listed above");
}

// ---- a small JSON Schema checker (the keywords this document uses; any other fails loudly) ------

fn check(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return if schema == &json!(true) || schema == &json!({}) {
            Ok(())
        } else {
            Err(format!("{at}: schema {schema}"))
        };
    };
    for (k, rule) in s {
        let ok = match k.as_str() {
            "$ref" => check(doc, resolved(doc, schema), v, at).map(|_| true)?,
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
                    _ => return Err(format!("{at}: type {rule}")),
                };
                types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "number" => v.is_number(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    _ => false,
                })
            }
            "const" => v == rule,
            "enum" => rule.as_array().unwrap().contains(v),
            "required" => rule
                .as_array()
                .unwrap()
                .iter()
                .all(|r| !v.is_object() || v.get(r.as_str().unwrap()).is_some()),
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (name, sub) in rule.as_object().unwrap() {
                        if let Some(x) = o.get(name) {
                            check(doc, sub, x, &format!("{at}.{name}"))?;
                        }
                    }
                }
                true
            }
            "additionalProperties" => match (v.as_object(), rule) {
                (Some(o), Value::Bool(false)) => {
                    let known = s.get("properties").and_then(|p| p.as_object());
                    match o.keys().find(|k| !known.is_some_and(|p| p.contains_key(k))) {
                        Some(extra) => return Err(format!("{at}: unexpected `{extra}`")),
                        None => true,
                    }
                }
                _ => true,
            },
            "items" => {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    check(doc, rule, x, &format!("{at}[{i}]"))?;
                }
                true
            }
            "allOf" => {
                for sub in rule.as_array().unwrap() {
                    check(doc, sub, v, at)?;
                }
                true
            }
            "anyOf" => rule
                .as_array()
                .unwrap()
                .iter()
                .any(|sub| check(doc, sub, v, at).is_ok()),
            "oneOf" => {
                rule.as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| check(doc, sub, v, at).is_ok())
                    .count()
                    == 1
            }
            "not" => check(doc, rule, v, at).is_err(),
            "minimum" => v.as_f64().is_none_or(|n| n >= rule.as_f64().unwrap()),
            "maximum" => v.as_f64().is_none_or(|n| n <= rule.as_f64().unwrap()),
            "minLength" => v
                .as_str()
                .is_none_or(|t| t.chars().count() as u64 >= rule.as_u64().unwrap()),
            "maxLength" => v
                .as_str()
                .is_none_or(|t| t.chars().count() as u64 <= rule.as_u64().unwrap()),
            "minItems" => v
                .as_array()
                .is_none_or(|a| a.len() as u64 >= rule.as_u64().unwrap()),
            "maxItems" => v
                .as_array()
                .is_none_or(|a| a.len() as u64 <= rule.as_u64().unwrap()),
            "maxProperties" => v
                .as_object()
                .is_none_or(|o| o.len() as u64 <= rule.as_u64().unwrap()),
            "contentMediaType" => {
                assert_eq!(rule, "application/json", "{at}");
                if let (Some(text), Some(inner)) = (v.as_str(), s.get("contentSchema")) {
                    let parsed: Value = serde_json::from_str(text)
                        .map_err(|e| format!("{at}: not JSON ({e}): {text}"))?;
                    check(doc, inner, &parsed, &format!("{at}(json)"))?;
                }
                true
            }
            "contentSchema" => true,
            // Patterns are checked by schemathesis against the live Worker; prose is prose.
            "pattern" | "description" => true,
            other if other.starts_with("x-") => true,
            other => return Err(format!("{at}: keyword `{other}` is not supported here")),
        };
        if !ok {
            return Err(format!("{at}: {v} fails `{k}: {rule}`"));
        }
    }
    Ok(())
}

fn validates(schema: &str, v: &Value) {
    let doc = doc();
    let s = json!({ "$ref": format!("#/components/schemas/{schema}") });
    if let Err(e) = check(&doc, &s, v, schema) {
        panic!("{e}");
    }
}

fn refuses(schema: &str, v: &Value) {
    let doc = doc();
    let s = json!({ "$ref": format!("#/components/schemas/{schema}") });
    assert!(check(&doc, &s, v, schema).is_err(), "{schema} admits {v}");
}

/// An SSE frame as its fields: `event`, `id`, and its one `data:` line (the text, as schemathesis
/// reads an event).
fn frame_fields(frame: &str) -> Value {
    assert!(frame.ends_with("\n\n"), "{frame:?}");
    let mut o = crate::json::Map::new();
    for line in frame.trim_end().lines() {
        let (k, v) = line.split_once(": ").expect("field: value");
        let v = match k {
            "data" | "event" | "id" => json!(v),
            other => panic!("unexpected field {other}"),
        };
        assert!(o.insert(k.to_owned(), v).is_none(), "one {k} line");
    }
    Value::Object(o)
}

#[test]
fn every_sse_frame_the_core_writes_is_one_of_the_documented_frames() {
    use crate::sse;
    let conflict = crate::conflict::Conflict {
        error: "busy".into(),
        active_task_id: Some("T".into()),
        active_task_status: Some("suspended".into()),
        pending_gate: Some(crate::conflict::PendingGate {
            kind: "tool_approval".into(),
            decide_path: "/v1/approvals/S/decide".into(),
        }),
    };
    let frames = [
        sse::meta_frame("t", "s"),
        sse::event_frame(7, "text_delta", r#"{"delta":"hi"}"#, Some("e-1")),
        sse::event_frame(8, "x", "[1,2]", None),
        sse::event_frame(9, "meta", "{}", None),
        sse::done_frame(
            10,
            &json!({"status": "completed", "result": {"text": "ok"}}),
        ),
        sse::done_frame(
            3,
            &json!({"status": "failed", "error": "e", "errorCode": "run.stalled"}),
        ),
        sse::refusal_done_frame(&conflict.done_result()),
        sse::HEARTBEAT_FRAME.to_owned(),
    ];
    for f in &frames {
        validates("SseFrame", &frame_fields(f));
    }
    // And the frame schemas are not vacuous.
    refuses("SseFrame", &json!({"data": r#"{"type":"done"}"#}));
    refuses(
        "SseFrame",
        &json!({"event": "meta", "data": r#"{"type":"meta"}"#}),
    );
    refuses(
        "SseFrame",
        &json!({"id": "1", "data": "{\"type\":\"done\",\"result\":{\"status\":\"x\"}}", "event": "x"}),
    );
    refuses("SseFrame", &json!({"id": "1", "data": "not json"}));
}

fn row(status: &str) -> crate::run::RunRow {
    crate::json::serde_from_value(json!({
        "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
        "status": status, "objective_preview": "p", "result": "{\"ok\":true}",
        "error": null, "error_code": null, "held_by": if status == "running" { Some("r1") } else { None },
        "lease_epoch": 1, "cancel_requested": false, "heartbeat_at": 1,
        "last_seq": 2, "created_at": 1, "updated_at": 2
    }))
    .unwrap()
}

fn body((_, text): crate::answer::Answer) -> Value {
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_bodies_the_core_builds_match_their_response_schemas() {
    use crate::{answer, liveness::Staleness, session_protocol::CancelReply};
    let s = Staleness::from_secs(None, None, None);
    for status in ["running", "completed", "cancelled"] {
        validates(
            "RunFace",
            &serde_json::from_str(&answer::face(&row(status), 10, &s)).unwrap(),
        );
        validates("RunFace", &body(answer::finished(&row(status))));
    }
    let stale = serde_json::from_str(&answer::face(&row("running"), i64::MAX / 2, &s)).unwrap();
    validates("RunFace", &stale);
    let cancel = |run| CancelReply {
        task_id: "T".into(),
        session_id: "S".into(),
        run,
        claim_released: false,
    };
    let schema = |b: &Value| {
        let doc = doc();
        let s = json!({"anyOf": [{"$ref": "#/components/schemas/RunFace"}, {"$ref": "#/components/schemas/CancelNoRow"}]});
        check(&doc, &s, b, "cancel").unwrap();
    };
    schema(&body(answer::cancelled(&cancel(None), 1, &s)));
    schema(&body(answer::cancelled(
        &cancel(Some(row("cancelled"))),
        1,
        &s,
    )));
    validates(
        "WaitResult",
        &body(answer::waited(&row("completed"), 1, &s)),
    );
    validates(
        "WaitResult",
        &body(answer::waited(&row("running"), i64::MAX / 2, &s)),
    );
    validates("RunFace", &body(answer::waited(&row("running"), 1, &s)));
    validates("Appended", &body(answer::appended(&[1, 2], false, 0)));
    validates("Appended", &body(answer::appended(&[3], true, 2)));
    validates("SteerQueued", &body(answer::steer_queued("T", 3)));
    validates("SessionStats", &body(answer::stats(1, 2, Some("T"), 3)));
    validates("SessionStats", &body(answer::stats(0, 0, None, 0)));
    validates(
        "Admitted",
        &serde_json::from_str(&crate::admission::admitted_body("T", "S")).unwrap(),
    );
    refuses("RunFace", &json!({"taskId": "T"}));
}

#[test]
fn every_refusal_body_matches_the_error_schema() {
    let conflict = crate::conflict::Conflict {
        error: "busy".into(),
        active_task_id: None,
        active_task_status: Some("needs_review".into()),
        pending_gate: Some(crate::conflict::PendingGate {
            kind: "plan_review".into(),
            decide_path: "/v1/assistant/tasks/T/plan_review".into(),
        }),
    };
    let samples = [
        ApiError::invalid_field("sessionId", "bad"),
        ApiError::payload_too_large(1),
        ApiError::method_not_allowed("GET, POST"),
        ApiError::header_too_large("accept", 1024),
        ApiError::steer_queue_full(64, 1 << 20),
        ApiError::too_many_streams(256, "this run"),
        conflict.to_api_error(),
        crate::auth::not_configured("SEMA_TOKENS is not set"),
    ];
    for e in samples {
        validates("Error", &serde_json::from_str(&e.body()).unwrap());
    }
    for c in ErrorCode::ALL {
        validates(
            "Error",
            &serde_json::from_str(&ApiError::new(c, "x").body()).unwrap(),
        );
    }
    refuses("Error", &json!({"error": "x", "errorCode": "no.such_code"}));
}

#[test]
fn the_docs_page_lists_every_operation_and_its_style_is_the_one_the_csp_allows() {
    let page = docs_page(DOCUMENT);
    for ((method, path), op) in operations(&doc()) {
        let id = op["operationId"].as_str().unwrap();
        assert!(page.contains(&format!("<section id=\"{id}\">")), "{id}");
        assert!(
            page.contains(&format!(
                "<span class=\"m\">{method}</span> <span class=\"p\">{}</span>",
                escape(&path)
            )),
            "{method} {path}"
        );
    }
    for c in ErrorCode::ALL {
        assert!(page.contains(&format!(
            "<code>{}</code></td><td>{}</td>",
            c.code(),
            c.status()
        )));
    }
    assert!(!page.contains("<script"), "the page runs nothing");
    use sha2::Digest;
    let digest = sha2::Sha256::digest(DOCS_STYLE.as_bytes());
    let hash = format!("'sha256-{}'", base64(&digest));
    assert!(DOCS_CSP.contains(&hash), "DOCS_CSP must allow {hash}");
    assert!(page.contains(&format!("<style>{DOCS_STYLE}</style>")));
}

#[test]
fn the_docs_page_escapes_what_the_document_says() {
    let page = docs_page(
        r#"{"openapi":"3.1.0","info":{"title":"<x>","version":"1","description":"a `<b>` & c"},
            "tags":[{"name":"t"}],
            "paths":{"/p":{"get":{"operationId":"o\"","tags":["t"],"summary":"<img>","security":[],"responses":{}}}}}"#,
    );
    assert!(!page.contains("<x>") && !page.contains("<img>") && !page.contains("<b>"));
    assert!(page.contains("<code>&lt;b&gt;</code> &amp; c"));
    assert!(page.contains("id=\"o&quot;\""));
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn base64_matches_the_rfc_vectors() {
    for (raw, enc) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(raw.as_bytes()), enc);
    }
}
