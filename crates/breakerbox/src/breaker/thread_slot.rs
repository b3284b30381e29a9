//! A small number per live thread, unique among the threads alive at any moment.
//!
//! A window gives each slot a lane of its own ([`super::lanes`]), so that a thread files a
//! plain success with a plain store on memory no other thread writes. A thread takes the
//! lowest free slot the first time it asks and gives it back when it exits; the next
//! thread to take that slot inherits the lanes, which is sound because the hand-over goes
//! through the pool's lock (the old owner's last store happens before the new owner's
//! first load).
//!
//! Threads beyond [`SLOTS`] (or one asking while its thread-local storage is being torn
//! down) get no slot and file through the window's lock instead: still exact, only slower.

/// How many slots exist, so how many threads at once can own a lane of each window.
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 64;
/// How many slots exist under loom (models run two or three threads).
#[cfg(loom)]
pub(crate) const SLOTS: usize = 4;

#[cfg(not(loom))]
mod pool {
    use std::cell::Cell;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::Mutex;

    /// `SLOT` before the thread has asked for a slot.
    const UNASSIGNED: u32 = u32::MAX - 1;
    /// `SLOT` of a thread that has none: all were taken, or the thread is exiting.
    const NONE: u32 = u32::MAX;

    /// Slots handed out so far, and those given back (lowest first).
    struct Pool {
        next: usize,
        free: BinaryHeap<Reverse<usize>>,
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        next: 0,
        free: BinaryHeap::new(),
    });

    fn pool() -> std::sync::MutexGuard<'static, Pool> {
        match POOL.lock() {
            Ok(pool) => pool,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn take() -> Option<usize> {
        let mut pool = pool();
        if let Some(Reverse(slot)) = pool.free.pop() {
            return Some(slot);
        }
        if pool.next < super::SLOTS {
            pool.next += 1;
            return Some(pool.next - 1);
        }
        None
    }

    /// A thread's claim on its slot: gives it back when the thread exits, after making
    /// sure the thread itself no longer uses it.
    struct Held(usize);

    impl Drop for Held {
        fn drop(&mut self) {
            // Another thread-local's destructor may still record an outcome on this thread:
            // from now on it goes through the window's lock.
            SLOT.with(|slot| slot.set(NONE));
            pool().free.push(Reverse(self.0));
        }
    }

    thread_local! {
        /// The slot, read on every plain success: a constant-initialised cell without a
        /// destructor, so reading it is one load.
        static SLOT: Cell<u32> = const { Cell::new(UNASSIGNED) };
        /// The claim, kept apart so that only it registers a destructor.
        static HELD: Cell<Option<Held>> = const { Cell::new(None) };
    }

    #[inline(always)]
    pub(super) fn current() -> Option<usize> {
        let slot = SLOT.with(Cell::get);
        if slot < UNASSIGNED {
            return Some(slot as usize);
        }
        if slot == NONE {
            return None;
        }
        assign()
    }

    #[cold]
    fn assign() -> Option<usize> {
        let Some(slot) = take() else {
            SLOT.with(|cell| cell.set(NONE));
            return None;
        };
        let claimed = HELD.try_with(|held| held.set(Some(Held(slot)))).is_ok();
        if !claimed {
            // The thread is exiting: give the slot straight back and use none.
            SLOT.with(|cell| cell.set(NONE));
            pool().free.push(Reverse(slot));
            return None;
        }
        let slot32 = u32::try_from(slot).unwrap_or(NONE);
        SLOT.with(|cell| cell.set(slot32));
        (slot32 != NONE).then_some(slot)
    }
}

/// The calling thread's slot, or `None` when all are taken.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn current() -> Option<usize> {
    pool::current()
}

/// Under loom, a model thread's slot is its loom thread number (deterministic across the
/// model's executions, as loom requires), modulo the slots; lanes are written by
/// compare-and-swap under loom, so two threads sharing one would still be sound.
#[cfg(loom)]
pub(crate) fn current() -> Option<usize> {
    let id = format!("{:?}", loom::thread::current().id());
    let number: String = id.chars().filter(char::is_ascii_digit).collect();
    Some(number.parse::<usize>().unwrap_or(0) % SLOTS)
}

/// Held by tests that need to know how many slots are taken (one that takes them all, one
/// that needs one free): `cargo test` runs a crate's tests as threads of one process.
#[cfg(all(test, not(loom)))]
pub(crate) static SLOT_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Barrier};

    #[test]
    fn live_threads_hold_distinct_slots_and_exited_ones_give_theirs_back() {
        let _exclusive = SLOT_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let slots: Vec<Option<usize>> = (0..threads)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let slot = current();
                    // Every thread holds its slot until all have taken one.
                    barrier.wait();
                    assert_eq!(current(), slot, "a thread's slot never changes");
                    slot
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|handle| handle.join().expect("thread"))
            .collect();
        let held: Vec<usize> = slots.iter().flatten().copied().collect();
        let distinct: HashSet<usize> = held.iter().copied().collect();
        assert_eq!(distinct.len(), held.len(), "two live threads shared a slot");
        // Those threads have exited: a new thread reuses a given-back slot rather than
        // taking a fresh one (other tests may hold slots meanwhile, so only reuse is
        // checked when these threads held any).
        if !held.is_empty() {
            let again = std::thread::spawn(current).join().expect("thread");
            assert!(again.is_some(), "a slot was given back but none was free");
        }
    }
}
