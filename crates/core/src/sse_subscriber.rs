//! The state machine of one SSE subscriber: register → buffer live frames while replaying → flush
//! above the last seq sent → live → done. The adapter owns the channel (a [`Sink`]) and the ledger
//! reads; every decision about which frame goes out, in what order, and when the stream closes is
//! made here — and, before any stream opens, whether a reconnect has anything left to receive
//! ([`reconnect`]).
//!
//! Guarantees: ledger frames (those with a seq) go out at most once and in strictly increasing seq
//! order, whether they came from the replay or from live publication; the stream ends with exactly one
//! `done` frame, after which nothing is sent. A *joining* subscriber (a keyed duplicate of a run in
//! flight, SPEC-api §4) gets no ledger frames at all, only that `done` frame marked `replay: true`.

use crate::{
    json::{JsonText, Value},
    run::RunRow,
    sse, status,
    store::EventRow,
};

/// Where a subscriber's frames go. `send` returns false when the client went away.
pub trait Sink {
    fn send(&mut self, frame: &str) -> bool;
    fn close(&mut self);
    /// The stream is about to close because its reader fell too far behind while replaying (a
    /// sink may count it; a refused `send` says the same of the live phase).
    fn cut_off(&mut self) {}
}

/// Live frames one subscriber may hold back while its replay catches up, in bytes. Past it the
/// stream is closed (the reader is far behind; it resumes by `Last-Event-ID`, losing nothing).
pub const REPLAY_BUFFER_MAX_BYTES: usize = 4 * 1024 * 1024;

/// A run's `done` frame before it is written: its id and its `result`. Written plainly for a
/// follower, with `replay: true` for a joiner or an idempotent replay; the same id either way.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub seq: i64,
    pub result: Value,
}

impl Done {
    /// The ledger's `done` event (its data is the result).
    pub fn of_event(e: &EventRow) -> Self {
        Self {
            seq: e.seq,
            result: crate::json::parse(&e.data).unwrap_or_default(),
        }
    }

    pub fn frame(&self, replay: bool) -> String {
        if replay {
            sse::replay_done_frame(self.seq, &self.result)
        } else {
            sse::done_frame(self.seq, &self.result)
        }
    }
}

/// A live frame held back during the replay.
#[derive(Debug, Clone, PartialEq)]
enum Held {
    Event(i64, String),
    Done(Done),
}

impl Held {
    fn bytes(&self) -> usize {
        match self {
            Self::Event(_, f) => f.len(),
            // Sized by its data, not written out: one per run, and the bound only needs an estimate.
            Self::Done(d) => d.result.json_text().len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Reading the ledger; live frames wait here.
    Replaying(Vec<Held>),
    Live,
    Closed,
}

/// One open stream's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscriber {
    /// Highest seq sent (ledger events and the done frame), or skipped by a joiner.
    last_sent: i64,
    /// A keyed duplicate joined to the run: no ledger frames, the `done` frame with `replay: true`.
    joining: bool,
    phase: Phase,
}

impl Subscriber {
    /// A subscriber registered before its replay, having seen everything up to `after`.
    pub fn new(after: i64) -> Self {
        Self {
            last_sent: after,
            joining: false,
            phase: Phase::Replaying(Vec::new()),
        }
    }

    /// A keyed duplicate of a run in flight (SPEC-api §4 in-flight dedupe): it waits for the run's
    /// end and receives only its `done` frame, with `replay: true`. `after` is where its (skipping)
    /// replay starts: the run's `last_seq` as last read, so nothing already written is re-read.
    pub fn joining(after: i64) -> Self {
        Self {
            joining: true,
            ..Self::new(after)
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

    /// A ledger event frame the object published live (right after its D1 commit): buffered while
    /// replaying, else sent unless already sent; a joiner ignores it.
    /// The frame is copied only when it must wait (the hot path, a live subscriber, borrows it).
    pub fn on_live(&mut self, seq: i64, frame: &str, sink: &mut impl Sink) {
        if self.joining {
            return;
        }
        match self.phase {
            Phase::Live => self.send(seq, frame, sink),
            Phase::Replaying(_) => self.hold(Held::Event(seq, frame.to_owned()), sink),
            Phase::Closed => {}
        }
    }

    /// The run's `done`, published live: buffered while replaying, else sent (and the stream closed).
    pub fn on_live_done(&mut self, done: &Done, sink: &mut impl Sink) {
        match self.phase {
            Phase::Live => self.send_done(done, sink),
            Phase::Replaying(_) => self.hold(Held::Done(done.clone()), sink),
            Phase::Closed => {}
        }
    }

    /// Keeps a live frame for the end of the replay, or ends the stream if that would pass
    /// [`REPLAY_BUFFER_MAX_BYTES`].
    fn hold(&mut self, held: Held, sink: &mut impl Sink) {
        let Phase::Replaying(buffer) = &mut self.phase else {
            return;
        };
        let used: usize = buffer.iter().map(Held::bytes).sum();
        if used + held.bytes() > REPLAY_BUFFER_MAX_BYTES {
            sink.cut_off();
            self.close(sink);
        } else {
            buffer.push(held);
        }
    }

    /// A ledger event read by the replay; true when it was the `done` event (the stream is closed).
    pub fn on_replayed(&mut self, e: &EventRow, sink: &mut impl Sink) -> bool {
        if e.kind == "done" {
            self.send_done(&Done::of_event(e), sink);
            return true;
        }
        if self.joining {
            self.last_sent = self.last_sent.max(e.seq);
        } else {
            let frame = sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref());
            self.send(e.seq, &frame, sink);
        }
        false
    }

    /// The replay caught up with a run that is still live: flush what arrived meanwhile (frames above
    /// the last seq sent, in order) and deliver live from now on.
    pub fn on_caught_up(&mut self, sink: &mut impl Sink) {
        let Phase::Replaying(buffer) = std::mem::replace(&mut self.phase, Phase::Live) else {
            return;
        };
        for held in buffer {
            self.send_held(held, sink);
        }
    }

    /// The replay found the run terminal and no `done` sent: send the closing `done` frame even if its
    /// seq is not above the anchor (the stream opened because the run was still live when the request
    /// was judged by [`reconnect`], and a stream always ends with `done`), then close.
    pub fn on_final_done(&mut self, done: &Done, sink: &mut impl Sink) {
        self.send_done(done, sink);
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

    fn send_held(&mut self, held: Held, sink: &mut impl Sink) {
        match held {
            Held::Event(seq, frame) => self.send(seq, &frame, sink),
            Held::Done(done) => self.send_done(&done, sink),
        }
    }

    /// The `done` frame always goes out (once: the stream closes after it), even when its seq is not
    /// above the anchor, so a stream anchored past the run's last seq still ends.
    fn send_done(&mut self, done: &Done, sink: &mut impl Sink) {
        if self.is_closed() {
            return;
        }
        self.last_sent = self.last_sent.max(done.seq);
        // Delivered or not (the client went away), the stream ends here.
        sink.send(&done.frame(self.joining));
        self.close(sink);
    }

    /// Ledger frames go out once, in seq order.
    fn send(&mut self, seq: i64, frame: &str, sink: &mut impl Sink) {
        if self.is_closed() || seq <= self.last_sent {
            return;
        }
        self.last_sent = seq;
        if !sink.send(frame) {
            // The client went away, or reads too slowly to keep up: end the stream (what it already
            // has is a prefix of the ledger; it resumes by `Last-Event-ID`).
            self.close(sink);
        }
    }
}

/// The frame of a ledger event (the `done` event becomes the `done` frame).
pub fn ledger_frame(e: &EventRow) -> String {
    if e.kind == "done" {
        Done::of_event(e).frame(false)
    } else {
        sse::event_frame(e.seq, &e.kind, &e.data, e.event_id.as_deref())
    }
}

/// The closing `done` of a terminal run: the ledger's `done` event if the writer that ended it
/// appended one (`last`: the run's last ledger event, when read), else one built from the row at
/// `last_seq + 1` (cancelled, reaped). Either way the same id on every reconnect.
pub fn closing_done(run: &RunRow, last: Option<&EventRow>) -> Done {
    match last.filter(|e| e.kind == "done") {
        Some(e) => Done::of_event(e),
        None => Done {
            seq: run.last_seq + 1,
            result: sse::done_result(run),
        },
    }
}

/// What a stream request anchored at `after` (its `Last-Event-ID`, else `?after=`, else 0) gets,
/// judged from the run's row as read when the request arrives, before any header is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconnect {
    /// Open the stream: replay after the anchor, tail, end with `done`.
    Stream,
    /// `204 No Content`: the run ended and the anchor is at or past its `done` frame's id, so there
    /// is nothing left to send. An `EventSource` stops for good on it (any status but 200 fails the
    /// connection); without it, one that does not close itself on `done` would reconnect forever.
    NoContent,
    /// Only the run's last ledger event can tell (is it the `done` event?): read it and ask
    /// [`reconnect_knowing`].
    NeedsLastEvent,
}

/// "At or past the done frame", precisely:
/// - a **non-terminal** run (running or parked) has no `done` frame yet: every anchor opens a stream,
///   which ends with the `done` frame whatever its id (an anchor above every seq the run has is one
///   no server sent; that stream still ends, and the reconnect after it is judged here again);
/// - a **terminal** run's `done` frame has the fixed id `D` = its `done` event's seq (`last_seq`) or,
///   when it ended without one, `last_seq + 1` ([`closing_done`]); `after >= D` is [`Reconnect::NoContent`].
///   `after > last_seq` is past either; `after < last_seq` is before either; `after == last_seq`
///   needs the last event ([`Reconnect::NeedsLastEvent`]), except for an empty ledger (`D` = 1).
///
/// The `done` frame is published only after its D1 commit, so a client that received it and
/// reconnects always finds the run terminal here.
pub fn reconnect(run: &RunRow, after: i64) -> Reconnect {
    if !status::is_terminal(&run.status) {
        Reconnect::Stream
    } else if after > run.last_seq {
        Reconnect::NoContent
    } else if after < run.last_seq || run.last_seq == 0 {
        Reconnect::Stream
    } else {
        Reconnect::NeedsLastEvent
    }
}

/// [`reconnect`] once the run's last ledger event (`last`, seq `last_seq`) is known.
pub fn reconnect_knowing(run: &RunRow, after: i64, last: Option<&EventRow>) -> Reconnect {
    match reconnect(run, after) {
        Reconnect::NeedsLastEvent if after >= closing_done(run, last).seq => Reconnect::NoContent,
        Reconnect::NeedsLastEvent => Reconnect::Stream,
        other => other,
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
        cut_off: usize,
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
        fn cut_off(&mut self) {
            assert!(!self.closed, "cut off after close");
            self.cut_off += 1;
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

    fn done(seq: i64) -> Done {
        Done {
            seq,
            result: crate::json!({"status": "completed"}),
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
        s.on_live(2, "id: 2\n\n", &mut w);
        s.on_live(3, "id: 3\n\n", &mut w);
        assert_eq!(ids(&w), vec![1]);
        s.on_replayed(&ev(2, "x"), &mut w); // the replay also read seq 2
        s.on_caught_up(&mut w);
        s.on_live(4, "id: 4\n\n", &mut w);
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
        s.on_live_done(&done(2), &mut w);
        assert!(s.is_closed() && w.closed);
        s.on_live(3, "id: 3\n\n", &mut w);
        assert!(!s.on_unsequenced("event: heartbeat\n\n", &mut w));
        s.on_final_done(&done(9), &mut w);
        s.on_live_done(&done(2), &mut w);
        assert_eq!(ids(&w), vec![1, 2]);
        assert_eq!(w.frames[1], done(2).frame(false));
        assert!(
            !w.frames[1].contains("replay"),
            "a follower's done is no replay"
        );
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
        s.on_final_done(&done(4), &mut w);
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed && s.is_closed());
        assert_eq!(s.last_sent(), 50);
    }

    #[test]
    fn a_stream_anchored_past_the_last_seq_gets_the_live_done_and_ends() {
        let (mut s, mut w) = (Subscriber::new(50), Wire::default());
        s.on_live_done(&done(4), &mut w); // the run is cancelled while replaying
        s.on_caught_up(&mut w);
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed && s.is_closed());
        let (mut s, mut w) = (Subscriber::new(50), Wire::default());
        s.on_caught_up(&mut w);
        s.on_live_done(&done(4), &mut w); // or after it caught up
        assert_eq!(ids(&w), vec![4]);
        assert!(w.closed);
    }

    #[test]
    fn a_client_that_went_away_gets_nothing_more() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        s.on_caught_up(&mut w);
        w.gone = true;
        s.on_live(1, "id: 1\n\n", &mut w);
        assert!(s.is_closed() && w.closed, "a failed send ends the stream");
        w.gone = false;
        s.on_live(2, "id: 2\n\n", &mut w);
        assert!(w.frames.is_empty());
    }

    #[test]
    fn a_replay_that_falls_too_far_behind_the_live_tail_ends_the_stream() {
        let (mut s, mut w) = (Subscriber::new(0), Wire::default());
        let big = "x".repeat(REPLAY_BUFFER_MAX_BYTES / 2);
        s.on_live(1, &big, &mut w);
        s.on_live(2, &big, &mut w);
        assert!(!s.is_closed());
        assert_eq!(w.cut_off, 0);
        s.on_live(3, "one more byte than it may hold", &mut w);
        assert!(s.is_closed() && w.closed);
        assert_eq!(w.cut_off, 1, "the sink is told why it closes, once");
        s.on_live(4, "after the close", &mut w);
        assert_eq!(w.cut_off, 1);
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
        row_with("cancelled", last_seq)
    }

    fn row_with(status: &str, last_seq: i64) -> RunRow {
        crate::json::serde_from_value(crate::json!({
            "task_id": "T", "session_id": "S", "owner": null, "instance_id": "default",
            "status": status, "objective_preview": "", "result": null,
            "error": "cancelled by user", "error_code": null, "held_by": null, "lease_epoch": 0,
            "cancel_requested": true, "heartbeat_at": null, "last_seq": last_seq,
            "created_at": 1, "updated_at": 1
        }))
        .unwrap()
    }

    #[test]
    fn the_closing_done_is_the_ledgers_done_event_or_one_built_after_the_last_seq() {
        let d = closing_done(&row(4), Some(&ev(4, "done")));
        assert_eq!(d.seq, 4);
        assert!(d.frame(false).starts_with("id: 4\n"));
        let d = closing_done(&row(4), Some(&ev(4, "text_delta")));
        assert_eq!(d.seq, 5);
        assert!(d.frame(false).contains("\"status\":\"cancelled\""));
        assert_eq!(closing_done(&row(0), None).seq, 1);
    }

    #[test]
    fn a_joiner_gets_no_ledger_frames_only_the_runs_done_marked_replay() {
        let (mut s, mut w) = (Subscriber::joining(3), Wire::default());
        assert!(!s.on_replayed(&ev(4, "text_delta"), &mut w));
        s.on_live(5, "id: 5\n\n", &mut w);
        s.on_caught_up(&mut w);
        s.on_live(6, "id: 6\n\n", &mut w);
        assert!(w.frames.is_empty() && !s.is_closed());
        assert!(s.on_unsequenced(sse::HEARTBEAT_FRAME, &mut w));
        s.on_live_done(&done(7), &mut w);
        assert_eq!(
            w.frames,
            vec![
                sse::HEARTBEAT_FRAME.to_owned(),
                "id: 7\ndata: {\"type\":\"done\",\"result\":{\"status\":\"completed\"},\"replay\":true}\n\n".to_owned()
            ]
        );
        assert!(s.is_closed() && w.closed);
    }

    #[test]
    fn a_joiner_whose_run_ends_during_its_replay_gets_exactly_one_replayed_done() {
        // Published live while the replay reads, then found terminal by the replay.
        let (mut s, mut w) = (Subscriber::joining(0), Wire::default());
        s.on_live_done(&done(2), &mut w);
        s.on_final_done(&done(2), &mut w);
        s.on_caught_up(&mut w);
        assert_eq!(w.frames, vec![done(2).frame(true)]);
        // Or read as the ledger's done event by the replay itself.
        let (mut s, mut w) = (Subscriber::joining(0), Wire::default());
        assert!(s.on_replayed(&ev(1, "done"), &mut w));
        assert_eq!(
            w.frames,
            vec!["id: 1\ndata: {\"type\":\"done\",\"result\":{},\"replay\":true}\n\n"]
        );
    }

    #[test]
    fn a_joiner_holds_no_event_bytes_while_its_replay_reads() {
        let (mut s, mut w) = (Subscriber::joining(0), Wire::default());
        let big = "x".repeat(REPLAY_BUFFER_MAX_BYTES / 2);
        for seq in 1..=4 {
            s.on_live(seq, &big, &mut w);
        }
        assert!(!s.is_closed(), "events are not held for a joiner");
        s.on_live_done(&done(5), &mut w);
        s.on_caught_up(&mut w);
        assert_eq!(ids(&w), vec![5]);
    }

    #[test]
    fn a_run_not_yet_ended_opens_a_stream_for_every_anchor() {
        for status in ["running", "suspended", "needs_review"] {
            for after in [0, 3, 4, 50] {
                assert_eq!(reconnect(&row_with(status, 3), after), Reconnect::Stream);
            }
        }
    }

    #[test]
    fn an_ended_run_answers_no_content_at_or_past_its_done_events_id() {
        let run = row_with("completed", 4); // its done event is seq 4
        let last = ev(4, "done");
        assert_eq!(reconnect(&run, 3), Reconnect::Stream);
        assert_eq!(reconnect(&run, 4), Reconnect::NeedsLastEvent);
        assert_eq!(reconnect_knowing(&run, 3, Some(&last)), Reconnect::Stream);
        assert_eq!(
            reconnect_knowing(&run, 4, Some(&last)),
            Reconnect::NoContent
        );
        assert_eq!(reconnect(&run, 5), Reconnect::NoContent);
        assert_eq!(reconnect(&run, 9_000), Reconnect::NoContent);
    }

    #[test]
    fn an_ended_run_without_a_done_event_answers_no_content_from_last_seq_plus_one() {
        let run = row(4); // cancelled: its done frame is built at seq 5
        let last = ev(4, "text_delta");
        assert_eq!(reconnect(&run, 4), Reconnect::NeedsLastEvent);
        assert_eq!(reconnect_knowing(&run, 4, Some(&last)), Reconnect::Stream);
        assert_eq!(reconnect(&run, 5), Reconnect::NoContent);
        // An empty ledger: the done frame is seq 1, and 0 (no anchor) is before it.
        assert_eq!(reconnect(&row(0), 0), Reconnect::Stream);
        assert_eq!(reconnect_knowing(&row(0), 0, None), Reconnect::Stream);
        assert_eq!(reconnect(&row(0), 1), Reconnect::NoContent);
    }

    #[test]
    fn no_content_is_exactly_an_anchor_at_or_past_the_closing_done_id() {
        for (status, kinds) in [("completed", ["x", "done"]), ("cancelled", ["x", "y"])] {
            for last_seq in 0..4 {
                let last = (last_seq > 0).then(|| ev(last_seq, kinds[usize::from(last_seq == 3)]));
                let run = row_with(status, last_seq);
                let d = closing_done(&run, last.as_ref()).seq;
                for after in 0..7 {
                    let want = if after >= d {
                        Reconnect::NoContent
                    } else {
                        Reconnect::Stream
                    };
                    assert_eq!(
                        reconnect_knowing(&run, after, last.as_ref()),
                        want,
                        "{status} {last_seq} {after}"
                    );
                }
            }
        }
    }
}
