//! A first-come, first-served async lock for one thread (a Durable Object's calls).
//!
//! Contract: waiters acquire in the order they asked. Releasing hands the lock straight to the
//! oldest waiter still waiting, so a caller that arrives later can never take it first (a lock
//! that lets arrivals barge in, as `futures_util`'s does, starves some waiters for seconds when
//! calls keep coming). A waiter that gives up (its future dropped) leaves the queue and is skipped;
//! one dropped after being handed the lock, before it ran, passes it on. Single-threaded by
//! construction (`Rc`, `Cell`): the Worker runtime runs one object's calls on one thread.

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
};

/// One waiter's place in the queue.
#[derive(Default)]
struct Slot {
    granted: Cell<bool>,
    gone: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

#[derive(Default)]
struct Inner {
    held: Cell<bool>,
    queue: RefCell<VecDeque<Rc<Slot>>>,
}

impl Inner {
    /// Hands the lock to the oldest waiter still waiting, or frees it when none is.
    fn release(&self) {
        loop {
            let next = self.queue.borrow_mut().pop_front();
            match next {
                Some(slot) if slot.gone.get() => continue,
                Some(slot) => {
                    slot.granted.set(true);
                    if let Some(w) = slot.waker.borrow_mut().take() {
                        w.wake();
                    }
                    return;
                }
                None => {
                    self.held.set(false);
                    return;
                }
            }
        }
    }
}

/// The lock (cheap to create; not `Send`).
#[derive(Default)]
pub struct FairLock {
    inner: Rc<Inner>,
}

/// Holding the lock; dropping it hands the lock on.
pub struct FairGuard {
    inner: Rc<Inner>,
}

impl Drop for FairGuard {
    fn drop(&mut self) {
        self.inner.release();
    }
}

/// A pending acquisition ([`FairLock::lock`]).
pub struct Acquire {
    inner: Rc<Inner>,
    slot: Option<Rc<Slot>>,
    done: bool,
}

impl FairLock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for the lock behind everyone who asked before.
    pub fn lock(&self) -> Acquire {
        let inner = self.inner.clone();
        let slot = if !inner.held.get() && inner.queue.borrow().is_empty() {
            inner.held.set(true);
            None
        } else {
            let slot = Rc::new(Slot::default());
            inner.queue.borrow_mut().push_back(slot.clone());
            Some(slot)
        };
        Acquire {
            inner,
            slot,
            done: false,
        }
    }

    /// How many callers wait for the lock (for stats and tests).
    pub fn waiting(&self) -> usize {
        self.inner
            .queue
            .borrow()
            .iter()
            .filter(|s| !s.gone.get())
            .count()
    }
}

impl Future for Acquire {
    type Output = FairGuard;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FairGuard> {
        let ready = match &self.slot {
            None => true,
            Some(slot) if slot.granted.get() => true,
            Some(slot) => {
                *slot.waker.borrow_mut() = Some(cx.waker().clone());
                false
            }
        };
        if !ready {
            return Poll::Pending;
        }
        self.done = true;
        Poll::Ready(FairGuard {
            inner: self.inner.clone(),
        })
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match &self.slot {
            // Granted (or taken at once) but never returned: the lock is this future's to pass on.
            None => self.inner.release(),
            Some(slot) if slot.granted.get() => self.inner.release(),
            Some(slot) => slot.gone.set(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Noop;
    impl Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }

    fn poll(f: &mut Acquire) -> Option<FairGuard> {
        let waker = Waker::from(std::sync::Arc::new(Noop));
        match Pin::new(f).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(g) => Some(g),
            Poll::Pending => None,
        }
    }

    #[test]
    fn waiters_acquire_in_the_order_they_asked_and_a_late_arrival_never_goes_first() {
        let lock = FairLock::new();
        let mut first = lock.lock();
        let g1 = poll(&mut first).expect("a free lock is taken at once");
        let mut second = lock.lock();
        let mut third = lock.lock();
        assert!(poll(&mut second).is_none() && poll(&mut third).is_none());
        drop(g1);
        // Released with waiters queued: a newcomer waits behind them, even before they run.
        let mut late = lock.lock();
        assert!(poll(&mut late).is_none());
        assert!(poll(&mut third).is_none(), "third is behind second");
        let g2 = poll(&mut second).expect("second was handed the lock");
        drop(g2);
        assert!(poll(&mut late).is_none(), "late is behind third");
        let g3 = poll(&mut third).expect("then third");
        drop(g3);
        let g4 = poll(&mut late).expect("then the late arrival");
        drop(g4);
        assert!(poll(&mut lock.lock()).is_some(), "free again");
    }

    #[test]
    fn a_waiter_that_gives_up_is_skipped_and_one_dropped_after_its_turn_passes_the_lock_on() {
        let lock = FairLock::new();
        let g = poll(&mut lock.lock()).unwrap();
        let gone = lock.lock();
        let mut granted_then_dropped = lock.lock();
        let mut last = lock.lock();
        assert!(poll(&mut granted_then_dropped).is_none());
        assert!(poll(&mut last).is_none());
        assert_eq!(lock.waiting(), 3);
        drop(gone);
        assert_eq!(lock.waiting(), 2);
        drop(g); // skips `gone`, hands the lock to `granted_then_dropped`
        drop(granted_then_dropped); // never ran: passes it on
        let g = poll(&mut last).expect("the lock reached the last waiter");
        drop(g);
        assert_eq!(lock.waiting(), 0);
        assert!(poll(&mut lock.lock()).is_some());
    }
}
