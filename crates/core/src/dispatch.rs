//! Task-queue dispatch: the protocol of the dispatcher Durable Object (one per queue) and its pure
//! bookkeeping — the backlog of runs it knows to be leasable — and the lease body it hands out.
//!
//! The dispatcher is a fast path, never the record: D1 holds every run and the lease stays a fenced
//! compare-and-set on the run row. The dispatcher remembers which runs of its queue are leasable
//! (told by whoever made them so: an admission, a decision that resumes a run, the cron's sweep),
//! and which runners wait (oldest first). When both exist it gives the oldest run to the
//! longest-waiting runner at once and writes that runner's lease itself, whether the runner waits
//! in a long-poll (the lease is the reply to its wait) or on a WebSocket (the lease is pushed). The
//! runtime does not tell a waiting request that its client left, so a runner that disconnected
//! mid-wait can be leased a run; the dispatcher follows the leases it wrote ([`Offers`], up to
//! [`MAX_FOLLOWED`]) and releases one its runner has not acknowledged within the acknowledgement
//! window, so the run goes to the next runner within that window instead of waiting for the reaper.
//! A runner that waits costs no D1 query: the dispatcher queries D1 only while its memory is
//! *cold* — just created (the object was evicted or restarted), or after its backlog overflowed —
//! to learn the queue's backlog; a lost notice only delays a run until the cron's sweep announces
//! it again.
//!
//! Sharding: one object per queue, named by [`object_name`]. A queue too busy for one object is
//! split by naming several queues (`gpu-1`, `gpu-2`, …) and pointing runner pools at each; the
//! object's name is the queue name alone, so every isolate derives the same object.

use crate::json::JsonText;
use crate::text_map::TextSet;
use crate::{error::ApiError, store::Lease};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The Worker's binding of the dispatcher object class.
pub const BINDING: &str = "DISPATCH";
/// The dispatcher's RPC method: `(call) -> text`, the text framed by [`crate::object_rpc::answer`]
/// (every call but a runner's WebSocket upgrade, which is a `fetch` to [`CONNECT_URL`]).
pub const RPC_METHOD: &str = "dispatchCall";
/// The URL a runner's WebSocket upgrade is forwarded to (`queue` and `runnerId` in its query).
pub const CONNECT_URL: &str = "https://dispatch.internal/connect";
/// The forwarded URL of a runner's WebSocket upgrade into `queue`'s dispatcher. Both are safe ids
/// (validated by the lease rules), which need no escaping in a query.
pub fn connect_url(queue: &str, runner_id: &str) -> String {
    format!("{CONNECT_URL}?queue={queue}&runnerId={runner_id}")
}
/// Most WebSockets one dispatcher holds; past it a connect gets `429 runner.too_many_waiting`.
pub const MAX_SOCKETS: usize = MAX_WAITERS;
/// Most runners one dispatcher holds waiting; past it a lease request gets `429
/// runner.too_many_waiting`.
pub const MAX_WAITERS: usize = 4096;
/// Most leasable runs a dispatcher remembers; past it the oldest are kept and the memory is marked
/// cold (D1 is asked again once the backlog drains).
pub const BACKLOG_MAX: usize = 4096;
/// How long a run handed to a runner waits for its lease write to be settled; past it the run is
/// offered again (the object was cut off before the write's result came back).
pub const OFFER_TTL_MS: i64 = 2_000;
/// Most due leases one release of the dispatcher takes (`RunnerStore::release_leases`: one read of
/// D1, and a batch of fenced writes for those still unacknowledged); more take several.
pub const RELEASE_BATCH: usize = crate::sql::runner_sql::MAX_UNACKED_READ;
/// How late a dispatcher looks at a handout that fell due, at most ([`Offers::follow_up_at`]): a
/// lapsed offer goes back, and an unacknowledged lease is released, up to this much after its time.
/// The ack window is the least a runner is given, so a later look takes nothing from it; and a
/// queue handing out runs one after another is looked at about twice a second, not once a lease.
pub const FOLLOW_UP_SLACK_MS: i64 = 500;
/// How soon a dispatcher tries again to release leases whose release failed (D1 unreachable).
pub const RELEASE_RETRY_MS: i64 = 5_000;
/// How many leasable runs one cold refill reads from D1 (oldest first).
pub const REFILL: i64 = 64;
/// Most runs one tick's sweep announces again (oldest leasable first): a lost notice delays a run
/// by at most one cron period.
pub const SWEEP_LIMIT: i64 = 500;

/// The name of the dispatcher object of `queue`.
pub fn object_name(queue: &str) -> String {
    format!("queue:{queue}")
}

/// A run the dispatcher may lease: its task id and the time it became leasable (for oldest-first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Ready {
    pub since: i64,
    pub task_id: String,
}

/// A call from the Worker to a queue's dispatcher, written in [`crate::object_codec`]'s text, as
/// [`crate::session_protocol::SessionCall`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchCall {
    /// A runner waits up to `wait_ms` for a run of `queue` (the object's own queue).
    Wait {
        queue: String,
        runner_id: String,
        wait_ms: u64,
    },
    /// These runs of `queue` became leasable.
    Notify { queue: String, runs: Vec<Ready> },
    /// What the dispatcher holds (diagnostics, tests).
    Stats,
}

/// The dispatcher's answer, written as [`DispatchCall`] is.
#[derive(Debug, Clone, PartialEq)]
pub enum DispatchReply {
    /// The lease the dispatcher wrote for this runner (the fenced compare-and-set), as the lease
    /// route answers it ([`lease_body`]); its D1 cost is in the reply's meter line.
    Leased {
        body: String,
    },
    /// Nothing within the wait.
    Empty,
    /// A notice was taken; `handed` runs were offered to waiting runners at once.
    Noted {
        handed: usize,
    },
    Stats {
        waiters: usize,
        backlog: usize,
        offered: usize,
        cold: bool,
        /// Runner WebSockets the dispatcher holds (ready or busy).
        sockets: usize,
    },
    Refused(ApiError),
    Failed {
        cause: String,
    },
}

// The messages' text (`object_codec`): each variant keeps its number, and each field its place.
crate::codec_enum!(DispatchCall {
    0 => Wait { queue, runner_id, wait_ms },
    1 => Notify { queue, runs },
    2 => Stats,
});
crate::codec_enum!(DispatchReply {
    0 => Leased { body },
    1 => Empty,
    2 => Noted { handed },
    3 => Stats { waiters, backlog, offered, cold, sockets },
    4 => Refused(error),
    5 => Failed { cause },
});
crate::codec_struct!(Ready { since, task_id });

/// One call of each variant (the round-trip test's and the layout pin's samples). The match has no
/// wildcard: a new variant stops the tests compiling until it is sampled here.
#[cfg(test)]
pub fn every_call() -> Vec<DispatchCall> {
    let _every_variant_is_sampled = |c: &DispatchCall| match c {
        DispatchCall::Wait { .. } | DispatchCall::Notify { .. } | DispatchCall::Stats => (),
    };
    vec![
        DispatchCall::Wait {
            queue: "q".into(),
            runner_id: "r".into(),
            wait_ms: 5,
        },
        DispatchCall::Notify {
            queue: "q".into(),
            runs: vec![Ready {
                since: 1,
                task_id: "t".into(),
            }],
        },
        DispatchCall::Stats,
    ]
}

/// One reply of each variant, as [`every_call`].
#[cfg(test)]
pub fn every_reply() -> Vec<DispatchReply> {
    let _every_variant_is_sampled = |r: &DispatchReply| match r {
        DispatchReply::Leased { .. }
        | DispatchReply::Empty
        | DispatchReply::Noted { .. }
        | DispatchReply::Stats { .. }
        | DispatchReply::Refused(_)
        | DispatchReply::Failed { .. } => (),
    };
    vec![
        DispatchReply::Leased {
            body: "{\"taskId\":\"t\"}".into(),
        },
        DispatchReply::Empty,
        DispatchReply::Noted { handed: 1 },
        DispatchReply::Stats {
            waiters: 1,
            backlog: 2,
            offered: 3,
            cold: true,
            sockets: 4,
        },
        DispatchReply::Refused(ApiError::lease_lost()),
        DispatchReply::Failed { cause: "x".into() },
    ]
}

/// Every sampled dispatcher message as text: the dispatcher's share of the layout the session
/// protocol's test pins (`object_codec::LAYOUT`).
#[cfg(test)]
pub fn every_message_text() -> String {
    let calls = every_call()
        .into_iter()
        .map(|c| crate::object_codec::encode(&c));
    let replies = every_reply()
        .into_iter()
        .map(|r| crate::object_codec::encode(&r));
    calls.chain(replies).collect()
}

/// The runs a dispatcher knows to be leasable, oldest first, bounded, with whether D1 may hold more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backlog {
    /// Sorted, oldest first (a run noticed now is the newest: it goes to the back). A deque rather
    /// than an ordered set: the same operations on a bounded list, with a fraction of the code.
    ready: VecDeque<Ready>,
    /// The task ids in `ready` (a run is remembered once, at its first `since`).
    ids: TextSet,
    /// D1 may hold leasable runs this memory does not: refill before trusting an empty backlog.
    cold: bool,
    /// D1 was read at least once: before that, what notices added may be newer than runs D1 holds.
    read_once: bool,
}

impl Default for Backlog {
    fn default() -> Self {
        Self::new()
    }
}

impl Backlog {
    /// A new dispatcher knows nothing yet: cold.
    pub fn new() -> Self {
        Self {
            ready: VecDeque::new(),
            ids: TextSet::new(),
            cold: true,
            read_once: false,
        }
    }

    pub fn len(&self) -> usize {
        self.ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    pub fn is_cold(&self) -> bool {
        self.cold
    }

    /// Whether to ask D1 now: the memory is cold and holds nothing to hand out, or D1 was never
    /// read (runs noticed by a new object may be newer than runs it was never told of: oldest first
    /// needs the read).
    pub fn needs_refill(&self) -> bool {
        self.cold && (self.ready.is_empty() || !self.read_once)
    }

    /// Adds runs (duplicates merge). Past [`BACKLOG_MAX`] the newest are dropped and the memory
    /// turns cold, so they are found in D1 once the older ones are gone.
    pub fn add(&mut self, runs: impl IntoIterator<Item = Ready>) {
        for r in runs {
            if self.ids.insert(r.task_id.clone()) {
                let at = self.ready.partition_point(|older| *older < r);
                self.ready.insert(at, r);
            }
        }
        while self.ready.len() > BACKLOG_MAX {
            if let Some(r) = self.ready.pop_back() {
                self.ids.remove(&r.task_id);
            }
            self.cold = true;
        }
    }

    /// Takes a refill read from D1 (`limit` asked): the memory is warm again unless the read was full.
    pub fn refilled(&mut self, runs: Vec<Ready>, limit: i64) {
        let full = runs.len() as i64 >= limit;
        self.add(runs);
        self.cold = full;
        self.read_once = true;
    }

    /// The oldest leasable run, removed.
    pub fn pop(&mut self) -> Option<Ready> {
        let r = self.ready.pop_front()?;
        self.ids.remove(&r.task_id);
        Some(r)
    }
}

/// A run handed out and not yet known to be in good hands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handout {
    pub ready: Ready,
    /// When it is looked at again.
    pub due: i64,
    /// Set once the lease was written: `(runner_id, lease_epoch)`.
    pub lease: Option<(String, i64)>,
}

/// Runs offered to waiting runners, followed until the runner is known to hold them: an offer lapses
/// after [`OFFER_TTL_MS`] unless its lease write was settled ([`Offers::taken`]); a lease its runner
/// has not acknowledged (first heartbeat or append) by its due time is released — fenced on that
/// runner, that epoch and `lease_acked = 0` — and the run offered again. So a runner that left while
/// waiting holds its run for at most the acknowledgement window, and never ran anything of it.
///
/// A hand-over's bookkeeping does not grow with the leases followed (a busy queue follows every
/// lease of the last `LEASE_ACK_SEC`: thousands): offers, leases and retried releases each sit in a
/// queue ordered by due, and a settled write looks only among the offers still open. At
/// [`MAX_FOLLOWED`] leases a new one is not followed; the reaper's requeue of unacknowledged leases
/// is its backstop (up to one tick after the ack window).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offers {
    offered: VecDeque<Handout>,
    leased: VecDeque<Handout>,
    retried: VecDeque<Handout>,
}

/// Most leases one dispatcher follows until their ack window ends (with the default 30 s window,
/// a thousand hand-overs a second); a lease written while this many are followed is left to the
/// reaper's requeue, so above that rate a share of the leases is followed, not none.
pub const MAX_FOLLOWED: usize = 32_768;

/// Puts `h` into `q` in order of due: at the back when it is due no earlier than the back (the
/// usual case, dues growing with the clock), else after the last handout due no later.
fn push_in_order(q: &mut VecDeque<Handout>, h: Handout) {
    let at = q.len() - q.iter().rev().take_while(|o| o.due > h.due).count();
    q.insert(at, h);
}

impl Offers {
    pub fn len(&self) -> usize {
        self.offered.len() + self.leased.len() + self.retried.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `ready` was offered at `now`.
    pub fn offer(&mut self, ready: Ready, now: i64) {
        let h = Handout {
            ready,
            due: now.saturating_add(OFFER_TTL_MS),
            lease: None,
        };
        push_in_order(&mut self.offered, h);
    }

    /// The lease write of the offered `task_id` settled: lost (`None`), the run is not ours to
    /// follow any more; won at `now` (the time the lease was written with, from which the reaper
    /// counts its window too), it is followed until `now + ack_ms`. It settles the newest open
    /// offer of that run: one that lapsed meanwhile (taken back by [`Offers::due`]) is not
    /// followed, unless the run was offered again, whose offer it then settles (that other
    /// write then loses: the run is held).
    pub fn taken(&mut self, task_id: &str, lease: Option<(String, i64)>, now: i64, ack_ms: i64) {
        let at = self
            .offered
            .iter()
            .rposition(|h| h.ready.task_id == task_id);
        let Some(mut h) = at.and_then(|at| self.offered.remove(at)) else {
            return;
        };
        if let Some(l) = lease.filter(|_| self.leased.len() < MAX_FOLLOWED) {
            h.lease = Some(l);
            h.due = now.saturating_add(ack_ms);
            push_in_order(&mut self.leased, h);
        }
    }

    /// The handouts due at `now`, removed: an offer whose lease write never settled goes back to the backlog; a
    /// lease is released if still unacknowledged (then its run goes back too).
    pub fn due(&mut self, now: i64) -> Vec<Handout> {
        let mut due = Vec::new();
        for q in [&mut self.offered, &mut self.leased, &mut self.retried] {
            while q.front().is_some_and(|h| h.due <= now) {
                due.extend(q.pop_front());
            }
        }
        due
    }

    /// `handouts` taken back by [`Offers::due`] whose release failed: followed again, due at `at`.
    pub fn retry(&mut self, handouts: impl IntoIterator<Item = Handout>, at: i64) {
        for mut h in handouts {
            h.due = at;
            push_in_order(&mut self.retried, h);
        }
    }

    /// When the next handout is due.
    pub fn next_due(&self) -> Option<i64> {
        [&self.offered, &self.leased, &self.retried]
            .into_iter()
            .filter_map(|q| q.front().map(|h| h.due))
            .min()
    }

    /// When the dispatcher next looks at its handouts: [`FOLLOW_UP_SLACK_MS`] after the first falls
    /// due, so that those falling due close together (one lease after another) are taken back by
    /// one look, not one each.
    pub fn follow_up_at(&self) -> Option<i64> {
        self.next_due()
            .map(|due| due.saturating_add(FOLLOW_UP_SLACK_MS))
    }
}

/// The lease as the runner receives it: `{taskId, sessionId, leaseEpoch, objective, meta, lastSeq,
/// cancelRequested, steerPending, resume?}`; a resumed run's `resume` names the gate, the decision,
/// and its `reason` (or a plan review's `feedback`); the two counts say what already waits for the
/// new holder, as an append's answer does.
pub fn lease_body(l: &Lease) -> String {
    lease_value(l).json_text()
}

/// [`lease_body`]'s fields, as a JSON object.
fn lease_value(l: &Lease) -> crate::json::Value {
    let meta: crate::json::Value = crate::json::parse(&l.meta).unwrap_or_default();
    let mut body = crate::json!({
        "taskId": l.task_id,
        "sessionId": l.session_id,
        "leaseEpoch": l.lease_epoch,
        "objective": l.objective,
        "meta": meta,
        "lastSeq": l.last_seq,
        "cancelRequested": l.waiting.cancel_requested,
        "steerPending": l.waiting.steer_pending,
    });
    if let Some(r) = &l.resume {
        let note = if r.kind == "plan_review" {
            "feedback"
        } else {
            "reason"
        };
        let card: crate::json::Value = crate::json::parse(&r.card).unwrap_or_default();
        let mut resume = crate::json!({
            "gate": {"kind": r.kind, "card": card},
            "decision": r.decision,
        });
        if let Some(text) = &r.reason {
            resume[note] = text.as_str().into();
        }
        body["resume"] = resume;
    }
    body
}

/// What a dispatcher keeps with each runner's WebSocket (its attachment: it survives hibernation,
/// when the object's memory does not). `ready`: the runner asked for a run and was not leased one
/// since; `since` orders ready sockets with the long-poll waiters (first come, first served).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketNote {
    pub queue: String,
    #[serde(rename = "runnerId")]
    pub runner_id: String,
    /// Unique per socket (the object's handle on it across hibernation).
    pub key: String,
    pub ready: bool,
    pub since: i64,
}

crate::tree_struct!(SocketNote lenient {
    queue: "queue",
    runner_id: "runnerId",
    key: "key",
    ready: "ready",
    since: "since",
});

/// The keepalive a runner sends on an idle socket, byte for byte. The runtime answers it with
/// [`PONG_FRAME`] itself (the hibernation API's auto-response), so a ping never wakes the
/// dispatcher; a runner that gets no pong within its next wait treats the socket as half-open and
/// reconnects (its unacknowledged lease, if one was in flight, is released after `LEASE_ACK_SEC`).
pub const PING_FRAME: &str = r#"{"type":"ping"}"#;
/// The runtime's answer to [`PING_FRAME`].
pub const PONG_FRAME: &str = r#"{"type":"pong"}"#;

/// A frame a runner sends on its WebSocket: `{"type":"ready"}` — it wants one run (again after
/// each run it finished or gave up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunnerFrame {
    Ready,
}

/// A runner frame's `type`.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Ready,
}

crate::tree_enum!(Kind { Ready = "ready" });

/// A runner frame as read: an object with a `type` field, other fields ignored.
#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type")]
    kind: Kind,
}

crate::tree_struct!(Frame lenient { kind: "type" });

/// Parsed as an object with a `type` field, other fields ignored, as serde's internal tagging
/// would, without its derived form's buffered `Content` (code size; the dispatcher reads frames
/// through `crate::json::from_text`, by [`crate::json::FromTree`]).
impl<'de> Deserialize<'de> for RunnerFrame {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Frame { kind: Kind::Ready } = Frame::deserialize(d)?;
        Ok(RunnerFrame::Ready)
    }
}

impl crate::json::FromTree for RunnerFrame {
    fn from_tree(v: &crate::json::Value) -> Result<Self, crate::json::Error> {
        let Frame { kind: Kind::Ready } = Frame::from_tree(v)?;
        Ok(RunnerFrame::Ready)
    }
}

/// The frame the dispatcher pushes with a lease the dispatcher itself wrote for the socket's
/// runner: `{"type":"lease", ...}` with the fields of [`lease_body`].
pub fn lease_frame(l: &Lease) -> String {
    let mut v = lease_value(l);
    v["type"] = "lease".into();
    v.json_text()
}

/// Ready sockets found after hibernation, in the order they asked (oldest first).
pub fn ready_in_order(mut notes: Vec<SocketNote>) -> Vec<SocketNote> {
    notes.retain(|n| n.ready);
    notes.sort_by(|a, b| (a.since, &a.key).cmp(&(b.since, &b.key)));
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(since: i64, id: &str) -> Ready {
        Ready {
            since,
            task_id: id.into(),
        }
    }

    #[test]
    fn a_new_backlog_is_cold_and_a_short_refill_warms_it() {
        let mut b = Backlog::new();
        assert!(b.needs_refill());
        b.refilled(vec![ready(2, "b"), ready(1, "a")], REFILL);
        assert!(!b.is_cold() && !b.needs_refill());
        assert_eq!(b.pop(), Some(ready(1, "a")));
        assert_eq!(b.pop(), Some(ready(2, "b")));
        // Empty and warm: trusted, no D1 query.
        assert!(b.pop().is_none() && !b.needs_refill());
    }

    #[test]
    fn a_full_refill_stays_cold_so_the_rest_is_read_once_this_drains() {
        let mut b = Backlog::new();
        b.refilled(vec![ready(1, "a"), ready(2, "b")], 2);
        assert!(b.is_cold() && !b.needs_refill());
        b.pop();
        b.pop();
        assert!(b.needs_refill());
    }

    #[test]
    fn a_new_backlog_told_of_a_run_still_reads_d1_once_so_older_runs_go_first() {
        let mut b = Backlog::new();
        b.add([ready(9, "new")]);
        assert!(b.needs_refill());
        b.refilled(vec![ready(1, "old"), ready(9, "new")], REFILL);
        assert!(!b.needs_refill());
        assert_eq!(b.pop().unwrap().task_id, "old");
        assert_eq!(b.pop().unwrap().task_id, "new");
    }

    #[test]
    fn notices_merge_duplicates_and_hand_out_oldest_first() {
        let mut b = Backlog::new();
        b.refilled(vec![], REFILL);
        b.add([ready(5, "x"), ready(3, "y"), ready(9, "x")]);
        assert_eq!(b.len(), 2);
        assert_eq!(b.pop().unwrap().task_id, "y");
        assert_eq!(b.pop().unwrap().task_id, "x");
    }

    #[test]
    fn an_overflowing_backlog_keeps_the_oldest_and_turns_cold() {
        let mut b = Backlog::new();
        b.refilled(vec![], REFILL);
        b.add((0..BACKLOG_MAX as i64 + 3).map(|i| ready(i, &format!("t{i}"))));
        assert_eq!(b.len(), BACKLOG_MAX);
        assert!(b.is_cold());
        assert_eq!(b.pop().unwrap().since, 0);
    }

    #[test]
    fn an_untaken_offer_lapses_and_a_taken_lease_is_followed_until_its_ack_window() {
        let mut o = Offers::default();
        o.offer(ready(1, "a"), 100);
        o.offer(ready(2, "b"), 100);
        o.offer(ready(3, "c"), 100);
        o.taken("a", None, 110, 5_000);
        o.taken("b", Some(("r".into(), 4)), 110, 5_000);
        assert_eq!(o.next_due(), Some(100 + OFFER_TTL_MS));
        let lapsed = o.due(100 + OFFER_TTL_MS);
        assert_eq!(lapsed.len(), 1);
        assert_eq!(
            (lapsed[0].ready.task_id.as_str(), &lapsed[0].lease),
            ("c", &None)
        );
        assert_eq!(o.next_due(), Some(5_110));
        let due = o.due(5_110);
        assert_eq!(due[0].lease, Some(("r".to_owned(), 4)));
        assert!(o.is_empty() && o.next_due().is_none());
    }

    #[test]
    fn handouts_whose_release_failed_are_followed_again_from_the_retry_time() {
        let mut o = Offers::default();
        o.offer(ready(1, "a"), 0);
        o.taken("a", Some(("r".into(), 2)), 0, 1_000);
        let due = o.due(1_000);
        assert!(o.is_empty());
        o.retry(due, 1_000 + RELEASE_RETRY_MS);
        assert!(o.due(1_000 + RELEASE_RETRY_MS - 1).is_empty());
        let again = o.due(1_000 + RELEASE_RETRY_MS);
        assert_eq!(
            (again[0].ready.task_id.as_str(), &again[0].lease),
            ("a", &Some(("r".to_owned(), 2)))
        );
    }

    #[test]
    fn handouts_falling_due_within_the_slack_of_the_first_are_followed_up_by_one_look() {
        let mut o = Offers::default();
        assert_eq!(o.follow_up_at(), None);
        for (i, at) in [
            1_000,
            1_010,
            1_000 + FOLLOW_UP_SLACK_MS,
            1_001 + FOLLOW_UP_SLACK_MS,
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("t{i}");
            o.offer(ready(i as i64, &id), at);
            o.taken(&id, Some(("r".into(), 1)), at, 30_000);
        }
        let look = o.follow_up_at().unwrap();
        assert_eq!(look, 31_000 + FOLLOW_UP_SLACK_MS);
        let taken: Vec<_> = o.due(look).into_iter().map(|h| h.ready.task_id).collect();
        assert_eq!(taken, ["t0", "t1", "t2"]);
        assert_eq!(o.follow_up_at(), Some(31_001 + 2 * FOLLOW_UP_SLACK_MS));
    }

    #[test]
    fn a_run_offered_again_while_its_earlier_lease_is_followed_is_followed_under_each_lease() {
        let mut o = Offers::default();
        o.offer(ready(1, "a"), 0);
        o.taken("a", Some(("r1".into(), 1)), 10, 30_000);
        // Parked, decided and offered again within the first lease's window.
        o.offer(ready(1, "a"), 1_000);
        o.taken("a", Some(("r2".into(), 2)), 1_010, 30_000);
        assert_eq!(o.len(), 2);
        let first = o.due(30_010);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].lease, Some(("r1".to_owned(), 1)));
        let second = o.due(31_010);
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].lease, Some(("r2".to_owned(), 2)));
        // A lost write forgets the offer it settles, never a lease still followed.
        o.offer(ready(2, "b"), 2_000);
        o.taken("b", Some(("r1".into(), 3)), 2_010, 30_000);
        o.offer(ready(2, "b"), 3_000);
        o.taken("b", None, 3_010, 30_000);
        assert_eq!(o.len(), 1);
        assert_eq!(o.next_due(), Some(32_010));
    }

    #[test]
    fn leases_settled_out_of_their_writes_order_are_still_taken_back_in_due_order() {
        let mut o = Offers::default();
        for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
            o.offer(ready(i as i64, id), 0);
        }
        // Written at 10, 20, 30 and 40; settled in the order 40, 10, 30, 20.
        for (id, at) in [("d", 40), ("a", 10), ("c", 30), ("b", 20)] {
            o.taken(id, Some(("r".into(), 1)), at, 1_000);
        }
        let mut order = Vec::new();
        while let Some(at) = o.next_due() {
            order.extend(o.due(at).into_iter().map(|h| (h.ready.task_id, h.due)));
        }
        assert_eq!(
            order,
            [
                ("a".to_owned(), 1_010),
                ("b".to_owned(), 1_020),
                ("c".to_owned(), 1_030),
                ("d".to_owned(), 1_040)
            ]
        );
    }

    #[test]
    fn the_next_due_is_the_earliest_of_offers_leases_and_retries() {
        let mut o = Offers::default();
        o.offer(ready(1, "leased"), 0);
        o.taken("leased", Some(("r".into(), 1)), 0, 30_000);
        let mut retry = o.clone();
        o.offer(ready(2, "offered"), 100);
        assert_eq!(o.next_due(), Some(100 + OFFER_TTL_MS));
        let back = retry.due(30_000);
        retry.offer(ready(3, "offered"), 30_000);
        retry.retry(back, 31_000);
        assert_eq!(retry.next_due(), Some(31_000));
        assert_eq!(retry.due(31_000)[0].ready.task_id, "leased");
        assert_eq!(retry.next_due(), Some(30_000 + OFFER_TTL_MS));
    }

    #[test]
    fn a_lease_written_after_its_offer_lapsed_is_not_followed() {
        let mut o = Offers::default();
        o.offer(ready(1, "a"), 0);
        assert_eq!(o.due(OFFER_TTL_MS).len(), 1);
        o.taken("a", Some(("r".into(), 1)), 10, 30_000);
        assert!(o.is_empty() && o.next_due().is_none());
    }

    #[test]
    fn a_lease_written_while_the_most_are_followed_is_left_to_the_reaper() {
        let mut o = Offers::default();
        let take = |o: &mut Offers, i: i64| {
            let id = format!("t{i}");
            o.offer(ready(i, &id), i);
            o.taken(&id, Some(("r".into(), 1)), i, 30_000);
        };
        let most = MAX_FOLLOWED as i64;
        for i in 0..=most {
            take(&mut o, i);
        }
        // The one past the bound is not followed; the earliest still are.
        assert_eq!(o.len(), MAX_FOLLOWED);
        assert_eq!(o.next_due(), Some(30_000));
        // One falls due: room again, and the next lease is followed.
        assert_eq!(o.due(30_000)[0].ready.task_id, "t0");
        take(&mut o, most + 1);
        assert_eq!(o.len(), MAX_FOLLOWED);
        let last = o.due(i64::MAX).pop().map(|h| h.ready.task_id);
        assert_eq!(last, Some(format!("t{}", most + 1)));
    }

    #[test]
    fn a_lease_frame_is_the_lease_body_typed_lease_and_ready_frames_parse() {
        let l = Lease {
            task_id: "t".into(),
            session_id: "s".into(),
            lease_epoch: 7,
            objective: "o".into(),
            meta: "{}".into(),
            last_seq: 0,
            created_at: 0,
            resume: None,
            waiting: crate::store::Waiting {
                cancel_requested: false,
                steer_pending: 2,
            },
        };
        let v: crate::json::Value = serde_json::from_str(&lease_frame(&l)).unwrap();
        assert_eq!(
            (&v["cancelRequested"], &v["steerPending"]),
            (&false.into(), &2.into())
        );
        assert_eq!(
            (v["type"].as_str(), v["taskId"].as_str()),
            (Some("lease"), Some("t"))
        );
        assert_eq!(v["leaseEpoch"], 7);
        let mut body: crate::json::Value = serde_json::from_str(&lease_body(&l)).unwrap();
        body["type"] = "lease".into();
        assert_eq!(v, body, "the frame is the body and its type");
        assert_eq!(
            serde_json::from_str::<RunnerFrame>(r#"{"type":"ready"}"#).unwrap(),
            RunnerFrame::Ready
        );
        assert!(serde_json::from_str::<RunnerFrame>(r#"{"type":"nope"}"#).is_err());
        // The keepalive is answered by the runtime, never parsed as a frame by the object.
        assert!(serde_json::from_str::<RunnerFrame>(PING_FRAME).is_err());
    }

    #[test]
    fn after_hibernation_only_ready_sockets_wait_oldest_first() {
        let note = |key: &str, ready, since| SocketNote {
            queue: "q".into(),
            runner_id: key.into(),
            key: key.into(),
            ready,
            since,
        };
        let order: Vec<_> = ready_in_order(vec![
            note("c", true, 3),
            note("b", false, 1),
            note("a", true, 2),
        ])
        .into_iter()
        .map(|n| n.key)
        .collect();
        assert_eq!(order, ["a", "c"]);
    }

    #[test]
    fn calls_and_replies_survive_a_round_trip() {
        for call in every_call() {
            let text = crate::object_codec::encode(&call);
            assert_eq!(
                crate::object_codec::decode::<DispatchCall>(&text).unwrap(),
                call
            );
        }
        for reply in every_reply() {
            let text = crate::object_codec::encode(&reply);
            assert_eq!(
                crate::object_codec::decode::<DispatchReply>(&text).unwrap(),
                reply
            );
        }
    }

    #[test]
    fn a_resumed_lease_names_a_plan_reviews_note_feedback_and_others_reason() {
        let mut l = Lease {
            task_id: "t".into(),
            session_id: "s".into(),
            lease_epoch: 2,
            objective: "o".into(),
            meta: "{}".into(),
            last_seq: 3,
            created_at: 0,
            resume: Some(crate::store::Resume {
                kind: "plan_review".into(),
                card: "{}".into(),
                decision: "revise".into(),
                reason: Some("shorter".into()),
            }),
            waiting: crate::store::Waiting::NOTHING,
        };
        let v: crate::json::Value = serde_json::from_str(&lease_body(&l)).unwrap();
        assert_eq!(v["resume"]["feedback"], "shorter");
        l.resume.as_mut().unwrap().kind = "tool_approval".into();
        let v: crate::json::Value = serde_json::from_str(&lease_body(&l)).unwrap();
        assert_eq!(v["resume"]["reason"], "shorter");
        assert_eq!(
            (v["leaseEpoch"].as_i64(), v["lastSeq"].as_i64()),
            (Some(2), Some(3))
        );
    }
}
