//! A first-come-first-served async lock for one store instance.
//!
//! rulvar's stores are synchronous: one call on one connection runs to completion before
//! the next starts. Our calls are async (fault points sit inside transactions), so two
//! tasks of one process sharing a store (a segment and its renew timer) must queue. The
//! lock serves waiters strictly in arrival order, which also keeps one instance's
//! concurrent appends in submission order (what A1/A2 and A5 expect), and it is
//! deterministic: no task ids, no runtime. A waiter dropped while queued (its process was
//! killed, or its caller gave up) leaves the queue and passes any wake-up on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct State {
    locked: bool,
    next_ticket: u64,
    queue: VecDeque<(u64, Option<Waker>)>,
}

/// The lock. Clones share it.
#[derive(Clone, Default)]
pub struct FifoLock {
    state: Rc<RefCell<State>>,
}

/// Held until dropped.
pub struct FifoGuard {
    state: Rc<RefCell<State>>,
}

impl FifoLock {
    pub fn new() -> FifoLock {
        FifoLock::default()
    }

    /// Wait for the lock.
    pub fn lock(&self) -> Acquire {
        Acquire { state: self.state.clone(), ticket: None, done: false }
    }
}

/// The future returned by [`FifoLock::lock`].
pub struct Acquire {
    state: Rc<RefCell<State>>,
    ticket: Option<u64>,
    done: bool,
}

impl Future for Acquire {
    type Output = FifoGuard;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FifoGuard> {
        let this = &mut *self;
        let mut st = this.state.borrow_mut();
        match this.ticket {
            None => {
                if !st.locked && st.queue.is_empty() {
                    st.locked = true;
                    drop(st);
                    this.done = true;
                    return Poll::Ready(FifoGuard { state: this.state.clone() });
                }
                let t = st.next_ticket;
                st.next_ticket += 1;
                st.queue.push_back((t, Some(cx.waker().clone())));
                this.ticket = Some(t);
                Poll::Pending
            }
            Some(t) => {
                if !st.locked && st.queue.front().map(|(f, _)| *f) == Some(t) {
                    st.queue.pop_front();
                    st.locked = true;
                    drop(st);
                    this.done = true;
                    this.ticket = None;
                    return Poll::Ready(FifoGuard { state: this.state.clone() });
                }
                if let Some(slot) = st.queue.iter_mut().find(|(f, _)| *f == t) {
                    slot.1 = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(t) = self.ticket {
            let mut st = self.state.borrow_mut();
            st.queue.retain(|(f, _)| *f != t);
            if !st.locked {
                if let Some((_, Some(w))) = st.queue.front() {
                    w.wake_by_ref();
                }
            }
        }
    }
}

impl Drop for FifoGuard {
    fn drop(&mut self) {
        let mut st = self.state.borrow_mut();
        st.locked = false;
        if let Some((_, Some(w))) = st.queue.front() {
            w.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The lock's promises, polled by hand: arrival order, no barging past a queued waiter,
    //! and a dropped waiter passing its turn on.

    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::{Acquire, FifoGuard, FifoLock};

    fn poll(a: &mut Acquire) -> Option<FifoGuard> {
        let waker = futures::task::noop_waker();
        match Pin::new(a).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(g) => Some(g),
            Poll::Pending => None,
        }
    }

    #[test]
    fn waiters_are_served_in_arrival_order_and_a_newcomer_does_not_barge() {
        let lock = FifoLock::new();
        let held = poll(&mut lock.lock()).expect("a free lock is taken at once");
        let mut b = lock.lock();
        let mut c = lock.lock();
        assert!(poll(&mut b).is_none() && poll(&mut c).is_none(), "both queue behind the holder");
        drop(held);
        // The lock is free, but b and c are queued: a newcomer that arrives before b is polled
        // (the releasing task's next call, say) must queue behind them.
        let mut late = lock.lock();
        assert!(poll(&mut late).is_none(), "a newcomer took the lock ahead of queued waiters");
        assert!(poll(&mut c).is_none(), "c was served before b, which arrived first");
        let gb = poll(&mut b).expect("b is first in line");
        drop(gb);
        assert!(poll(&mut late).is_none(), "the newcomer went ahead of c");
        let gc = poll(&mut c).expect("c is next");
        drop(gc);
        assert!(poll(&mut late).is_some(), "the newcomer is served last");
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue() {
        let lock = FifoLock::new();
        let held = poll(&mut lock.lock()).expect("free");
        let mut b = lock.lock();
        let mut c = lock.lock();
        assert!(poll(&mut b).is_none() && poll(&mut c).is_none());
        drop(b);
        drop(held);
        assert!(poll(&mut c).is_some(), "c waited on a waiter that had gone");
    }
}
