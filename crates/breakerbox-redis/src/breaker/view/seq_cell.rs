//! A sequence lock over `N` words: readers copy the words without a lock and retry only
//! while a write is in progress; writers (rare) serialise on a mutex.
//!
//! Self-contained on purpose: its atomics and lock come from the shim below, so the loom
//! model in `breakerbox/tests/loom_seq_cell.rs` includes this very file (`#[path]`) and
//! checks it under `--cfg loom` with the core crate's other models.
//!
//! The protocol (after Boehm, "Can seqlocks get along with programming language memory
//! models?", 2012):
//! - a writer makes the sequence odd, publishes that with a release fence, stores the
//!   words (relaxed), and makes the sequence even again with a release store;
//! - a reader loads an even sequence (acquire), loads the words (relaxed), orders them
//!   before a second load of the sequence with an acquire fence, and keeps the copy only
//!   if the sequence did not move. A copy is then the words of exactly one write.

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::Mutex;

/// `N` words read and written as one value.
pub(crate) struct SeqCell<const N: usize> {
    /// Odd while a write is in progress; +2 per write.
    seq: AtomicU64,
    words: [AtomicU64; N],
    writer: Mutex<()>,
}

impl<const N: usize> SeqCell<N> {
    /// A cell holding `words`.
    pub(crate) fn new(words: [u64; N]) -> SeqCell<N> {
        SeqCell {
            seq: AtomicU64::new(0),
            words: words.map(AtomicU64::new),
            writer: Mutex::new(()),
        }
    }

    /// The words of the last completed write.
    #[inline]
    pub(crate) fn load(&self) -> [u64; N] {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let words = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return words;
                }
            }
            spin();
        }
    }

    /// How many writes were made so far (during a write: the ones before it).
    #[inline]
    pub(crate) fn writes(&self) -> u64 {
        self.seq.load(Ordering::Acquire) / 2
    }

    /// Replaces the words by `f(current)` if it gives some; returns whether it did.
    /// Writers serialise, so `f` sees the words of the write before this one.
    pub(crate) fn update(&self, f: impl FnOnce([u64; N]) -> Option<[u64; N]>) -> bool {
        self.update_counted(|words, _| f(words))
    }

    /// As [`SeqCell::update`], with `f` also told how many writes were made before this
    /// one (so that it can refuse to write over one made since the caller looked).
    pub(crate) fn update_counted(&self, f: impl FnOnce([u64; N], u64) -> Option<[u64; N]>) -> bool {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(next) = f(self.load(), self.seq.load(Ordering::Relaxed) / 2) else {
            return false;
        };
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(next) {
            word.store(value, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
        true
    }
}

impl<const N: usize> std::fmt::Debug for SeqCell<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqCell")
            .field("words", &self.load())
            .finish_non_exhaustive()
    }
}

/// Waits a moment for a writer to finish (under loom: lets the writer run).
#[inline]
fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
