//! The default clock's latency measurement ([`Clock::stamp`], [`Clock::elapsed_since`]) on
//! the real clock: it agrees with `CLOCK_MONOTONIC` before and after it switches to the
//! time-stamp counter (invariant, with `rdtscp`), and a stamp taken before the switch is still measured right.

use std::thread::sleep;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Clock, MonotonicClock, Nanos};

/// How far a measured latency may be from two `CLOCK_MONOTONIC` readings around it: the
/// readings are not taken at the same instant as the stamps (a preempted thread can put
/// milliseconds between them), and the counter's scale may be off by a millionth.
const SLACK: Duration = Duration::from_millis(20);

fn agrees(measured: Nanos, outer: Nanos, inner: Nanos, what: &str) {
    // `outer` brackets the measurement from outside, `inner` from inside.
    let slack = Nanos::from_duration(SLACK);
    assert!(
        measured.saturating_add(slack) >= inner && measured <= outer.saturating_add(slack),
        "{what}: measured {measured:?}, CLOCK_MONOTONIC says between {inner:?} and {outer:?}"
    );
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    __cpuid(0x8000_0000).eax >= 0x8000_0007
        && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        && __cpuid(0x8000_0001).edx & (1 << 27) != 0
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn invariant_tsc() -> bool {
    false
}

#[test]
fn latency_agrees_with_the_monotonic_clock_across_the_switch_to_the_counter() {
    let clock = MonotonicClock;
    // The first stamp of the process: a monotonic reading (the counter's scale is unknown).
    let before = clock.now();
    let early = clock.stamp();
    let after = clock.now();
    sleep(Duration::from_millis(30));
    let (inner, measured, outer) = (clock.now(), clock.elapsed_since(early), clock.now());
    agrees(
        measured,
        outer.saturating_sub(before),
        inner.saturating_sub(after),
        "before calibration",
    );
    // The first stamp started the counter's calibration on its own thread (at most 200 ms
    // of busy-waiting; more on a loaded machine).
    let mut waited = 0;
    while invariant_tsc() && !MonotonicClock::latency_from_tsc() && waited < 5_000 {
        sleep(Duration::from_millis(10));
        waited += 10;
    }
    assert_eq!(
        MonotonicClock::latency_from_tsc(),
        invariant_tsc(),
        "the counter is used exactly where the CPU reports it invariant (waited {waited} ms)"
    );
    // A stamp in counter ticks measures what the monotonic clock measures.
    for pause in [0, 5, 100] {
        let before = clock.now();
        let start = clock.stamp();
        let after = clock.now();
        sleep(Duration::from_millis(pause));
        let (inner, measured, outer) = (clock.now(), clock.elapsed_since(start), clock.now());
        agrees(
            measured,
            outer.saturating_sub(before),
            inner.saturating_sub(after),
            &format!("after calibration, {pause} ms"),
        );
    }
    // The stamp from before the switch is still measured in nanoseconds, not as ticks.
    let (inner, measured, outer) = (clock.now(), clock.elapsed_since(early), clock.now());
    agrees(
        measured,
        outer.saturating_sub(before),
        inner.saturating_sub(after),
        "a stamp from before calibration",
    );
}

#[test]
fn a_slow_call_rule_on_the_default_clock_sees_a_slow_call() {
    let breaker = CircuitBreaker::builder()
        .slow_call_threshold(Duration::from_millis(20))
        .slow_call_rate(0.5)
        .min_calls(2)
        .count_window(2)
        .build()
        .expect("valid config");
    for _ in 0..2 {
        let permit = breaker.try_acquire().expect("closed");
        sleep(Duration::from_millis(25));
        permit.success();
    }
    assert_eq!(
        breaker.phase(),
        breakerbox::Phase::Open,
        "two calls of 25 ms against a 20 ms threshold are slow"
    );
}
