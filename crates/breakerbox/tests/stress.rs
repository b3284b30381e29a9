//! Many OS threads hammer one breaker that keeps cycling closed -> open -> half-open, and an
//! independent gauge, kept by the callers themselves, checks that no more than `max_probes`
//! probes of one half-open phase are ever in flight.
//!
//! The gauge counts probes per half-open generation, not globally: when a phase ends
//! (closed by the last required success, re-opened by a failure or by the half-open
//! deadline) the probes still held from it are stale, and the next half-open phase may
//! rightly admit `max_probes` new ones while the stale ones finish. A plain global counter
//! would report those as over-admission.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use breakerbox::model::TransitionReason;
use breakerbox::{CircuitBreaker, Event, EventKind, JitterSource, ManualClock, Phase, SplitMix};

const WORKERS: usize = 8;
const MIN_ADMISSIONS: u64 = 100_000;
const MIN_HALF_OPEN_PHASES: u64 = 1_000;
const MIN_HALF_OPEN_TIMEOUTS: u64 = 1;
const WALL_CAP: Duration = Duration::from_secs(20);
const RECOVERY: Duration = Duration::from_millis(1);
const HALF_OPEN_TIMEOUT: Duration = Duration::from_millis(2);
/// How far the driver thread moves the breaker's clock at each step.
const TICK: Duration = Duration::from_micros(250);

/// Probes in flight of the latest half-open generation any caller has seen, packed into one
/// word: generation in the high 40 bits, count in the low 24.
struct ProbeGauge(AtomicU64);

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

impl ProbeGauge {
    fn new() -> ProbeGauge {
        ProbeGauge(AtomicU64::new(0))
    }

    /// A probe of `generation` starts; returns how many of that generation are now in
    /// flight, or `None` when a later generation has already probed (this permit is stale
    /// and no longer counts against the limit).
    fn enter(&self, generation: u64) -> Option<u64> {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let (current, count) = (word >> COUNT_BITS, word & COUNT_MASK);
            let count = match current.cmp(&generation) {
                std::cmp::Ordering::Equal => count + 1,
                std::cmp::Ordering::Less => 1,
                std::cmp::Ordering::Greater => return None,
            };
            let next = (generation << COUNT_BITS) | count;
            match self
                .0
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(count),
                Err(actual) => word = actual,
            }
        }
    }

    /// A probe of `generation` ends (before its verdict is recorded or its permit dropped).
    fn exit(&self, generation: u64) {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            if word >> COUNT_BITS != generation {
                return; // a later generation took over; this one is no longer counted
            }
            let next = word - 1;
            match self
                .0
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }
}

#[derive(Default)]
struct Tally {
    admissions: AtomicU64,
    probes: AtomicU64,
    rejections: AtomicU64,
    stale_gauge_entries: AtomicU64,
    max_probes_seen: AtomicU64,
    over_limit: AtomicU64,
    to_open: AtomicU64,
    to_half_open: AtomicU64,
    to_closed: AtomicU64,
    half_open_timeouts: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// A few hundred spins, sometimes a yield, to keep a probe in flight long enough for
/// others to race for its slot; now and then long enough for the driver to push the
/// clock past the half-open deadline, so the probe comes back stale.
fn hold_briefly(rng: &SplitMix) {
    let spins = (rng.sample() * 400.0) as u32;
    for _ in 0..spins {
        std::hint::spin_loop();
    }
    let roll = rng.sample();
    if roll < 0.01 {
        thread::sleep(Duration::from_millis(1));
    } else if roll < 0.1 {
        thread::yield_now();
    }
}

fn worker(
    breaker: CircuitBreaker<ManualClock>,
    gauge: Arc<ProbeGauge>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let rng = SplitMix::new(seed);
    let max_probes = u64::from(breaker.config().max_probes);
    while !stop.load(Ordering::Relaxed) {
        let permit = match breaker.try_acquire() {
            Ok(permit) => permit,
            Err(_) => {
                bump(&tally.rejections);
                thread::yield_now();
                continue;
            }
        };
        bump(&tally.admissions);
        let roll = rng.sample();
        if !permit.is_probe() {
            // Closed: mostly healthy, with failures often enough to trip every ~100 calls.
            match roll {
                r if r < 0.02 => permit.failure(),
                r if r < 0.03 => drop(permit),
                _ => permit.success(),
            }
            continue;
        }
        bump(&tally.probes);
        let generation = permit.generation();
        match gauge.enter(generation) {
            Some(in_flight) => {
                tally
                    .max_probes_seen
                    .fetch_max(in_flight, Ordering::Relaxed);
                if in_flight > max_probes {
                    bump(&tally.over_limit);
                }
            }
            None => bump(&tally.stale_gauge_entries),
        }
        hold_briefly(&rng);
        // Leave the gauge before the slot can be reused: before the verdict or the drop.
        gauge.exit(generation);
        match roll {
            r if r < 0.55 => permit.success(),
            r if r < 0.75 => permit.failure(),
            r if r < 0.85 => permit.ignore(),
            _ => drop(permit), // unrecorded: frees the slot
        }
    }
}

fn cycle_under_load(max_probes: u32) {
    let clock = ManualClock::new();
    let tally = Arc::new(Tally::default());
    let sink = tally.clone();
    let breaker = CircuitBreaker::builder()
        .name("stress")
        .consecutive_failures(1)
        .max_probes(max_probes)
        .required_successes(2)
        .recovery_timeout(RECOVERY)
        .half_open_timeout(HALF_OPEN_TIMEOUT)
        .clock(clock.clone())
        .listener(move |event: &Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                match t.to {
                    Phase::Open => bump(&sink.to_open),
                    Phase::HalfOpen => bump(&sink.to_half_open),
                    Phase::Closed => bump(&sink.to_closed),
                    _ => {}
                }
                if t.reason == TransitionReason::HalfOpenTimedOut {
                    bump(&sink.half_open_timeouts);
                }
            }
        })
        .build()
        .expect("a valid config");

    let gauge = Arc::new(ProbeGauge::new());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (breaker, gauge, tally, stop) =
                (breaker.clone(), gauge.clone(), tally.clone(), stop.clone());
            let seed = 0x5EED_0000 + u64::from(max_probes) * 100 + i as u64;
            thread::spawn(move || worker(breaker, gauge, tally, stop, seed))
        })
        .collect();

    // The driver: moves the breaker's clock until the work is done or the wall cap is hit.
    #[allow(clippy::disallowed_methods)] // the test's own wall-clock cap, not breaker time
    let started = Instant::now();
    let mut steps = 0u64;
    let mut last_jump = 0u64;
    while started.elapsed() < WALL_CAP
        && (get(&tally.admissions) < MIN_ADMISSIONS
            || get(&tally.to_half_open) < MIN_HALF_OPEN_PHASES
            || get(&tally.half_open_timeouts) < MIN_HALF_OPEN_TIMEOUTS)
    {
        // Now and then, jump past the deadline of a half-open phase, so that it times out
        // with probes in flight.
        // (At most one jump every 10 steps, so most phases still close or fail normally.)
        // On a fast machine a half-open phase lasts a few microseconds, which a driver that
        // only looks at the phase between its sleeps never sees. So right after a step
        // (which may end a cool-down) the driver takes a probe of its own when it can: it
        // holds the phase half-open across the jump and reports nothing until after it, a
        // probe that never reported in time.
        steps += 1;
        clock.advance(TICK);
        let due = steps >= last_jump + 10;
        let held = match due {
            true => breaker
                .try_acquire()
                .ok()
                .filter(|permit| permit.is_probe()),
            false => None,
        };
        if held.is_some() || (due && breaker.phase() == Phase::HalfOpen) {
            last_jump = steps;
            clock.advance(HALF_OPEN_TIMEOUT);
        }
        thread::sleep(Duration::from_micros(50));
        // Late: its phase has timed out, or times out as this release settles it.
        drop(held);
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
    let elapsed = started.elapsed();

    let snapshot = breaker.snapshot();
    let max_seen = get(&tally.max_probes_seen);
    eprintln!(
        "max_probes={max_probes}: {} admissions ({} probes, {} rejections) in {elapsed:?}; \
         {} to half-open, {} to open ({} half-open timeouts), {} to closed; \
         max probes in flight seen {max_seen}; {} stale gauge entries; {} stale results; \
         {} clock steps",
        get(&tally.admissions),
        get(&tally.probes),
        get(&tally.rejections),
        get(&tally.to_half_open),
        get(&tally.to_open),
        get(&tally.half_open_timeouts),
        get(&tally.to_closed),
        get(&tally.stale_gauge_entries),
        snapshot.stale_results,
        steps,
    );

    assert_eq!(
        get(&tally.over_limit),
        0,
        "more than {max_probes} probes in flight"
    );
    assert!(max_seen <= u64::from(max_probes));
    assert!(max_seen >= 1, "no probe was ever admitted");
    assert!(
        get(&tally.admissions) >= MIN_ADMISSIONS,
        "only {} admissions within {WALL_CAP:?}",
        get(&tally.admissions)
    );
    assert!(
        get(&tally.to_half_open) >= MIN_HALF_OPEN_PHASES,
        "only {} half-open phases within {WALL_CAP:?}",
        get(&tally.to_half_open)
    );
    assert!(get(&tally.to_closed) > 0, "no half-open phase ever closed");
    assert!(
        get(&tally.half_open_timeouts) >= MIN_HALF_OPEN_TIMEOUTS,
        "only {} half-open phases timed out within {WALL_CAP:?}",
        get(&tally.half_open_timeouts)
    );
    // Every permit is gone: a half-open breaker must show no probe in flight.
    if snapshot.phase == Phase::HalfOpen {
        assert_eq!(snapshot.probes_in_flight, 0, "a probe slot leaked");
    }
    // Each transition bumps the generation exactly once.
    assert_eq!(
        snapshot.generation,
        get(&tally.to_open) + get(&tally.to_half_open) + get(&tally.to_closed)
    );
}

#[test]
fn two_probes_at_most_are_in_flight_while_eight_threads_cycle_the_breaker() {
    cycle_under_load(2);
}

#[test]
fn one_probe_at_most_is_in_flight_while_eight_threads_cycle_the_breaker() {
    cycle_under_load(1);
}

#[test]
fn three_probes_at_most_are_in_flight_while_eight_threads_cycle_the_breaker() {
    cycle_under_load(3);
}
