//! Server-sent events as `sema watch` reads them: a line parser (the WHATWG event-stream rules the
//! server's frames follow: `id:`, `event:`, `data:` fields, `:` comments, a blank line dispatches)
//! and the resume bookkeeping that makes a dropped connection lose and repeat nothing.
//!
//! The server's ledger frames carry `id: <seq>` (the event's seq, the same on every replay), so the
//! watcher remembers the highest seq it has shown and reconnects with `Last-Event-ID: <that seq>`;
//! any frame at or below it (a replay overlapping what was shown) is dropped. Frames without an id
//! (`meta`, `heartbeat`) are not ledger events and are never counted. A `done` frame ends the watch
//! whatever its id: a server replaying `done` to a reconnect past it is still saying "ended".

use serde_json::Value;
use std::time::Duration;

/// One dispatched frame, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Builds frames from lines. Feed it every line of the stream (with or without the line ending);
/// a frame comes out at each blank line that closes one with data.
#[derive(Debug, Default)]
pub struct Parser {
    id: Option<String>,
    event: Option<String>,
    data: Vec<String>,
}

impl Parser {
    /// Takes one line; returns the frame it completes, if any. Unknown fields and comments are ignored.
    pub fn line(&mut self, raw: &str) -> Option<Frame> {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            let (id, event, data) = (
                self.id.take(),
                self.event.take(),
                std::mem::take(&mut self.data),
            );
            if data.is_empty() {
                return None;
            }
            return Some(Frame {
                id,
                event,
                data: data.join("\n"),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            "data" => self.data.push(value.to_owned()),
            _ => {}
        }
        None
    }
}

/// What a frame means to the watcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// A ledger event not shown before: show it (its JSON, `type` and `seq` set).
    Event(Value),
    /// A ledger event at or below the last one shown: a replay overlap, dropped.
    Repeat,
    /// The run ended: `{status, result?, error?, errorCode?}`.
    Done(Value),
    /// A frame outside the ledger (`meta`, `heartbeat`, or data that is not JSON): nothing to show.
    Other,
}

/// The resume bookkeeping of one watch: the highest seq shown, across every connection.
#[derive(Debug, Default, Clone)]
pub struct Cursor {
    last: Option<i64>,
}

impl Cursor {
    /// Starts after `after` (a seq already shown elsewhere), or at the beginning.
    pub fn after(after: Option<i64>) -> Self {
        Self { last: after }
    }

    /// The `Last-Event-ID` a (re)connect sends: the last seq shown, if any.
    pub fn last_event_id(&self) -> Option<i64> {
        self.last
    }

    /// Classifies `frame` and advances past a new ledger event.
    pub fn see(&mut self, frame: &Frame) -> Seen {
        if frame.event.as_deref() == Some("heartbeat") || frame.event.as_deref() == Some("meta") {
            return Seen::Other;
        }
        let Ok(data) = serde_json::from_str::<Value>(&frame.data) else {
            return Seen::Other;
        };
        if data["type"] == "done" {
            return Seen::Done(data.get("result").cloned().unwrap_or(Value::Null));
        }
        let Some(seq) = frame
            .id
            .as_deref()
            .and_then(|s| s.trim().parse::<i64>().ok())
        else {
            return Seen::Other;
        };
        if self.last.is_some_and(|last| seq <= last) {
            return Seen::Repeat;
        }
        self.last = Some(seq);
        Seen::Event(data)
    }
}

/// Reconnect pacing: the wait before attempt `n` (0 = the first reconnect) grows from 200 ms,
/// doubling, to at most 5 s. A connection that delivered a new event resets `n`.
pub fn backoff(attempt: u32) -> Duration {
    let ms = 200u64.saturating_mul(1u64 << attempt.min(5));
    Duration::from_millis(ms.min(5_000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frames(text: &str) -> Vec<Frame> {
        let mut p = Parser::default();
        text.split_inclusive('\n')
            .filter_map(|l| p.line(l))
            .collect()
    }

    fn ledger(seq: i64, delta: &str) -> Frame {
        Frame {
            id: Some(seq.to_string()),
            event: None,
            data: json!({"type": "text_delta", "delta": delta, "seq": seq}).to_string(),
        }
    }

    #[test]
    fn a_ledger_frame_and_a_named_frame_parse_with_their_fields() {
        let got =
            frames("id: 7\ndata: {\"type\":\"text_delta\"}\n\nevent: heartbeat\ndata: {}\n\n");
        assert_eq!(
            got,
            vec![
                Frame {
                    id: Some("7".into()),
                    event: None,
                    data: "{\"type\":\"text_delta\"}".into()
                },
                Frame {
                    id: None,
                    event: Some("heartbeat".into()),
                    data: "{}".into()
                },
            ]
        );
    }

    #[test]
    fn crlf_endings_no_space_after_the_colon_and_multi_line_data_follow_the_event_stream_rules() {
        let got = frames("id:3\r\ndata:a\r\ndata: b\r\n\r\n");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("3"));
        assert_eq!(got[0].data, "a\nb");
    }

    #[test]
    fn comments_unknown_fields_and_a_blank_line_without_data_dispatch_nothing() {
        assert!(frames(": keepalive\n\nretry: 3000\nfoo: bar\n\n\n").is_empty());
    }

    #[test]
    fn a_frame_cut_off_before_its_blank_line_is_never_dispatched() {
        // Each connection gets a parser of its own, so a dropped half-frame dies with it.
        let mut p = Parser::default();
        assert_eq!(p.line("id: 4\n"), None);
        assert_eq!(p.line("data: {\"type\":\"text_delta\"}\n"), None);
        let mut next = Parser::default();
        assert_eq!(next.line("data: {}\n"), None);
        let f = next.line("\n").unwrap();
        assert_eq!((f.id, f.data), (None, "{}".to_owned()));
    }

    #[test]
    fn new_events_advance_the_cursor_and_a_replay_overlap_is_dropped() {
        let mut c = Cursor::default();
        assert_eq!(c.last_event_id(), None);
        assert!(matches!(c.see(&ledger(1, "a ")), Seen::Event(_)));
        assert!(matches!(c.see(&ledger(2, "b ")), Seen::Event(_)));
        assert_eq!(c.last_event_id(), Some(2));
        // A server that replays from an older anchor: 1 and 2 again, then 3 is new.
        assert_eq!(c.see(&ledger(1, "a ")), Seen::Repeat);
        assert_eq!(c.see(&ledger(2, "b ")), Seen::Repeat);
        assert!(matches!(c.see(&ledger(3, "c")), Seen::Event(_)));
        assert_eq!(c.last_event_id(), Some(3));
    }

    #[test]
    fn a_watch_resumed_from_an_anchor_starts_after_it() {
        let mut c = Cursor::after(Some(5));
        assert_eq!(c.last_event_id(), Some(5));
        assert_eq!(c.see(&ledger(5, "x")), Seen::Repeat);
        assert!(matches!(c.see(&ledger(6, "y")), Seen::Event(_)));
    }

    #[test]
    fn done_ends_the_watch_even_when_its_id_is_at_or_below_the_cursor() {
        let mut c = Cursor::after(Some(9));
        let done = Frame {
            id: Some("3".into()),
            event: None,
            data: r#"{"type":"done","result":{"status":"cancelled","error":"cancelled by user"}}"#
                .into(),
        };
        assert_eq!(
            c.see(&done),
            Seen::Done(json!({"status": "cancelled", "error": "cancelled by user"}))
        );
        assert_eq!(c.last_event_id(), Some(9));
    }

    #[test]
    fn heartbeat_meta_and_non_json_frames_are_not_ledger_events() {
        let mut c = Cursor::default();
        for f in [
            Frame {
                id: None,
                event: Some("heartbeat".into()),
                data: "{}".into(),
            },
            Frame {
                id: None,
                event: Some("meta".into()),
                data: r#"{"type":"meta","taskId":"t"}"#.into(),
            },
            Frame {
                id: Some("1".into()),
                event: None,
                data: "not json".into(),
            },
            Frame {
                id: Some("x".into()),
                event: None,
                data: r#"{"type":"text_delta"}"#.into(),
            },
        ] {
            assert_eq!(c.see(&f), Seen::Other);
        }
        assert_eq!(c.last_event_id(), None);
    }

    #[test]
    fn a_stream_cut_mid_frame_and_resumed_shows_every_event_exactly_once() {
        // The first connection delivers seqs 1..=2 and half of 3; the resume (after 2) replays 3..=4.
        let first = "id: 1\ndata: {\"type\":\"text_delta\",\"delta\":\"a \"}\n\nid: 2\ndata: {\"type\":\"text_delta\",\"delta\":\"b \"}\n\nid: 3\ndata: {\"type\":\"te";
        let second = "id: 3\ndata: {\"type\":\"text_delta\",\"delta\":\"c \"}\n\nid: 4\ndata: {\"type\":\"text_delta\",\"delta\":\"d\"}\n\nid: 5\ndata: {\"type\":\"done\",\"result\":{\"status\":\"completed\"}}\n\n";
        let (mut p, mut c, mut shown, mut done) =
            (Parser::default(), Cursor::default(), String::new(), None);
        for line in first.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            if let Some(Seen::Event(e)) = p.line(line).map(|f| c.see(&f)) {
                shown.push_str(e["delta"].as_str().unwrap());
            }
        }
        // The reconnect reads with a fresh parser, resuming after the last seq shown.
        let mut p = Parser::default();
        assert_eq!(c.last_event_id(), Some(2));
        for line in second.split_inclusive('\n') {
            match p.line(line).map(|f| c.see(&f)) {
                Some(Seen::Event(e)) => shown.push_str(e["delta"].as_str().unwrap()),
                Some(Seen::Done(r)) => done = Some(r),
                _ => {}
            }
        }
        assert_eq!(shown, "a b c d");
        assert_eq!(done, Some(json!({"status": "completed"})));
    }

    #[test]
    fn backoff_doubles_from_200_ms_and_stops_at_5_s() {
        let waits: Vec<u64> = (0..8).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
    }
}
