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
