use crate::helpers::{unique, Client};
use serde_json::json;

fn raw_post(path: &str, content_type: Option<&str>, body: &[u8]) -> crate::helpers::Resp {
    let mut headers = vec![];
    if let Some(ct) = content_type {
        headers.push(("Content-Type", ct));
    }
    Client::anonymous().send("POST", path, Some(body), &headers)
}

#[test]
fn malformed_json_is_400_invalid_json() {
    raw_post("/v1/runs", Some("application/json"), b"{\"sessionId\":")
        .assert_refusal(400, "invalid_json");
}

#[test]
fn a_non_json_content_type_is_415() {
    let body = json!({"sessionId": unique("ct"), "objective": "o"}).to_string();
    raw_post("/v1/runs", Some("text/plain"), body.as_bytes())
        .assert_refusal(415, "unsupported_media_type");
    raw_post("/v1/runs", None, body.as_bytes()).assert_refusal(415, "unsupported_media_type");
}

#[test]
fn unknown_missing_and_mistyped_fields_are_400_and_name_the_problem() {
    let c = Client::anonymous();
    let s = unique("fields");
    for (body, needle) in [
        (
            json!({"sessionId": s, "objective": "o", "priority": 1}),
            "priority",
        ),
        (json!({"objective": "o"}), "sessionId"),
        (json!({"sessionId": s}), "objective"),
        (json!({"sessionId": s, "objective": 7}), "invalid type"),
        (json!({"sessionId": s, "objective": ""}), "objective"),
        (
            json!({"sessionId": s, "objective": "o", "meta": "m"}),
            "meta",
        ),
        (json!([1, 2]), "object"),
    ] {
        let r = c.post_json("/v1/runs", &body);
        let v = r.assert_refusal(400, "invalid_request");
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{body}: {}",
            r.body
        );
    }
    // Nothing was admitted into the session by any of these.
    assert_eq!(c.submit(&s, json!({})).status, 202);
}

#[test]
fn unsafe_ids_are_400_in_the_body_and_in_the_path() {
    let c = Client::anonymous();
    for bad in ["a/b", "..", "", "sp ace", &"x".repeat(65)] {
        let r = c.post_json("/v1/runs", &json!({"sessionId": bad, "objective": "o"}));
        assert_eq!(
            r.assert_refusal(400, "invalid_request")["field"],
            "sessionId",
            "{bad:?}"
        );
        let r = c.post_json(
            "/v1/runs",
            &json!({"sessionId": unique("ok"), "objective": "o", "taskId": bad}),
        );
        assert_eq!(
            r.assert_refusal(400, "invalid_request")["field"],
            "taskId",
            "{bad:?}"
        );
    }
    c.get("/v1/runs/a%2Fb")
        .assert_refusal(400, "invalid_request");
    c.cancel("bad%20id").assert_refusal(400, "invalid_request");
}

#[test]
fn an_objective_over_64_kib_is_413_and_one_of_exactly_64_kib_is_admitted() {
    let c = Client::anonymous();
    let big = c.post_json(
        "/v1/runs",
        &json!({"sessionId": unique("big"), "objective": "x".repeat(65_537)}),
    );
    assert_eq!(
        big.assert_refusal(413, "payload_too_large")["field"],
        "objective"
    );
    let max = c.post_json(
        "/v1/runs",
        &json!({"sessionId": unique("max"), "objective": "x".repeat(65_536)}),
    );
    assert_eq!(max.status, 202, "{}", max.body);
}

#[test]
fn a_body_over_1_mib_is_413() {
    let meta = "y".repeat(1024 * 1024);
    let body = json!({"sessionId": unique("huge"), "objective": "o", "meta": {"blob": meta}});
    Client::anonymous()
        .post_json("/v1/runs", &body)
        .assert_refusal(413, "payload_too_large");
}

#[test]
fn bad_idempotency_keys_and_principal_headers_are_400() {
    let body = json!({"sessionId": unique("hdr"), "objective": "o"});
    let long = "k".repeat(256);
    Client::anonymous()
        .post_json_with("/v1/runs", &body, &[("Idempotency-Key", long.as_str())])
        .assert_refusal(400, "invalid_request");
    Client::anonymous()
        .with_role("admin")
        .post_json("/v1/runs", &body)
        .assert_refusal(400, "invalid_request");
}

#[test]
fn unknown_routes_are_404_and_wrong_methods_405_with_allow() {
    let c = Client::anonymous();
    c.get("/v1/nothing").assert_refusal(404, "not_found");
    let r = c.send("DELETE", "/v1/runs", None, &[]);
    r.assert_refusal(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("GET, POST"));
    c.send("PUT", "/v1/runs/abc/cancel", None, &[])
        .assert_refusal(405, "method_not_allowed");
}

#[test]
fn bad_list_parameters_are_400() {
    let c = Client::anonymous();
    for q in [
        "limit=0",
        "limit=1000",
        "limit=ten",
        "cursor=zz",
        "sessionId=a%2Fb",
        "order=asc",
    ] {
        c.get(&format!("/v1/runs?{q}"))
            .assert_refusal(400, "invalid_request");
    }
}

#[test]
fn a_chunked_body_over_1_mib_is_refused_with_413_and_admits_nothing() {
    let session = unique("chunked");
    // A valid JSON object 2 MiB long, sent without Content-Length (chunked transfer encoding).
    let pad = "x".repeat(2 * 1024 * 1024);
    let body = format!(r#"{{"sessionId":"{session}","objective":"o","meta":{{"pad":"{pad}"}}}}"#);
    let url = format!("{}/v1/runs", crate::helpers::base_url());
    let resp = match ureq::post(&url)
        .set("Content-Type", "application/json")
        .send(std::io::Cursor::new(body.into_bytes()))
    {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        // The server may answer and close before it has read the rest of the upload.
        Err(e) => panic!("transport error instead of a 413: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap_or_default();
    assert_eq!(status, 413, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["errorCode"], "payload_too_large");
    let runs = Client::anonymous().get(&format!("/v1/runs?sessionId={session}"));
    assert_eq!(runs.json()["runs"], json!([]));
}

#[test]
fn integers_beyond_2_pow_53_are_a_400_never_a_500() {
    let c = Client::anonymous();
    let task = c.submit(&unique("big"), json!({})).admitted();
    let events = format!("/v1/runs/{task}/events");
    c.get(&format!("{events}?after=9007199254740992"))
        .assert_refusal(400, "invalid_request");
    c.send(
        "GET",
        &events,
        None,
        &[
            ("Accept", "text/event-stream"),
            ("Last-Event-ID", "9007199254740992"),
        ],
    )
    .assert_refusal(400, "invalid_request");
    // A malformed Last-Event-ID is refused on the JSON page too, where it would mean nothing;
    // a blank one is absent.
    for bad in ["abc", "-1", "9007199254740992"] {
        c.send("GET", &events, None, &[("Last-Event-ID", bad)])
            .assert_refusal(400, "invalid_request");
    }
    assert_eq!(
        c.send("GET", &events, None, &[("Last-Event-ID", " ")])
            .status,
        200
    );
    let cursor: String = format!("{}:{task}", 1u64 << 53)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    c.get(&format!("/v1/runs?cursor={cursor}"))
        .assert_refusal(400, "invalid_request");
    c.clone()
        .with_role("runner")
        .post_json(
            &format!("/v1/runs/{task}/heartbeat"),
            &json!({"runnerId": "r", "leaseEpoch": 9007199254740992u64}),
        )
        .assert_refusal(400, "invalid_request");
    c.cancel(&task);
}

#[test]
fn a_malformed_last_event_id_on_post_v1_tasks_is_a_400_in_either_form_and_admits_nothing() {
    let session = unique("tasks-anchor");
    let c = Client::anonymous();
    for stream in [false, true] {
        let body = json!({"sessionId": session, "objective": "o", "stream": stream, "waitMs": 100});
        c.post_json_with("/v1/tasks", &body, &[("Last-Event-ID", ".mv")])
            .assert_refusal(400, "invalid_request");
    }
    // Nothing was admitted: the session has no run and is still free.
    let runs = c.get(&format!("/v1/runs?sessionId={session}"));
    assert_eq!(runs.json()["runs"], json!([]));
    let body = json!({"sessionId": session, "objective": "o"});
    assert_eq!(c.post_json("/v1/runs", &body).status, 202);
}

#[test]
fn a_header_longer_than_the_api_reads_is_431_naming_it_and_admits_nothing() {
    let session = unique("hdr-size");
    let body = json!({"sessionId": session, "objective": "o"});
    let c = Client::anonymous();
    for (name, len) in [
        ("Authorization", 8 * 1024),
        ("X-Sema-Principal", 1024),
        ("Idempotency-Key", 2 * 1024),
        ("Last-Event-ID", 100),
    ] {
        let value = "7".repeat(len);
        let e = c
            .post_json_with("/v1/runs", &body, &[(name, value.as_str())])
            .assert_refusal(431, "header_too_large");
        assert_eq!(e["header"], name.to_ascii_lowercase());
        assert!(e["limit"].as_u64().unwrap() < len as u64);
    }
    // Nothing was admitted: the session is still free.
    assert_eq!(c.post_json("/v1/runs", &body).status, 202);
}
