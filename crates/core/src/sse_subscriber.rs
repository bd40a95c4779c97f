//! The state machine of one SSE subscriber: register → buffer live frames while replaying → flush
//! above the last seq sent → live → done. The adapter owns the channel (a [`Sink`]) and the ledger
//! reads; every decision about which frame goes out, in what order, and when the stream closes is
//! made here.
//!
//! Guarantees: ledger frames (those with a seq) go out at most once and in strictly increasing seq
//! order, whether they came from the replay or from live publication; the stream ends with exactly one
//! `done` frame, after which nothing is sent.

use crate::{run::RunRow, sse, store::EventRow};

/// Where a subscriber's frames go. `send` returns false when the client went away.
pub trait Sink {
    fn send(&mut self, frame: &str) -> bool;
    fn close(&mut self);
}

/// Live frames one subscriber may hold back while its replay catches up, in bytes. Past it the
/// stream is closed (the reader is far behind; it resumes by `Last-Event-ID`, losing nothing).
pub const REPLAY_BUFFER_MAX_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Reading the ledger; live frames wait here as `(seq, frame, is_done)`.
    Replaying(Vec<(i64, String, bool)>),
    Live,
    Closed,
}

/// One open stream's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriber {
    /// Highest seq sent (ledger events and the done frame).
    last_sent: i64,
    phase: Phase,
}

impl Subscriber {
    /// A subscriber registered before its replay, having seen everything up to `after`.
    pub fn new(after: i64) -> Self {
        Self {
            last_sent: after,
            phase: Phase::Replaying(Vec::new()),
        }
    }

    /// The seq the replay continues after.
    pub fn last_sent(&self) -> i64 {
        self.last_sent
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    pub fn is_replaying(&self) -> bool {
        matches!(self.phase, Phase::Replaying(_))
    }

    /// A frame the object published live (right after its D1 commit): buffered while replaying,
    /// else sent unless already sent.
    pub fn on_live(&mut self, seq: i64, frame: &str, is_done: bool, sink: &mut impl Sink) {
        match &mut self.phase {
            Phase::Replaying(buffer) => {
                let held: usize = buffer.iter().map(|(_, f, _)| f.len()).sum();
                if held + frame.len() > REPLAY_BUFFER_MAX_BYTES {
                    self.close(sink);
                } else {
                    buffer.push((seq, frame.to_owned(), is_done));
                }
            }
            Phase::Live => self.send(seq, frame, is_done, sink),
            Phase::Closed => {}
        }
    }

    /// A ledger event read by the replay; true when it was the `done` event (the stream is closed).
    pub fn on_replayed(&mut self, e: &EventRow, sink: &mut impl Sink) -> bool {
        let is_done = e.kind == "done";
        let frame = ledger_frame(e);
        self.send(e.seq, &frame, is_done, sink);
        is_done
    }

    /// The replay caught up with a run that is still live: flush what arrived meanwhile (frames above
    /// the last seq sent, in order) and deliver live from now on.
    pub fn on_caught_up(&mut self, sink: &mut impl Sink) {
        let Phase::Replaying(buffer) = std::mem::replace(&mut self.phase, Phase::Live) else {
            return;
        };
        for (seq, frame, is_done) in buffer {
            self.send(seq, &frame, is_done, sink);
        }
    }

    /// The replay found the run terminal and no `done` sent: send the closing `done` frame even if its
    /// seq was already sent (a client reconnecting after the end gets the same frame again, and a
    /// stream anchored past the last seq still ends), then close.
    pub fn on_final_done(&mut self, seq: i64, frame: &str, sink: &mut impl Sink) {
        self.send(seq, frame, true, sink);
    }

    /// A frame without a seq (the opening `meta`, a keep-alive heartbeat): passes while open. Returns
    /// false once the stream is closed (the caller stops its keep-alive loop).
    pub fn on_unsequenced(&mut self, frame: &str, sink: &mut impl Sink) -> bool {
        if self.is_closed() {
            return false;
        }
        if !sink.send(frame) {
            self.close(sink);
            return false;
        }
        true
    }

    /// Ends the stream (the replay failed, or the object is going away).
    pub fn close(&mut self, sink: &mut impl Sink) {
        if !self.is_closed() {
            self.phase = Phase::Closed;
            sink.close();
        }
    }

    /// Ledger frames go out once, in seq order; the `done` frame always goes out (once: the stream
    /// closes after it), even when its seq is not above the anchor, so a stream anchored past the
    /// run's last seq still ends.
    fn send(&mut self, seq: i64, frame: &str, is_done: bool, sink: &mut impl Sink) {
        if self.is_closed() || (seq <= self.last_sent && !is_done) {
            return;
        }
        self.last_sent = self.last_sent.max(seq);
        if !sink.send(frame) {
            // The client went away, or reads too slowly to keep up: end the stream (what it already
            // has is a prefix of the ledger; it resumes by `Last-Event-ID`).
            self.close(sink);
            return;
        }
        if is_done {
            self.close(sink);
        }
    }
}

/// The frame of a ledger event (the `done` event becomes the `done` frame).
pub fn ledger_frame(e: &EventRow) -> String {
    if e.kind == "done" {
        let result: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_default();
        sse::done_frame(e.seq, &result)
    } else {
        sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref())
    }
}

/// The closing frame of a terminal run whose replay sent no `done`: the ledger's `done` event if
/// the runner finished it (`last`: the run's last ledger event, when re-read), else a `done` built
/// from the row at `last_seq + 1` (cancelled, reaped). Either way the same id on every reconnect.
pub fn closing_done(run: &RunRow, last: Option<&EventRow>) -> (i64, String) {
    match last.filter(|e| e.kind == "done") {
        Some(e) => (e.seq, ledger_frame(e)),
        None => {
            let seq = run.last_seq + 1;
            (seq, sse::done_frame(seq, &sse::done_result(run)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Wire {
        frames: Vec<String>,
        closed: bool,
        gone: bool,
    }

    impl Sink for Wire {
        fn send(&mut self, frame: &str) -> bool {
            assert!(!self.closed, "sent {frame:?} after close");
            if self.gone {
                return false;
            }
            self.frames.push(frame.to_owned());
            true
        }
        fn close(&mut self) {
            self.closed = true;
        }
    }

    fn ev(seq: i64, kind: &str) -> EventRow {
        EventRow {
            seq,
            kind: kind.into(),
            data: "{}".into(),
            event_id: None,
            created_at: 0,
        }
    }

    fn ids(w: &Wire) -> Vec<i64> {
        w.frames
            .iter()
            .map(|f| {
                f.strip_prefix("id: ")
                    .unwrap()
                    .split('\n')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn live_frames_wait_during_replay_and_flush_once_in_order_after_it() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        s.on_replayed(&ev(1, "x"), &mut w);
        s.on_live(2, "id: 2\n\n", false, &mut w);
        s.on_live(3, "id: 3\n\n", false, &mut w);
        assert_eq!(ids(&w), vec![1]);
        s.on_replayed(&ev(2, "x"), &mut w); // the replay also read seq 2
        s.on_caught_up(&mut w);
        s.on_live(4, "id: 4\n\n", false, &mut w);
        assert_eq!(ids(&w), vec![1, 2, 3, 4]);
        assert!(!s.is_replaying());
    }

    #[test]
    fn a_resumed_stream_skips_everything_up_to_its_anchor() {
        let (mut s, mut w) = (Subscriber::new(5), Wire::default());
        for seq in 1..=6 {
            s.on_replayed(&ev(seq, "x"), &mut w);
        }
        assert_eq!(ids(&w), vec![6]);
        assert_eq!(s.last_sent(), 6);
    }

    #[test]
    fn the_done_event_closes_the_stream_and_nothing_follows() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        assert!(!s.on_replayed(&ev(1, "x"), &mut w));
        s.on_caught_up(&mut w);
        s.on_live(2, "id: 2\ndata: {\"type\":\"done\"}\n\n", true, &mut w);
        assert!(s.is_closed() && w.closed);
        s.on_live(3, "id: 3\n\n", false, &mut w);
        assert!(!s.on_unsequenced("event: heartbeat\n\n", &mut w));
        s.on_final_done(9, "id: 9\n\n", &mut w);
        assert_eq!(ids(&w), vec![1, 2]);
    }

    #[test]
    fn a_replayed_done_event_is_the_done_frame_and_reports_the_end() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        assert!(s.on_replayed(&ev(1, "done"), &mut w));
        assert!(w.frames[0].starts_with("id: 1\ndata: {\"type\":\"done\",\"result\":"));
        assert!(w.closed);
    }

    #[test]
    fn a_stream_anchored_past_the_last_seq_still_gets_the_final_done() {
        let (mut s, mut w) = (Subscriber::new(50), Wire::default());
        s.on_final_done(4, "id: 4\ndata: {}\n\n", &mut w);
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed && s.is_closed());
        assert_eq!(s.last_sent(), 50);
    }

    #[test]
    fn a_stream_anchored_past_the_last_seq_gets_the_live_done_and_ends() {
        let (mut s, mut w) = (Subscriber::new(50), Wire::default());
        s.on_live(4, "id: 4\ndata: {}\n\n", true, &mut w); // the run is cancelled while replaying
        s.on_caught_up(&mut w);
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed && s.is_closed());
        let (mut s, mut w) = (Subscriber::new(50), Wire::default());
        s.on_caught_up(&mut w);
        s.on_live(4, "id: 4\ndata: {}\n\n", true, &mut w); // or after it caught up
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed);
    }

    #[test]
    fn a_client_that_went_away_gets_nothing_more() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        s.on_caught_up(&mut w);
        w.gone = true;
        s.on_live(1, "id: 1\n\n", false, &mut w);
        assert!(s.is_closed() && w.closed, "a failed send ends the stream");
        w.gone = false;
        s.on_live(2, "id: 2\n\n", false, &mut w);
        assert!(w.frames.is_empty());
    }

    #[test]
    fn a_replay_that_falls_too_far_behind_the_live_tail_ends_the_stream() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        let big = "x".repeat(REPLAY_BUFFER_MAX_BYTES / 2);
        s.on_live(1, &big, false, &mut w);
        s.on_live(2, &big, false, &mut w);
        assert!(!s.is_closed());
        s.on_live(3, "one more byte than it may hold", false, &mut w);
        assert!(s.is_closed() && w.closed);
        s.on_caught_up(&mut w);
        assert!(w.frames.is_empty(), "nothing is sent after the close");
    }

    #[test]
    fn unsequenced_frames_pass_while_open_without_moving_the_anchor() {
        let (mut s, mut w) = (Subscriber::new(3), Wire::default());
        assert!(s.on_unsequenced("event: meta\ndata: {}\n\n", &mut w));
        assert_eq!((w.frames.len(), s.last_sent()), (1, 3));
    }

    fn row(last_seq: i64) -> RunRow {
        serde_json::from_value(serde_json::json!({
            "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
            "status": "cancelled", "objective_preview": "", "result": null,
            "error": "cancelled by user", "error_code": null, "held_by": null, "lease_epoch": 0,
            "cancel_requested": true, "heartbeat_at": null, "last_seq": last_seq,
            "created_at": 1, "updated_at": 1
        }))
        .unwrap()
    }

    #[test]
    fn the_closing_done_is_the_ledgers_done_event_or_one_built_after_the_last_seq() {
        let (seq, frame) = closing_done(&row(4), Some(&ev(4, "done")));
        assert_eq!(seq, 4);
        assert!(frame.starts_with("id: 4\n"));
        let (seq, frame) = closing_done(&row(4), Some(&ev(4, "text_delta")));
        assert_eq!(seq, 5);
        assert!(frame.contains("\"status\":\"cancelled\""));
        assert_eq!(closing_done(&row(0), None).0, 1);
    }
}
