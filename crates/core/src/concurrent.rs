//! Several futures driven at once on the isolate's one thread: every call to many objects (a
//! leader's children, a dispatcher's pushes, a reaper's notices) waits on all of them together.
//!
//! futures-util's `join_all` and `buffer_unordered` do this with a task queue (a reference-counted
//! task per future, a wake list, and above 30 futures an ordering heap), compiled once per future
//! type: about 4 KB of the gzipped module for three call sites. Here every unfinished future is
//! polled again whenever any of them wakes the task. That costs a poll per waiting future per wake,
//! a cost bounded by the callers' bounds (a leader's concurrency, a queue's waiting runners, a
//! reaper's notices at once), and it needs no queue: a spurious poll is one any future must accept.

use std::{
    future::{poll_fn, Future},
    pin::Pin,
    task::Poll,
};

/// A future in flight, or its output once it is done.
enum Slot<F: Future> {
    Running(Pin<Box<F>>),
    Done(Option<F::Output>),
}

impl<F: Future> Slot<F> {
    /// Polls the future if it still runs; whether it is still running after.
    fn poll(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        if let Slot::Running(f) = self {
            match f.as_mut().poll(cx) {
                Poll::Ready(out) => *self = Slot::Done(Some(out)),
                Poll::Pending => return true,
            }
        }
        false
    }

    fn running(&self) -> bool {
        matches!(self, Slot::Running(_))
    }

    fn take(&mut self) -> Option<F::Output> {
        match self {
            Slot::Done(out) => out.take(),
            Slot::Running(_) => None,
        }
    }
}

/// Runs every future at once; their outputs in the order given.
pub async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut slots: Vec<Slot<F>> = futures
        .into_iter()
        .map(|f| Slot::Running(Box::pin(f)))
        .collect();
    poll_fn(|cx| {
        let mut running = false;
        for slot in &mut slots {
            running |= slot.poll(cx);
        }
        if running {
            Poll::Pending
        } else {
            Poll::Ready(slots.iter_mut().filter_map(Slot::take).collect())
        }
    })
    .await
}

/// Runs the futures at most `at_once` at a time (at least one), starting the next as one ends;
/// their outputs in the order given.
pub async fn join_bounded<F: Future>(
    futures: impl IntoIterator<Item = F>,
    at_once: usize,
) -> Vec<F::Output> {
    let mut pending = futures.into_iter();
    let mut exhausted = false;
    let mut slots: Vec<Slot<F>> = Vec::new();
    poll_fn(|cx| loop {
        let mut running = slots.iter().filter(|s| s.running()).count();
        while running < at_once.max(1) && !exhausted {
            match pending.next() {
                Some(f) => {
                    slots.push(Slot::Running(Box::pin(f)));
                    running += 1;
                }
                None => exhausted = true,
            }
        }
        if running == 0 {
            return Poll::Ready(slots.iter_mut().filter_map(Slot::take).collect());
        }
        let still: usize = slots.iter_mut().map(|s| usize::from(s.poll(cx))).sum();
        if still == running || exhausted && still > 0 {
            // Each one still running has registered its wake; none ended whose place to fill.
            return Poll::Pending;
        }
        // Some ended: fill their places (or finish) in this same poll.
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        cell::Cell,
        rc::Rc,
        task::{Context, Waker},
    };

    /// A test's clock and the number of its jobs running now (and at most, so far).
    #[derive(Default)]
    struct Clock {
        now: Cell<u32>,
        running: Cell<usize>,
        most: Cell<usize>,
    }

    /// A job that starts when first polled and ends once the clock reaches `start + ticks`,
    /// answering `out`.
    async fn job(clock: Rc<Clock>, ticks: u32, out: &'static str) -> &'static str {
        let c = &clock;
        c.running.set(c.running.get() + 1);
        c.most.set(c.most.get().max(c.running.get()));
        let end = c.now.get() + ticks;
        poll_fn(|_| {
            if c.now.get() >= end {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        c.running.set(c.running.get() - 1);
        out
    }

    /// Polls `f` once per tick of `clock` until it is done; its output and the ticks it took.
    fn run<T>(clock: &Clock, f: impl Future<Output = T>) -> (T, u32) {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return (out, clock.now.get());
            }
            clock.now.set(clock.now.get() + 1);
            assert!(clock.now.get() < 100, "the join never finished");
        }
    }

    #[test]
    fn join_all_runs_every_future_at_once_and_answers_in_the_order_given() {
        let clock = Rc::new(Clock::default());
        let jobs = [(3, "a"), (1, "b"), (2, "c")].map(|(t, o)| job(clock.clone(), t, o));
        let (out, took) = run(&clock, join_all(jobs));
        assert_eq!(out, ["a", "b", "c"]);
        assert_eq!(clock.most.get(), 3, "all three ran together");
        assert_eq!(took, 3, "as long as the longest, not the sum");
    }

    #[test]
    fn join_all_of_nothing_is_empty_at_once() {
        let clock = Clock::default();
        let (out, took) = run(&clock, join_all(Vec::<std::future::Ready<u8>>::new()));
        assert!(out.is_empty());
        assert_eq!(took, 0);
    }

    #[test]
    fn join_bounded_never_runs_more_than_its_bound_and_fills_a_place_as_soon_as_one_ends() {
        let clock = Rc::new(Clock::default());
        let jobs = [(2, "a"), (1, "b"), (3, "c"), (1, "d"), (1, "e")]
            .map(|(t, o)| job(clock.clone(), t, o));
        let (out, took) = run(&clock, join_bounded(jobs, 2));
        assert_eq!(out, ["a", "b", "c", "d", "e"]);
        assert_eq!(clock.most.get(), 2, "at most two at a time");
        // a and b start at 0; b ends at 1 (c starts, until 4); a ends at 2 (d starts, until 3);
        // d ends at 3 (e starts, until 4): all done at 4, where one at a time would take 8.
        assert_eq!(took, 4);
    }

    #[test]
    fn join_bounded_with_a_bound_of_zero_still_runs_one_at_a_time() {
        let clock = Rc::new(Clock::default());
        let jobs = [(1, "a"), (1, "b")].map(|(t, o)| job(clock.clone(), t, o));
        let (out, took) = run(&clock, join_bounded(jobs, 0));
        assert_eq!(out, ["a", "b"]);
        assert_eq!(clock.most.get(), 1);
        assert_eq!(took, 2);
    }
}
