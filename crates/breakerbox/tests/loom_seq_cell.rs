//! Loom models of the Redis engine's local view: the sequence lock its `ViewCell` stores
//! the view in (`breakerbox-redis/src/breaker/view/seq_cell.rs`, included here as is, its
//! atomics and lock swapped for loom's by its own `cfg(loom)` shim).
//!
//! The model lives in this crate, beside the breaker's own loom models, because building
//! `breakerbox-redis` itself under `--cfg loom` would build its network stack too.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p breakerbox --test loom_seq_cell --release`
//! (`LOOM_MAX_PREEMPTIONS` overrides the default bound of 2, which keeps the three models
//! under half a minute in all).
#![cfg(loom)]
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
#[path = "../../breakerbox-redis/src/breaker/view/seq_cell.rs"]
mod seq_cell;

use loom::sync::Arc;
use loom::thread;
use seq_cell::SeqCell;

/// The view's width: four words.
type Cell = SeqCell<4>;

/// What write number `k` stores: four different words, each naming `k`, so a copy mixing
/// two writes is recognisable.
fn written(k: u64) -> [u64; 4] {
    [k, k << 8 | 1, k << 16 | 2, k << 24 | 3]
}

/// The write a copy comes from, if all its words come from one write.
fn write_of(words: [u64; 4]) -> Option<u64> {
    let k = words[0];
    (words == written(k)).then_some(k)
}

/// Runs `model` under loom, with a preemption bound of 2 unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise, and checks that loom explored more than one interleaving.
fn check(name: &str, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    let started = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "{name}: {runs} interleavings explored in {:?}",
        started.elapsed()
    );
    assert!(runs > 1, "{name}: loom explored a single interleaving");
}

/// Spawns `f` on a loom thread with its own handle to `cell`. Every model runs its readers
/// and writers on spawned threads, the main thread only joining them (loom explores a model
/// whose main thread reads while a spawned thread writes less thoroughly).
fn spawn<T: Send + 'static>(
    cell: &Arc<Cell>,
    f: impl FnOnce(&Cell) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let cell = cell.clone();
    thread::spawn(move || f(&cell))
}

#[test]
fn a_reader_never_sees_a_torn_view_while_a_writer_updates_it() {
    check("torn reads", || {
        let cell = Arc::new(Cell::new(written(0)));
        let writer = spawn(&cell, |cell| {
            for k in 1..=2 {
                assert!(cell.update(|_| Some(written(k))));
            }
        });
        // Two reads: each is one whole write, and they never go back in time.
        let reader = spawn(&cell, |cell| {
            let first = write_of(cell.load()).expect("a copy of one write");
            let second = write_of(cell.load()).expect("a copy of one write");
            assert!(first <= second && second <= 2, "{first} then {second}");
        });
        writer.join().unwrap();
        reader.join().unwrap();
        assert_eq!(write_of(cell.load()), Some(2));
    });
}

#[test]
fn concurrent_updates_are_never_lost() {
    check("lost updates", || {
        let cell = Arc::new(Cell::new(written(0)));
        // Each update reads the current value and writes the next: a lost update would
        // leave the count short.
        let writers: Vec<_> = (0..2)
            .map(|_| {
                spawn(&cell, |cell| {
                    cell.update(|words| write_of(words).map(|k| written(k + 1)))
                })
            })
            .collect();
        let reader = spawn(&cell, |cell| {
            write_of(cell.load()).expect("a copy of one write")
        });
        for writer in writers {
            assert!(writer.join().unwrap());
        }
        assert!(reader.join().unwrap() <= 2);
        assert_eq!(write_of(cell.load()), Some(2));
    });
}

#[test]
fn a_declined_update_changes_nothing() {
    check("declined update", || {
        let cell = Arc::new(Cell::new(written(5)));
        let decliner = spawn(&cell, |cell| assert!(!cell.update(|_| None)));
        let writer = spawn(&cell, |cell| assert!(cell.update(|_| Some(written(6)))));
        let reader = spawn(&cell, |cell| {
            write_of(cell.load()).expect("a copy of one write")
        });
        decliner.join().unwrap();
        writer.join().unwrap();
        assert!((5..=6).contains(&reader.join().unwrap()));
        assert_eq!(write_of(cell.load()), Some(6));
    });
}
