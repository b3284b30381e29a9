//! Per-thread success lanes: where a window files plain successes without a shared write.
//!
//! A window owns one lane per thread slot ([`super::thread_slot`]), allocated the first time
//! its thread files through it. A lane counts the plain successes of one closed generation
//! (and, for a time window, of one bucket period) filed by the thread that holds the slot.
//!
//! Who writes what:
//! - The count only ever grows, by its owner, with a plain load and store (no atomic
//!   read-modify-write: on the machines we measure, one costs more than the whole call).
//! - Its key (generation, period, end of period) changes only under the window's lock, by
//!   the owner, which first moves the count somewhere the window still sees it.
//! - Readers sum the lanes under the window's lock: keys are stable then, and each count is
//!   a single-writer counter growing by one, so the sum of a sweep equals the total at some
//!   instant during the sweep. The window's events are placed at that instant, which lies
//!   within their own call: counts stay exact (linearizable), not approximate.

use super::thread_slot::{self, SLOTS};
use crate::sync::{AtomicU64, Ordering};

/// A generation no lane holds (generations have 37 bits).
const NO_GENERATION: u64 = u64::MAX;

/// One thread's plain successes of one generation and period. Aligned so that two
/// threads' lanes never share a cache line (nor the adjacent line a prefetcher pairs).
#[repr(align(128))]
pub(crate) struct Lane {
    generation: AtomicU64,
    period: AtomicU64,
    until: AtomicU64,
    count: AtomicU64,
}

/// What a lane holds, read under the window's lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaneCount {
    pub(crate) period: u64,
    pub(crate) count: u64,
}

impl Lane {
    fn empty() -> Lane {
        Lane {
            generation: AtomicU64::new(NO_GENERATION),
            period: AtomicU64::new(0),
            until: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// The owner's fast path: counts one plain success if the lane is keyed to
    /// `generation` and `now` is before the end of its period. Returns the lane's count
    /// after it, or `None` when it counted nothing.
    #[inline(always)]
    pub(crate) fn try_add(&self, generation: u64, now: u64) -> Option<u64> {
        if self.generation.load(Ordering::Relaxed) != generation
            || now >= self.until.load(Ordering::Relaxed)
        {
            return None;
        }
        Some(self.add())
    }

    /// Counts one plain success (owner only); returns the lane's count after it.
    #[inline(always)]
    pub(crate) fn add(&self) -> u64 {
        #[cfg(not(loom))]
        {
            let count = self.count.load(Ordering::Relaxed).wrapping_add(1);
            self.count.store(count, Ordering::Release);
            count
        }
        #[cfg(loom)]
        {
            self.count.fetch_add(1, Ordering::AcqRel).wrapping_add(1)
        }
    }

    /// Whether the lane is keyed to `generation` (owner only, under the window's lock).
    #[inline(always)]
    pub(crate) fn holds(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Relaxed) == generation
    }

    /// What the lane holds for `generation` (under the window's lock).
    pub(crate) fn read(&self, generation: u64) -> Option<LaneCount> {
        if self.generation.load(Ordering::Acquire) != generation {
            return None;
        }
        Some(LaneCount {
            period: self.period.load(Ordering::Acquire),
            count: self.count.load(Ordering::Acquire),
        })
    }

    /// Re-keys the lane to `generation` and `period` (ending at `until`), empty (owner
    /// only, under the window's lock; the caller has moved what the lane held).
    pub(crate) fn rekey(&self, generation: u64, period: u64, until: u64) {
        self.count.store(0, Ordering::Release);
        self.period.store(period, Ordering::Release);
        self.until.store(until, Ordering::Release);
        self.generation.store(generation, Ordering::Release);
    }
}

/// Lanes come in chunks of this many. The first chunk is part of the window (the lowest
/// slots are handed out first, so most threads have one there, one load away); the others
/// are allocated the first time a thread of their slots files through the window.
#[cfg(not(loom))]
const CHUNK: usize = 8;

/// The chunks after the first: together they hold a lane for every slot, and no more.
#[cfg(not(loom))]
const CHUNKS: usize = SLOTS / CHUNK - 1;
#[cfg(not(loom))]
const _: () = assert!(
    (CHUNKS + 1) * CHUNK == SLOTS,
    "the chunks cover the slots exactly"
);

/// The lanes of one window, one per thread slot.
pub(crate) struct Lanes {
    #[cfg(not(loom))]
    first: [Lane; CHUNK],
    #[cfg(not(loom))]
    chunks: [std::sync::OnceLock<Box<[Lane; CHUNK]>>; CHUNKS],
    /// Under loom, one lane per slot (a handful), all of them swept.
    #[cfg(loom)]
    lanes: Box<[Lane]>,
    /// One past the highest slot whose lane exists (beyond the first chunk, which always
    /// does): readers sweep only that far.
    #[cfg(not(loom))]
    used: AtomicU64,
}

impl Lanes {
    pub(crate) fn new() -> Lanes {
        Lanes {
            #[cfg(not(loom))]
            first: std::array::from_fn(|_| Lane::empty()),
            #[cfg(not(loom))]
            chunks: std::array::from_fn(|_| std::sync::OnceLock::new()),
            #[cfg(loom)]
            lanes: (0..SLOTS).map(|_| Lane::empty()).collect(),
            #[cfg(not(loom))]
            used: AtomicU64::new(0),
        }
    }

    /// The calling thread's lane, created on its first use; `None` for a thread without a
    /// slot.
    #[inline(always)]
    pub(crate) fn mine(&self) -> Option<&Lane> {
        let slot = thread_slot::current()?;
        #[cfg(not(loom))]
        {
            if let Some(lane) = self.first.get(slot) {
                return Some(lane);
            }
            let chunk = self.chunks.get(slot / CHUNK - 1)?;
            match chunk.get() {
                Some(lanes) => lanes.get(slot % CHUNK),
                None => self.create(chunk, slot),
            }
        }
        #[cfg(loom)]
        {
            self.lanes.get(slot)
        }
    }

    #[cfg(not(loom))]
    #[cold]
    fn create<'a>(
        &self,
        chunk: &'a std::sync::OnceLock<Box<[Lane; CHUNK]>>,
        slot: usize,
    ) -> Option<&'a Lane> {
        let lanes = chunk.get_or_init(|| Box::new(std::array::from_fn(|_| Lane::empty())));
        // Readers sweep whole chunks up to the highest one in use.
        let end = (slot / CHUNK + 1) * CHUNK;
        self.used.fetch_max(end as u64, Ordering::AcqRel);
        lanes.get(slot % CHUNK)
    }

    /// Every lane's count for `generation` (under the window's lock).
    pub(crate) fn each(&self, generation: u64, mut visit: impl FnMut(LaneCount)) {
        #[cfg(not(loom))]
        let used = self.used.load(Ordering::Acquire).min(SLOTS as u64) as usize;
        #[cfg(not(loom))]
        // The first chunk is always swept: it is part of the window.
        let lanes = self.first.iter().chain(
            self.chunks
                .iter()
                .take(used.div_ceil(CHUNK).saturating_sub(1))
                .filter_map(|chunk| chunk.get())
                .flat_map(|chunk| chunk.iter()),
        );
        #[cfg(loom)]
        let lanes = self.lanes.iter();
        for lane in lanes {
            if let Some(count) = lane.read(generation) {
                visit(count);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier};

    /// One thread, by its slot: told when to take its lane, and answering its address.
    struct Probe {
        slot: Option<usize>,
        go: mpsc::Sender<()>,
        lane: mpsc::Receiver<Option<usize>>,
    }

    #[test]
    fn every_slot_has_a_lane_of_its_own_and_readers_sweep_exactly_the_chunks_in_use() {
        let _exclusive = thread_slot::SLOT_TESTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let lanes = Arc::new(Lanes::new());
        // More threads than slots, all alive together: every slot other tests do not
        // hold is taken by one of them.
        let threads = SLOTS + 8;
        let start = Arc::new(Barrier::new(threads + 1));
        let end = Arc::new(Barrier::new(threads + 1));
        let (slots_tx, slots_rx) = mpsc::channel();
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (lanes, start, end, slots_tx) = (
                    Arc::clone(&lanes),
                    Arc::clone(&start),
                    Arc::clone(&end),
                    slots_tx.clone(),
                );
                let (go_tx, go_rx) = mpsc::channel::<()>();
                let (lane_tx, lane_rx) = mpsc::channel();
                let handle = std::thread::spawn(move || {
                    start.wait();
                    slots_tx
                        .send((i, thread_slot::current()))
                        .expect("main thread");
                    go_rx.recv().expect("main thread");
                    let lane = lanes.mine().map(|lane| {
                        lane.rekey(1, 0, u64::MAX);
                        lane.add();
                        std::ptr::from_ref(lane) as usize
                    });
                    lane_tx.send(lane).expect("main thread");
                    end.wait();
                });
                (handle, go_tx, lane_rx)
            })
            .collect();
        start.wait();
        let mut found: Vec<Option<usize>> = vec![None; threads];
        for _ in 0..threads {
            let (i, slot) = slots_rx.recv().expect("a thread");
            found[i] = slot;
        }
        let mut probes: Vec<Probe> = Vec::new();
        let mut joins = Vec::new();
        for ((handle, go, lane), slot) in handles.into_iter().zip(found) {
            probes.push(Probe { slot, go, lane });
            joins.push(handle);
        }
        // One at a time, lowest slot first: each thread keys its lane and counts one.
        probes.sort_by_key(|p| p.slot.unwrap_or(usize::MAX));
        assert!(
            probes
                .iter()
                .any(|p| p.slot.is_some_and(|s| s >= SLOTS - CHUNK)),
            "no thread got a slot of the last chunk"
        );
        let (mut seen, mut counted, mut used) = (Vec::new(), 0u64, 0usize);
        for probe in &probes {
            probe.go.send(()).expect("thread");
            let lane = probe.lane.recv().expect("thread");
            assert_eq!(
                lane.is_some(),
                probe.slot.is_some(),
                "slot {:?}",
                probe.slot
            );
            let (Some(lane), Some(slot)) = (lane, probe.slot) else {
                continue;
            };
            assert!(!seen.contains(&lane), "slot {slot} shares a lane");
            seen.push(lane);
            counted += 1;
            if slot >= CHUNK {
                used = (slot / CHUNK + 1) * CHUNK;
            }
            let mut sum = 0;
            lanes.each(1, |lane| sum += lane.count);
            assert_eq!(sum, counted, "after slot {slot}");
            // The sweep ends at the last chunk in use, not after it.
            assert_eq!(
                lanes.used.load(Ordering::Relaxed) as usize,
                used,
                "slot {slot}"
            );
        }
        end.wait();
        for handle in joins {
            handle.join().expect("thread");
        }
    }
}
