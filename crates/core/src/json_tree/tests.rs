//! The parser and writer held to serde_json: the same trees from the same texts, the same errors
//! in the same words at the same places from broken ones, the same text written back.

use super::*;

/// Texts that cover every kind of value, escape and nesting (valid JSON).
const VALID: &[&str] = &[
    r#"{"a":1,"b":[true,false,null],"c":{"d":"e"},"f":-2,"g":15,"h":"\u00e9\n\"\\\/\b\f\r\t"}"#,
    r#"  [ 0 , -0 , 12e3 , -1.25E-2 , 18446744073709551615 , -9223372036854775808 ]  "#,
    r#"{"z":1,"a":2,"m":{"y":[],"b":{}},"a":3}"#,
    "\"\\ud83d\\ude00 \\u0041 caf\u{e9} \u{1f600}\"",
    "[\"\\u0000\\u001f\", \"tab\\there\", {\"\": \"\"}]",
    "\n{\n  \"multi\": [1,\n 2],\n  \"line\": \"x\"\n}\n",
    r#"{"big":123456789012345678901234567890,"neg":-123456789012345678901234567890,"f":1e300}"#,
    "0",
    "\"plain\"",
    "true",
];

/// Bytes each byte of a valid text is replaced by, to break it.
const BREAKERS: &[u8] = b"\"\\,]}:[{x0-.e\n\x01 u";

fn serde_parse(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str::<serde_json::Value>(text).map_err(|e| e.to_string())
}

/// Ours beside serde_json's on `text`: the same error, or trees that serde_json reads as equal
/// (ours written and read back by serde_json, so a number kept as text compares by its value).
fn assert_same(text: &str) {
    let ours = parse(text);
    let theirs = serde_parse(text);
    match (&ours, &theirs) {
        (Ok(v), Ok(t)) => {
            let back = serde_parse(&v.text()).expect("ours writes JSON");
            assert_eq!(&back, t, "tree of {text:?}");
        }
        (Err(e), Err(t)) => assert_eq!(&e.to_string(), t, "error of {text:?}"),
        _ => panic!("{text:?}: ours {ours:?}, serde_json {theirs:?}"),
    }
}

#[test]
fn every_valid_text_parses_to_the_tree_serde_json_reads() {
    for text in VALID {
        assert!(parse(text).is_ok(), "{text}");
        assert_same(text);
    }
}

#[test]
fn broken_texts_are_refused_with_serde_json_s_message_at_its_line_and_column() {
    let mut cases = 0;
    for text in VALID {
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut variants = vec![bytes[..cut].to_vec()];
            let mut without = bytes.to_vec();
            without.remove(cut);
            variants.push(without);
            for b in BREAKERS {
                let mut with = bytes.to_vec();
                with[cut] = *b;
                variants.push(with.clone());
                with.insert(cut, *b);
                variants.push(with);
            }
            for v in variants {
                if let Ok(t) = std::str::from_utf8(&v) {
                    assert_same(t);
                    cases += 1;
                }
            }
        }
    }
    for text in [
        "",
        " ",
        "nul",
        "nulx",
        "tru",
        "[1,]",
        "{\"a\":1,}",
        "{,}",
        "[,1]",
        "{\"a\" 1}",
        "{1:2}",
        "01",
        "-",
        "-a",
        "1.",
        "1.e3",
        "1e",
        "1e+",
        "1ex",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"\\ud800\"",
        "\"\\ud800x\"",
        "\"\\ud800\\n\"",
        "\"\\ud800\\u0041\"",
        "\"\\udc00\"",
        "\"a\u{1}b\"",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "1 2",
        "[\n1,\n\n x]",
        "\"unterminated",
    ] {
        assert_same(text);
        assert!(parse(text).is_err(), "{text:?} is refused");
        cases += 1;
    }
    assert!(cases > 5_000, "{cases} cases");
}

#[test]
fn nesting_stops_where_serde_json_stops_it() {
    for depth in [126, 127, 128, 129] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_same(&arrays);
        let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        assert_same(&objects);
    }
    assert!(parse(&format!("{}{}", "[".repeat(127), "]".repeat(127))).is_ok());
    assert!(parse(&format!("{}{}", "[".repeat(128), "]".repeat(128))).is_err());
}

#[test]
fn the_writer_writes_what_serde_json_writes() {
    let all_controls: String = (0u8..0x20).map(char::from).collect();
    for s in [all_controls.as_str(), "\"\\/", "é€😀", "", "plain text"] {
        assert_eq!(
            Value::from(s).text(),
            serde_json::to_string(s).unwrap(),
            "{s:?}"
        );
    }
    for text in VALID {
        let ours = parse(text).unwrap();
        let theirs: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        // Without numbers kept as text, the texts are the same byte for byte.
        if !text.contains(['.', 'e', 'E']) && !text.contains("-0") && !text.contains("123456789012")
        {
            assert_eq!(
                ours.text(),
                serde_json::to_string(&theirs).unwrap(),
                "{text}"
            );
        }
    }
}

#[test]
fn numbers_are_integers_when_they_fit_and_their_own_text_otherwise() {
    let v = parse(r#"[0, 7, -7, 18446744073709551615, 18446744073709551616, -0, 1.50, 2E3, -9223372036854775809]"#).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items[0].as_u64(), Some(0));
    assert_eq!(items[1].as_i64(), Some(7));
    assert_eq!(items[2].as_i64(), Some(-7));
    assert_eq!(items[2].as_u64(), None);
    assert_eq!(items[3].as_u64(), Some(u64::MAX));
    assert_eq!(items[3].as_i64(), None);
    for (i, text) in [
        (4, "18446744073709551616"),
        (5, "-0"),
        (6, "1.50"),
        (7, "2E3"),
        (8, "-9223372036854775809"),
    ] {
        assert_eq!(items[i].as_i64(), None, "{text}");
        assert_eq!(items[i].text(), text);
    }
    assert_eq!(
        v.text(),
        "[0,7,-7,18446744073709551615,18446744073709551616,-0,1.50,2E3,-9223372036854775809]"
    );
    assert_eq!(Value::from(i64::MIN).text(), i64::MIN.to_string());
    assert_eq!(Value::from(-1i32), Value::from(-1i64));
    assert_eq!(Value::from(3u8), Value::from(3i64), "one integer, one way");
}

#[test]
fn an_object_keeps_its_keys_sorted_and_the_last_of_a_repeated_key() {
    let v = parse(r#"{"b":1,"a":2,"b":3,"c":{"y":1,"x":2}}"#).unwrap();
    assert_eq!(v.text(), r#"{"a":2,"b":3,"c":{"x":2,"y":1}}"#);
    let mut m = Map::new();
    assert_eq!(m.insert("k".into(), Value::from(1)), None);
    assert_eq!(m.insert("a".into(), Value::from(2)), None);
    assert_eq!(m.insert("k".into(), Value::from(3)), Some(Value::from(1)));
    assert_eq!(m.keys().cloned().collect::<Vec<_>>(), ["a", "k"]);
    assert_eq!(m.remove("a"), Some(Value::from(2)));
    assert_eq!(m.remove("a"), None);
    assert_eq!(m.len(), 1);
    let collected: Map = [("z", 1), ("a", 2), ("z", 3)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::from(v)))
        .collect();
    assert_eq!(Value::Object(collected).text(), r#"{"a":2,"z":3}"#);
}

#[test]
fn indexing_a_missing_key_or_position_gives_null_and_pointers_follow_rfc_6901() {
    let v = parse(r#"{"a":[{"b/c":1,"d~e":2}],"s":"x"}"#).unwrap();
    assert!(v["missing"].is_null());
    assert!(v["a"][5].is_null());
    assert!(v["s"]["deeper"].is_null());
    assert_eq!(v["a"][0]["b/c"], 1);
    assert_eq!(v.pointer("/a/0/b~1c"), Some(&Value::from(1)));
    assert_eq!(v.pointer("/a/0/d~0e"), Some(&Value::from(2)));
    assert_eq!(v.pointer(""), Some(&v));
    assert_eq!(v.pointer("/a/01"), None);
    assert_eq!(v.pointer("a"), None);
    let mut w = Value::Null;
    w["k"] = Value::from("v");
    assert_eq!(w.text(), r#"{"k":"v"}"#);
}

#[test]
fn the_json_macro_builds_the_tree_serde_json_s_builds() {
    let name = String::from("n");
    let n = 7u32;
    let none: Option<&str> = None;
    let list = vec!["a", "b"];
    let ours = crate::json!({
        "name": name, "n": n, "neg": -3, "none": none, "null": null, "t": true,
        "list": list, "nested": {"a": [1, {"b": null}, [], {}], "e": {}}, "expr": n + 1,
    });
    let theirs = serde_json::json!({
        "name": name, "n": n, "neg": -3, "none": none, "null": null, "t": true,
        "list": list, "nested": {"a": [1, {"b": null}, [], {}], "e": {}}, "expr": n + 1,
    });
    assert_eq!(ours.text(), serde_json::to_string(&theirs).unwrap());
    assert_eq!(name, "n", "values are taken by reference");
    assert_eq!(crate::json!([]).text(), "[]");
    assert_eq!(crate::json!(null).text(), "null");
    assert_eq!(crate::json!("s").text(), "\"s\"");
}

#[test]
fn shape_errors_are_worded_as_serde_json_words_them() {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
        count: u8,
    }
    for text in [
        r#"{"name": null, "count": 1}"#,
        r#"{"name": "x", "count": 300}"#,
        r#"{"name": "x", "count": -1}"#,
        r#"{"name": true, "count": 1}"#,
        r#"{"name": [], "count": 1}"#,
        r#"{"name": "x"}"#,
        r#"null"#,
    ] {
        let ours = crate::json::serde_from_text::<Shape>(text)
            .unwrap_err()
            .to_string();
        let theirs = serde_json::from_str::<Shape>(text).unwrap_err().to_string();
        // serde_json's own reader adds the place; the words before it are the same.
        assert!(theirs.starts_with(&ours), "{text}: {ours:?} / {theirs:?}");
    }
}

#[test]
fn a_number_a_float_cannot_hold_is_refused_as_serde_json_refuses_it() {
    for text in [
        "1e400",
        "-1e400",
        "[1e309]",
        "{\"a\": 2e308}",
        "1.8e308",
        "17976931348623159e292",
        "1e999999999999",
        "123456789012345678901234567890e300",
        &"9".repeat(400),
        "1e308",
        "-1.7e308",
        "1e-400",
        "0e999999",
        "0.000e5000",
        "1.7976931348623157e308",
    ] {
        assert_same(text);
    }
    assert!(parse("1e309").is_err());
    assert!(parse("1.7976931348623157e308").is_ok(), "the largest float");
    let boundary = std::str::from_utf8(F64_OVERFLOW).unwrap();
    assert!(
        parse(&format!("0.{boundary}e309")).is_err(),
        "rounds to infinity"
    );
    let below = format!("{}1", &boundary[..boundary.len() - 1]);
    assert!(below.as_str() < boundary);
    assert!(
        parse(&format!("0.{below}e309")).is_ok(),
        "rounds to the largest float"
    );
    assert!(
        parse(&format!("0.{boundary}e309")).is_err(),
        "rounds to infinity"
    );
    assert_eq!(
        parse("1e-400").unwrap().text(),
        "1e-400",
        "a tiny number is taken as written"
    );
}

#[test]
fn quoted_text_is_escaped_as_debug_escapes_quotes_backslashes_and_control_characters() {
    let texts = [
        "",
        "plain words",
        "a \"quoted\" word",
        "back\\slash",
        "line\nfeed, return\r, tab\t, nul\0",
        "escape \u{1b}, delete \u{7f}, next line \u{85}, \u{9f}",
        "accents é, wide 日本, emoji 🦀",
    ];
    for text in texts {
        assert_eq!(Quoted(text).to_string(), format!("{text:?}"), "{text}");
    }
    // Where it parts from `Debug`, on purpose: a format character and a combining mark are
    // written as they are (`Debug` escapes both, with Unicode tables the Worker would carry).
    assert_eq!(
        Quoted("zero\u{200b}width").to_string(),
        "\"zero\u{200b}width\""
    );
    assert_eq!(Quoted("e\u{301}").to_string(), "\"e\u{301}\"");
    assert_ne!(format!("{:?}", "e\u{301}"), "\"e\u{301}\"");
}
